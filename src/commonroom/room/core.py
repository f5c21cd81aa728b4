"""The room service: the only place where trio meets the engine.

It runs engine operations that may write on a single store thread (a
`CapacityLimiter(1)`) and read-only ones on the engine's read path (`_read`:
their own connection and snapshot, never behind a commit's fsync),
publishes their events to the hub after the transaction committed, and runs
the room's background work in the room's own nursery (`Room.run`):

- the expiry sweeper, which sleeps until the next expiry a feature reports
  (woken early when a new one appears) so expiries happen within a second of
  `expires_at` with nobody calling;
- the file watcher, one `stat` every 0.1 s (on the store thread), and while a
  change settles a look at each settle deadline the engine reports, so a save
  becomes a version about the settle period (250 ms) after it ended;
- the streams nursery: every open stream's pump (`room.pumps`).

Publishing order: events reach the hub in commit order. An HTTP call defers
its events until its answer is written (`execute(..., publish=False)` then
`defer` + `flush` after the send), so the caller is answered before 1,000
subscribers are woken; a later publish flushes everything deferred before it,
so the order holds.

A write that finds the file settling (the host is saving, docs/spec/PROTOCOL.md section
16) is not an error yet: `execute` waits until the settle deadline the engine
answered and runs the call again, for at most `SETTLE_WAIT_SECONDS`; only then
does the caller get `storage_unavailable` / `file_changing`. The engine never
sleeps; its `SettleWait` plan says how long, and this is where the waiting happens.

No single request holds the room: a read that computes diffs or a merge
(`limits.HEAVY_READS`) is bounded in cost by the engine (engine/linediff.py),
charged to its participant's own window (`HEAVY_READS_PER_MINUTE`, the host
exempt), runs on a thread rather than the event loop (its transaction on the read
path's second connection; the rebase, which writes, on the store thread), and waits
its turn for `heavy_limiter`: at most one runs at a time, and the host's status, on
the read path, waits for none of them.

Storage faults (a refused write, a full disk) are answered to the caller and
also printed as one line on the room's stderr (`FaultLines`), where the host
looks; the same fault again within `FAULT_REPEAT_SECONDS` is counted, not printed.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncGenerator, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs
import trio

from commonroom.engine import facade
from commonroom.engine.facade import LOOK_SLACK, AppRequestStart, EngineFace, Outcome, StreamStart, newest_event_id
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.events import Event
from commonroom.protocol.operations import OPERATIONS_BY_NAME
from commonroom.protocol.records import AppReply, ProposalWaited, ThreadWaited, WaitAnswer, to_wire
from commonroom.protocol.timefmt import parse_ts
from commonroom.ratelimit import RateLimiter, heavy_reads_refused
from commonroom.room.app_hosts import AppHosts
from commonroom.room.hub import EventHub
from commonroom.room.pumps import RoomStream, StreamWriter, open_pumped, pump_to_writer
from commonroom.room.slots import StreamSlots
from commonroom.room.streams import (
    Addressed,
    Again,
    StreamItem,
    observe,
    wait_for_events,
    wait_for_person,
)

WATCH_INTERVAL = 0.1
FAULT_REPEAT_SECONDS = 30.0
MAX_SWEEP_SLEEP = 30.0
# After a sweep or watch the sidecar refused (a full disk), retry this much later: the
# room keeps serving reads meanwhile and recovers once the host frees space.
STORAGE_RETRY = 1.0
# Past this size of the document a write's own work (outlines of the whole text, copies
# of it) costs far more than the thread hop, and made on the store thread its big
# temporaries did not stay in the room's memory: 148 MB against 158 MB after 100
# commits on a 10 MB document with proposals and reviews on the trio thread.
INLINE_WRITES_MAX_BYTES = 1024 * 1024

log = logging.getLogger(__name__)


class Room:
    def __init__(
        self,
        engine: EngineFace,
        *,
        watch_interval: float = WATCH_INTERVAL,
        max_sweep_sleep: float = MAX_SWEEP_SLEEP,
        inline_store: bool = False,
        stream_slots: StreamSlots | None = None,
        fault_sink: Callable[[str], None] | None = None,
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
        # The read path's thread, when a read cannot run on the trio thread (`_read`).
        self.reader_limiter = trio.CapacityLimiter(1)
        # One heavy read at a time in the store's queue (the module docstring).
        self.heavy_limiter = trio.CapacityLimiter(1)
        self.heavy_reads = RateLimiter(limits.HEAVY_READS_PER_MINUTE, 60.0, trio.current_time)
        self._checkpoint_wakeup = trio.Event()
        self._sweep_wakeup = trio.Event()
        self._sweep_due: datetime | None = None  # when the sleeping sweeper wakes by itself
        self._deferred: list[Event] = []
        self._streams: trio.Nursery | None = None
        # Which events are addressed to a reader (docs/spec/PROTOCOL.md 10.1).
        self.addressed: Addressed | None = facade.addressed
        self.hub.latest_event_id = newest_event_id(engine)
        self.faults = FaultLines(fault_sink or _to_stderr)
        # Task apps' requests (docs/spec/PROTOCOL.md 20): the pages hosting apps, the requests
        # waiting on them; in memory only, never in the sidecar.
        self.app_hosts = AppHosts()

    async def run_sync(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` on the store thread; with `execute`, the only way to the sidecar."""
        if self.inline_store:
            await trio.lowlevel.checkpoint()
            result = fn(*args)
        else:
            result = await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)
        self._checkpoint_if_due()
        return result

    async def execute(
        self, name: str, bearer: str | None, params: Mapping[str, Any], *,
        from_query: bool = False, publish: bool = True,
    ) -> Outcome:
        """Run an operation on the store thread; publish its events (or, with
        `publish=False`, defer them: the caller must `flush` once it answered)."""
        def run() -> Outcome:
            return facade.execute(self.engine, name, bearer, params, from_query=from_query)

        if name in limits.HEAVY_READS and not self.inline_store:
            heavy = await self._heavy_read(name, bearer, params, from_query)
            if publish:
                self.publish(heavy.events)
            else:
                self._deferred.extend(heavy.events)
            if heavy.retry_at is None:  # (a rebase that writes may find the file settling)
                if self.engine.presence.pending():
                    self._sweep_wakeup.set()
                if heavy.error is not None:
                    self.faults.report(heavy.error)
                return heavy
        spec = OPERATIONS_BY_NAME.get(name)
        settle_wait = facade.SettleWait(trio.current_time())
        while True:
            outcome: Outcome
            read = (await self._read(name, bearer, params, from_query)
                    if spec is not None and spec.read_only else None)
            if read is not None:
                outcome = read
            elif self.inline_store:
                outcome = await self.run_sync(run)
            else:
                async with self.limiter:  # nobody else uses the engine meanwhile
                    if self._runs_here(name):
                        outcome = run()
                    else:
                        outcome = await trio.to_thread.run_sync(run)
                self._checkpoint_if_due()
            if publish:
                self.publish(outcome.events)
            else:
                self._deferred.extend(outcome.events)
            # The file may be settling (the host is saving): wait for it, then run again.
            pause = settle_wait.pause(outcome.retry_at, self.engine.clock(), trio.current_time())
            if pause is None:
                break
            await trio.sleep(pause)
        if self.engine.presence.pending():
            self._sweep_wakeup.set()  # a new arrival: the sweeper announces it
        if outcome.error is not None:
            self.faults.report(outcome.error)
        elif isinstance(outcome.result, AppRequestStart):
            outcome = await self._carry_app_request(outcome, outcome.result)
        return outcome

    async def _carry_app_request(self, outcome: Outcome, start: AppRequestStart) -> Outcome:
        """An app request the engine authorized: carried to a page, answered with its reply
        (`room/app_hosts.py`), outside the store's limiter; nothing of it is stored."""
        try:
            reply = await self.app_hosts.ask(start)
        except CommonroomError as error:
            return attrs.evolve(outcome, result=None, error=error)
        return attrs.evolve(outcome, result=AppReply(start.task_id, start.app_revision, reply))

    async def _heavy_read(self, name: str, bearer: str | None, params: Mapping[str, Any],
                          from_query: bool) -> Outcome:
        """A read that computes diffs: its transaction on the store thread, its diffs after it,
        on a worker thread outside the store's limiter (the module docstring)."""
        refused = self._heavy_read_refused(bearer)
        if refused is not None:
            return Outcome(None, refused, [])

        def run() -> Outcome:
            return facade.execute(self.engine, name, bearer, params, from_query=from_query,
                                  later=True)

        async with self.heavy_limiter:
            outcome: Outcome | None = None
            if OPERATIONS_BY_NAME[name].read_only:
                outcome = await self._read(name, bearer, params, from_query, later=True)
            if outcome is None:
                async with self.limiter:
                    outcome = await trio.to_thread.run_sync(run)
                self._checkpoint_if_due()
            if outcome.error is not None:
                return outcome
            result = await trio.to_thread.run_sync(facade.resolve_later, outcome.result)
        return Outcome(result, None, outcome.events)

    async def _read(self, name: str, bearer: str | None, params: Mapping[str, Any],
                    from_query: bool, *, later: bool = False) -> Outcome | None:
        """A read-only operation on the read path (engine/readpath.py), never behind the
        store's limiter: on the trio thread when the read connection is free and no commit
        is landing (a small read costs less than the thread hop), else on the reader
        thread; a heavy one (`later`) always on a thread, with its own connection. None: run it the writer's way (the
        file changed or an expiry is due, which only the writer records)."""
        def run(block: bool) -> Outcome | facade.NotReady | None:
            return facade.read(self.engine, name, bearer, params, from_query=from_query,
                               later=later, block=block)

        if self.inline_store:
            await trio.lowlevel.checkpoint()
            answer = run(True)
        elif later:  # its own connection, one at a time already (`heavy_limiter`)
            answer = await trio.to_thread.run_sync(run, True)
        else:
            answer = run(False)
            if answer is facade.NOT_READY:
                answer = await trio.to_thread.run_sync(run, True, limiter=self.reader_limiter)
        assert not isinstance(answer, facade.NotReady)  # a blocking read always ran
        return answer

    def _heavy_read_refused(self, bearer: str | None) -> CommonroomError | None:
        """A heavy read past its participant's window (the host's never is), else None."""
        try:
            key = facade.hash_secret(bearer) if bearer else None
        except UnicodeEncodeError:  # a lone surrogate: no session the room minted
            key = None
        participant = self.engine.session_participant(key) if key is not None else None
        if participant is None or participant == self.engine.host_participant_id:
            return None  # the engine answers who that is (or is not)
        wait = self.heavy_reads.acquire(participant)
        return None if wait is None else heavy_reads_refused(wait)

    def _runs_here(self, name: str) -> bool:
        """Does the call run on the trio thread? Asked holding the store's limiter.

        The thread hop costs more than the work of a read or of a small write (a lease,
        a proposal, a review: 0.4-1 ms of engine work, no fsync: the sidecar syncs only
        for a version, and the WAL is checkpointed on the store thread,
        `_checkpointer`). The store thread keeps what may write the document (a temp
        file, fsyncs, a rename: `OperationSpec.writes_document`), the large bodies
        (attachments, `body_bytes`) and every write once the document is past
        `INLINE_WRITES_MAX_BYTES`. A call's refresh may record an external edit or an
        expiry first: no fsync, at worst a hash of the file.
        """
        spec = OPERATIONS_BY_NAME.get(name)
        if spec is None or spec.writes_document or spec.body_bytes is not None:
            return False
        return spec.read_only or len(self.engine.current().data) <= INLINE_WRITES_MAX_BYTES

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
        if any(self._expires_before_the_sweep(event) for event in events):
            self._sweep_wakeup.set()

    def _expires_before_the_sweep(self, event: Event) -> bool:
        """Does `event` start something that expires before the sweeper wakes anyway?

        The catalogue says which events may (`EventSpec.schedules_expiry`: a lease taken
        or renewed, a session created, a permission asked, a handoff's end...): the
        sweeper sleeps until the earliest expiry it knew of, so it must look again only
        if this one is earlier (a write cycle's checkout then costs no extra sweep).
        """
        if not event.spec.schedules_expiry:
            return False
        expires_at = getattr(event.payload, "expires_at", None)
        if self._sweep_due is None or not isinstance(expires_at, str):
            return True
        return parse_ts(expires_at) < self._sweep_due

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

    async def wait(self, start: StreamStart, again: Again | None = None
                   ) -> WaitAnswer | ProposalWaited | ThreadWaited:
        """The long-poll for an authorized start (held in the caller's task, at most 25 s).

        A wait for a person (`start.watch`) needs `again`: the adapter's way to run the same
        operation once more for the same caller (a fresh start), when an event names it."""
        if start.watch is not None:
            if again is None:
                raise ValueError("a wait for a person needs `again`")
            return await wait_for_person(self, start, again)
        return await wait_for_events(
            self, session_hash=start.actor.session_hash,
            participant_id=start.actor.participant_id, cursor=start.cursor or 0,
            timeout_seconds=start.timeout_seconds, addressed=self.addressed,
        )

    async def record(self, payload: ev.Payload) -> None:
        """Append a room-lifecycle event (workspace.started / stopped)."""

        self.publish(await self.run_sync(facade.record_event, self.engine, payload))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Background work; runs until cancelled (the room nursery owns it)."""
        try:
            async with trio.open_nursery() as nursery, trio.open_nursery() as stream_pumps:
                self._streams = stream_pumps
                nursery.start_soon(self._sweeper)
                nursery.start_soon(self._watcher)
                nursery.start_soon(self._checkpointer)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._streams = None

    def _checkpoint_if_due(self) -> None:
        if self.engine.checkpoint_due:
            self._checkpoint_wakeup.set()

    async def _checkpointer(self) -> None:
        """Checkpoint the WAL on the store thread when the engine says it is due
        (`EngineConfig.caller_checkpoints`): writes that run on the trio thread never do."""
        while True:
            await self._checkpoint_wakeup.wait()
            self._checkpoint_wakeup = trio.Event()
            try:
                await self.run_sync(self.engine.checkpoint)
            except CommonroomError as error:
                log.info("the WAL checkpoint was refused (%s); retrying", error.code)
                self.faults.report(error)
                await trio.sleep(STORAGE_RETRY)
                self._checkpoint_wakeup.set()

    async def _sweeper(self) -> None:
        while True:
            self._sweep_wakeup = trio.Event()
            try:
                events, due = await self.run_sync(self.engine.sweep)
            except CommonroomError as error:
                log.info("the sweep was refused (%s); retrying", error.code)  # the fault line says why
                self.faults.report(error)
                await trio.sleep(STORAGE_RETRY)
                continue
            self.publish(events)
            now = self.engine.clock()
            delay = self.max_sweep_sleep
            if due is not None:
                delay = min(delay, max(0.0, seconds_until(due, now)) + 0.01)
            self._sweep_due = now + timedelta(seconds=delay)
            with trio.move_on_after(delay):
                await self._sweep_wakeup.wait()
            self._sweep_due = None

    async def _watcher(self) -> None:
        """Look at the file every `watch_interval`, and at each settle deadline.

        The look runs on the store thread: the trio thread never touches the file.
        """
        engine = self.engine
        while True:
            try:
                events, next_look = await self.run_sync(engine.watch)
            except CommonroomError as error:
                log.info("an external edit could not be recorded yet (%s)", error.code)
                self.faults.report(error)
                await trio.sleep(STORAGE_RETRY)
                continue
            self.publish(events)
            delay = self.watch_interval
            if next_look is not None:
                delay = min(delay, seconds_until(next_look, engine.clock()) + LOOK_SLACK)
            await trio.sleep(max(delay, LOOK_SLACK))


class FaultLines:
    """Storage faults as one line each on the room's stderr (docs/spec/PROTOCOL.md section 16).

    Only `storage_unavailable` for a refused write or sidecar (a full disk, a
    read-only folder), never `file_changing` (the host saving is no fault). The
    line is the error's message: file names and the system's reason, no secret.
    """

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        self._last: tuple[str, float] | None = None
        self._repeats = 0

    def report(self, error: CommonroomError) -> None:
        if error.code != "storage_unavailable" or error.details.get("reason") == "file_changing":
            return
        now = trio.current_time()
        last = self._last
        if last is not None and last[0] == error.message and now - last[1] < FAULT_REPEAT_SECONDS:
            self._repeats += 1
            return
        more = f" (the fault before repeated {self._repeats} more times)" if self._repeats else ""
        self._last, self._repeats = (error.message, now), 0
        self.sink(f"commonroom: storage fault: {error.message}{more}")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def seconds_until(moment: datetime, now: datetime) -> float:
    return (moment - now).total_seconds()
