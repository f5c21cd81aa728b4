"""The room service: the only place where trio meets the engine.

It runs engine operations on a single store thread (a `CapacityLimiter(1)`),
publishes their events to the hub after the transaction committed, and runs
the room's background work in the room's own nursery (`Room.run`):

- the expiry sweeper, which sleeps until the next expiry a feature reports
  (woken early when a new one appears) so expiries happen within a second of
  `expires_at` with nobody calling;
- the file watcher, one `stat` every half second (on the store thread), so an
  external edit becomes a version within 2 seconds;
- the streams nursery: every open stream's pump (`room.pumps`).

Publishing order: events reach the hub in commit order. An HTTP call defers
its events until its answer is written (`execute(..., publish=False)` then
`defer` + `flush` after the send), so the caller is answered before 1,000
subscribers are woken; a later publish flushes everything deferred before it,
so the order holds.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping
from datetime import datetime
from typing import Any

import trio

from commonroom.engine import addressing, dispatch
from commonroom.engine.core import Engine, Outcome
from commonroom.engine.observe import StreamStart
from commonroom.protocol import events as ev
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.events import Event
from commonroom.protocol.records import WaitAnswer, to_wire
from commonroom.room.hub import EventHub
from commonroom.room.pumps import RoomStream, StreamWriter, open_pumped, pump_to_writer
from commonroom.room.slots import StreamSlots
from commonroom.room.streams import Addressed, StreamItem, observe, wait_for_events

WATCH_INTERVAL = 0.5
MAX_SWEEP_SLEEP = 30.0
# After a sweep or watch the sidecar refused (a full disk), retry this much later: the
# room keeps serving reads meanwhile and recovers once the host frees space.
STORAGE_RETRY = 1.0

log = logging.getLogger(__name__)
# Events that may bring the next expiry closer: the sweeper re-reads its deadline.
_EXPIRY_EVENTS = frozenset({ev.LeaseAcquired.TYPE, ev.LeaseRenewed.TYPE, ev.SessionCreated.TYPE})


class Room:
    def __init__(
        self,
        engine: Engine,
        *,
        watch_interval: float = WATCH_INTERVAL,
        max_sweep_sleep: float = MAX_SWEEP_SLEEP,
        inline_store: bool = False,
        stream_slots: StreamSlots | None = None,
    ) -> None:
        self.engine = engine
        # Every adapter takes one per open stream (room/slots.py); the host is never refused.
        self.stream_slots = (stream_slots if stream_slots is not None
                             else StreamSlots(uncapped={engine.host_participant_id}))
        # Tests under trio's autojump clock run store calls on the trio thread: work
        # on another thread is invisible to that clock, which would jump time (and
        # fire every timeout) while the store works.
        self.inline_store = inline_store
        self.watch_interval = watch_interval
        self.max_sweep_sleep = max_sweep_sleep
        self.hub = EventHub()
        self.limiter = trio.CapacityLimiter(1)
        self._sweep_wakeup = trio.Event()
        self._deferred: list[Event] = []
        self._streams: trio.Nursery | None = None
        # Which events are addressed to a reader (PROTOCOL.md 10.1).
        self.addressed: Addressed | None = addressing.addressed
        self.hub.latest_event_id = engine.conn.execute(
            "SELECT coalesce(max(event_id), 0) FROM events"
        ).fetchone()[0]

    async def run_sync(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` on the store thread; the only way to the sidecar."""
        if self.inline_store:
            await trio.lowlevel.checkpoint()
            return fn(*args)
        return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    async def execute(
        self, name: str, bearer: str | None, params: Mapping[str, Any], *,
        from_query: bool = False, publish: bool = True,
    ) -> Outcome:
        """Run an operation on the store thread; publish its events (or, with
        `publish=False`, defer them: the caller must `flush` once it answered)."""
        def run() -> Outcome:
            return dispatch.execute(self.engine, name, bearer, params, from_query=from_query)

        outcome: Outcome
        if self._runs_here(name):
            async with self.limiter:  # the store thread is not using the engine meanwhile
                outcome = run()
        else:
            outcome = await self.run_sync(run)
        if publish:
            self.publish(outcome.events)
        else:
            self._deferred.extend(outcome.events)
        if self.engine.presence.pending():
            self._sweep_wakeup.set()  # a new arrival: the sweeper announces it
        return outcome

    def _runs_here(self, name: str) -> bool:
        """A read-only call runs on the trio thread, holding the store's limiter.

        The thread hop costs more than a read itself (a status answer is about
        0.1 ms of engine work); writes keep the store thread, they may fsync. A
        read's refresh may record an external edit or an expiry first: no fsync
        (only a commit syncs the sidecar), at worst a hash of the file.
        """
        if self.inline_store:
            return False
        try:
            return dispatch.operation(name).read_only
        except CommonroomError:
            return False

    async def call(
        self, name: str, bearer: str | None, params: Mapping[str, Any], *, from_query: bool = False
    ) -> Any:
        """Run an operation; returns its wire JSON or raises its CommonroomError."""
        outcome = await self.execute(name, bearer, params, from_query=from_query)
        if outcome.error is not None:
            raise outcome.error
        return to_wire(outcome.result)

    def publish(self, events: list[Event]) -> None:
        """Offer committed events to the hub now (after anything deferred before them)."""
        if self._deferred:
            events = [*self._deferred, *events]
            self._deferred = []
        if not events:
            return
        self.hub.publish(events)
        if any(event.type in _EXPIRY_EVENTS for event in events):
            self._sweep_wakeup.set()

    def flush(self) -> None:
        """Publish what was deferred (an answer has been written)."""
        self.publish([])

    # ------------------------------------------------------------------ streams

    def open_stream(
        self, start: StreamStart, *, heartbeat_seconds: float, buffer: int = 256,
    ) -> RoomStream:
        """Open an observe stream for an authorized start; its pump runs in the room's nursery."""
        nursery = self._streams_nursery()
        return open_pumped(nursery, self._observe(start, heartbeat_seconds, buffer, None))

    def open_writing_stream(
        self, start: StreamStart, writer: StreamWriter, *, heartbeat_seconds: float,
        buffer: int = 256,
    ) -> None:
        """Open an observe stream that writes its own bytes through `writer` (and takes
        live events on the hub's direct lane); its pump runs in the room's nursery."""
        nursery = self._streams_nursery()
        nursery.start_soon(pump_to_writer, self._observe(start, heartbeat_seconds, buffer, writer),
                           writer)

    def _streams_nursery(self) -> trio.Nursery:
        if self._streams is None:
            raise CommonroomError("transport_unavailable", "the room is not running")
        return self._streams

    def _observe(
        self, start: StreamStart, heartbeat_seconds: float, buffer: int, direct: StreamWriter | None,
    ) -> AsyncGenerator[StreamItem, None]:
        return observe(
            self, session_hash=start.actor.session_hash,
            participant_id=start.actor.participant_id, since_event_id=start.cursor,
            heartbeat_seconds=heartbeat_seconds, buffer=buffer, addressed=self.addressed,
            direct=direct,
        )

    async def wait(self, start: StreamStart) -> WaitAnswer:
        """The long-poll for an authorized start (held in the caller's task, at most 25 s)."""
        return await wait_for_events(
            self, session_hash=start.actor.session_hash,
            participant_id=start.actor.participant_id, cursor=start.cursor or 0,
            timeout_seconds=start.timeout_seconds, addressed=self.addressed,
        )

    @property
    def open_streams(self) -> int:
        """Pumps running in the room's streams nursery."""
        return 0 if self._streams is None else len(self._streams.child_tasks)

    async def record(self, payload: ev.Payload) -> None:
        """Append a room-lifecycle event (workspace.started / stopped)."""

        def _append() -> list[Event]:
            engine = self.engine
            with engine.transaction(engine.clock()) as tx:
                tx.emit(payload)
            return tx.events

        self.publish(await self.run_sync(_append))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Background work; runs until cancelled (the room nursery owns it)."""
        try:
            async with trio.open_nursery() as nursery, trio.open_nursery() as stream_pumps:
                self._streams = stream_pumps
                nursery.start_soon(self._sweeper)
                nursery.start_soon(self._watcher)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._streams = None

    async def _sweeper(self) -> None:
        while True:
            self._sweep_wakeup = trio.Event()
            try:
                events, due = await self.run_sync(self.engine.sweep)
            except CommonroomError as error:
                log.warning("the sweep was refused (%s); retrying", error.code)
                await trio.sleep(STORAGE_RETRY)
                continue
            self.publish(events)
            delay = self.max_sweep_sleep
            if due is not None:
                delay = min(delay, max(0.0, seconds_until(due, self.engine.clock())) + 0.01)
            with trio.move_on_after(delay):
                await self._sweep_wakeup.wait()

    async def _watcher(self) -> None:
        engine = self.engine
        while True:
            await trio.sleep(self.watch_interval)
            # The stat runs on the store thread too: the trio thread never touches the file.
            if await self.run_sync(engine.doc.changed):
                try:
                    self.publish(await self.run_sync(lambda: engine.refresh(engine.clock())))
                except CommonroomError as error:
                    log.warning("an external edit could not be recorded yet (%s)", error.code)


def seconds_until(moment: datetime, now: datetime) -> float:
    return (moment - now).total_seconds()
