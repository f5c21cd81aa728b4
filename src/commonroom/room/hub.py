"""The event hub: fans committed events out to live subscribers in the room process.

Theory of operation: the room publishes each batch of events *after* its
transaction committed, in event-id order. Every subscriber owns a bounded
buffer; `publish` never waits: when a subscriber's buffer is full it is marked
`lagged` and its buffer is dropped, so a slow reader can neither slow the room
nor make its memory grow. The subscriber then tells its client to resync
(`reset_lag` starts buffering again).

A subscriber attaches *before* it replays history from the sidecar; live
events that arrive during the replay wait in its buffer, and the consumer
skips ids it already replayed. That is how replay-then-live has no gap and no
duplicate (see `commonroom.streams`).

The direct lane: a subscriber whose stream can write an event without its
reader task (a direct-writing SSE stream, `http/stream_views.py`) sets
`direct`. `publish` then hands each event to `direct` instead of buffering it
and waking the reader, as long as the reader is parked (waiting in
`next_batch`), caught up (`event_id == cursor + 1`) and its buffer empty; the
stream decides which events it takes that way (not the ones addressed to its
reader or ending its stream). A commit's fan-out to 1,000 streams is then one
loop of socket writes in the publishing task: no task wakes, no framing per
reader. Anything refused takes the buffered way, so order is kept: a refused
event makes the buffer non-empty and every later one queues behind it.

`close_all` (the room is stopping) closes every subscriber and wakes its
reader; a subscriber created afterwards is born closed, so a stream that
starts during shutdown ends at once instead of waiting forever.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import trio

from commonroom.protocol.events import Event

DEFAULT_BUFFER = 256


class Subscriber:
    """One reader's bounded view of the live events; not shared between tasks."""

    def __init__(self, hub: EventHub, buffer: int) -> None:
        if buffer < 1:
            raise ValueError("a subscriber needs a buffer of at least one event")
        self._hub = hub
        self._buffer: deque[Event] = deque()
        self._limit = buffer
        self._wakeup = trio.Event()
        self.lagged = False
        self.closed = False
        self.direct: Callable[[Event], bool] | None = None
        """Delivers an event without the reader task (True: delivered); see the module doc."""
        self.cursor = 0
        """The last event id the reader has delivered: set by the reader before it parks,
        advanced by direct deliveries while it is parked."""
        self.delivered_at = -math.inf
        """trio time of the last direct delivery (the reader's heartbeat counts from it)."""
        self.poked = False
        self._parked = False

    def _offer(self, event: Event, now: float) -> None:
        """Take one published event (`now`: the publish's trio time, read once for all)."""
        if self.lagged or self.closed:
            return
        direct = self.direct
        if (direct is not None and self._parked and not self._buffer
                and event.event_id == self.cursor + 1 and direct(event)):
            self.cursor = event.event_id
            self.delivered_at = now
            return
        if len(self._buffer) >= self._limit:
            # Overflow: drop everything (memory stays bounded); the reader resyncs.
            self.lagged = True
            self._buffer.clear()
        else:
            self._buffer.append(event)
        self._wakeup.set()

    @property
    def pending(self) -> int:
        """Events buffered and not yet taken by `next_batch`."""
        return len(self._buffer)

    def close(self) -> None:
        """End the subscription (e.g. its session was revoked); wakes the reader."""
        self.closed = True
        self._wakeup.set()
        self._hub._subscribers.discard(self)

    def poke(self) -> None:
        """Wake the reader with nothing to read (its direct writer owes it work)."""
        self.poked = True
        self._wakeup.set()

    async def next_batch(self) -> list[Event]:
        """Wait for events, oldest first.

        Returns [] when lagged, closed or poked (check the flags; the reader
        clears `poked`). Cancel-safe:
        a cancelled wait loses nothing, the events stay buffered. While it
        waits the reader is parked: `direct` may deliver events meanwhile.
        """
        while not self._buffer and not self.lagged and not self.closed and not self.poked:
            self._wakeup = trio.Event()
            self._parked = True
            try:
                await self._wakeup.wait()
            finally:
                self._parked = False
        batch = list(self._buffer)
        self._buffer.clear()
        return batch

    @contextmanager
    def parked(self) -> Iterator[None]:
        """The reader waits for something else than events (its session's liveness check)
        with the direct lane open, as if it waited in `next_batch`: its cursor must be set."""
        self._parked = True
        try:
            yield
        finally:
            self._parked = False

    def reset_lag(self) -> None:
        """Start buffering again after a lag (the reader resynced)."""
        self.lagged = False
        self._buffer.clear()

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventHub:
    def __init__(self) -> None:
        self._subscribers: set[Subscriber] = set()
        self.latest_event_id = 0
        self.closed = False

    def subscribe(self, buffer: int = DEFAULT_BUFFER) -> Subscriber:
        sub = Subscriber(self, buffer)
        if self.closed:
            sub.closed = True
        else:
            self._subscribers.add(sub)
        return sub

    def publish(self, events: Iterable[Event]) -> None:
        """Offer committed events to every subscriber; never waits."""
        subscribers = tuple(self._subscribers)
        now = trio.current_time()
        for event in events:
            if event.event_id > self.latest_event_id:
                self.latest_event_id = event.event_id
            for sub in subscribers:
                sub._offer(event, now)

    def close_all(self) -> None:
        """The room is stopping: close every subscriber (and any later one)."""
        self.closed = True
        for sub in tuple(self._subscribers):
            sub.close()

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)
