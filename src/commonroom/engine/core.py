"""The engine: one room's versions, transactions and file, as a composition of small parts.

Theory of operation
-------------------
`commonroom.engine.dispatch.execute(engine, name, bearer, params)` is the one
entry point adapters reach (through the room service, which runs it on the
single store thread). It calls back into the engine:

1. `Engine.refresh`: the file is looked at (`engine.watch`: one `stat`, a
   settled change becomes an `external edit` version before anything else reads
   or writes) and due expiries are applied (the `on_expiry` hooks), so an expired
   lease never blocks anyone, even between sweeper wake-ups;
2. `Engine.transaction` (`engine.txn`): the operation runs inside one SQLite
   transaction and appends its events there (`Tx.emit`); a handler that changes
   the document writes a version (`engine.versions`), which stages the new bytes,
   and the commit order renames them over the file after COMMIT.

The parts, each a module: `Transactions` (`engine.txn`: the transaction, undo,
writer thread and commit order), `Versions` (`engine.versions`: the snapshot
cache and version writes), `FileWatch` (`engine.watch`: the file's look, settle
and recovery), `Ports` (`engine.ports`: transport metadata) and `LiveKeys`
(`engine.live`: the sessions and invitations the ingress's gates ask about).
This class opens the sidecar, wires them together, and runs the expiry sweeps.
Read-only operations take another way in (`dispatch.read`): `ReadPath`
(`engine.readpath`), their own connection and snapshot, never behind a commit.
It knows no feature's rules: what a document change or an expiry means for
leases, proposals, sessions or handoffs is in the feature modules, which the
dispatcher hands in as `Hooks` when it opens the engine.
The engine does no networking and reads time only from the injected clock; its
one thread is the writer thread of `engine.txn` (where reads and writes run is the
room's choice).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from commonroom.engine.config import DEFAULT_CONFIG, EngineConfig
from commonroom.engine.ids import new_id, new_workspace_id
from commonroom.engine.live import LiveKeys
from commonroom.engine.ports import Ports, read_meta
from commonroom.engine.presence import Presence
from commonroom.engine.readpath import ReadPath
from commonroom.engine.regions import Span
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.storage_errors import write_refused
from commonroom.engine.tx import NO_HOOKS, Hooks, Tx
from commonroom.engine.txn import Transactions
from commonroom.engine.versions import Versions
from commonroom.engine.watch import FileWatch, remove_stray_temp_files, require_text_file
from commonroom.protocol import events as ev
from commonroom.protocol.capabilities import HOST
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.events import Event
from commonroom.protocol.timefmt import Clock, system_clock
from commonroom.store.document import DocumentFile
from commonroom.store.private import make_private
from commonroom.store.schema import migrate

if TYPE_CHECKING:
    from commonroom.engine.gitsync import GitSync

SIDECAR_SUFFIX = ".commonroom.db"


class Engine:
    def __init__(
        self,
        path: Path,
        *,
        sidecar: Path | None = None,
        clock: Clock = system_clock,
        name: str | None = None,
        hooks: Hooks = NO_HOOKS,
        config: EngineConfig = DEFAULT_CONFIG,
    ) -> None:
        self.path = Path(path).resolve()
        self.hooks = hooks
        self.config = config
        self.sidecar_path = sidecar or self.path.with_name(self.path.name + SIDECAR_SUFFIX)
        self.clock = clock
        self.doc = DocumentFile(self.path)
        self.lifecycle = "open"
        self.serving = config.serving
        # How long an external edit holds the regions it changed (`--human-hold-minutes`;
        # an edit found at open holds nothing: `Tx.edit_found_at_open`).
        self.human_hold_minutes: float = config.human_hold_minutes
        # `config.git`: the work tree that records committed versions (engine/gitsync.py);
        # opened by `dispatch.open_engine` once the workspace id is known.
        self.git: GitSync | None = None
        # Presence is a room-process fact (who called in the last 90 s); it is
        # kept in memory and written to the sidecar only when a participant leaves.
        self.presence = Presence()
        self.live = LiveKeys()
        self._expiry_cache: tuple[int, datetime | None] | None = None
        require_text_file(self.path)  # before the sidecar exists: refusing leaves nothing behind
        self.conn = _open_sidecar(self.sidecar_path, config)
        try:
            self.reads = ReadPath(self)  # read-only operations' own connection (engine.readpath)
        except BaseException:
            self.conn.close()
            raise
        self.txn = Transactions(self)
        self.versions = Versions(self)
        self.file = FileWatch(self, config.settle_ms)
        self.settle = self.file.settle
        try:
            self._open(name)
        except OSError as exc:
            self._close_connections()
            raise write_refused(self.path, exc) from None
        except BaseException:
            self._close_connections()
            raise
        self.reads.publish(self.current())  # what readers see as current, from now on
        self.ports = Ports(self.conn)

    def close(self) -> None:
        self.txn.close()
        if self.git is not None:
            self.git.close()
        self._close_connections()

    def _close_connections(self) -> None:
        self.reads.close()
        self.conn.close()

    def _open(self, name: str | None) -> None:
        remove_stray_temp_files(self.path)
        now = self.clock()
        if read_meta(self.conn, "workspace_id") is None:
            data, stamp = self.file.first_read(now)
            with self.transaction(now) as tx:
                self.workspace_id = new_workspace_id()
                tx.conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
                    ("workspace_id", self.workspace_id), ("name", name or self.path.name),
                    ("created_at", tx.now_s)])
                self.host_participant_id = new_id("pt_")
                tx.conn.execute(
                    "INSERT INTO participants (participant_id, kind, name, capabilities,"
                    " joined_at, is_host) VALUES (?, 'human', 'host', ?, ?, 1)",
                    (self.host_participant_id, json.dumps(list(HOST)), tx.now_s),
                )
                self.versions.insert(tx, data, "initial version", None, None, "initial", None)
                tx.conn.execute("UPDATE versions SET file_written = 1 WHERE version = 1")
                tx.emit(ev.WorkspaceCreated(version=1))
            if not self.settle.settling:
                self.settle.settled(stamp)
        else:
            self.workspace_id = str(read_meta(self.conn, "workspace_id"))
            host = self.conn.execute("SELECT participant_id FROM participants WHERE is_host = 1").fetchone()
            self.host_participant_id = str(host[0])
            self.versions.current_version = int(
                self.conn.execute("SELECT max(version) FROM versions").fetchone()[0])
            self.file.recover(now)
        self.name = str(read_meta(self.conn, "name"))
        self.live.load(self.conn, now)

    # ------------------------------------------------------------ the parts' faces

    @property
    def current_version(self) -> int:
        return self.versions.current_version

    def current(self) -> Snapshot:
        return self.versions.current()

    def snapshot(self, version: int) -> Snapshot:
        return self.versions.snapshot(version)

    def resolve(self, region: str, version: int | None = None) -> tuple[Snapshot, Span]:
        snap = self.current() if version is None else self.snapshot(version)
        return snap, snap.outline.resolve(region)

    @property
    def file_problem(self) -> str | None:
        return self.file.problem

    @property
    def file_state(self) -> str:
        return self.file.state

    def file_changing(self, now: datetime, deadline: datetime) -> CommonroomError:
        return self.file.changing(now, deadline)

    def transaction(self, now: datetime, *, write: bool = True, writes_document: bool = False
                    ) -> AbstractContextManager[Tx]:
        return self.txn.open(now, write=write, writes_document=writes_document)

    @property
    def checkpoint_due(self) -> bool:
        return self.txn.checkpoint_due

    def checkpoint(self) -> None:
        self.txn.checkpoint()

    def session_participant(self, session_hash: bytes) -> str | None:
        return self.live.session_participant(session_hash)

    def knows_invitation(self, secret_hash: bytes) -> bool:
        return self.live.knows_invitation(secret_hash)

    def sessions_ended(self, tx: Tx, hashes: list[bytes]) -> None:
        """Sessions ended in `tx` leave the live keys once it committed (`engine.sessions`)."""
        tx.after_commit.append(partial(self.live.sessions_ended, [bytes(h) for h in hashes]))

    def without_room(self) -> None:  # a host command, no room running: the status says `stopped`
        self.lifecycle = "stopped"

    def begin_stopping(self) -> None:  # diagnostics say so: the last state change of a served engine
        self.lifecycle = "stopping"

    # ------------------------------------------------------------ time passing

    def refresh(self, now: datetime, events: list[Event] | None = None) -> list[Event]:
        """External edits and due expiries, each committed on its own; returns their events.

        Each step's events are appended to `events` as soon as it committed, so a
        caller that passes its own list keeps them when a later step raises (an
        external edit recorded, then the expiry refused by a full disk).
        """
        events = [] if events is None else events
        events.extend(self.file.look(now))
        due = self.next_expiry()
        if due is not None and due <= now:
            with self.transaction(now) as tx:
                self._expire(tx)
            events.extend(tx.events)
        return events

    def watch(self) -> tuple[list[Event], datetime | None]:
        """For the room's file watcher: one look at the file; its events, and when
        to look again at the latest (None: the file is steady)."""
        events = self.file.look(self.clock())
        return events, self.settle.deadline

    def sweep(self) -> tuple[list[Event], datetime | None]:
        """For the room's sweeper: apply due expiries and the sweep-only hooks (presence);
        return their events and the next due time."""
        now = self.clock()
        events = self.refresh(now)
        due = self._earliest(self.hooks.next_sweep, now)
        if due is not None and due <= now:
            with self.transaction(now) as tx:
                for hook in self.hooks.on_sweep:
                    hook(tx)
            events.extend(tx.events)
        times = [t for t in (self.next_expiry(), self._earliest(self.hooks.next_sweep, now)) if t]
        return events, min(times) if times else None

    def next_expiry(self) -> datetime | None:
        """The earliest moment a hook has something to expire (None: nothing pending).

        Asked before every operation; the answer only changes when a row does, so
        it is kept until the connection's `total_changes` moves (any write, even
        one rolled back, so never stale).
        """
        stamp = self.conn.total_changes
        cached = self._expiry_cache
        if cached is not None and cached[0] == stamp:
            return cached[1]
        due = self._earliest(self.hooks.next_expiry, self.clock())
        self._expiry_cache = (stamp, due)
        return due

    def _earliest(self, finders: tuple[Callable[[Tx], datetime | None], ...], now: datetime
                  ) -> datetime | None:
        """The earliest due time the finders give, asked at `now`: the caller's own
        reading, so that "due now" compares equal to it (a second reading is later)."""
        tx = Tx(self, self.conn, now)
        times = [due for find in finders if (due := find(tx)) is not None]
        return min(times) if times else None

    def _expire(self, tx: Tx) -> None:
        for hook in self.hooks.on_expiry:
            hook(tx)


def _open_sidecar(sidecar_path: Path, config: EngineConfig) -> sqlite3.Connection:
    try:
        make_private(sidecar_path)  # before SQLite creates its -wal and -shm beside it
        conn = sqlite3.connect(sidecar_path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL: a transaction survives kill -9 without an fsync of its own (the
        # WAL is in the OS's hands); one that records a document write syncs the
        # WAL itself before the rename (`engine.txn`), so an acknowledged version
        # also survives power loss. Leases, proposals and messages cost no fsync;
        # a power cut may lose the last of them, never a version.
        conn.execute("PRAGMA synchronous=NORMAL")
        # The WAL is checkpointed at 512 pages (2 MiB, not SQLite's 4 MiB) and cut back to
        # 1 MiB after a checkpoint: a burst of large writes (proposal churn) leaves at most
        # about 2 MiB of journal beside the database. With `caller_checkpoints` the caller
        # checkpoints instead (`Engine.checkpoint_due`).
        conn.execute(f"PRAGMA wal_autocheckpoint={0 if config.caller_checkpoints else 512}")
        conn.execute(f"PRAGMA journal_size_limit={1024 * 1024}")
        conn.execute("PRAGMA foreign_keys=ON")
        migrate(conn)
    except (sqlite3.OperationalError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)  # never the path
        raise CommonroomError(
            "storage_unavailable",
            f"cannot open the sidecar {sidecar_path.name} ({reason}): its folder must be"
            " writable (or serve with --ephemeral)",
            {"file": sidecar_path.name},
        ) from None
    return conn
