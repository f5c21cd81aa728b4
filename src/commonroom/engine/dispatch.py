"""Dispatch: the one way into the engine for adapters (through the room service).

`execute(engine, name, bearer, raw_params)`:

1. finds the operation's spec (`protocol.operations.OPERATIONS_BY_NAME`) and its
   handler (`operations.HANDLERS`; this is the only module of the engine that
   imports it) and parses its parameter record at
   the edge (`invalid_request` naming the field);
2. `engine.refresh`: an external edit becomes a version, due expiries apply;
3. runs the handler in one transaction: authenticates the bearer (the engine
   says who the caller is, not the adapter), checks the capability, calls the
   handler.

It never raises a `CommonroomError`: the `Outcome` holds the result record or
the error *and* the events that did commit (an expiry swept on the way, or a
proposal marked `conflicted` by a refused commit), so the room can publish
them either way. A write that found the file settling (docs/spec/PROTOCOL.md section 16)
is an `Outcome` with `retry_at`: the room waits and calls again.

`read(engine, name, bearer, raw_params)` is the same for a read-only operation on
the read path (`engine.readpath`): its own connection and snapshot, no refresh
and no write; it answers `None` when the operation must go the writer's way (the
file changed or an expiry is due: a refresh has something to record).

`open_engine` opens an engine with the features' hooks (what a document
change and the passing of time mean for leases, proposals and sessions).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from commonroom.engine import (
    access,
    attachments,
    blame,
    gitsync,
    leases,
    linediff,
    proposals,
    resident,
    revisions,
    sessions,
    task_surfaces,
    threads,
    undoes,
)
from commonroom.engine.config import DEFAULT_CONFIG, EngineConfig
from commonroom.engine.core import Engine
from commonroom.engine.operations import HANDLERS
from commonroom.engine.readpath import GateClosed, Reader, RefreshDue, Standby
from commonroom.engine.settle import FileSettling
from commonroom.engine.tx import Hooks, Outcome, Tx
from commonroom.protocol import limits
from commonroom.protocol.capabilities import require
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.events import Event
from commonroom.protocol.operations import OPERATIONS_BY_NAME, OperationSpec
from commonroom.protocol.params import parse_params
from commonroom.protocol.timefmt import Clock, system_clock

HOOKS = Hooks(
    # The human-editing hold comes after the proposals hook: the edit supersedes
    # pending proposals on the regions it touched, then holds those regions.
    on_document_change=(
        # provenance first: a committed proposal's texts are still unpruned here
        blame.record_version,
        leases.on_document_change,
        # a host's save rebases pending work where the merge is clean; the proposals
        # hook then supersedes only what is still stale
        revisions.rebase_on_host_save,
        proposals.on_document_change, leases.hold_human_edits,
        threads.on_document_change,  # the review conversation: re-anchor threads (PROTOCOL.md 17)
        gitsync.on_document_change,  # last: it only schedules the git commit after this one
    ),
    on_expiry=(leases.expire, sessions.expire, attachments.expire, task_surfaces.expire,
               resident.expire),
    next_expiry=(leases.next_expiry, sessions.next_expiry, attachments.next_expiry,
                 task_surfaces.next_expiry, resident.next_expiry),
    # Presence changes are announced by the room's sweeper (participant.present/away).
    on_sweep=(access.presence_sweep,),
    next_sweep=(access.presence_due,),
    undone_by_save=undoes.find_undone,
)


def open_engine(
    path: Path, config: EngineConfig = DEFAULT_CONFIG, *, sidecar: Path | None = None,
    clock: Clock = system_clock, name: str | None = None,
) -> Engine:
    """The room's engine around `path`, with every feature's hooks and the room's `config`."""
    engine = Engine(path, sidecar=sidecar, clock=clock, name=name, hooks=HOOKS, config=config)
    if config.git is not None:
        try:
            engine.git = gitsync.GitSync(engine.path, engine.workspace_id,
                                         all_saves=config.git.all_saves, report=config.git.report)
        except BaseException:
            engine.close()
            raise
    return engine


def operation(name: str) -> OperationSpec:
    spec = OPERATIONS_BY_NAME.get(name)
    if spec is None:
        raise CommonroomError("invalid_request", f"unknown operation {name!r}")
    return spec


def execute(
    engine: Engine,
    name: str,
    bearer: str | None,
    raw_params: Mapping[str, Any],
    *,
    from_query: bool = False,
    later: bool = False,
) -> Outcome:
    """Run one operation. A read's diffs (`linediff.later`) are computed before this returns,
    or, with `later`, left for the caller to compute off the store (`linediff.resolved`)."""
    events: list[Event] = []
    tx = None
    try:
        op = operation(name)
        params = parse_params(op.params, raw_params, from_query=from_query)
        now = engine.clock()
        engine.refresh(now, events)  # committed steps stay in `events` if a later one fails
        # Only a spec with `writes_document` may stage a write (the engine refuses any
        # other): the room runs everything else on its event loop, where fsyncs must not be.
        with engine.transaction(now, write=not op.read_only,
                                writes_document=op.writes_document) as tx:
            if op.capability is not None:
                tx.actor_or_none = sessions.authenticate(tx, bearer)
                # The capability rule; handlers add finer rules (holder, author, admin for raw commit).
                require(tx.actor.capabilities, op.capability)
            result = HANDLERS[name](tx, params)
        events.extend(tx.events)
        return Outcome(result if later else linediff.resolved(result), None, events)
    except CommonroomError as error:
        if tx is not None and tx.committed:
            events.extend(tx.events)  # the handler's writes committed before it failed
        return Outcome(None, error, events)
    except FileSettling as settling:
        # Nothing of the operation stands (rolled back, or undone after COMMIT).
        return Outcome(None, engine.file_changing(engine.clock(), settling.deadline), events,
                       retry_at=settling.deadline)


def read(
    engine: Engine,
    name: str,
    bearer: str | None,
    raw_params: Mapping[str, Any],
    *,
    from_query: bool = False,
    later: bool = False,
    block: bool = True,
) -> Outcome | NotReady | None:
    """Run a read-only operation on the read path (`engine.readpath`), like `execute`.

    `None`: a refresh has something to do first (the file moved, or an expiry is due):
    run the operation with `execute`, the writer's way. `NOT_READY` (only with
    `block=False`): the read connection is in use or a commit is landing; nothing ran.
    """
    heavy = name in limits.HEAVY_READS
    reader = engine.reads.reader(heavy=heavy)
    if heavy:
        answer = _on_reader(reader, name, bearer, raw_params, from_query=from_query,
                            later=later, block=block, wait_for_gate=block)
        return NOT_READY if answer is GATE_CLOSED else answer
    # A light read does not wait for a landing commit when the snapshot before it is
    # pinned (`readpath.Standby`): it answers that version, whose file is still in place.
    answer = _on_reader(reader, name, bearer, raw_params, from_query=from_query, later=later,
                        block=block, wait_for_gate=False)
    if answer is not GATE_CLOSED:
        return answer
    answer = _on_standby(engine.reads.standby, name, bearer, raw_params,
                         from_query=from_query, later=later, block=block)
    if answer is not NOT_READY or not block:
        return answer
    return _on_reader(reader, name, bearer, raw_params, from_query=from_query, later=later,
                      block=True, wait_for_gate=True)  # nothing pinned: wait for the gate


class NotReady(enum.Enum):
    NOT_READY = "not ready"
    GATE_CLOSED = "gate closed"


NOT_READY: Final = NotReady.NOT_READY
# A commit is landing and the caller asked not to wait for it (never returned by `read`).
GATE_CLOSED: Final = NotReady.GATE_CLOSED


def _on_reader(reader: Reader, name: str, bearer: str | None, raw_params: Mapping[str, Any], *,
               from_query: bool, later: bool, block: bool,
               wait_for_gate: bool) -> Outcome | NotReady | None:
    """The read on `reader`'s own snapshot; NOT_READY if its connection is in use (and
    not `block`), GATE_CLOSED if a commit is landing (and not `wait_for_gate`)."""
    if not reader.lock.acquire(blocking=block):
        return NOT_READY
    try:
        with reader.transaction(reader.engine.clock(), block=wait_for_gate) as tx:
            return _answer(reader, tx, name, bearer, raw_params, from_query=from_query,
                           later=later)
    except GateClosed:
        return GATE_CLOSED
    except RefreshDue:
        return None
    except CommonroomError as error:
        return Outcome(None, error, [])
    finally:
        reader.lock.release()


def _on_standby(standby: Standby, name: str, bearer: str | None, raw_params: Mapping[str, Any],
                *, from_query: bool, later: bool, block: bool) -> Outcome | NotReady | None:
    """The read on the snapshot pinned before a landing commit; NOT_READY if none is
    pinned (or, without `block`, it is in use)."""
    try:
        with standby.pinned_transaction(standby.engine.clock(), block=block) as tx:
            if tx is None:
                return NOT_READY
            return _answer(standby, tx, name, bearer, raw_params, from_query=from_query,
                           later=later)
    except RefreshDue:
        return None
    except CommonroomError as error:
        return Outcome(None, error, [])


def _answer(reader: Reader, tx: Tx, name: str, bearer: str | None,
            raw_params: Mapping[str, Any], *, from_query: bool, later: bool) -> Outcome:
    """A read-only operation in `tx`, a read transaction of `reader`. Raises `RefreshDue`
    (run it the writer's way) and the operation's `CommonroomError`."""
    op = operation(name)
    if not op.read_only:
        raise ValueError(f"{name} is not a read-only operation")
    params = parse_params(op.params, raw_params, from_query=from_query)
    reader.raise_if_expiry_due(tx)
    if op.capability is not None:
        tx.actor_or_none = sessions.authenticate(tx, bearer)
        require(tx.actor.capabilities, op.capability)
    result = HANDLERS[name](tx, params)
    return Outcome(result if later else linediff.resolved(result), None, [])
