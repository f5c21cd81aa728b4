"""What a handler works with: the transaction handle `Tx`, the actor, the hooks, the outcome.

`Tx` is the only way a handler changes state: its SQL runs on the
transaction's connection, its events are appended with `emit`, and what may
only happen once the transaction committed (presence) waits in `after_commit`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.events import Event
from commonroom.protocol.timefmt import format_ts

if TYPE_CHECKING:
    from commonroom.engine.core import Engine
    from commonroom.engine.snapshot import Snapshot


@attrs.frozen
class Outcome:
    """What one operation did: its result record or its error, and the events that committed."""

    result: Any
    error: CommonroomError | None
    events: list[Event]
    # Set when a write found the file settling: `error` is its `file_changing`
    # answer, and the same call may run again once this moment passed.
    retry_at: datetime | None = None


@attrs.frozen
class Actor:
    """Who is calling: always taken from the session, never from a body field."""

    participant_id: str
    capabilities: tuple[str, ...]
    session_hash: bytes
    kind: str
    name: str


ChangeHook = Callable[["Tx", "Snapshot", "Snapshot", "str | None"], None]
"""(tx, before, after, committed proposal id): the document changed in this transaction."""
TxHook = Callable[["Tx"], None]


@attrs.frozen
class Hooks:
    """What feature modules do when the document changes or time passes.

    The dispatcher builds the one set (leases, proposals, sessions, handoffs,
    presence register theirs there); an engine opened without it only keeps
    versions, which is what the store-level tests use.
    """

    on_document_change: tuple[ChangeHook, ...] = ()
    on_expiry: tuple[TxHook, ...] = ()
    next_expiry: tuple[Callable[[Tx], datetime | None], ...] = ()
    # Run by the room's sweeper only (`Engine.sweep`), never before an operation:
    # presence changes are announced by the sweeper, not by whoever calls next.
    on_sweep: tuple[TxHook, ...] = ()
    next_sweep: tuple[Callable[[Tx], datetime | None], ...] = ()
    # Before a host's save is recorded: the recent changes by others it takes back
    # (`undoes` on the version and in its `change.committed`, PROTOCOL.md 16).
    undone_by_save: Callable[[Tx, Snapshot, str], list[ev.UndoneChange]] | None = None


NO_HOOKS = Hooks()
"""An engine that only keeps versions (the store-level tests open one)."""


@attrs.define
class StagedWrite:
    version: int
    data: bytes
    temp_path: Path | None = None


@attrs.frozen
class PreparedFile:
    """A new version's temp file: opened on the committing thread, filled and fsynced on
    the engine's writer thread (`filled`) while the committing thread hashes and stores
    the bytes (`Versions._write`).

    `data` is the bytes being written, or, when they were given as pieces, the bytes
    the writer thread reads back from the file once written (`DocumentFile.fill_temp`).
    """

    data: bytes | Future[bytes]
    fd: int
    temp: Path
    filled: Future[None]

    def read_back(self) -> bytes | None:
        """The bytes read back from the file (waiting for them), or None: the write failed
        (`filled` raises why) or `data` was given whole."""
        if isinstance(self.data, bytes):
            return None
        try:
            return self.data.result()
        except OSError:
            return None

    def holds(self, data: bytes) -> bool:
        """Is the file being written `data` (this very object)?"""
        if isinstance(self.data, bytes):
            return self.data is data
        return self.data.done() and self.data.exception() is None and self.data.result() is data


class Tx:
    """What a handler sees: the connection, the clock reading, the actor, `emit`."""

    def __init__(self, engine: Engine, conn: sqlite3.Connection, now: datetime) -> None:
        self.engine = engine
        self.conn = conn
        self.now = now
        self.now_s = format_ts(now)
        self.actor_or_none: Actor | None = None
        self.events: list[Event] = []
        self.staged: StagedWrite | None = None
        self.prepared: PreparedFile | None = None
        # What to go back to if the transaction does not stand (`_forget_uncommitted`).
        self.version_at_start: int = engine.current_version
        self.committed = False
        # A version write records an edit made while no room ran (`engine.watch`): it
        # holds nothing, nobody is typing now.
        self.edit_found_at_open = False
        # Run once the transaction (and its file write) committed, in order.
        self.after_commit: list[Callable[[], None]] = []

    @property
    def actor(self) -> Actor:
        assert self.actor_or_none is not None, "operation needs an authenticated actor"
        return self.actor_or_none

    def emit(self, payload: ev.Payload) -> Event:
        """Append one event (a payload record of the catalogue) to the ring, in this transaction."""
        ev.check(payload)
        body = json.dumps(ev.payload_json(payload), separators=(",", ":"))
        cur = self.conn.execute(
            "INSERT INTO events (type, created_at, payload) VALUES (?, ?, ?)",
            (payload.TYPE, self.now_s, body),
        )
        event_id = cur.lastrowid
        assert event_id is not None
        actor = self.actor_or_none
        event = ev.make(event_id, self.now_s, payload, actor.session_hash if actor else None)
        self.events.append(event)
        return event

    def trim_ring(self) -> None:
        """Before COMMIT: drop the events this transaction pushed past the ring's bound.

        One indexed range delete per transaction (not per event); only the rows that
        fell off are below the bound, so the cost does not grow with history.
        """
        if self.events:
            self.conn.execute("DELETE FROM events WHERE event_id <= ?",
                              (self.events[-1].event_id - limits.EVENT_RING,))

    def touch_presence(self, participant_id: str) -> None:
        """The participant made this request: present once the transaction committed
        (a refused COMMIT announces nobody)."""
        self.after_commit.append(partial(self.engine.presence.touch, participant_id, self.now))

    def fail_after_commit(self, error: CommonroomError) -> CommitThenFail:
        """`raise tx.fail_after_commit(error)`: keep what the handler wrote (say a proposal
        marked conflicted), commit it, then fail with `error`."""
        return CommitThenFail(error)


class CommitThenFail(Exception):
    """Raised by a handler whose writes must commit although the operation fails."""

    def __init__(self, error: CommonroomError) -> None:
        super().__init__(error.code)
        self.error = error


Handler = Callable[[Tx, Any], Any]
