"""The room service: the only place where trio meets the engine.

It runs engine operations on a single store thread (a `CapacityLimiter(1)`),
publishes their events to the hub after the transaction committed, and runs
the room's background work in the room's own nursery:

- the expiry sweeper, which sleeps until the next lease/session expiry (woken
  early when a new one appears) so expiries happen within a second of
  `expires_at` with nobody calling;
- the file watcher, one `stat` every half second, so an external edit becomes
  a version within 2 seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import trio

from commonroom.engine import dispatch
from commonroom.engine.core import Engine, Outcome
from commonroom.hub import EventHub
from commonroom.protocol import events as ev
from commonroom.protocol.events import Event
from commonroom.protocol.records import to_wire

WATCH_INTERVAL = 0.5
MAX_SWEEP_SLEEP = 30.0
# Events that may bring the next expiry closer: the sweeper re-reads its deadline.
_EXPIRY_EVENTS = frozenset({ev.LeaseAcquired.TYPE, ev.LeaseRenewed.TYPE, ev.SessionCreated.TYPE})


class Room:
    def __init__(
        self,
        engine: Engine,
        *,
        watch_interval: float = WATCH_INTERVAL,
        max_sweep_sleep: float = MAX_SWEEP_SLEEP,
    ) -> None:
        self.engine = engine
        self.watch_interval = watch_interval
        self.max_sweep_sleep = max_sweep_sleep
        self.hub = EventHub()
        self.limiter = trio.CapacityLimiter(1)
        self._sweep_wakeup = trio.Event()
        self.hub.latest_event_id = engine.conn.execute(
            "SELECT coalesce(max(event_id), 0) FROM events"
        ).fetchone()[0]

    async def run_sync(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` on the store thread; the only way to the sidecar."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    async def execute(
        self, name: str, bearer: str | None, params: Mapping[str, Any], *, from_query: bool = False
    ) -> Outcome:
        outcome: Outcome = await self.run_sync(
            lambda: dispatch.execute(self.engine, name, bearer, params, from_query=from_query)
        )
        self.publish(outcome.events)
        if self.engine.presence.pending():
            self._sweep_wakeup.set()  # a new arrival: the sweeper announces it
        return outcome

    async def call(
        self, name: str, bearer: str | None, params: Mapping[str, Any], *, from_query: bool = False
    ) -> Any:
        """Run an operation; returns its wire JSON or raises its CommonroomError."""
        outcome = await self.execute(name, bearer, params, from_query=from_query)
        if outcome.error is not None:
            raise outcome.error
        return to_wire(outcome.result)

    def publish(self, events: list[Event]) -> None:
        if not events:
            return
        self.hub.publish(events)
        if any(event.type in _EXPIRY_EVENTS for event in events):
            self._sweep_wakeup.set()

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
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._sweeper)
            nursery.start_soon(self._watcher)
            task_status.started()

    async def _sweeper(self) -> None:
        while True:
            self._sweep_wakeup = trio.Event()
            events, due = await self.run_sync(self.engine.sweep)
            self.publish(events)
            delay = self.max_sweep_sleep
            if due is not None:
                delay = min(delay, max(0.0, seconds_until(due, self.engine.clock())) + 0.01)
            with trio.move_on_after(delay):
                await self._sweep_wakeup.wait()

    async def _watcher(self) -> None:
        while True:
            await trio.sleep(self.watch_interval)
            if self.engine.doc.changed():
                events = await self.run_sync(lambda: self.engine.refresh(self.engine.clock()))
                self.publish(events)


def seconds_until(moment: datetime, now: datetime) -> float:
    return (moment - now).total_seconds()
