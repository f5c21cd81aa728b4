"""`client/generated.py` is what `tools/gen_client.py` writes from the operation table, and it
carries each call as the methods written by hand did.

Regenerating gives the same bytes (as docs/openapi.json is guarded); a new operation in the
table becomes a method of both clients with the signature its record gives; every method sends
the parameters it was given, under their wire names, and a long-poll's hold.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import attrs
import pytest
import trio

from commonroom.client import generated
from commonroom.client.operations import NOT_A_METHOD, SHELL_METHODS, Call
from commonroom.protocol import records
from commonroom.protocol.operations import OPERATIONS, OperationSpec
from commonroom.wire.plans import WAIT_HOLD_SECONDS
from tests.unit.test_wire import load_tool

tool = load_tool("gen_client")


def test_the_committed_module_is_what_the_tool_writes() -> None:
    assert tool.generate() == tool.TARGET.read_text(encoding="utf-8"), (
        "client/generated.py is stale: run .venv/bin/python tools/gen_client.py")
    assert tool.main(["--check"]) == 0


def test_every_operation_has_a_method_of_both_clients_with_the_summary_as_its_doc() -> None:
    carried = {op.name for op in OPERATIONS} - NOT_A_METHOD
    assert set(generated.OPERATION_METHODS) == carried
    for op in OPERATIONS:
        if op.name in SHELL_METHODS or op.name in NOT_A_METHOD:
            continue
        name = generated.GENERATED_METHODS[op.name]
        blocking = getattr(generated.BlockingOperations, name)
        asynchronous = getattr(generated.AsyncOperations, name)
        assert inspect.iscoroutinefunction(asynchronous) and not inspect.iscoroutinefunction(blocking)
        assert inspect.signature(blocking) == inspect.signature(asynchronous), name
        assert blocking.__doc__ == asynchronous.__doc__
        first_words = " ".join(op.summary.split()[:4])
        assert first_words in " ".join((blocking.__doc__ or "").split()), name


def test_every_override_says_why() -> None:
    for op, override in tool.OVERRIDES.items():
        assert override.reason.strip(), op
    assert not set(tool.NAMES) & set(SHELL_METHODS)


# -- a new operation: added to the table, it appears by running the generator ----------------


@attrs.frozen
class FrobParams:
    target: str = attrs.field(metadata={"doc": "what to frob"})
    times: int = attrs.field(metadata={"min": 1, "max": 9})
    note: str | None = None
    depth: int = attrs.field(default=3, metadata={"min": 1})
    gently: bool = attrs.field(default=True, metadata={"doc": "false frobs hard"})


FROB = OperationSpec("workspace.frob", "POST", "/workspace/frob", "message", FrobParams, records.Pong,
                     "Frob a target some times.")


def _generated_with(monkeypatch: pytest.MonkeyPatch, *specs: OperationSpec) -> types.ModuleType:
    monkeypatch.setattr(tool, "OPERATIONS", (*OPERATIONS, *specs))
    source = tool.generate()
    module = types.ModuleType("commonroom.client.generated_probe")
    exec(compile(source, "generated_probe.py", "exec"), module.__dict__)  # the tool's own output
    return module


def test_a_new_operation_becomes_a_method_with_its_records_signature(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module = _generated_with(monkeypatch, FROB)
    assert module.GENERATED_METHODS["workspace.frob"] == "frob"
    method = module.BlockingOperations.frob
    signature = inspect.signature(method, eval_str=True)
    shown = [(p.name, p.kind.name, p.annotation, p.default) for p in signature.parameters.values()]
    empty = inspect.Parameter.empty
    assert shown == [
        ("self", "POSITIONAL_OR_KEYWORD", empty, empty),
        ("target", "POSITIONAL_OR_KEYWORD", str, empty),      # required: by position, in order
        ("times", "POSITIONAL_OR_KEYWORD", int, empty),
        ("note", "KEYWORD_ONLY", str | None, None),           # optional: keyword-only
        ("depth", "KEYWORD_ONLY", int | None, None),          # None leaves the default to the room
        ("gently", "KEYWORD_ONLY", bool, True),               # a bool keeps its record default
    ]
    assert signature.return_annotation is records.Pong
    doc = method.__doc__ or ""
    assert doc.startswith("Frob a target some times.")
    assert "`target`: what to frob." in doc and "`times`: 1 to 9." in doc
    assert "`depth`: at least 1; the room's default 3." in doc

    sent = _Recorder().carry(module, "frob", "it", 2, depth=4)
    assert sent == Call("workspace.frob", records.Pong,
                        {"target": "it", "times": 2, "note": None, "depth": 4, "gently": True})
    assert inspect.iscoroutinefunction(module.AsyncOperations.frob)


def test_a_name_taken_by_a_shell_method_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    clash = attrs.evolve(FROB, name="workspace.observe.frob")
    monkeypatch.setitem(tool.NAMES, "workspace.observe.frob", "observe")
    with pytest.raises(ValueError, match="observe"):
        _generated_with(monkeypatch, clash)


# -- what a generated method sends ------------------------------------------------------------


class _Recorder:
    """Both faces with a `_run` that records the call instead of carrying it."""

    def carry(self, module: Any, name: str, *args: Any, **kwargs: Any) -> Call[Any]:
        calls: list[Call[Any]] = []

        class Blocking(module.BlockingOperations):  # type: ignore[misc]
            def _run(self, call: Call[Any]) -> Any:
                calls.append(call)

        class Async(module.AsyncOperations):  # type: ignore[misc]
            async def _run(self, call: Call[Any]) -> Any:
                calls.append(call)

        getattr(Blocking(), name)(*args, **kwargs)
        trio.run(lambda: getattr(Async(), name)(*args, **kwargs))
        assert calls[0] == calls[1], "the two faces send the same call"
        return calls[0]


@pytest.mark.parametrize(("name", "args", "kwargs", "op", "params", "hold"), [
    ("read", (), {}, "workspace.read",
     {"region": "workspace", "version": None, "max_lines": None, "max_bytes": None}, 0.0),
    ("read", ("Plan",), {"version": 3}, "workspace.read",
     {"region": "Plan", "version": 3, "max_lines": None, "max_bytes": None}, 0.0),
    ("propose", ("Plan", "## Plan\n"), {"base_version": 2}, "workspace.propose",
     {"region": "Plan", "content": "## Plan\n", "base_version": 2, "summary": "update Plan"}, 0.0),
    ("propose", ("Plan", "## Plan\n"), {"base_version": 2, "summary": "sharper"}, "workspace.propose",
     {"region": "Plan", "content": "## Plan\n", "base_version": 2, "summary": "sharper"}, 0.0),
    ("commit", ("pr_1",), {}, "workspace.commit",
     {"proposal_id": "pr_1", "base_version": None, "summary": None, "content": None}, 0.0),
    ("wait", (), {}, "workspace.wait",
     {"cursor": 0, "timeout_seconds": WAIT_HOLD_SECONDS}, float(WAIT_HOLD_SECONDS)),
    ("wait", (7,), {"timeout_seconds": 0}, "workspace.wait", {"cursor": 7, "timeout_seconds": 0}, 0.0),
    ("proposal_wait", ("pr_1",), {"timeout_seconds": 2.5}, "workspace.proposal.wait",
     {"proposal_id": "pr_1", "timeout_seconds": 2.5}, 2.5),
    ("publish_live_view", ("tk_1", {"surface_id": "s"}), {}, "task.live_view",
     {"task_id": "tk_1", "surface": {"surface_id": "s"}, "clear": False}, 0.0),
    ("revoke_session", ("pt_1",), {}, "session.revoke", {"participant_id": "pt_1"}, 0.0),
    ("pause_policies", (), {"all": True}, "workspace.policy_pause",
     {"all": True, "policy_id": None, "paused": True}, 0.0),
])
def test_a_method_sends_its_parameters_by_their_wire_names(
        name: str, args: tuple[Any, ...], kwargs: dict[str, Any], op: str, params: dict[str, Any],
        hold: float) -> None:
    sent = _Recorder().carry(generated, name, *args, **kwargs)
    assert (sent.op, sent.params, sent.hold) == (op, params, hold)
    assert sent.result is next(spec.result for spec in OPERATIONS if spec.name == op)
