"""The event hub: ordering, bounded buffers (lagged), closing, subscriber count."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from commonroom.protocol import events
from commonroom.protocol.events import Event
from commonroom.room.hub import EventHub


def ev(event_id: int) -> Event:
    return events.make(event_id, "2026-11-30T12:00:00.000000+00:00",
                       events.WorkspaceStarted(version=event_id))


async def test_events_arrive_in_publish_order() -> None:
    hub = EventHub()
    sub = hub.subscribe()
    hub.publish([ev(1), ev(2)])
    hub.publish([ev(3)])
    assert [e.event_id for e in await sub.next_batch()] == [1, 2, 3]
    assert sub.pending == 0
    assert hub.latest_event_id == 3


async def test_every_subscriber_gets_every_event() -> None:
    hub = EventHub()
    subs = [hub.subscribe() for _ in range(5)]
    hub.publish([ev(i) for i in range(1, 11)])
    for sub in subs:
        assert [e.event_id for e in await sub.next_batch()] == list(range(1, 11))


async def test_next_batch_waits_until_publish() -> None:
    hub = EventHub()
    sub = hub.subscribe()
    got: list[int] = []

    async def reader() -> None:
        got.extend(e.event_id for e in await sub.next_batch())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        hub.publish([ev(7)])
    assert got == [7]


async def test_full_buffer_marks_lagged_and_drops_without_waiting() -> None:
    hub = EventHub()
    slow = hub.subscribe(buffer=4)
    fast = hub.subscribe(buffer=100)
    hub.publish([ev(i) for i in range(1, 51)])  # synchronous: never waits for a reader
    assert slow.lagged
    assert slow.pending == 0  # memory released, not grown
    assert await slow.next_batch() == []
    assert [e.event_id for e in await fast.next_batch()] == list(range(1, 51))
    assert not fast.lagged
    # After the reader resynced, buffering starts again.
    slow.reset_lag()
    hub.publish([ev(51)])
    assert [e.event_id for e in await slow.next_batch()] == [51]


async def test_exactly_full_buffer_is_not_lagged() -> None:
    hub = EventHub()
    sub = hub.subscribe(buffer=3)
    hub.publish([ev(1), ev(2), ev(3)])
    assert not sub.lagged
    hub.publish([ev(4)])
    assert sub.lagged


async def test_lag_wakes_a_waiting_reader() -> None:
    hub = EventHub()
    sub = hub.subscribe(buffer=1)
    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:

            async def reader() -> None:
                while not sub.lagged:
                    await sub.next_batch()

            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            hub.publish([ev(1), ev(2), ev(3)])


async def test_close_wakes_reader_and_unsubscribes() -> None:
    hub = EventHub()
    sub = hub.subscribe()
    assert hub.subscriber_count == 1
    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:

            async def reader() -> None:
                assert await sub.next_batch() == []
                assert sub.closed

            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            sub.close()
    assert hub.subscriber_count == 0
    hub.publish([ev(1)])
    assert sub.pending == 0


async def test_close_all_wakes_everyone_and_later_subscribers_are_closed() -> None:
    hub = EventHub()
    subs = [hub.subscribe() for _ in range(20)]
    ended = 0

    async def reader(index: int) -> None:
        nonlocal ended
        assert await subs[index].next_batch() == []
        ended += 1

    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            for index in range(len(subs)):
                nursery.start_soon(reader, index)
            await trio.testing.wait_all_tasks_blocked()
            hub.close_all()
    assert ended == 20
    assert hub.subscriber_count == 0
    late = hub.subscribe()
    assert late.closed
    assert hub.subscriber_count == 0
    with trio.fail_after(1):
        assert await late.next_batch() == []


async def test_cancelled_wait_loses_nothing() -> None:
    hub = EventHub()
    sub = hub.subscribe()
    with trio.move_on_after(0.01):
        await sub.next_batch()
    hub.publish([ev(1)])
    assert [e.event_id for e in await sub.next_batch()] == [1]


async def test_subscriber_count_and_context_manager() -> None:
    hub = EventHub()
    with hub.subscribe() as a, hub.subscribe() as b:
        assert hub.subscriber_count == 2
        assert not a.closed and not b.closed
    assert hub.subscriber_count == 0
    assert a.closed and b.closed


def test_buffer_must_hold_an_event() -> None:
    with pytest.raises(ValueError):
        EventHub().subscribe(buffer=0)
