"""Every public method of the clients keeps its name, parameters, defaults and result type.

`tests/fixtures/client_signatures.json` holds, for `Client`, `AsyncClient` and their leases,
each public method as `inspect.signature` sees it (annotations evaluated, so a method written
by hand and one generated into `client/generated.py` compare alike): its kind, every
parameter's kind, annotation and default (positional ones in order, keyword-only ones by
name), its return annotation, and the operation it carries. However the methods come to be
made, a script written against the client keeps working: a change to the operation table that
changes a client signature fails here. A deliberate change is regenerated with
    COMMONROOM_UPDATE_CLIENT_SIGNATURES=1 .venv/bin/pytest tests/unit/test_client_signatures.py
and reviewed in the diff.
"""

from __future__ import annotations

import inspect
import json
import os
import types
from pathlib import Path
from typing import Any

import attrs
import pytest

from commonroom.client import aio, sync
from commonroom.client.generated import OPERATION_METHODS
from commonroom.protocol.operations import OPERATIONS
from commonroom.protocol.requests import ReadParams
from tests.unit.test_wire import load_tool

FIXTURE = Path(__file__).parent.parent / "fixtures" / "client_signatures.json"
UPDATE = os.environ.get("COMMONROOM_UPDATE_CLIENT_SIGNATURES") == "1"
CLASSES: dict[str, type[Any]] = {
    "Client": sync.Client, "AsyncClient": aio.AsyncClient,
    "Lease": sync.Lease, "AsyncLease": aio.AsyncLease,
}


def _annotation(annotation: Any) -> str | None:
    return None if annotation is inspect.Parameter.empty else inspect.formatannotation(annotation)


def _kind(cls: type[Any], name: str, method: Any) -> str:
    kind = ("async generator" if inspect.isasyncgenfunction(method)
            else "coroutine" if inspect.iscoroutinefunction(method)
            else "generator" if inspect.isgeneratorfunction(method) else "function")
    return f"classmethod {kind}" if isinstance(inspect.getattr_static(cls, name), classmethod) \
        else kind


def _method(cls: type[Any], name: str, method: Any) -> dict[str, Any]:
    signature = inspect.signature(method, eval_str=True)
    # Keyword-only parameters by name: their order is nothing a call can see.
    ordered = sorted(signature.parameters.values(),
                     key=lambda p: (p.kind, p.name if p.kind is p.KEYWORD_ONLY else ""))
    parameters = [
        {"name": p.name, "kind": p.kind.name, "annotation": _annotation(p.annotation),
         **({} if p.default is inspect.Parameter.empty else {"default": repr(p.default)})}
        for p in ordered if p.name != "self"
    ]
    operations = [op for op, method_name in OPERATION_METHODS.items() if method_name == name]
    return {"kind": _kind(cls, name, method), "parameters": parameters,
            "returns": _annotation(signature.return_annotation),
            **({"operation": operations[0]} if operations and "Lease" not in cls.__name__ else {})}


def _signatures() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for label, cls in CLASSES.items():
        found[label] = {}
        for name in sorted(dir(cls)):
            method = getattr(cls, name)
            if name.startswith("_") or not callable(method) or isinstance(method, type):
                continue
            found[label][name] = _method(cls, name, method)
    return found


def _shown(entry: dict[str, Any] | None) -> str:
    """A recorded method as one line: `coroutine (region: str = 'workspace', *, version: ...) -> ...`."""
    if entry is None:
        return "(absent)"
    shown, star = [], False
    for p in entry["parameters"]:
        if p["kind"] == "KEYWORD_ONLY" and not star:
            shown.append("*")
            star = True
        shown.append(f"{p['name']}: {p['annotation']}" + (f" = {p['default']}" if "default" in p else ""))
    return f"{entry['kind']} ({', '.join(shown)}) -> {entry['returns']} [{entry.get('operation', '')}]"


def test_client_methods_keep_their_signatures() -> None:
    found = _signatures()
    if UPDATE:
        FIXTURE.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
    recorded = json.loads(FIXTURE.read_text())
    changed = [
        f"{label}.{name}:\n  recorded {_shown(recorded.get(label, {}).get(name))}"
        f"\n  now      {_shown(found.get(label, {}).get(name))}"
        for label in sorted(recorded.keys() | found.keys())
        for name in sorted(recorded.get(label, {}).keys() | found.get(label, {}).keys())
        if recorded.get(label, {}).get(name) != found.get(label, {}).get(name)
    ]
    assert not changed, (
        "the client's public methods changed; a script calling them may break:\n"
        + "\n".join(changed) + "\nIf the change is on purpose (an operation or its parameter"
        " record changed, or tools/gen_client.py's NAMES / OVERRIDES did), run"
        " .venv/bin/python tools/gen_client.py, then regenerate this fixture with"
        " COMMONROOM_UPDATE_CLIENT_SIGNATURES=1 .venv/bin/pytest tests/unit/test_client_signatures.py"
        " and review its diff")


def test_every_operation_method_is_recorded_on_both_clients() -> None:
    recorded = json.loads(FIXTURE.read_text())
    for label in ("Client", "AsyncClient"):
        carried = {entry["operation"] for entry in recorded[label].values() if "operation" in entry}
        assert carried == set(OPERATION_METHODS), label


def test_a_record_change_that_changes_a_signature_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain the fixture guards: a field added to `ReadParams`, regenerated, changes `read`."""

    @attrs.frozen
    class ReadParamsWithContext(ReadParams):
        context_lines: int | None = None

    tool = load_tool("gen_client")
    monkeypatch.setattr(tool, "OPERATIONS", tuple(
        attrs.evolve(spec, params=ReadParamsWithContext) if spec.name == "workspace.read" else spec
        for spec in OPERATIONS))
    probe = types.ModuleType("commonroom.client.generated_probe")
    exec(compile(tool.generate(), "generated_probe.py", "exec"), probe.__dict__)  # the tool's output
    recorded = json.loads(FIXTURE.read_text())["Client"]
    operations = probe.BlockingOperations
    assert _method(operations, "status", operations.status) == recorded["status"]
    changed = _method(operations, "read", operations.read)
    assert changed != recorded["read"]
    assert {"name": "context_lines", "kind": "KEYWORD_ONLY", "annotation": "int | None",
            "default": "None"} in changed["parameters"]
