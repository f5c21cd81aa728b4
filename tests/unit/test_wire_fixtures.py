"""Golden wire fixtures: the real answer of every operation, held in tests/fixtures/wire/.

A scripted session runs every operation of the table through a real room (its engine
on a real sidecar, `Room.call` answering each call's wire JSON, the long-poll and the
observe streams framed as the adapters frame them). Ids, times, hashes and secrets
are normalised (`<pt_>`, `<time>`, `<hash>`, `<secret>`); the rest must equal the
fixture. A change to an answer's shape (a field renamed, dropped, retyped, added)
fails here until the fixture is regenerated on purpose:

    COMMONROOM_UPDATE_WIRE_FIXTURES=1 .venv/bin/pytest tests/unit/test_wire_fixtures.py

and the diff of tests/fixtures/wire/ is the wire change a reviewer sees. This replaces
checking each answer against a schema generated from the very record that made it.
"""

from __future__ import annotations

import base64
import json
import os
import re
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from commonroom.engine import sessions
from commonroom.engine.dispatch import open_engine
from commonroom.engine.ids import hash_secret
from commonroom.http.framing import format_sse, format_ws
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.operations import OPERATIONS
from commonroom.protocol.records import to_wire
from commonroom.protocol.timefmt import ManualClock
from commonroom.room.core import Room
from commonroom.room.streams import observe, wait_for_events
from tests.conftest import SAMPLE
from tests.editing import let_settle, save_like_an_editor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wire"
UPDATE = os.environ.get("COMMONROOM_UPDATE_WIRE_FIXTURES") == "1"

_ID = re.compile(r"\b(pt|ls|pr|ho|tk|inv|att|msg|ws|po|th|cm|pm)_[A-Za-z0-9_-]{8,}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
_HASH = re.compile(r"\b(?:sha256:)?[0-9a-f]{64}\b")
_SECRET_KEYS = frozenset({"session_id", "invitation", "secret", "uri", "join_uri"})


def normalise(value: Any, key: str | None = None) -> Any:
    """The answer with what differs between runs replaced by its kind."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        if key in _SECRET_KEYS or value.startswith("commonroom://"):
            return "<secret>"
        value = _ID.sub(lambda m: f"<{m.group(1)}_>", value)
        value = _TIME.sub("<time>", value)
        return _HASH.sub("<hash>", value)
    return value


class Session:
    """Runs operations through the room and keeps each one's first answer."""

    def __init__(self, room: Room, clock: ManualClock) -> None:
        self.room = room
        self.clock = clock
        self.answers: dict[str, Any] = {}

    async def call(self, op: str, bearer: str | None, /, **params: Any) -> Any:
        self.clock.advance(seconds=1)  # every row its own time: lists come back in one order
        answer = await self.room.call(op, bearer, params)
        self.answers.setdefault(op, answer)
        return answer

    async def join(self, host: str, name: str, **invite: Any) -> dict[str, Any]:
        invitation = await self.room.call("workspace.invite", host, invite)
        joined: dict[str, Any] = await self.call("session.join", None, invite=invitation["invitation"],
                                                 name=name)
        return joined


async def _script(session: Session, host: str, host_id: str) -> dict[str, Any]:
    call = session.call
    invite = await call("workspace.invite", host,
                        capabilities=["read", "observe", "checkout", "propose", "commit"])
    agent = await call("session.join", None, invite=invite["invitation"], name="agent")
    bearer = agent["session_id"]
    for name in ("workspace.status", "workspace.summary", "workspace.regions", "workspace.participants",
                 "workspace.leases", "workspace.room", "workspace.diagnostics"):
        await call(name, bearer)
    read = await call("workspace.read", bearer, region="Goals")
    lease = await call("workspace.checkout", bearer, region="Goals")
    await call("workspace.renew", bearer, lease_id=lease["lease_id"], minutes=20)
    proposal = await call("workspace.propose", bearer, region="Goals", base_version=read["version"],
                          summary="sharper", content="## Goals\n\n- ship it well\n\n")
    await call("workspace.proposals", bearer)
    await call("workspace.proposal", bearer, proposal_id=proposal["proposal_id"])
    await call("workspace.review", host, proposal_id=proposal["proposal_id"],
            revision=proposal["revision"], decision="approve",
               comment="ok")
    await call("workspace.commit", bearer, proposal_id=proposal["proposal_id"])
    await call("workspace.release", bearer, lease_id=lease["lease_id"])
    other = await call("workspace.propose", bearer, region="Risks", base_version=2, summary="x",
                       content="## Risks\n\nSome.\n\n")
    await call("workspace.withdraw", bearer, proposal_id=other["proposal_id"])
    await call("workspace.commit", host, base_version=2, summary="raw", content="# Plan\n\nall new\n")
    await call("workspace.diff", bearer, base_version=1)
    await call("workspace.changes_since", bearer, version=1)
    await call("workspace.history", bearer)
    await call("workspace.invitations", host)
    await call("workspace.revoke_invitation", host, invite_id=invite["invite_id"])
    pal = await session.join(host, "pal")  # the default agent set: message and handoff included
    pal_bearer = pal["session_id"]
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
    att = await call("attachment.add", pal_bearer, file_name="notes.md", mime_type="text/markdown",
                     data_base64=base64.b64encode(b"# notes\n").decode())
    await call("attachment.get", bearer, attachment_id=att["attachment_id"])
    ho = await call("handoff.request", pal_bearer, to_participant_id=host_id, summary="review the plan",
                    region="Plan", attachment_ids=[att["attachment_id"]], request_id="r1")
    accepted = await call("handoff.respond", host, handoff_id=ho["handoff_id"], decision="accept")
    await call("task.get", pal_bearer, task_id=accepted["task_id"])
    await call("task.update", host, task_id=accepted["task_id"], status="input_required",
               status_message="which list?")
    await call("workspace.message", pal_bearer, text="the first one", to=[host_id],
               handoff_id=ho["handoff_id"])
    await call("workspace.messages", bearer, after=0)
    await call("handoff.result", host, handoff_id=ho["handoff_id"], status="completed", summary="done")
    await call("task.cancel", pal_bearer, task_id=accepted["task_id"])  # finished: an ack
    second_ho = await call("handoff.request", pal_bearer, to_participant_id=host_id, summary="another")
    await call("handoff.cancel", pal_bearer, handoff_id=second_ho["handoff_id"])
    await call("workspace.handoffs", bearer)
    await call("workspace.handoff", bearer, handoff_id=ho["handoff_id"])
    await call("workspace.advertise", pal_bearer, capabilities=["python", "review"])
    await call("surface.publish", pal_bearer, data_base64=png)
    await call("surface.read", bearer, participant_id=pal["participant_id"])
    await call("surface.clear", pal_bearer)
    await call("attachment.delete", host, attachment_id=att["attachment_id"])
    await call("workspace.ping", bearer)
    # Provenance (docs/spec/PROTOCOL.md 18): blame, revert, restore, policies.
    await call("workspace.blame", bearer, region="workspace")
    restored = await call("workspace.restore", host, region="Plan", version=1)
    await call("workspace.revert", host, version=restored["version"])
    policy = await call("workspace.policy_add", host, label="pal", region_pattern="Plan*",
                        max_changed_lines=2)
    await call("workspace.policies", host)
    await call("workspace.policy_pause", host, all=True)
    await call("workspace.policy_remove", host, policy_id=policy["policy_id"])
    # The review conversation (docs/spec/PROTOCOL.md 17, issue 22).
    thread = await call("thread.open", pal_bearer, region="Plan", body="why?", blocking=True)
    await call("thread.reply", host, thread_id=thread["thread_id"], body="because")
    await call("thread.resolve", pal_bearer, thread_id=thread["thread_id"])
    await call("workspace.threads", bearer, status="resolved")
    await call("workspace.thread", bearer, thread_id=thread["thread_id"])
    version = (await session.room.call("workspace.status", bearer, {}))["version"]
    asked = await call("workspace.propose", pal_bearer, region="Plan", base_version=version,
                       summary="y", content="# Plan\n\nall newer\n")
    await call("workspace.review", host, proposal_id=asked["proposal_id"],
            revision=asked["revision"], decision="request_changes",
               comment="say more")
    await call("workspace.proposal.revise", pal_bearer, proposal_id=asked["proposal_id"],
               content="# Plan\n\nall newer, and why\n")
    await call("workspace.proposal.rebase", pal_bearer, proposal_id=asked["proposal_id"])
    # Task surfaces (docs/spec/PROTOCOL.md 20): pal takes a task, shows it, asks its app.
    shown = await session.room.call("handoff.request", host, {
        "to_participant_id": pal["participant_id"], "summary": "show progress"})
    task_id = (await session.room.call("handoff.respond", pal_bearer, {
        "handoff_id": shown["handoff_id"], "decision": "accept"}))["task_id"]
    await call("task.live_view", pal_bearer, task_id=task_id, surface={
        "surface_id": "progress", "revision": 1, "data": {"done": 1},
        "root": {"type": "Card", "title": "Steps", "children": [
            {"type": "Value", "path": "done", "label": "Done"},
            {"type": "Button", "label": "+1", "action": {"type": "increment", "path": "done"}}]}})
    await call("task.app", pal_bearer, task_id=task_id, bundle={
        "version": 1, "manifest": {"title": "Chooser", "networkOrigins": []},
        "html": "<button>A</button>", "css": "", "js": "", "initialState": {"choice": None}})
    await call("task.app_state", host, task_id=task_id, revision=0, state={"choice": "A"})
    line = session.room.app_hosts.open()
    session.room.app_hosts.host(line.host_id, [task_id])
    async with trio.open_nursery() as nursery:
        async def page() -> None:
            item = await line.receive.receive()
            session.room.app_hosts.answer(line.host_id, item.request_id, {"choice": "A"})

        nursery.start_soon(page)
        await call("task.app_request", pal_bearer, task_id=task_id, payload={"question": "which?"})
    session.room.app_hosts.close(line.host_id)
    await call("task.surfaces", bearer, task_id=task_id)
    # Resident agents (docs/spec/PROTOCOL.md 19): runtime state, permission requests.
    await call("workspace.runtime", pal_bearer, state="running", harness="acp:scripted", queued=1,
               turn=1)
    pm = await call("permission.request", pal_bearer, title="Run tests", tool="execute",
                    input_preview="pytest -q", options=[
                        {"option_id": "allow", "name": "Allow", "kind": "allow_once"},
                        {"option_id": "reject", "name": "Reject", "kind": "reject_once"}])
    await call("workspace.permissions", host)
    await call("permission.answer", host, permission_id=pm["permission_id"], option_id="allow")
    pm2 = await call("permission.request", pal_bearer, title="Push", options=[
        {"option_id": "allow", "name": "Allow", "kind": "allow_once"}])
    await call("permission.withdraw", pal_bearer, permission_id=pm2["permission_id"])
    await call("runtime.interrupt", host, participant_id=pal["participant_id"], turn=1)
    await call("runtime.resume", host, participant_id=pal["participant_id"])

    # A host's save that undid someone's change (docs/spec/PROTOCOL.md 16, wave 4).
    engine = session.room.engine
    stale = engine.path.read_text()
    version = (await session.room.call("workspace.status", bearer, {}))["version"]
    added = await session.room.call("workspace.propose", pal_bearer, {
        "region": "workspace", "base_version": version, "summary": "a line",
        "content": stale + "\nA line of pal's.\n"})
    await session.room.call("workspace.review", host, {"proposal_id": added["proposal_id"],
                                                       "revision": added["revision"],
                                                       "decision": "approve"})
    await session.room.call("workspace.commit", pal_bearer, {"proposal_id": added["proposal_id"]})
    save_like_an_editor(engine.path, stale)
    let_settle(engine, session.clock)
    await call("workspace.undone", host)
    await call("workspace.reapply", host, version=engine.current_version)
    second = await session.join(host, "second")
    await call("session.revoke", host, participant_id=second["participant_id"])
    return {**agent, "waited": {"workspace.proposal.wait": {"proposal_id": asked["proposal_id"]},
                                "workspace.thread.wait": {"thread_id": thread["thread_id"]}}}


async def _streams(room: Room, agent: dict[str, Any]) -> dict[str, Any]:
    """The stream operations' answers as their adapters carry them (the first three events)."""
    session_hash = hash_secret(agent["session_id"])
    pid = agent["participant_id"]
    wait = to_wire(await wait_for_events(room, session_hash=session_hash, participant_id=pid, cursor=0,
                                         timeout_seconds=0, limit=3))
    frames: list[Any] = []
    async with aclosing(observe(room, session_hash=session_hash, participant_id=pid,
                                since_event_id=0, heartbeat_seconds=60)) as items:
        async for item in items:
            if item.kind == "event":
                frames.append(item)
            if len(frames) == 3:
                break
    waits = {}
    for name, params in agent["waited"].items():  # the waits for a person: answered at once
        start = (await room.execute(name, agent["session_id"], {**params, "timeout_seconds": 0})).result
        waits[name] = to_wire(await room.wait(start, lambda: None))  # type: ignore[arg-type,return-value]
    return {
        **waits,
        "workspace.wait": wait,
        "workspace.observe": [format_sse(event).decode() for event in frames],
        "workspace.observe_ws": [json.loads(format_ws(event) or "null") for event in frames],
    }


async def test_every_operation_answers_as_its_golden_fixture(tmp_path: Path) -> None:
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE)
    clock = ManualClock()
    engine = open_engine(path, clock=clock)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    try:
        room = Room(engine, inline_store=True)
        host = sessions.mint_host_session(engine)
        session = Session(room, clock)
        agent = await _script(session, host, engine.host_participant_id)
        answers = {**session.answers, **await _streams(room, agent)}
        await session.call("workspace.leave", agent["session_id"])
        answers["workspace.leave"] = session.answers["workspace.leave"]
    finally:
        engine.close()
    assert set(answers) == {op.name for op in OPERATIONS}, {op.name for op in OPERATIONS} ^ set(answers)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    mismatched = []
    for name, answer in sorted(answers.items()):
        fixture = FIXTURES / f"{name}.json"
        shown = json.dumps(normalise(answer), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        if UPDATE:
            fixture.write_text(shown)
        elif not fixture.exists() or fixture.read_text() != shown:
            mismatched.append(name)
    assert not mismatched, (
        f"answers differ from tests/fixtures/wire/ for {mismatched}; if the wire change is meant,"
        " regenerate with COMMONROOM_UPDATE_WIRE_FIXTURES=1 and review the diff"
    )
    assert {p.stem for p in FIXTURES.glob("*.json")} == {op.name for op in OPERATIONS}, "stale fixtures"


@pytest.mark.parametrize("value", [
    "pt_abcdefgh1234", "2026-12-01T10:00:00Z", "a" * 64, "commonroom://join/xyz",
])
def test_normalise_hides_what_differs_between_runs(value: str) -> None:
    assert normalise({"x": value})["x"].startswith("<")
