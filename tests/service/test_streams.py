"""Observe and wait against a real room (engine + sidecar + hub), no HTTP.

Replay-then-live continuity, resume, resync (cursor_expired, lagged),
heartbeats, stream ends (revoke, leave, expiry, room stop), fan-out, and the
long-poll.

Every test runs under trio's autojump clock (each takes `autojump_clock`) (the room's store calls run inline
so the clock sees them): heartbeat intervals, long-poll holds and "ends within a
second" are virtual time, exact and instant, whatever the machine's load.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from trio.testing import MockClock

from commonroom.engine import sessions
from commonroom.engine.core import Engine
from commonroom.engine.dispatch import open_engine
from commonroom.engine.ids import hash_secret
from commonroom.http import framing
from commonroom.http.framing import format_sse, format_ws
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.events import Event
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.records import to_wire
from commonroom.protocol.timefmt import ManualClock
from commonroom.room import streams
from commonroom.room.core import Room
from commonroom.room.streams import StreamItem, observe, wait_for_events
from tests.conftest import SAMPLE

Items = AsyncGenerator[StreamItem, None]


@attrs.define
class Env:
    room: Room
    engine: Engine
    clock: ManualClock
    host: str
    bearer: str
    participant_id: str

    @property
    def session_hash(self) -> bytes:
        return hash_secret(self.bearer)

    def observe(self, since: int | None, **kw: Any) -> Items:
        return observe(
            self.room,
            session_hash=self.session_hash,
            participant_id=self.participant_id,
            since_event_id=since,
            **kw,
        )

    async def wait(self, cursor: int, timeout_seconds: float) -> dict[str, Any]:
        """The long-poll for this participant, as its wire JSON."""
        answer = await wait_for_events(
            self.room, session_hash=self.session_hash, participant_id=self.participant_id,
            cursor=cursor, timeout_seconds=timeout_seconds,
        )
        wire: dict[str, Any] = to_wire(answer)
        return wire

    async def join(self, name: str) -> dict[str, Any]:
        inv = await self.room.call("workspace.invite", self.host, {})
        joined: dict[str, Any] = await self.room.call(
            "session.join", None, {"invite": inv["invitation"], "name": name}
        )
        return joined

    async def pair(self, bearer: str | None = None) -> None:
        """A checkout and a release: two events, through real operations (ours by default)."""
        bearer = bearer or self.bearer
        lease = await self.room.call("workspace.checkout", bearer, {"region": "Goals"})
        await self.room.call("workspace.release", bearer, {"lease_id": lease["lease_id"]})

    async def burst(self, n: int) -> list[Event]:
        """n events in one transaction, published like any operation's."""
        engine = self.engine

        def _append() -> list[Event]:
            with engine.transaction(engine.clock()) as tx:
                for i in range(n):
                    tx.emit(ev.WorkspaceStarted(version=i))
            return tx.events

        events: list[Event] = await self.room.run_sync(_append)
        self.room.publish(events)
        return events

    def table_ids(self) -> list[int]:
        return [r[0] for r in self.engine.conn.execute("SELECT event_id FROM events ORDER BY 1")]

    @property
    def latest(self) -> int:
        return self.table_ids()[-1]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE)
    clock = ManualClock()
    engine = open_engine(path, clock=clock)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    room = Room(engine, inline_store=True)
    host = sessions.mint_host_session(engine)
    inv = await room.call("workspace.invite", host, {})
    joined = await room.call("session.join", None, {"invite": inv["invitation"], "name": "a"})
    yield Env(room, engine, clock, host, joined["session_id"], joined["participant_id"])
    room.hub.close_all()
    engine.close()


async def next_item(items: Items, *, heartbeats: bool = False, timeout: float = 5.0) -> StreamItem:
    with trio.fail_after(timeout):
        while True:
            item = await anext(items)
            if heartbeats or item.kind != "heartbeat":
                return item


async def event_ids_until(items: Items, last_id: int, *, timeout: float = 5.0) -> list[int]:
    ids: list[int] = []
    with trio.fail_after(timeout):
        async for item in items:
            assert item.kind in ("event", "heartbeat"), item
            if item.event is not None:
                ids.append(item.event.event_id)
                if item.event.event_id >= last_id:
                    break
    return ids


async def run_until_end(items: Items, out: list[StreamItem]) -> None:
    async with aclosing(items):
        async for item in items:
            out.append(item)
    assert out[-1].kind == "end"


# ------------------------------------------------------------ replay + live


@pytest.mark.parametrize("buffer", [256, 8])
async def test_replay_then_live_has_no_gap_and_no_duplicate(autojump_clock: MockClock, env: Env, buffer: int) -> None:
    await env.burst(700)  # more than one page of replay
    replay_end = env.latest
    final: int | None = None

    async def producer() -> None:
        nonlocal final
        for _ in range(300):
            await env.pair()
        final = env.room.hub.latest_event_id

    seen: list[int] = []
    latest_when_replay_ended = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        with trio.fail_after(15):
            async with aclosing(env.observe(0, heartbeat_seconds=0.05, buffer=buffer)) as items:
                async for item in items:
                    assert item.kind in ("event", "heartbeat"), item
                    if item.event is not None:
                        seen.append(item.event.event_id)
                        if item.event.event_id <= replay_end and len(seen) % 10 == 0:
                            # A slowish reader: commits land while it replays
                            # (with buffer=8 the live buffer overflows meanwhile).
                            await trio.sleep(0.002)
                        if item.event.event_id == replay_end:
                            latest_when_replay_ended = env.room.hub.latest_event_id
                    if final is not None and seen and seen[-1] >= final:
                        break
    assert final is not None
    assert latest_when_replay_ended > replay_end, "the producer did not overlap the replay"
    assert seen == list(range(1, final + 1))
    assert seen == env.table_ids()


async def test_resume_after_disconnect_is_continuous(autojump_clock: MockClock, env: Env) -> None:
    await env.burst(30)
    first: list[int] = []
    async with aclosing(env.observe(0)) as items:
        async for item in items:
            if item.event is not None:
                first.append(item.event.event_id)
                if len(first) == 10:
                    break
    assert env.room.hub.subscriber_count == 0  # the disconnected stream let go
    await env.burst(20)
    for _ in range(5):
        await env.pair()
    async with aclosing(env.observe(first[-1])) as items:
        rest = await event_ids_until(items, env.latest)
    assert first + rest == list(range(1, env.latest + 1))


async def test_since_none_starts_live_at_latest(autojump_clock: MockClock, env: Env) -> None:
    await env.burst(5)
    latest = env.latest
    async with aclosing(env.observe(None, heartbeat_seconds=0.05)) as items:
        item = await next_item(items, heartbeats=True)
        assert item.kind == "heartbeat"  # nothing replayed
        await env.pair()
        assert await event_ids_until(items, latest + 2) == [latest + 1, latest + 2]


async def test_since_zero_on_a_young_room_is_not_a_resync(autojump_clock: MockClock, env: Env) -> None:
    async with aclosing(env.observe(0)) as items:
        item = await next_item(items)
        assert item.kind == "event"
        assert item.event is not None
        assert (item.event.event_id, item.event.type) == (1, "workspace.created")


async def test_events_not_published_through_the_hub_are_filled_from_the_ring(
    autojump_clock: MockClock, env: Env
) -> None:
    latest = env.latest
    async with aclosing(env.observe(latest)) as items:
        # Committed behind the room's back (never published), then a published one.
        sessions.mint_host_session(env.engine)
        await env.room.record(ev.WorkspaceStarted(version=0))
        assert await event_ids_until(items, latest + 2) == [latest + 1, latest + 2]


class _Wire:
    """A direct writer and the stream's consumer writing to one ordered wire."""

    def __init__(self, *, refuse: set[int] | None = None, partial: bool = False) -> None:
        self.ids: list[int] = []  # event ids in the order they reached the wire
        self.direct: list[int] = []
        self.refuse = refuse or set()
        self.partial = partial
        self.owed = False

    def write_event_nowait(self, event: Event, owe: Any) -> bool:
        if event.event_id in self.refuse or self.owed:
            return False
        self.ids.append(event.event_id)
        self.direct.append(event.event_id)
        if self.partial:
            self.owed = True
            owe()
        return True

    def consume(self, item: StreamItem) -> None:
        if item.kind == "flush":
            self.owed = False
        elif item.event is not None:
            self.ids.append(item.event.event_id)


async def _wire_until(env: Env, wire: _Wire, items: Items, last_id: int) -> None:
    with trio.fail_after(5):
        while not wire.ids or wire.ids[-1] < last_id:
            wire.consume(await anext(items))


async def test_the_direct_lane_takes_live_events_while_the_reader_waits(
    autojump_clock: MockClock, env: Env
) -> None:
    wire = _Wire()
    latest = env.latest
    async with aclosing(env.observe(latest, direct=wire)) as items:
        await env.room.record(ev.WorkspaceStarted(version=0))  # the reader is not parked yet
        await _wire_until(env, wire, items, latest + 1)
        async with trio.open_nursery() as nursery:
            # The reader parks in its wait; the next events are written for it and
            # it is not woken at all.
            nursery.start_soon(_wire_until, env, wire, items, latest + 5)
            await trio.testing.wait_all_tasks_blocked()
            await env.burst(4)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert wire.ids == list(range(latest + 1, latest + 6))
    assert wire.direct == list(range(latest + 2, latest + 6))


async def test_the_direct_lane_keeps_order_across_a_hole_a_refusal_and_a_partial_write(
    autojump_clock: MockClock, env: Env
) -> None:
    latest = env.latest
    wire = _Wire(refuse={latest + 6})
    async with aclosing(env.observe(latest, direct=wire)) as items, trio.open_nursery() as nursery:
        nursery.start_soon(_wire_until, env, wire, items, latest + 10)
        await trio.testing.wait_all_tasks_blocked()
        await env.burst(2)  # latest+1, +2: direct
        await trio.testing.wait_all_tasks_blocked()
        sessions.mint_host_session(env.engine)  # +3: committed behind the room's back
        await env.burst(2)  # +4, +5: not direct (a hole before them); the reader fills +3
        await trio.testing.wait_all_tasks_blocked()
        await env.burst(1)  # +6: refused by the writer, the reader writes it
        await trio.testing.wait_all_tasks_blocked()
        await env.burst(1)  # +7: direct again
        await trio.testing.wait_all_tasks_blocked()
        wire.partial = True
        await env.burst(3)  # +8 direct in part; +9, +10 wait behind the owed bytes
    assert wire.ids == list(range(latest + 1, latest + 11))
    assert wire.direct == [latest + 1, latest + 2, latest + 7, latest + 8]


# ------------------------------------------------------------ resync


async def test_cursor_older_than_the_ring_resyncs_then_continues_live(autojump_clock: MockClock, env: Env) -> None:
    await env.burst(limits.EVENT_RING + 100)
    ids = env.table_ids()
    oldest, latest = ids[0], ids[-1]
    assert len(ids) == limits.EVENT_RING
    async with aclosing(env.observe(5)) as items:
        item = await next_item(items)
        assert item.kind == "resync"
        assert item.data == {
            "reason": "cursor_expired",
            "oldest_event_id": oldest,
            "latest_event_id": latest,
        }
        await env.room.record(ev.WorkspaceStarted(version=0))
        assert await event_ids_until(items, latest + 1) == [latest + 1]


async def test_resync_boundaries(autojump_clock: MockClock, env: Env) -> None:
    await env.burst(limits.EVENT_RING + 100)
    ids = env.table_ids()
    oldest, latest = ids[0], ids[-1]
    for cursor in (0, oldest - 2, latest + 50):
        async with aclosing(env.observe(cursor)) as items:
            item = await next_item(items)
            assert item.kind == "resync", cursor
            assert item.data is not None and item.data["reason"] == "cursor_expired"
    # The ring still holds cursor + 1: a replay, not a resync.
    async with aclosing(env.observe(oldest - 1)) as items:
        item = await next_item(items)
        assert item.event is not None and item.event.event_id == oldest
    # Nothing after the cursor: live, no resync.
    async with aclosing(env.observe(latest, heartbeat_seconds=0.05)) as items:
        assert (await next_item(items, heartbeats=True)).kind == "heartbeat"


async def test_slow_subscriber_lags_and_resyncs_while_a_fast_one_keeps_everything(autojump_clock: MockClock, env: Env,
) -> None:
    start = env.latest
    async with (
        aclosing(env.observe(None, buffer=8, heartbeat_seconds=0.05)) as slow,
        aclosing(env.observe(None, heartbeat_seconds=0.05)) as fast,
    ):
        # A heartbeat means the stream is past its (empty) replay: live now.
        assert (await next_item(slow, heartbeats=True)).kind == "heartbeat"
        assert (await next_item(fast, heartbeats=True)).kind == "heartbeat"
        await env.room.record(ev.WorkspaceStarted(version=0))
        assert await event_ids_until(slow, start + 1) == [start + 1]
        fast_ids: list[int] = []

        async def fast_reader() -> None:
            fast_ids.extend(await event_ids_until(fast, start + 52))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fast_reader)
            for _ in range(50):  # the slow stream is not read meanwhile
                await env.room.record(ev.WorkspaceStarted(version=0))
            item = await next_item(slow)
            assert item.kind == "resync"
            assert item.data == {
                "reason": "lagged",
                "oldest_event_id": 1,
                "latest_event_id": start + 51,
            }
            await env.room.record(ev.WorkspaceStarted(version=0))
            assert await event_ids_until(slow, start + 52) == [start + 52]
        assert fast_ids == list(range(start + 1, start + 53))


# ------------------------------------------------------------ heartbeats


async def test_heartbeats_every_interval_of_silence(autojump_clock: MockClock, env: Env) -> None:
    async with aclosing(env.observe(None, heartbeat_seconds=0.05)) as items:
        t0 = trio.current_time()
        kinds = [(await next_item(items, heartbeats=True)).kind for _ in range(3)]
        elapsed = trio.current_time() - t0
    assert kinds == ["heartbeat"] * 3
    assert elapsed == pytest.approx(0.15)


async def test_an_event_postpones_the_heartbeat(autojump_clock: MockClock, env: Env) -> None:
    latest = env.latest
    async with aclosing(env.observe(latest, heartbeat_seconds=0.3)) as items:
        await trio.sleep(0.2)
        await env.room.record(ev.WorkspaceStarted(version=0))
        t0 = trio.current_time()
        assert (await next_item(items, heartbeats=True)).kind == "event"
        assert (await next_item(items, heartbeats=True)).kind == "heartbeat"
        assert trio.current_time() - t0 == pytest.approx(0.3)  # a full interval after the event


async def test_a_held_stream_renews_presence(autojump_clock: MockClock, env: Env) -> None:
    env.engine.presence.forget(env.participant_id)
    async with aclosing(env.observe(None, heartbeat_seconds=0.05)) as items:
        await next_item(items, heartbeats=True)
        assert env.engine.presence.last_seen(env.participant_id) is not None


# ------------------------------------------------------------ ends


async def _ends_within(env: Env, action: Any, limit: float = 1.0, **kw: Any) -> list[StreamItem]:
    out: list[StreamItem] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_until_end, env.observe(None, **kw), out)
        await trio.sleep(0.05)  # the stream is subscribed and live
        t0 = trio.current_time()
        with trio.fail_after(limit + 0.5):
            await action()
            while not out or out[-1].kind != "end":
                await trio.sleep(0.005)
        assert trio.current_time() - t0 < limit
    assert env.room.hub.subscriber_count == 0
    return out


async def test_revocation_ends_the_stream_within_a_second(autojump_clock: MockClock, env: Env) -> None:
    async def revoke() -> None:
        await env.room.call("session.revoke", env.host, {"participant_id": env.participant_id})

    out = await _ends_within(env, revoke)
    assert out[-2].event is not None and out[-2].event.type == "session.revoked"


async def test_leave_ends_the_stream(autojump_clock: MockClock, env: Env) -> None:
    async def leave() -> None:
        await env.room.call("workspace.leave", env.bearer, {})

    out = await _ends_within(env, leave)
    assert out[-2].event is not None and out[-2].event.type == "participant.left"


async def test_expiry_without_an_event_ends_the_stream(autojump_clock: MockClock, env: Env) -> None:
    """The fallback check (no sweeper here to emit session.expired)."""

    async def expire() -> None:
        env.clock.advance(hours=limits.SESSION_MAX_MINUTES / 60 + 1)

    out = await _ends_within(env, expire, 1.0 + 0.25, liveness_seconds=1.0)
    assert [item.kind for item in out] == ["end"]


async def test_revoking_someone_else_does_not_end_the_stream(autojump_clock: MockClock, env: Env) -> None:
    other = await env.join("b")
    latest = env.latest
    async with aclosing(env.observe(latest)) as items:
        await env.room.call("session.revoke", env.host, {"participant_id": other["participant_id"]})
        await env.room.record(ev.WorkspaceStarted(version=0))
        ids = await event_ids_until(items, latest + 2)
        assert ids == [latest + 1, latest + 2]


async def test_a_stream_for_an_ended_session_ends_at_once(autojump_clock: MockClock, env: Env) -> None:
    await env.room.call("workspace.leave", env.bearer, {})
    async with aclosing(env.observe(0)) as items:
        assert (await next_item(items, timeout=1)).kind == "end"
        with pytest.raises(StopAsyncIteration):
            await anext(items)


async def test_closing_the_hub_ends_every_stream(autojump_clock: MockClock, env: Env) -> None:
    outs: list[list[StreamItem]] = [[] for _ in range(5)]
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            for out in outs:
                nursery.start_soon(run_until_end, env.observe(0), out)
            await trio.sleep(0.1)
            t0 = trio.current_time()
            env.room.hub.close_all()
        assert trio.current_time() - t0 < 0.5
    for out in outs:
        assert out[-1].kind == "end"
    assert env.room.hub.subscriber_count == 0
    # A stream that starts while the room stops ends at once.
    async with aclosing(env.observe(0)) as items:
        assert (await next_item(items, timeout=1)).kind == "end"


async def test_closing_the_hub_ends_a_stream_in_the_middle_of_a_replay(autojump_clock: MockClock, env: Env) -> None:
    await env.burst(1500)
    async with aclosing(env.observe(0)) as items:
        assert (await next_item(items)).kind == "event"
        env.room.hub.close_all()
        assert (await next_item(items, timeout=1)).kind == "end"
        with pytest.raises(StopAsyncIteration):
            await anext(items)


# ------------------------------------------------------------ fan-out


async def test_two_hundred_subscribers_get_the_same_events(autojump_clock: MockClock, env: Env) -> None:
    start = env.latest
    results: list[list[int]] = []

    async def reader() -> None:
        async with aclosing(env.observe(start)) as items:
            results.append(await event_ids_until(items, start + 30, timeout=10))

    async with trio.open_nursery() as nursery:
        for _ in range(200):
            nursery.start_soon(reader)
        await trio.sleep(0.05)
        await env.burst(10)
        for _ in range(10):
            await env.pair()
    assert len(results) == 200
    assert all(ids == list(range(start + 1, start + 31)) for ids in results)
    assert env.room.hub.subscriber_count == 0


async def test_idle_streams_share_their_session_checks(
    autojump_clock: MockClock, env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = streams.check_streams

    def counting(engine: Engine, touches: dict[bytes, str | None]) -> Any:
        calls.append(len(touches))
        return real(engine, touches)

    monkeypatch.setattr(streams, "check_streams", counting)
    beats = 0

    async def reader() -> None:
        nonlocal beats
        async with aclosing(env.observe(None, heartbeat_seconds=0.1)) as items:
            for _ in range(4):
                assert (await next_item(items, heartbeats=True)).kind == "heartbeat"
                beats += 1

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(reader)
    assert beats == 200
    # 50 streams of one session wake on the same grid: the first check, then one a
    # tick for 0.4 s, each shared by all 50 (unshared: 250 store calls).
    assert calls == [1] * 5, calls


class _RecordingWriter:
    """A direct writer that takes every event it is offered (the hub's lane, `room/hub.py`)."""

    def __init__(self) -> None:
        self.taken: list[int] = []

    def write_event_nowait(self, event: Event, owe: Any) -> bool:
        self.taken.append(event.event_id)
        return True


async def test_the_direct_lane_stays_open_while_a_stream_checks_its_session(
    autojump_clock: MockClock, env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All of a room's streams check their sessions at the same grid instant and wait for
    one shared store call; events published meanwhile still go the direct lane (no task
    of the stream wakes for them), and the stream neither repeats nor loses them."""
    checking, release = trio.Event(), trio.Event()
    real_run_sync = env.room.run_sync

    async def held_check(fn: Any, *args: Any) -> Any:
        if fn is streams.check_streams:
            checking.set()
            await release.wait()
        return await real_run_sync(fn, *args)

    monkeypatch.setattr(env.room, "run_sync", held_check)
    writer = _RecordingWriter()
    items: list[StreamItem] = []
    stream = env.observe(None, heartbeat_seconds=100.0, liveness_seconds=1.0, direct=writer)
    async with trio.open_nursery() as nursery:
        async def consume() -> None:
            async with aclosing(stream):
                async for item in stream:
                    items.append(item)

        nursery.start_soon(consume)
        with trio.fail_after(5):
            await checking.wait()  # the first check, as the stream starts
        release.set()
        await trio.sleep(0.1)  # now parked in next_batch
        checking, release = trio.Event(), trio.Event()
        with trio.fail_after(5):
            await checking.wait()  # the grid's check, one second in: held
        await env.pair(env.host)
        during = env.table_ids()[-2:]
        assert writer.taken == during  # delivered while the check waits
        release.set()
        await trio.sleep(0.1)
        await env.pair(env.host)
        after = env.table_ids()[-2:]
        assert writer.taken == [*during, *after]
        nursery.cancel_scope.cancel()
    assert [item.kind for item in items if item.kind != "heartbeat"] == []


# ------------------------------------------------------------ long-poll


async def test_wait_returns_at_once_when_events_exist(autojump_clock: MockClock, env: Env) -> None:
    await env.burst(300)
    t0 = trio.current_time()
    answer = await env.wait(0, 10)
    assert trio.current_time() - t0 < 0.5
    assert [e["event_id"] for e in answer["events"]] == list(range(1, 201))
    assert answer["cursor"] == 200
    assert answer["resync"] is False
    assert answer["latest_event_id"] == env.latest
    assert set(answer["events"][0]) == {"event_id", "type", "created_at", "payload"}
    again = await env.wait(answer["cursor"], 10)
    assert [e["event_id"] for e in again["events"]] == list(range(201, env.latest + 1))
    assert again["cursor"] == env.latest


async def test_wait_holds_until_an_event_arrives(autojump_clock: MockClock, env: Env) -> None:
    latest = env.latest
    answers: list[dict[str, Any]] = []

    async def poll() -> None:
        answers.append(await env.wait(latest, 10))

    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        await trio.sleep(0.1)
        assert answers == []
        await env.pair(env.host)  # someone else's change
    assert trio.current_time() - t0 == pytest.approx(0.1)  # answered when the change came
    (answer,) = answers
    assert answer["events"][0]["event_id"] == latest + 1
    assert answer["events"][0]["type"] == "lease.acquired"
    assert answer["cursor"] == answer["events"][-1]["event_id"]
    assert answer["resync"] is False
    assert env.room.hub.subscriber_count == 0


async def test_wait_is_not_answered_early_by_the_callers_own_events(autojump_clock: MockClock, env: Env) -> None:
    """docs/spec/PROTOCOL.md 10.1: own events ride along, but only someone else's end the hold."""
    latest = env.latest
    answers: list[dict[str, Any]] = []

    async def poll() -> None:
        answers.append(await env.wait(latest, 10))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        await trio.sleep(0.1)
        await env.pair()  # our own checkout and release
        await trio.sleep(0.2)
        assert answers == [], "answered early by the caller's own events"
        await env.room.record(ev.WorkspaceStarted(version=0))  # the room's, not ours
    (answer,) = answers
    assert [e["type"] for e in answer["events"]] == ["lease.acquired", "lease.released", "workspace.started"]


async def test_wait_times_out_empty(autojump_clock: MockClock, env: Env) -> None:
    latest = env.latest
    t0 = trio.current_time()
    answer = await env.wait(latest, 0.1)
    assert trio.current_time() - t0 == pytest.approx(0.1)
    assert answer == {"events": [], "cursor": latest, "resync": False, "latest_event_id": latest}
    t0 = trio.current_time()
    answer = await env.wait(latest, 0)
    assert trio.current_time() - t0 == 0
    assert answer["events"] == []


async def test_wait_resyncs_an_expired_cursor(autojump_clock: MockClock, env: Env) -> None:
    await env.burst(limits.EVENT_RING + 10)
    latest = env.latest
    answer = await env.wait(3, 5)
    assert answer == {"events": [], "cursor": latest, "resync": True, "latest_event_id": latest}


async def test_wait_ends_when_the_room_stops(autojump_clock: MockClock, env: Env) -> None:
    latest = env.latest
    answers: list[dict[str, Any]] = []

    async def poll() -> None:
        answers.append(await env.wait(latest, 10))

    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(0.05)
            env.room.hub.close_all()
    assert answers[0]["events"] == []


# ------------------------------------------------------------ wire formats


def test_sse_and_ws_formats() -> None:
    event = ev.make(42, "2026-11-30T12:00:00.000000+00:00",
                    ev.LeaseAcquired("ls_1", "pt_1", "Goals", "2026-11-30T12:15:00.000000+00:00"))
    item = StreamItem("event", event)
    body = json.dumps(
        {"event_id": 42, "type": "lease.acquired", "created_at": event.created_at,
         "payload": {"lease_id": "ls_1", "participant_id": "pt_1", "region": "Goals",
                     "expires_at": "2026-11-30T12:15:00.000000+00:00"}},
        separators=(",", ":"),
    )
    assert format_sse(item) == f"id: 42\nevent: lease.acquired\ndata: {body}\n\n".encode()
    assert format_ws(item) == body
    data = {"reason": "lagged", "oldest_event_id": 3, "latest_event_id": 9}
    resync = StreamItem("resync", data=data)
    sse = format_sse(resync)
    assert sse.startswith(b"event: resync\ndata: ") and sse.endswith(b"\n\n")
    assert json.loads(sse.split(b"data: ", 1)[1]) == data
    ws = format_ws(resync)
    assert ws is not None and json.loads(ws) == {"type": "resync", **data}
    assert format_sse(StreamItem("heartbeat")) == b": hb\n\n"
    assert format_sse(StreamItem("end")) == b""
    assert format_ws(StreamItem("heartbeat")) is None
    assert format_ws(StreamItem("end")) is None
    assert framing.SSE_PREAMBLE == b"retry: 5000\n\n"


def test_an_events_frame_is_built_once_for_every_subscriber() -> None:
    event = ev.make(7, "2026-11-30T12:00:00.000000+00:00", ev.WorkspaceStarted(version=3))
    first = format_sse(StreamItem("event", event))
    assert format_sse(StreamItem("event", event)) is first  # the same bytes, not a copy
    addressed = format_sse(StreamItem("event", event.addressed_copy()))
    assert addressed != first and b'"addressed":true' in addressed
    batch = framing.sse_chunk([StreamItem("event", event), StreamItem("heartbeat")])
    assert batch == first + b": hb\n\n"
