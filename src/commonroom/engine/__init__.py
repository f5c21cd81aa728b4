"""The rules of a room, sans-I/O: no trio, no HTTP, time from an injected clock.

The public face (what the room service, the host CLI and tests use); the
feature modules behind it are private to the engine:

- `open_engine(path, ...)` — the room's engine around a markdown file, with
  every feature's hooks;
- `execute(engine, name, bearer, params)` — run one operation of the table;
  returns an `Outcome` (result record or error, and the events that committed);
- `OPERATIONS`, `Operation` — the one operation table;
- `Engine`, `Hooks`, `Outcome`, `Actor`, `Tx` — the engine itself, for the
  room service and for store-level tests;
- `Outline`, `WHOLE`, `related` — the region scanner and the region rules.

Names load on first use (PEP 562), so importing one feature module does not
import the whole table, and the package has no import cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commonroom.engine.core import Actor, Engine, Hooks, Outcome, Tx
    from commonroom.engine.dispatch import execute, open_engine
    from commonroom.engine.operations import OPERATIONS, Operation
    from commonroom.engine.regions import WHOLE, Outline, related

_EXPORTS: dict[str, str] = {
    "open_engine": "commonroom.engine.dispatch",
    "execute": "commonroom.engine.dispatch",
    "OPERATIONS": "commonroom.engine.operations",
    "Operation": "commonroom.engine.operations",
    "Engine": "commonroom.engine.core",
    "Hooks": "commonroom.engine.core",
    "Outcome": "commonroom.engine.core",
    "Actor": "commonroom.engine.core",
    "Tx": "commonroom.engine.core",
    "Outline": "commonroom.engine.regions",
    "WHOLE": "commonroom.engine.regions",
    "related": "commonroom.engine.regions",
}

__all__ = [
    "OPERATIONS",
    "WHOLE",
    "Actor",
    "Engine",
    "Hooks",
    "Operation",
    "Outcome",
    "Outline",
    "Tx",
    "execute",
    "open_engine",
    "related",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'commonroom.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
