"""The room service's own background work, on trio's MockClock (no real waiting)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import trio
import trio.testing

from commonroom.engine import sessions
from commonroom.engine.dispatch import open_engine
from commonroom.protocol.events import Event
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import parse_ts
from commonroom.room.core import Room

BASE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def mock_wall_clock(clock: trio.testing.MockClock) -> object:
    # The engine reads time on the store thread, so it reads the MockClock object directly.
    return lambda: BASE + timedelta(seconds=clock.current_time())


async def _room(doc_path: Path, clock: trio.testing.MockClock) -> tuple[Room, str, dict[str, str]]:
    engine = open_engine(doc_path, clock=mock_wall_clock(clock))  # type: ignore[arg-type]
    engine.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    # Only the sweeper's own deadline may be jumped to: no watcher ticks, no capped sleeps,
    # and store calls inline, where the autojump clock sees them.
    room = Room(engine, watch_interval=10**7, max_sweep_sleep=10**7, inline_store=True)
    host = sessions.mint_host_session(engine)
    invite = await room.call("workspace.invite", host, {})
    joined = await room.call("session.join", None, {"invite": invite["invitation"], "name": "a"})
    return room, host, joined


async def _next_of(sub: object, kind: str) -> Event:
    while True:
        for event in await sub.next_batch():  # type: ignore[attr-defined]
            if event.type == kind:
                return event


async def test_sweeper_expires_a_lease_within_a_second_with_nobody_calling(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    room, _, joined = await _room(doc_path, autojump_clock)
    bearer = joined["session_id"]
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        sub = room.hub.subscribe()
        lease = await room.call("workspace.checkout", bearer, {"region": "Goals", "minutes": 1})
        with trio.fail_after(600):
            event = await _next_of(sub, "lease.expired")
        late = parse_ts(event.created_at) - parse_ts(lease["expires_at"])
        assert timedelta(0) <= late <= timedelta(seconds=1)
        assert event.payload.lease_id == lease["lease_id"]
        nursery.cancel_scope.cancel()
    room.engine.close()


async def test_sweeper_wakes_for_a_session_that_expires_later(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    room, _, joined = await _room(doc_path, autojump_clock)
    bearer = joined["session_id"]
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        sub = room.hub.subscribe()
        with trio.fail_after(9 * 3600):
            event = await _next_of(sub, "session.expired")
        status = await room.execute("workspace.status", bearer, {})
        assert status.error is not None and status.error.code == "session_expired"
        late = parse_ts(event.created_at) - parse_ts(joined["expires_at"])
        assert timedelta(0) <= late <= timedelta(seconds=1)
        nursery.cancel_scope.cancel()
    room.engine.close()


async def test_a_stream_ends_within_a_second_of_its_session_expiring(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The sweeper's session.expired ends the stream; no 1-second polling needed."""
    from contextlib import aclosing

    from commonroom.engine.core import hash_secret
    from commonroom.room import streams

    room, _, joined = await _room(doc_path, autojump_clock)
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        items = streams.observe(room, session_hash=hash_secret(joined["session_id"]),
                                participant_id=joined["participant_id"], since_event_id=None,
                                heartbeat_seconds=3600, liveness_seconds=3600)
        async with aclosing(items):
            with trio.fail_after(9 * 3600):
                async for item in items:
                    if item.kind == "end":
                        break
        ended = BASE + timedelta(seconds=autojump_clock.current_time())
        late = ended - parse_ts(joined["expires_at"])
        assert timedelta(0) <= late <= timedelta(seconds=1)
        nursery.cancel_scope.cancel()
    room.engine.close()
