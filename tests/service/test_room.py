"""The room service's own background work, on trio's MockClock (no real waiting)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
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


async def test_sweeper_wakes_for_an_earlier_lease_and_only_for_one(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A lease that expires before the sleeping sweeper would wake wakes it (and expires on
    time); one that expires after does not cost a sweep (a write cycle's checkout did)."""
    room, _, joined = await _room(doc_path, autojump_clock)
    bearer = joined["session_id"]
    sweeps = 0
    sweep = room.engine.sweep

    def counted() -> Any:
        nonlocal sweeps
        sweeps += 1
        return sweep()

    room.engine.sweep = counted  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        sub = room.hub.subscribe()
        await room.call("workspace.checkout", bearer, {"region": "Goals", "minutes": 10})
        await trio.testing.wait_all_tasks_blocked()
        before = sweeps
        await room.call("workspace.checkout", bearer, {"region": "Risks", "minutes": 20})
        await trio.testing.wait_all_tasks_blocked()
        assert sweeps == before, "a lease expiring after the sweeper's wake woke it"
        short = await room.call("workspace.checkout", bearer, {"region": "Appendix", "minutes": 1})
        with trio.fail_after(120):
            event = await _next_of(sub, "lease.expired")
        assert event.payload.lease_id == short["lease_id"]
        late = parse_ts(event.created_at) - parse_ts(short["expires_at"])
        assert timedelta(0) <= late <= timedelta(seconds=1)
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

    from commonroom.engine.ids import hash_secret
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


# -- the host's saves: the watcher settles them, a write waits for them (docs/spec/PROTOCOL.md 16)


async def _watching_room(doc_path: Path, clock: trio.testing.MockClock,
                         faults: list[str]) -> tuple[Room, str, str]:
    """A room with its watcher (every 0.1 s) and an approved proposal on Goals."""
    engine = open_engine(doc_path, clock=mock_wall_clock(clock))  # type: ignore[arg-type]
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    room = Room(engine, max_sweep_sleep=10**7, inline_store=True, fault_sink=faults.append)
    host = sessions.mint_host_session(engine)
    invite = await room.call("workspace.invite", host, {})
    agent = (await room.call("session.join", None, {"invite": invite["invitation"], "name": "a"}))
    proposal = await room.call("workspace.propose", agent["session_id"], {
        "region": "Goals", "base_version": 1, "summary": "s", "content": "## Goals\n\n- mine\n\n"})
    await room.call("workspace.review", host, {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"],
                                               "decision": "approve"})
    return room, agent["session_id"], proposal["proposal_id"]


def _save_in_place(path: Path, text: str) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(0)
        handle.write(text.encode())


async def test_a_save_becomes_one_version_a_settle_period_later_with_nobody_calling(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    room, _, _ = await _watching_room(doc_path, autojump_clock, [])
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        sub = room.hub.subscribe()
        await trio.sleep(0.05)
        saved = trio.current_time()
        text = doc_path.read_text()
        _save_in_place(doc_path, text[:30])  # a save in two writes, 20 ms apart
        await trio.sleep(0.02)
        _save_in_place(doc_path, text.replace("Intro text.", "Typed."))
        with trio.fail_after(5):
            event = await _next_of(sub, "change.committed")
        took = trio.current_time() - saved
        assert 0.25 <= took <= 0.25 + 0.1 + 0.02 + 0.01  # settle, one watcher tick, the save itself
        assert event.payload.source == "external" and room.engine.current_version == 2
        assert room.engine.current().text == text.replace("Intro text.", "Typed.")
        nursery.cancel_scope.cancel()
    room.engine.close()


async def test_a_commit_waits_for_the_hosts_save_and_then_lands(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    faults: list[str] = []
    room, agent, proposal_id = await _watching_room(doc_path, autojump_clock, faults)
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        _save_in_place(doc_path, doc_path.read_text().replace("The end.", "The host's end."))
        started = trio.current_time()
        done = await room.call("workspace.commit", agent, {"proposal_id": proposal_id})
        assert 0.25 <= trio.current_time() - started <= 0.3
        assert done["version"] == 3  # the save first (version 2), then the commit on top
        text = doc_path.read_text()
        assert "The host's end." in text and "- mine" in text
        nursery.cancel_scope.cancel()
    assert faults == []  # a save is no storage fault
    room.engine.close()


async def test_a_file_that_never_settles_answers_file_changing_after_two_seconds(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    faults: list[str] = []
    room, agent, proposal_id = await _watching_room(doc_path, autojump_clock, faults)
    text = doc_path.read_text()

    async def host_keeps_typing() -> None:
        for n in range(1000):
            _save_in_place(doc_path, text.replace("The end.", f"The end {n}."))
            await trio.sleep(0.1)

    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        nursery.start_soon(host_keeps_typing)
        await trio.sleep(0.01)
        started = trio.current_time()
        outcome = await room.execute("workspace.commit", agent, {"proposal_id": proposal_id})
        assert 2.0 - 1e-6 <= trio.current_time() - started <= 2.01  # waited the 2 s, then answered
        assert outcome.error is not None
        wire = outcome.error.to_wire()
        assert (outcome.error.http_status, wire["error"], wire["details"]["reason"]) == (
            503, "storage_unavailable", "file_changing")
        assert wire["retry_after_seconds"] >= 1
        assert room.engine.current_version == 1 and "- mine" not in doc_path.read_text()
        nursery.cancel_scope.cancel()
    assert faults == []
    room.engine.close()


async def test_storage_faults_are_one_line_on_stderr_and_repeats_are_counted(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    faults: list[str] = []
    room, agent, proposal_id = await _watching_room(doc_path, autojump_clock, faults)

    def full_disk(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    room.engine.doc.fill_temp = full_disk  # type: ignore[method-assign]
    for _ in range(3):
        outcome = await room.execute("workspace.commit", agent, {"proposal_id": proposal_id})
        assert outcome.error is not None and outcome.error.code == "storage_unavailable"
    assert faults == [f"commonroom: storage fault: {outcome.error.message}"]
    assert "\n" not in faults[0] and "No space left on device" in faults[0]
    await trio.sleep(31)
    await room.execute("workspace.commit", agent, {"proposal_id": proposal_id})
    assert faults[1] == faults[0] + " (the fault before repeated 2 more times)"
    room.engine.close()
