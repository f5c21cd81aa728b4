"""The event log: ring of 2000, monotonic ids, no secrets in payloads."""

from __future__ import annotations

import json

from commonroom.protocol import events as ev
from commonroom.protocol import limits
from tests.conftest import Driver


def test_ids_increase_and_ring_keeps_newest(room: Driver) -> None:
    engine = room.engine
    with engine.transaction(engine.clock()) as tx:
        for i in range(limits.EVENT_RING + 150):
            tx.emit(ev.WorkspaceStarted(version=i))
    ids = [r[0] for r in engine.conn.execute("SELECT event_id FROM events ORDER BY event_id")]
    assert len(ids) == limits.EVENT_RING
    assert ids == list(range(ids[0], ids[0] + limits.EVENT_RING))
    last = ids[-1]
    with engine.transaction(engine.clock()) as tx:
        tx.emit(ev.WorkspaceStarted(version=-1))
    assert tx.events[0].event_id == last + 1


def test_event_ids_never_repeat_after_reopen(room: Driver) -> None:
    from commonroom.engine.dispatch import open_engine

    latest = room.engine.conn.execute("SELECT max(event_id) FROM events").fetchone()[0]
    path = room.engine.path
    room.engine.close()
    again = open_engine(path, clock=room.clock)
    with again.transaction(again.clock()) as tx:
        tx.emit(ev.WorkspaceStarted(version=0))
    assert tx.events[0].event_id == latest + 1
    room.engine = again


def test_events_never_contain_secrets(room: Driver) -> None:
    inv = room.invite(capabilities=["read", "checkout", "propose", "commit", "invite"])
    joined = room.call("session.join", None, invite=inv["invitation"], name="a")
    bearer = joined["session_id"]
    lease = room.call("workspace.checkout", bearer, region="Goals")
    room.call("workspace.release", bearer, lease_id=lease["lease_id"])
    room.call("workspace.invite", bearer, capabilities=["read"])
    room.call("session.revoke", room.host, participant_id=joined["participant_id"])
    from commonroom.protocol.invitation import decode

    secrets = {bearer, room.host, decode(inv["invitation"]).secret, inv["invitation"], "127.0.0.1"}
    rows = [r[0] for r in room.engine.conn.execute("SELECT payload FROM events")]
    assert len(rows) > 8
    blob = "\n".join(rows)
    for secret in secrets:
        assert secret not in blob
    for row in rows:
        assert "session_id" not in json.loads(row)
