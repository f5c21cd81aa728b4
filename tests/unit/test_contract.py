"""The contract the adapters are generated from: the operation table and the event catalogue.

- the event catalogue is exactly PROTOCOL.md section 8's list, with the payload
  fields the protocol names (records may add fields, never drop one);
- every operation has a parameter and (for calls) a result schema, and every
  call's actual answer in a scripted session validates against its result
  schema;
- no module of the package imports in a cycle.
"""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest

from commonroom.engine import dispatch
from commonroom.engine.operations import CALLS, OPERATIONS, STREAMS
from commonroom.protocol import events
from commonroom.protocol.records import to_wire
from commonroom.protocol.schema import json_schema
from tests.conftest import Driver

# PROTOCOL.md section 8, "Event types (payload fields in brackets)".
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

# PROTOCOL.md section 17 (the review conversation, issue 22) names these; the fields are ours
# (docs/protocol.md "The review conversation"), as is `proposal.changes_requested`.
REVIEW_EVENTS: dict[str, tuple[str, ...]] = {
    "thread.opened": ("thread_id", "region", "participant_id", "blocking", "proposal_id"),
    "thread.replied": ("thread_id", "region", "participant_id", "comment_id"),
    "thread.resolved": ("thread_id", "region", "participant_id", "resolved"),
    "thread.outdated": ("thread_id", "region", "version"),
    "proposal.revised": ("proposal_id", "participant_id", "revision", "base_version", "summary",
                         "rebased"),
}
ADDITIVE_EVENTS: dict[str, tuple[str, ...]] = {
    "proposal.changes_requested": ("proposal_id", "reviewer_id", "comment"),
}

SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "PROTOCOL.md"
SRC = Path(__file__).resolve().parents[2] / "src" / "commonroom"


def test_catalogue_is_the_protocols_list() -> None:
    every = {**PROTOCOL_EVENTS, **REVIEW_EVENTS, **ADDITIVE_EVENTS}
    assert set(events.EVENTS) == set(every)
    for name, fields in every.items():
        spec = events.EVENTS[name]
        assert name == spec.payload.TYPE
        have = [f.name for f in attrs.fields(spec.payload)]
        assert set(fields) <= set(have), (name, fields, have)


@pytest.mark.skipif(not SPEC.exists(), reason="the shared spec is not beside the repository")
def test_catalogue_matches_the_spec_file() -> None:
    """The hard-coded list above is PROTOCOL.md's, read from the file itself when it is there."""
    text = SPEC.read_text()
    section = text[text.index("Event types (payload fields in brackets)"):text.index("`GET /workspace/observe`")]
    named = {token.strip("`") for token in section.replace(",", " ").replace(";", " ").split()
             if token.startswith("`") and "." in token and not token.startswith("`GET")}
    assert named == set(PROTOCOL_EVENTS)
    review = text[text.index("## 17. The review conversation"):text.index("## 18.")]
    named = {token.strip("`,.") for token in review.replace("(", " ").split()
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
    assert {op.name for op in STREAMS} == {"workspace.observe", "workspace.observe_ws", "workspace.wait"}


def _validate(op_name: str, answer: Any) -> None:
    op = dispatch.operation(op_name)
    assert op.result is not None
    jsonschema.validate(answer, json_schema(op.result))


def test_every_call_answers_what_its_schema_says(room: Driver) -> None:
    """A scripted session through every call operation; each answer validates."""
    seen: set[str] = set()

    def call(op: str, bearer: str | None, /, **params: Any) -> Any:
        outcome = dispatch.execute(room.engine, op, bearer, params)
        assert outcome.error is None, (op, outcome.error)
        answer = to_wire(outcome.result)
        _validate(op, answer)
        seen.add(op)
        return answer

    host = room.host
    invite = call("workspace.invite", host, capabilities=["read", "observe", "checkout", "propose", "commit"])
    agent = call("session.join", None, invite=invite["invitation"], name="agent")
    bearer = agent["session_id"]
    for name in ("workspace.status", "workspace.summary", "workspace.regions", "workspace.participants",
                 "workspace.leases", "workspace.room", "workspace.diagnostics"):
        call(name, bearer)
    read = call("workspace.read", bearer, region="Goals")
    lease = call("workspace.checkout", bearer, region="Goals")
    call("workspace.renew", bearer, lease_id=lease["lease_id"], minutes=20)
    proposal = call("workspace.propose", bearer, region="Goals", base_version=read["version"],
                    summary="sharper", content="## Goals\n\n- ship it well\n\n")
    call("workspace.proposals", bearer)
    call("workspace.proposal", bearer, proposal_id=proposal["proposal_id"])
    call("workspace.review", host, proposal_id=proposal["proposal_id"], decision="approve", comment="ok")
    call("workspace.commit", bearer, proposal_id=proposal["proposal_id"])
    call("workspace.release", bearer, lease_id=lease["lease_id"])
    other = call("workspace.propose", bearer, region="Risks", base_version=2, summary="x",
                 content="## Risks\n\nSome.\n\n")
    call("workspace.withdraw", bearer, proposal_id=other["proposal_id"])
    call("workspace.commit", host, base_version=2, summary="raw", content="# Plan\n\nall new\n")
    call("workspace.diff", bearer, base_version=1)
    call("workspace.changes_since", bearer, version=1)
    call("workspace.history", bearer)
    call("workspace.invitations", host)
    call("workspace.revoke_invitation", host, invite_id=invite["invite_id"])
    # Handoffs, tasks, room text, attachments, surfaces (PROTOCOL.md 9, 10, 10.1).
    pal = room.join("pal")  # the default agent set: message and handoff included
    pal_bearer = pal["session_id"]
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
    att = call("attachment.add", pal_bearer, file_name="notes.md", mime_type="text/markdown",
               data_base64=base64.b64encode(b"# notes\n").decode())
    call("attachment.get", bearer, attachment_id=att["attachment_id"])
    ho = call("handoff.request", pal_bearer, to_participant_id=room.engine.host_participant_id,
              summary="review the plan", region="Plan", attachment_ids=[att["attachment_id"]],
              request_id="r1")
    accepted = call("handoff.respond", host, handoff_id=ho["handoff_id"], decision="accept")
    call("task.get", pal_bearer, task_id=accepted["task_id"])
    call("task.update", host, task_id=accepted["task_id"], status="input_required",
         status_message="which list?")
    call("workspace.message", pal_bearer, text="the first one", to=[room.engine.host_participant_id],
         handoff_id=ho["handoff_id"])
    call("workspace.messages", bearer, after=0)
    call("handoff.result", host, handoff_id=ho["handoff_id"], status="completed", summary="done")
    call("task.cancel", pal_bearer, task_id=accepted["task_id"])  # finished: an ack
    second_ho = call("handoff.request", pal_bearer, to_participant_id=room.engine.host_participant_id,
                     summary="another")
    call("handoff.cancel", pal_bearer, handoff_id=second_ho["handoff_id"])
    call("workspace.handoffs", bearer)
    call("workspace.handoff", bearer, handoff_id=ho["handoff_id"])
    call("workspace.advertise", pal_bearer, capabilities=["python", "review"])
    call("surface.publish", pal_bearer, data_base64=png)
    call("surface.read", bearer, participant_id=pal["participant_id"])
    call("surface.clear", pal_bearer)
    call("attachment.delete", host, attachment_id=att["attachment_id"])
    # The review conversation (PROTOCOL.md 17).
    thread = call("thread.open", pal_bearer, region="Plan", body="why?", blocking=True)
    call("thread.reply", host, thread_id=thread["thread_id"], body="because")
    call("thread.resolve", pal_bearer, thread_id=thread["thread_id"])
    call("workspace.threads", bearer, status="resolved")
    call("workspace.thread", bearer, thread_id=thread["thread_id"])
    asked = call("workspace.propose", pal_bearer, region="Plan", base_version=room.version,
                 summary="y", content="# Plan\n\nall newer\n")
    call("workspace.review", host, proposal_id=asked["proposal_id"], decision="request_changes",
         comment="say more")
    call("workspace.proposal.revise", pal_bearer, proposal_id=asked["proposal_id"],
         content="# Plan\n\nall newer, and why\n")
    call("workspace.proposal.rebase", pal_bearer, proposal_id=asked["proposal_id"])
    second = room.join("second")
    call("session.revoke", host, participant_id=second["participant_id"])
    call("workspace.leave", bearer)
    assert seen == {op.name for op in CALLS}, {op.name for op in CALLS} - seen


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


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("commonroom")}


def test_no_import_cycles_in_the_package() -> None:
    """Module-level and function-level imports alike; a cycle means a hidden dependency."""
    modules = {
        ".".join(("commonroom", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__"): path
        for path in SRC.rglob("*.py")
    }
    graph = {
        name: {dep for dep in _imports(path) if dep in modules and dep != name}
        for name, path in modules.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(dep):], dep]))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_only_dispatch_imports_the_table_inside_the_engine() -> None:
    for path in (SRC / "engine").glob("*.py"):
        # The package's public face re-exports the table lazily; it uses none of it.
        if path.name in ("dispatch.py", "operations.py", "__init__.py"):
            continue
        assert "commonroom.engine.operations" not in _imports(path), path.name


def test_the_engine_package_has_a_curated_public_face() -> None:
    import commonroom.engine as engine

    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    assert engine.execute is dispatch.execute and engine.OPERATIONS is OPERATIONS
    with pytest.raises(AttributeError):
        _ = engine.not_a_public_name
