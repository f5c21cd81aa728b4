"""Observe and wait: the transport-independent core of the event streams.

The adapters frame these items (`commonroom.http.framing`: server-sent
events, WebSocket text frames; the MCP notification streams); the long-poll
answer (`wait_for_events`) is built from the same generator.

Theory of operation
-------------------
Events reach a stream from two places: the sidecar's ring (the newest 2000
events, read on the store thread) and the room's hub (events published live
after their transaction committed). A stream

1. subscribes to the hub *first*, so every event published from now on waits
   in its bounded buffer;
2. then reads the ring after the cursor, in pages of `PAGE` events, and yields
   them. Everything committed before a page read is in the page; everything
   published after the subscription is in the buffer; the overlap is skipped by
   id (`event_id <= last` is dropped). So there is no gap and no duplicate;
3. then goes live: it drains the buffer, skipping ids it already yielded. A
   hole in the live ids (an event committed but published out of order, or
   not through the room) is filled from the ring, so ids stay contiguous.

A resync tells the client to read `GET /workspace/room` again and continues
live from the latest event (`data.latest_event_id`):

- `cursor_expired` when the ring no longer holds event `cursor + 1` (or the
  cursor is ahead of the room: a different sidecar);
- `lagged` when the live buffer overflowed (a slow reader: the hub dropped
  its buffer rather than grow or wait). An overflow *during the replay* is not
  a lag of the client: the stream reads on from the ring, and only reports
  `lagged` if the ring itself moved past it meanwhile.

While waiting, a stream wakes on a grid of `LIVENESS_SECONDS` (or its
heartbeat interval when shorter) to check that its session is still alive and, every
`TOUCH_SECONDS`, to renew its participant's presence. The checks of all
streams of a room that wake at the same instant share one store-thread call
(`_Liveness`), so 200 idle streams cost one call per interval, not 200. A
`session.revoked` / `session.expired` / `participant.left` event about the
stream's participant triggers a check at once. A dead session, or the hub
closing (the room stops), ends the stream: it yields a final `end` item and
returns.

The generator never yields inside a cancel scope or nursery (trio's rule for
async generators), and releases its subscription before yielding `end` and in
`finally`, so a consumer that stops early leaks nothing; consumers should
still wrap it in `contextlib.aclosing`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Protocol

import attrs
import trio

from commonroom.engine.facade import EngineFace, StreamStart, check_streams, ring_window
from commonroom.protocol import limits
from commonroom.protocol.events import Event
from commonroom.protocol.records import ProposalWaited, ThreadWaited, WaitAnswer
from commonroom.room.hub import EventHub, Subscriber


class StoreRoom(Protocol):
    """What a stream needs of the room: its engine, its hub, and the store thread."""

    engine: EngineFace
    hub: EventHub

    async def run_sync(self, fn: Any, *args: Any) -> Any: ...


Room = StoreRoom
Addressed = Callable[[Event, str], bool]
"""(event, reader's participant id) -> is the event addressed to that reader."""

PAGE = 500
"""Events read from the ring per store-thread call while replaying."""
LIVENESS_SECONDS = 10.0
"""Longest time a stream goes without checking that its session is alive. The
sweeper's `session.expired` and the `session.revoked`/`participant.left`
events end a stream at once; this check is the fallback, so it is rare enough
that 1,000 idle streams cost next to nothing."""
TOUCH_SECONDS = 20.0
"""How often a held stream renews presence (docs/spec/PROTOCOL.md: present = last 90 s)."""
WAIT_MAX_SECONDS = float(limits.WAIT_MAX_SECONDS)
WAIT_MAX_EVENTS = limits.WAIT_MAX_EVENTS



@attrs.frozen
class StreamItem:
    """What a stream yields."""

    kind: str  # "event" | "resync" | "heartbeat" | "live" | "flush" | "end"
    event: Event | None = None
    # resync: {"reason": "cursor_expired" | "lagged", "oldest_event_id", "latest_event_id"}
    data: dict[str, Any] | None = None


HEARTBEAT = StreamItem("heartbeat")
END = StreamItem("end")
LIVE = StreamItem("live")
"""Only with `mark_live`: the replay is over, what follows is live."""
FLUSH = StreamItem("flush")
"""Only with a direct writer: it owes its socket bytes (a direct write went out in part)."""


class DirectWriter(Protocol):
    """A stream's writer that can take an event without the stream's task (see `hub`)."""

    def write_event_nowait(self, event: Event, owe: Callable[[], None]) -> bool:
        """Write the event's frame now, or refuse (False) and leave it to the stream.

        Calls `owe()` when only part of the frame went out: the stream then
        yields `flush` and its consumer writes the rest before anything else.
        """
        ...


# ------------------------------------------------------------ the ring


@attrs.frozen
class _Window:
    """One read of the ring: its bounds and a page of events after a cursor."""

    oldest: int  # oldest retained event id (0: no events)
    latest: int  # newest event id (0: no events)
    events: list[Event]

    def expired(self, cursor: int) -> bool:
        """Events after `cursor` are missing from the ring (or the cursor is bogus)."""
        if cursor > self.latest:
            return True
        return cursor < self.latest and cursor + 1 < self.oldest

    def resync(self, reason: str) -> StreamItem:
        return StreamItem(
            "resync",
            data={
                "reason": reason,
                "oldest_event_id": self.oldest,
                "latest_event_id": self.latest,
            },
        )


def _read_ring(engine: EngineFace, cursor: int, limit: int) -> _Window:
    """Store thread: one consistent look at the events table (nothing else runs here)."""
    return _Window(*ring_window(engine, cursor, limit))


async def _ring(room: Room, cursor: int, limit: int) -> _Window:
    window: _Window = await room.run_sync(_read_ring, room.engine, cursor, limit)
    return window


# ------------------------------------------------------------ liveness


@attrs.define
class _Round:
    hashes: set[bytes] = attrs.Factory(set)
    touches: dict[bytes, str] = attrs.Factory(dict)
    results: dict[bytes, bool] = attrs.Factory(dict)
    done: trio.Event = attrs.Factory(trio.Event)


class _Liveness:
    """Coalesces the session checks of a room's streams into one store-thread call.

    The first stream to ask in a scheduler tick leads the round: it yields
    once so that the streams woken at the same instant join, then runs one
    call for all of them. A round whose leader was cancelled answers "alive"
    (the stream checks again at its next tick).
    """

    def __init__(self) -> None:
        # No reference to the room: it is the key of a weak mapping to this.
        self._round: _Round | None = None

    async def check(self, room: Room, session_hash: bytes, touch: str | None) -> bool:
        rnd = self._round
        leader = rnd is None
        if rnd is None:
            rnd = self._round = _Round()
        rnd.hashes.add(session_hash)
        if touch is not None:
            rnd.touches[session_hash] = touch
        if not leader:
            await rnd.done.wait()
            return rnd.results.get(session_hash, True)
        try:
            try:
                await trio.lowlevel.checkpoint()
            finally:
                self._round = None
            rnd.results = await room.run_sync(
                check_streams, room.engine, {h: rnd.touches.get(h) for h in rnd.hashes}
            )
        finally:
            rnd.done.set()
        return rnd.results.get(session_hash, True)


_LIVENESS: weakref.WeakKeyDictionary[Room, _Liveness] = weakref.WeakKeyDictionary()


def _liveness(room: Room) -> _Liveness:
    checker = _LIVENESS.get(room)
    if checker is None:
        checker = _LIVENESS[room] = _Liveness()
    return checker


# ------------------------------------------------------------ observe


class _Stream:
    """The state of one observe stream between yields."""

    def __init__(
        self,
        room: Room,
        sub: Subscriber,
        session_hash: bytes,
        participant_id: str,
        heartbeat_seconds: float,
        liveness_seconds: float = LIVENESS_SECONDS,
        addressed: Addressed | None = None,
        mark_live: bool = False,
        direct: DirectWriter | None = None,
    ) -> None:
        self.room = room
        self.sub = sub
        if direct is not None:
            # Called by the hub for every live event while the reader is parked: once per
            # subscriber per event (1,000 times for a commit seen by 1,000 streams), so it
            # binds what it needs here instead of looking it up on each call.
            write_now, owe, reader = direct.write_event_nowait, sub.poke, participant_id

            def deliver(event: Event) -> bool:
                # The reader's own events (addressed copies, an end) take its task.
                if event.spec.ends_streams and event.participant() == reader:
                    return False
                if addressed is not None and addressed(event, reader):
                    return False
                return write_now(event, owe)

            sub.direct = deliver
        self.addressed = addressed
        self.mark_live = mark_live
        self.session_hash = session_hash
        self.participant_id = participant_id
        self.heartbeat = heartbeat_seconds
        self.check_interval = min(liveness_seconds, heartbeat_seconds)
        self.last = 0
        now = trio.current_time()
        self.last_output = now
        self.next_check = self._grid_after(now)
        self.last_touch = -math.inf

    def _grid_after(self, now: float) -> float:
        # A shared grid: streams with the same interval wake together and
        # share one liveness call. Strictly after `now`: in floating point the
        # next grid point can round to `now` itself (0.3 / 0.1 < 3), and a check
        # due "now" again after every check spins until the clock moves.
        step = self.check_interval
        point = (math.floor(now / step) + 1) * step
        return point if point > now else point + step

    async def alive(self) -> bool:
        now = trio.current_time()
        touch = None
        if now - self.last_touch >= TOUCH_SECONDS:
            touch = self.participant_id
            self.last_touch = now
        self.next_check = self._grid_after(now)
        return await _liveness(self.room).check(self.room, self.session_hash, touch)

    async def alive_parked(self) -> bool:
        """`alive`, with the hub's direct lane open meanwhile (the stream is caught up).

        Every stream of a room checks at the same grid instant and waits for the one
        shared store call; a commit published meanwhile would otherwise find 1,000
        readers away from `next_batch` and wake each one's task to write its event.
        """
        sub = self.sub
        sub.cursor = self.last
        with sub.parked():
            alive = await self.alive()
        self.last = max(self.last, sub.cursor)
        self.last_output = max(self.last_output, sub.delivered_at)
        return alive

    def item(self, event: Event) -> StreamItem:
        """The event as this reader gets it (its own copy when addressed to it)."""
        if self.addressed is not None and self.addressed(event, self.participant_id):
            event = event.addressed_copy()
        return StreamItem("event", event)

    def ends_us(self, event: Event) -> bool:
        return event.spec.ends_streams and event.participant() == self.participant_id

    def emitted(self) -> None:
        self.last_output = trio.current_time()

    async def items(self, since_event_id: int | None) -> AsyncGenerator[StreamItem, None]:
        """The stream's items; `end` is the last one."""
        sub = self.sub
        # The session may have ended between authentication and here; this
        # also counts the stream as presence from its first moment.
        if sub.closed or not await self.alive():
            yield END
            return
        if since_event_id is None:
            self.last = (await _ring(self.room, 0, 0)).latest
        else:
            self.last = max(0, since_event_id)
            async with aclosing(self.catch_up("cursor_expired")) as replay:
                async for item in replay:
                    yield item
                    if item.kind == "end":
                        return
        if self.mark_live:
            yield LIVE

        while True:
            if sub.lagged:
                sub.reset_lag()
                window = await _ring(self.room, 0, 0)
                self.last = window.latest
                yield window.resync("lagged")
                continue
            if sub.closed:
                yield END  # the room is stopping (or the stream was closed)
                return
            now = trio.current_time()
            if now >= self.next_check:
                alive = await self.alive_parked()
                if sub.poked:
                    sub.poked = False
                    yield FLUSH
                if not alive:
                    yield END
                    return
                continue  # the lane may have delivered meanwhile: look again
            # One expression for "the heartbeat is due" and the wait's deadline:
            # in floating point `now - last >= h` and `last + h <= now` can disagree,
            # and a deadline already passed that is not "due" spins.
            heartbeat_due = self.last_output + self.heartbeat
            if now >= heartbeat_due:
                yield HEARTBEAT
                continue

            batch: list[Event] = []
            sub.cursor = self.last
            with trio.move_on_at(min(self.next_check, heartbeat_due)):
                batch = await sub.next_batch()
            # What the direct lane delivered while we were parked.
            self.last = max(self.last, sub.cursor)
            self.last_output = max(self.last_output, sub.delivered_at)
            if sub.poked:
                sub.poked = False
                yield FLUSH
            for event in batch:
                if event.event_id <= self.last:
                    continue  # already replayed (or filled from the ring)
                if event.event_id != self.last + 1:
                    # A hole (an event published out of order, or committed
                    # without the room): fill it, and all after, from the ring.
                    async with aclosing(self.catch_up("lagged")) as fill:
                        async for item in fill:
                            yield item
                            if item.kind == "end":
                                return
                    continue
                self.last = event.event_id
                yield self.item(event)
                if sub.closed or (self.ends_us(event) and not await self.alive()):
                    yield END
                    return

    async def catch_up(self, first_reason: str) -> AsyncGenerator[StreamItem, None]:
        """Yield the ring's events after `self.last` until the live buffer takes over.

        If the ring no longer holds `last + 1`, yields one resync (reason
        `first_reason` on the first read, `lagged` on later ones: the ring
        moved on while the client read) and continues from the latest event.
        Ends with `self.last` current and the subscriber not lagged.
        """
        reason = first_reason
        while True:
            if self.sub.closed:
                yield END  # the room is stopping
                return
            if self.sub.lagged:
                # Reset *before* the read: what the buffer dropped is in the ring.
                self.sub.reset_lag()
            if trio.current_time() >= self.next_check and not await self.alive():
                yield END
                return
            window = await _ring(self.room, self.last, PAGE)
            if window.expired(self.last):
                self.last = window.latest
                yield window.resync(reason)
                return
            reason = "lagged"
            for event in window.events:
                self.last = event.event_id
                yield self.item(event)
                if self.sub.closed or (self.ends_us(event) and not await self.alive()):
                    yield END
                    return
            if len(window.events) < PAGE and not self.sub.lagged:
                return


async def observe(
    room: Room,
    *,
    session_hash: bytes,
    participant_id: str,
    since_event_id: int | None,
    heartbeat_seconds: float = 15.0,
    buffer: int = 256,
    liveness_seconds: float = LIVENESS_SECONDS,
    addressed: Addressed | None = None,
    mark_live: bool = False,
    direct: DirectWriter | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """Replay retained events after the cursor, then live, with no gap and no duplicate.

    `since_event_id=None` starts live at the current latest event. Yields
    `event`, `resync`, `heartbeat` (after `heartbeat_seconds` of silence)
    items, and `live` once when the replay is over if `mark_live`; the last
    item is `end` (session revoked, expired or left, or the room stopping),
    after which the generator returns. `addressed(event, participant_id)`
    marks the events addressed to this reader. With a `direct` writer, live
    events may go straight to it while the stream waits (they are then not
    yielded), and `flush` items ask the consumer to finish a direct write.
    """
    if heartbeat_seconds <= 0:
        raise ValueError("heartbeat_seconds must be positive")
    sub = room.hub.subscribe(buffer)
    stream = _Stream(room, sub, session_hash, participant_id, heartbeat_seconds, liveness_seconds,
                     addressed, mark_live, direct)
    try:
        async with aclosing(stream.items(since_event_id)) as items:
            async for item in items:
                if item.kind == "end":
                    # Release the subscription even if the consumer never resumes us.
                    sub.close()
                yield item
                # Silence starts when the consumer is done with the item.
                stream.emitted()
                if item.kind == "end":
                    return
    finally:
        sub.close()


# ------------------------------------------------------------ long-poll


async def wait_for_events(
    room: Room,
    *,
    session_hash: bytes,
    participant_id: str,
    cursor: int,
    timeout_seconds: float,
    limit: int = WAIT_MAX_EVENTS,
    addressed: Addressed | None = None,
) -> WaitAnswer:
    """The long-poll (GET /workspace/wait): observe's first answer, as one record.

    The retained events after `cursor` (at most `limit`) come back at once;
    with none, the request is held until a live event arrives or
    `timeout_seconds` (0..25) pass, and then carries what arrived without
    waiting further. A live event the caller's own session caused does not end
    the hold (it is in the answer when something else does). A cursor that
    fell off the ring answers `resync: true` with the cursor at the latest
    event. The room stopping, or the session ending, answers what there is.
    """
    limit = max(1, min(limit, WAIT_MAX_EVENTS))
    timeout = min(max(timeout_seconds, 0.0), WAIT_MAX_SECONDS)
    events: list[Event] = []
    resync_to: int | None = None
    stream = observe(
        room, session_hash=session_hash, participant_id=participant_id,
        since_event_id=max(0, cursor), heartbeat_seconds=timeout + 60.0, buffer=limit,
        addressed=addressed, mark_live=True,
    )
    async with aclosing(stream) as items:
        live = False
        with trio.move_on_after(math.inf) as hold:
            async for item in items:
                if item.kind == "resync":
                    assert item.data is not None
                    resync_to = int(item.data["latest_event_id"])
                    break
                if item.kind == "end":
                    break
                if item.kind == "live":
                    live = True
                    if events or timeout == 0:
                        break
                    hold.deadline = trio.current_time() + timeout
                    continue
                if item.kind != "event":
                    continue
                assert item.event is not None
                events.append(item.event)
                if len(events) >= limit:
                    break
                if live and item.event.caused_by != session_hash:
                    # Something for the caller: take what else is ready, then answer.
                    hold.deadline = trio.current_time()
    latest = room.hub.latest_event_id
    if resync_to is not None:
        return WaitAnswer([], resync_to, True, resync_to)
    new_cursor = events[-1].event_id if events else cursor
    return WaitAnswer(events, new_cursor, False, max(latest, new_cursor))


# ------------------------------------------------------------ waits for a person

Again = Callable[[], Awaitable[StreamStart]]
"""Run the wait's operation once more for the same caller: a fresh start (raises its error)."""


async def wait_for_person(room: Room, start: StreamStart, again: Again) -> ProposalWaited | ThreadWaited:
    """`workspace.proposal.wait` / `workspace.thread.wait`: no cursor, no filtering by the caller.

    Answers at once when the start says the wait is over; else holds up to the start's
    timeout (at most 25 s), running the operation again (`again`) whenever an event names
    the watched record (or the reader lost events: `resync`), and answers as soon as that says
    it is over. At the timeout, the room stopping or the session ending, it answers the
    latest state with `waiting: true`. Events are read from the start's own read on, so a
    change between that read and the hold is not missed.
    """
    watch = start.watch
    assert watch is not None
    timeout = min(max(start.timeout_seconds, 0.0), WAIT_MAX_SECONDS)
    if not watch.answer.waiting or timeout == 0:
        return watch.answer
    stream = observe(
        room, session_hash=start.actor.session_hash, participant_id=start.actor.participant_id,
        since_event_id=start.latest_event_id, heartbeat_seconds=timeout + 60.0,
    )
    async with aclosing(stream) as items:
        with trio.move_on_after(timeout):
            async for item in items:
                if item.kind == "end":
                    break
                named = (item.kind == "event" and item.event is not None
                         and getattr(item.event.payload, watch.key, None) == watch.id)
                if not (named or item.kind == "resync"):
                    continue
                fresh = (await again()).watch
                assert fresh is not None
                watch = fresh
                if not watch.answer.waiting:
                    break
    return watch.answer
