"""Every commit that brings an expiry closer carries an event the catalogue flags.

The room's sweeper sleeps until the earliest expiry it knew of and looks again only when a
published event has `EventSpec.schedules_expiry` (`Room._expires_before_the_sweep`). So an
operation (or an external edit) that makes any feature's next expiry earlier, without such an
event, leaves the thing expiring late: the sweeper oversleeps it. This drives every feature
that expires (sessions, leases, torn-save leases, handoff attachments, task surfaces,
permission requests) and checks each step, per expiry hook, against the events it emitted.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from commonroom.engine import dispatch
from commonroom.engine.tx import Tx
from commonroom.protocol.events import EVENTS
from commonroom.protocol.records import to_wire
from tests.conftest import Driver


def _dues(room: Driver) -> list[datetime | None]:
    engine = room.engine
    tx = Tx(engine, engine.conn, room.clock())
    return [find(tx) for find in engine.hooks.next_expiry]


def _checked(room: Driver, op: str, bearer: str | None, **params: Any) -> Any:
    before = _dues(room)
    outcome = dispatch.execute(room.engine, op, bearer, params)
    if outcome.error is not None:
        raise outcome.error
    after = _dues(room)
    closer = [room.engine.hooks.next_expiry[i].__module__ for i, (old, new)
              in enumerate(zip(before, after, strict=True))
              if new is not None and (old is None or new < old)]
    flagged = [e.type for e in outcome.events if EVENTS[e.type].schedules_expiry]
    assert not closer or flagged, (
        f"{op} brought the next expiry of {closer} closer, but none of its events"
        f" {[e.type for e in outcome.events]} has schedules_expiry in protocol/events.py:"
        " the room's sweeper would sleep past it")
    return to_wire(outcome.result)


def test_every_step_that_schedules_an_expiry_wakes_the_sweeper(room: Driver) -> None:
    def join(name: str) -> Any:
        invitation = _checked(room, "workspace.invite", room.host)["invitation"]
        return _checked(room, "session.join", None, invite=invitation, name=name)

    alice, bob = join("alice"), join("bob")
    lease = _checked(room, "workspace.checkout", alice["session_id"], region="Goals", minutes=5)
    _checked(room, "workspace.renew", alice["session_id"], lease_id=lease["lease_id"], minutes=10)

    handoff = _checked(room, "handoff.request", alice["session_id"],
                       to_participant_id=bob["participant_id"], summary="rewrite Goals")
    task = _checked(room, "handoff.respond", bob["session_id"],
                    handoff_id=handoff["handoff_id"], decision="accept")
    _checked(room, "attachment.add", bob["session_id"], file_name="notes.txt",
             mime_type="text/plain", handoff_id=handoff["handoff_id"],
             data_base64=base64.b64encode(b"notes\n").decode())
    _checked(room, "task.live_view", bob["session_id"], task_id=task["task_id"], surface={
        "surface_id": "progress", "revision": 1,
        "root": {"type": "Text", "text": "working"}, "data": {}})
    # Its end starts the attachments' and the surfaces' grace periods.
    _checked(room, "handoff.result", bob["session_id"], handoff_id=handoff["handoff_id"],
             status="completed", summary="done")

    _checked(room, "permission.request", bob["session_id"], title="run tests", tool="bash",
             options=[{"option_id": "allow", "name": "Allow", "kind": "allow_once"},
                      {"option_id": "deny", "name": "Deny", "kind": "reject_once"}])

    # A host's save that cuts a leased region off keeps the lease a while (a torn save).
    _checked(room, "workspace.checkout", bob["session_id"], region="Risks", minutes=60)
    text = room.engine.path.read_text()
    room.engine.path.write_text(text.replace("## Risks\n\nNothing yet.\n", ""))
    room.clock.advance(seconds=5)
    _checked(room, "workspace.status", room.host)
    room.clock.advance(seconds=5)
    _checked(room, "workspace.status", room.host)
    assert room.engine.conn.execute(
        "SELECT count(*) FROM leases WHERE vanished_at IS NOT NULL AND ended_at IS NULL"
    ).fetchone()[0] == 1, "the save was not seen: the torn-save step checked nothing"
