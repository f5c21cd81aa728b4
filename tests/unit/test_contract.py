"""The contract the adapters are generated from: the operation table and the event catalogue.

- the event catalogue is exactly docs/spec/PROTOCOL.md section 8's list, with the payload
  fields the protocol names (records may add fields, never drop one);
- every operation has a parameter and (for calls) a result schema (each answer's
  shape is held by the golden fixtures, tests/unit/test_wire_fixtures.py);
- no module of the package imports in a cycle.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import attrs
import jsonschema
import pytest

from commonroom.engine import dispatch
from commonroom.protocol import events
from commonroom.protocol.operations import OPERATIONS, STREAMS
from commonroom.protocol.schema import json_schema
from tests.conftest import Driver

# docs/spec/PROTOCOL.md section 8, "Event types (payload fields in brackets)".
PROTOCOL_EVENTS: dict[str, tuple[str, ...]] = {
    "workspace.created": ("version",),
    "workspace.started": ("version",),
    "workspace.stopped": ("version",),
    "participant.joined": ("participant_id", "kind", "name", "capabilities"),
    "participant.left": ("participant_id",),
    "session.created": ("participant_id", "expires_at"),
    "session.expired": ("participant_id",),
    "session.revoked": ("participant_id",),
    "invitation.created": ("invite_id", "capabilities", "expires_at", "max_uses"),
    "invitation.redeemed": ("invite_id", "participant_id"),
    "invitation.revoked": ("invite_id",),
    "lease.acquired": ("lease_id", "participant_id", "region", "expires_at"),
    "lease.renewed": ("lease_id", "participant_id", "region", "expires_at"),
    "lease.released": ("lease_id", "participant_id", "region", "reason"),
    "lease.expired": ("lease_id", "participant_id", "region"),
    "proposal.created": ("proposal_id", "participant_id", "region", "base_version", "summary"),
    "proposal.approved": ("proposal_id", "reviewer_id"),
    "proposal.rejected": ("proposal_id", "reviewer_id"),
    "proposal.committed": ("proposal_id", "version"),
    "proposal.conflicted": ("proposal_id",),
    "proposal.superseded": ("proposal_id",),
    "proposal.withdrawn": ("proposal_id",),
    "change.committed": ("version", "summary", "participant_id", "region", "source"),
    "handoff.requested": ("handoff_id", "from_participant_id", "to_participant_id", "summary"),
    "handoff.accepted": ("handoff_id", "from_participant_id", "to_participant_id", "summary"),
    "handoff.declined": ("handoff_id", "from_participant_id", "to_participant_id", "summary"),
    "handoff.completed": ("handoff_id", "from_participant_id", "to_participant_id", "summary"),
    "handoff.failed": ("handoff_id", "from_participant_id", "to_participant_id", "summary"),
    "handoff.cancelled": ("handoff_id", "from_participant_id", "to_participant_id", "summary"),
    "task.updated": ("task_id", "handoff_id", "status", "status_message"),
    "message.sent": ("message_id", "participant_id", "to", "text", "handoff_id"),
    "participant.present": ("participant_id",),
    "participant.away": ("participant_id",),
    "proposal.amended": ("proposal_id", "reviewer_id"),
    "attachment.added": ("attachment_id", "participant_id", "handoff_id", "mime_type", "size"),
    "attachment.removed": ("attachment_id", "reason"),
    "surface.published": ("participant_id",),
    "surface.cleared": ("participant_id",),
    "guard.tripped": ("participant_id", "target_participant_id", "kind", "retry_after_seconds"),
}

# docs/spec/PROTOCOL.md section 17 (the review conversation, issue 22) names these; the fields are ours
# (docs/protocol.md "The review conversation"), as is `proposal.changes_requested`.
REVIEW_EVENTS: dict[str, tuple[str, ...]] = {
    "thread.opened": ("thread_id", "region", "participant_id", "blocking", "proposal_id"),
    "thread.replied": ("thread_id", "region", "participant_id", "comment_id"),
    "thread.resolved": ("thread_id", "region", "participant_id", "resolved"),
    "thread.outdated": ("thread_id", "region", "version"),
    "thread.reanchored": ("thread_id", "region", "version"),
    "proposal.revised": ("proposal_id", "participant_id", "revision", "base_version", "summary",
                         "rebased"),
}
# docs/spec/PROTOCOL.md section 20 (task surfaces) names these; the fields are ours
# (docs/protocol.md "Task surfaces").
TASK_SURFACE_EVENTS: dict[str, tuple[str, ...]] = {
    "task.live_view": ("task_id", "surface_id", "revision", "participant_id", "reason"),
    "task.app": ("task_id", "revision", "title", "participant_id", "reason"),
    "task.app_state": ("task_id", "app_revision", "revision", "participant_id"),
}
ADDITIVE_EVENTS: dict[str, tuple[str, ...]] = {
    "proposal.changes_requested": ("proposal_id", "reviewer_id", "comment"),
}
# docs/spec/PROTOCOL.md section 19 (resident agents) names the first four; the interrupt and resume
# events are ours (docs/protocol.md "Resident agents").
RESIDENT_EVENTS: dict[str, tuple[str, ...]] = {
    "participant.runtime": ("participant_id", "state", "harness", "queued", "turn_started_at"),
    "permission.requested": ("permission_id", "participant_id", "title", "tool", "expires_at"),
    "permission.answered": ("permission_id", "participant_id", "option_id", "answered_by"),
    "permission.expired": ("permission_id", "participant_id"),
    "permission.withdrawn": ("permission_id", "participant_id"),
    "runtime.interrupted": ("participant_id", "turn", "by"),
    "runtime.resumed": ("participant_id", "by"),
}

SPEC = Path(__file__).resolve().parents[2] / "docs" / "spec" / "PROTOCOL.md"
SRC = Path(__file__).resolve().parents[2] / "src" / "commonroom"


def test_catalogue_is_the_protocols_list() -> None:
    every = {**PROTOCOL_EVENTS, **REVIEW_EVENTS, **ADDITIVE_EVENTS, **TASK_SURFACE_EVENTS,
             **RESIDENT_EVENTS}
    assert set(events.EVENTS) == set(every)
    for name, fields in every.items():
        spec = events.EVENTS[name]
        assert name == spec.payload.TYPE
        have = [f.name for f in attrs.fields(spec.payload)]
        assert set(fields) <= set(have), (name, fields, have)


def test_catalogue_matches_the_spec_file() -> None:
    """The hard-coded list above is docs/spec/PROTOCOL.md's, read from the file itself."""
    text = SPEC.read_text()
    section = text[text.index("Event types (payload fields in brackets)"):text.index("`GET /workspace/observe`")]
    named = {token.strip("`") for token in section.replace(",", " ").replace(";", " ").split()
             if token.startswith("`") and "." in token and not token.startswith("`GET")}
    assert named == set(PROTOCOL_EVENTS)
    review = text[text.index("## 17. The review conversation"):text.index("## 18.")]
    named = {token.strip("`,.") for token in review.replace("(", " ").replace(")", " ").split()
             if token.startswith("`") and token.strip("`,.").split(".")[0] in ("thread", "proposal")
             and token.strip("`,.").count(".") == 1}
    assert named == set(REVIEW_EVENTS)


def test_every_event_names_only_known_resources() -> None:
    for spec in events.EVENTS.values():
        assert spec.resources <= set(events.RESOURCES)
    enders = {name for name, spec in events.EVENTS.items() if spec.ends_streams}
    assert enders == {"session.revoked", "session.expired", "participant.left"}


def test_a_payload_outside_the_catalogue_cannot_be_emitted(room: Driver) -> None:
    @attrs.frozen
    class Bogus(events.Payload):
        TYPE = "bogus.thing"

    engine = room.engine
    with pytest.raises(TypeError), engine.transaction(engine.clock()) as tx:
        tx.emit(Bogus())
    assert engine.conn.execute("SELECT count(*) FROM events WHERE type = 'bogus.thing'").fetchone()[0] == 0


def test_events_round_trip_through_the_ring(room: Driver) -> None:
    agent = room.join("a")
    room.call("workspace.checkout", agent["session_id"], region="Goals")
    history = room.call("workspace.history", room.host, limit=200)
    assert history["events"]
    for raw in history["events"]:
        back = events.from_dict(raw)
        assert back.to_dict() == raw
        assert json.loads(back.wire) == raw


def test_every_operation_has_schemas() -> None:
    assert len({op.name for op in OPERATIONS}) == len(OPERATIONS)
    assert len({(op.method, op.path) for op in OPERATIONS}) == len(OPERATIONS)
    for op in OPERATIONS:
        schema = json_schema(op.params, params=True)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        jsonschema.Draft202012Validator.check_schema(schema)
        if op.kind == "call":
            assert op.result is not None, op.name
        if op.result is not None:
            jsonschema.Draft202012Validator.check_schema(json_schema(op.result))
    assert {op.name for op in STREAMS} == {"workspace.observe", "workspace.observe_ws", "workspace.wait",
                                           "workspace.proposal.wait", "workspace.thread.wait"}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:` (imports that never run)."""
    out: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            pending.extend(node.orelse)
            continue
        out.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return out


def _src_modules() -> dict[str, Path]:
    return {
        ".".join(("commonroom", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__"): path
        for path in SRC.rglob("*.py")
    }


_SRC_MODULES = _src_modules()


def _imports(path: Path) -> set[str]:
    """The project modules `path` imports at run time, at any depth (a function's imports too).

    `from commonroom.engine import threads` names the submodule `commonroom.engine.threads`,
    not the package: recording the package would hide every cycle through such an import."""
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in _SRC_MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("commonroom")}


def _import_graph() -> dict[str, set[str]]:
    return {
        name: {dep for dep in _imports(path) if dep in _SRC_MODULES and dep != name}
        for name, path in _SRC_MODULES.items()
    }


def _package_of(module: str) -> str:
    """`commonroom.engine.threads` -> `commonroom.engine`; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def _first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep):], dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for name in sorted(graph):
        if name not in state and (found := visit(name)) is not None:
            return found
    return None


def test_no_import_cycles_in_the_package() -> None:
    """Module-level and function-level imports alike; a cycle means a hidden dependency."""
    cycle = _first_cycle(_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_no_import_cycles_between_the_packages() -> None:
    """The packages (`engine`, `http`, `mcp`, `client`, `wire`, ...) import one way too: a cycle
    between two packages, even through different modules, means they are one layer."""
    packages: dict[str, set[str]] = {}
    for name, deps in _import_graph().items():
        own = _package_of(name)
        packages.setdefault(own, set()).update(
            other for dep in deps if (other := _package_of(dep)) != own)
    cycle = _first_cycle(packages)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or ())


def test_the_cycle_check_sees_an_import_of_a_submodule_inside_a_function(tmp_path: Path) -> None:
    """The check itself: `from pkg import mod` in a function body counts as importing `pkg.mod`;
    an import under `if TYPE_CHECKING:` never runs and does not count."""
    source = tmp_path / "module.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from commonroom.engine import Outline\n"
        "if TYPE_CHECKING:\n"
        "    from commonroom.engine import snapshot\n"
        "def f() -> None:\n"
        "    from commonroom.engine import threads, regions as r\n"
    )
    assert _imports(source) == {"commonroom.engine", "commonroom.engine.threads",
                                "commonroom.engine.regions"}
    assert _first_cycle({"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}}) == ["a.x", "a.y", "a.z", "a.x"]
    assert _first_cycle({"a.x": {"a.y"}, "a.y": set()}) is None


def test_only_dispatch_imports_the_table_inside_the_engine() -> None:
    for path in (SRC / "engine").glob("*.py"):
        if path.name in ("dispatch.py", "operations.py"):
            continue
        assert "commonroom.engine.operations" not in _imports(path), path.name


def test_the_facade_is_the_engines_one_face() -> None:
    """Everything above the engine imports `engine.facade` (.importlinter holds it in tox -e lint)."""
    from commonroom.engine import facade

    for name in facade.__all__:
        assert getattr(facade, name) is not None, name
    assert facade.execute is dispatch.execute
