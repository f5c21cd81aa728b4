"""Every client method keeps its name, positional order, keyword defaults and result type.

`tests/fixtures/client_signatures.json` holds each method's signature (both clients, from
`inspect.signature`) as it is today; however the methods come to be made (written builders,
or generated from the parameter records' field metadata), a script written against the
client keeps working. A deliberate change is regenerated with
    COMMONROOM_UPDATE_CLIENT_SIGNATURES=1 .venv/bin/pytest tests/unit/test_client_signatures.py
and reviewed in the diff.
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

from commonroom.client import aio, sync
from commonroom.client.operations import OPERATION_METHODS

FIXTURE = Path(__file__).parent.parent / "fixtures" / "client_signatures.json"
UPDATE = os.environ.get("COMMONROOM_UPDATE_CLIENT_SIGNATURES") == "1"


def _signatures() -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = {}
    for op, name in sorted(OPERATION_METHODS.items()):
        blocking = getattr(sync.Client, name)
        asynchronous = getattr(aio.AsyncClient, name)
        found[op] = {
            "method": name,
            "signature": str(inspect.signature(blocking)),
            "async_signature": str(inspect.signature(asynchronous)),
            "async": inspect.iscoroutinefunction(asynchronous)
            or inspect.isasyncgenfunction(asynchronous),
        }
    return found


def test_client_methods_keep_their_signatures() -> None:
    found = _signatures()
    if UPDATE:
        FIXTURE.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
    recorded = json.loads(FIXTURE.read_text())
    changed = {op: (recorded.get(op), found.get(op)) for op in recorded.keys() | found.keys()
               if recorded.get(op) != found.get(op)}
    assert not changed, (
        f"client methods changed (recorded, now): {changed}; if on purpose, regenerate with"
        " COMMONROOM_UPDATE_CLIENT_SIGNATURES=1 and review the diff")
