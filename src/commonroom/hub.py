"""The event hub: fans committed events out to live subscribers in the room process.

Theory of operation: the room publishes each batch of events *after* its
transaction committed, in event-id order. Every subscriber owns a bounded
buffer; `publish` never waits: when a subscriber's buffer is full it is marked
`lagged` and its buffer is dropped, so a slow reader can neither slow the room
nor make its memory grow. The subscriber then tells its client to resync.

A subscriber attaches *before* it replays history from the sidecar; live
events that arrive during the replay wait in its buffer, and the consumer
skips ids it already replayed. That is how replay-then-live has no gap and no
duplicate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import trio

from commonroom.engine.records import Event

DEFAULT_BUFFER = 256


class Subscriber:
    def __init__(self, hub: EventHub, buffer: int) -> None:
        self._hub = hub
        self._buffer: deque[Event] = deque()
        self._limit = buffer
        self._wakeup = trio.Event()
        self.lagged = False
        self.closed = False

    def _offer(self, event: Event) -> None:
        if self.lagged or self.closed:
            return
        if len(self._buffer) >= self._limit:
            self.lagged = True
            self._buffer.clear()
        else:
            self._buffer.append(event)
        self._wakeup.set()

    def close(self) -> None:
        """End the subscription (e.g. its session was revoked); wakes the reader."""
        self.closed = True
        self._wakeup.set()
        self._hub._subscribers.discard(self)

    async def next_batch(self) -> list[Event]:
        """Wait for events; returns [] when lagged or closed (check the flags)."""
        while not self._buffer and not self.lagged and not self.closed:
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        batch = list(self._buffer)
        self._buffer.clear()
        return batch

    def reset_lag(self) -> None:
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

    def subscribe(self, buffer: int = DEFAULT_BUFFER) -> Subscriber:
        sub = Subscriber(self, buffer)
        self._subscribers.add(sub)
        return sub

    def publish(self, events: Iterable[Event]) -> None:
        for event in events:
            if event.event_id > self.latest_event_id:
                self.latest_event_id = event.event_id
            for sub in tuple(self._subscribers):
                sub._offer(event)

    def close_all(self) -> None:
        for sub in tuple(self._subscribers):
            sub.close()

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)
