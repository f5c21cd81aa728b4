"""The engine: one room's versions, transactions and file (no trio, no network, no clock of its own;
it does its own file and SQLite I/O).

Theory of operation
-------------------
`commonroom.engine.dispatch.execute(engine, name, bearer, params)` is the one
entry point adapters reach (through the room service, which runs it on the
single store thread). It calls back into this module:

1. `Engine.refresh`: the file is checked with one `stat`; a change is read
   once it has settled (`engine.settle`, docs/spec/PROTOCOL.md section 16) and its
   content becomes a version (`external edit`) before anything else reads or
   writes; while it settles, reads answer from the last version and a write
   raises `FileSettling` (the room waits and retries); due expiries are applied
   (the `on_expiry` hooks), so an expired lease never blocks anyone, even
   between sweeper wake-ups;
2. `Engine.transaction`: the operation runs inside one SQLite transaction and
   appends its events there (`Tx.emit`, typed payload records of
   `protocol.events`); a handler that changes the document stages the new bytes;
3. commit order for a document change: the new version row and its events are
   written, the new file content is written to a temp file and fsynced, the
   transaction commits, the temp file is renamed over the document, and the
   version is marked as written. Before COMMIT and again just before the
   rename the file's stamp is compared with the one its version had: a save
   the host began meanwhile is never renamed over (`FileSettling`, the
   transaction rolled back or undone). A crash between commit and rename leaves a
   version marked unwritten whose predecessor is on disk: reopening rolls it
   forward. A crash before commit leaves only a stray temp file. A rename
   that *fails* (the file or folder refuses it) is reported to the client, so
   the committed transaction is undone (`store/undo.py`) and the answer is
   `storage_unavailable`: a reported failure never lands later.

What this module owns: `Engine`, with the versions (`write_version`,
`write_replacement`; a version in memory is an `engine.snapshot.Snapshot`),
the transaction and commit order (the handle handlers get is `engine.tx.Tx`),
external edits, and the recovery on open. It knows no feature's rules: what a
document change or an expiry means for leases, proposals, sessions or handoffs
is in the feature modules, which the dispatcher hands in as `Hooks` when it
opens the engine.

The engine does no networking and reads time only from the injected clock. Its
one use of threads is its writer thread: a new version's temp file is written and
fsynced there while the transaction goes on (the transaction waits for it before
COMMIT), and the file a rename replaced is closed there after the answer, so
freeing its blocks does not delay it.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from commonroom.engine.config import DEFAULT_CONFIG, EngineConfig
from commonroom.engine.history import StoredOutline, build_index, load_index, store_index
from commonroom.engine.ids import new_id, new_workspace_id, sha256_hex
from commonroom.engine.presence import Presence
from commonroom.engine.regions import WHOLE, Outline, Span
from commonroom.engine.settle import FileSettling, Reading, Settle, Step
from commonroom.engine.snapshot import SNAPSHOT_CACHE_BYTES, Snapshot
from commonroom.engine.storage_errors import is_storage_fault, sidecar_refused, write_refused
from commonroom.engine.text import decode_text, encode_text, is_text
from commonroom.engine.tx import NO_HOOKS, CommitThenFail, Hooks, PreparedFile, StagedWrite, Tx
from commonroom.protocol import events as ev
from commonroom.protocol.capabilities import HOST
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.events import Event
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import Clock, format_ts, system_clock
from commonroom.store import blobs, faults
from commonroom.store.document import DocumentFile, FileStamp, NotRegularFile
from commonroom.store.private import make_private
from commonroom.store.schema import migrate
from commonroom.store.undo import UndoLog

if TYPE_CHECKING:
    from commonroom.engine.gitsync import GitSync

SIDECAR_SUFFIX = ".commonroom.db"
# A caller that checkpoints itself (`EngineConfig.caller_checkpoints`) is told to once the
# WAL file is past this size. After a checkpoint SQLite cuts the file back to
# `journal_size_limit` (the same 1 MiB) and writes it from the start again, so a file past
# it holds at least 1 MiB of frames: checkpoints come as often as SQLite's own would at 256
# pages, and the WAL is never larger than with its 512.
WAL_CHECKPOINT_BYTES = 1024 * 1024


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
        # With `config.caller_checkpoints`: the WAL outgrew WAL_CHECKPOINT_BYTES at the
        # last write, the caller should run `checkpoint` (off its event loop).
        self.checkpoint_due = False
        self.sidecar_path = sidecar or self.path.with_name(self.path.name + SIDECAR_SUFFIX)
        self.clock = clock
        self.doc = DocumentFile(self.path)
        self.transport_hint: TransportHint | None = None
        self.transport_name = "none"
        self.lifecycle = "open"
        self.serving = config.serving
        # How long an external edit holds the regions it changed (`--human-hold-minutes`);
        # 0 while opening: an edit made while no room ran is nobody typing now.
        self.human_hold_minutes: float = 0.0
        # `config.git`: the work tree that records committed versions (engine/gitsync.py);
        # opened by `dispatch.open_engine` once the workspace id is known.
        self.git: GitSync | None = None
        # Presence is a room-process fact (who called in the last 90 s); it is
        # kept in memory and written to the sidecar only when a participant leaves.
        self.presence = Presence()
        # Hash -> participant id of the sessions that are not ended: what the
        # ingress's rate limiter asks (on the event loop, without a store call)
        # to charge a bearer to its own window, and its participant's, from its
        # first request. Changed only after the transaction that creates or ends
        # a session committed (`engine.sessions`); dict lookups and single
        # set/pop calls are atomic under the GIL.
        self.live_sessions: dict[bytes, str] = {}
        # Hashes of every invitation secret this room minted (used up, expired and
        # revoked ones too): the join gate charges an attempt to its invitation's
        # window when the secret is one of these, else to the small window of
        # unknown secrets. Added after the inviting transaction committed.
        self.invitation_hashes: set[bytes] = set()
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()
        self._expiry_cache: tuple[int, datetime | None] | None = None
        self._writer: ThreadPoolExecutor | None = None
        # Why the file cannot take a version right now (it is not UTF-8 text
        # any more, it vanished and cannot be restored, it cannot be read):
        # reads keep serving the last version, writes are refused with it.
        self.file_problem: str | None = None
        # When a change of the file may be read (`config.settle_ms`), and the
        # file's stamp as the current version has it.
        self.settle = Settle(timedelta(milliseconds=config.settle_ms))
        # Checked before the sidecar exists, so refusing leaves nothing behind.
        try:
            self._require_text(DocumentFile(self.path).read()[0])
        except FileNotFoundError:
            pass  # a new document: created empty by _open
        except NotRegularFile:
            raise self._not_a_file() from None
        except OSError as exc:
            raise CommonroomError(
                "storage_unavailable",
                f"cannot read {self.path.name} ({exc.strerror or type(exc).__name__})",
                {"file": self.path.name},
            ) from None
        try:
            make_private(self.sidecar_path)  # before SQLite creates its -wal and -shm beside it
            self.conn = sqlite3.connect(
                self.sidecar_path, isolation_level=None, check_same_thread=False
            )
            self.conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL: a transaction survives kill -9 without an fsync of its own (the
            # WAL is in the OS's hands); one that records a document write syncs the
            # WAL itself before the rename (`_sync_journal`), so an acknowledged
            # version also survives power loss. Leases, proposals and messages cost
            # no fsync; a power cut may lose the last of them, never a version.
            self.conn.execute("PRAGMA synchronous=NORMAL")
            # The WAL is checkpointed at 512 pages (2 MiB, not SQLite's 4 MiB) and cut back to
            # 1 MiB after a checkpoint: a burst of large writes (proposal churn: bench_proposal_churn)
            # leaves at most about 2 MiB of journal beside the database. With
            # `caller_checkpoints` the caller checkpoints instead (`checkpoint_due`).
            self.conn.execute(f"PRAGMA wal_autocheckpoint={0 if config.caller_checkpoints else 512}")
            self.conn.execute(f"PRAGMA journal_size_limit={1024 * 1024}")
            self.conn.execute("PRAGMA foreign_keys=ON")
            migrate(self.conn)
        except (sqlite3.OperationalError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)  # never the path
            raise CommonroomError(
                "storage_unavailable",
                f"cannot open the sidecar {self.sidecar_path.name} ({reason}): its folder must be"
                " writable (or serve with --ephemeral)",
                {"file": self.sidecar_path.name},
            ) from None
        self.undo_log = UndoLog(self.conn)
        try:
            self._open(name)
        except OSError as exc:
            self.conn.close()
            raise write_refused(self.path, exc) from None
        except BaseException:
            self.conn.close()
            raise
        self.human_hold_minutes = config.human_hold_minutes

    # ------------------------------------------------------------------ setup

    def close(self) -> None:
        if self._writer is not None:
            self._writer.shutdown(wait=True)
        if self.git is not None:
            self.git.close()
        self.conn.close()

    def drain_writer(self) -> None:
        """Wait until the writer thread has done what commits left it (closing replaced
        files); benchmarks call it so that work does not run into what they time next."""
        if self._writer is not None:
            self._writer.submit(lambda: None).result()

    def _doc_writer(self) -> ThreadPoolExecutor:
        """The one thread that writes temp files of new versions (started on first use)."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="commonroom-doc")
        return self._writer

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _open(self, name: str | None) -> None:
        self._remove_stray_temp_files()
        now = self.clock()
        if self._meta("workspace_id") is None:
            data, stamp = self._first_read(now)
            self.current_version = 0
            with self.transaction(now) as tx:
                self.workspace_id = new_workspace_id()
                tx.conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("workspace_id", self.workspace_id),
                        ("name", name or self.path.name),
                        ("created_at", tx.now_s),
                    ],
                )
                self.host_participant_id = new_id("pt_")
                tx.conn.execute(
                    "INSERT INTO participants (participant_id, kind, name, capabilities,"
                    " joined_at, is_host) VALUES (?, 'human', 'host', ?, ?, 1)",
                    (self.host_participant_id, json.dumps(list(HOST)), tx.now_s),
                )
                self._insert_version(tx, data, "initial version", None, None, "initial", None)
                tx.conn.execute("UPDATE versions SET file_written = 1 WHERE version = 1")
                tx.emit(ev.WorkspaceCreated(version=1))
            if not self.settle.settling:
                self.settle.settled(stamp)
        else:
            self.workspace_id = str(self._meta("workspace_id"))
            host = self.conn.execute(
                "SELECT participant_id FROM participants WHERE is_host = 1"
            ).fetchone()
            self.host_participant_id = str(host[0])
            row = self.conn.execute("SELECT max(version) FROM versions").fetchone()
            self.current_version = int(row[0])
            self._recover(now)
        self.name = str(self._meta("name"))
        saved_hint = self._meta("transport_hint")
        if saved_hint and saved_hint != "null":
            self.transport_hint = TransportHint(**json.loads(saved_hint))
            self.transport_name = self.transport_hint.type
        self.live_sessions.update(
            (bytes(row[0]), str(row[1]))
            for row in self.conn.execute(
                "SELECT session_hash, participant_id FROM sessions"
                " WHERE ended_at IS NULL AND expires_at > ?",
                (format_ts(now),),
            )
        )
        self.invitation_hashes.update(
            bytes(row[0]) for row in self.conn.execute("SELECT secret_hash FROM invitations")
        )

    def _first_read(self, now: datetime) -> tuple[bytes, FileStamp]:
        """The bytes of version 1 (a missing file is created empty), and their stamp.

        A file that changed while it was read is still version 1 (a room needs
        one); what it settles to follows as a version of its own.
        """
        try:
            data, before, after = self.doc.read()
        except FileNotFoundError:
            return b"", self.doc.write(b"")
        except NotRegularFile:
            raise self._not_a_file() from None
        if after != before:
            self.settle.found_at_open(now, after)
        return data, before

    def _not_a_file(self) -> CommonroomError:
        return CommonroomError(
            "invalid_request",
            f"{self.path.name} is not a regular file (a FIFO, socket, device or folder);"
            " commonroom serves a markdown file", {"file": self.path.name})

    def _require_text(self, data: bytes) -> None:
        if not is_text(data):
            raise CommonroomError(
                "invalid_request",
                f"{self.path.name} is not UTF-8 text; commonroom serves UTF-8 markdown only",
                {"file": self.path.name},
            )

    def _remove_stray_temp_files(self) -> None:
        prefix = f".{self.path.name}."
        for entry in self.path.parent.glob(prefix + "*.tmp"):
            with suppress(OSError):
                entry.unlink()

    def _recover(self, now: datetime) -> None:
        """Bring file and sidecar together after a stop or a crash (docs/spec/PROTOCOL.md section 15)."""
        latest = self.snapshot(self.current_version)
        written = self.conn.execute(
            "SELECT file_written FROM versions WHERE version = ?", (self.current_version,)
        ).fetchone()[0]
        try:
            data, before, after = self.doc.read()
        except NotRegularFile:
            raise self._not_a_file() from None
        except FileNotFoundError:
            # The file vanished: the room's last version is the best copy there is.
            self.settle.settled(self.doc.write(latest.data))
            return
        digest = sha256_hex(data)
        if after == before:
            if digest == latest.content_hash:
                if not written:
                    self.conn.execute(
                        "UPDATE versions SET file_written = 1 WHERE version = ?", (latest.version,)
                    )
                self.settle.settled(before)
                return
            if (not written and latest.version > 1
                    and digest == self.snapshot(latest.version - 1).content_hash):
                # Crash between sidecar commit and rename: finish the write.
                self.settle.settled(self.doc.write(latest.data))
                self.conn.execute(
                    "UPDATE versions SET file_written = 1 WHERE version = ?", (latest.version,)
                )
                return
        # The file wins: someone edited it while the room was closed (or is saving
        # it right now). It is recorded once it has settled, like any save, and
        # holds nothing (`Settle.at_open`).
        self.settle.found_at_open(now, after)

    # ---------------------------------------------------------- transactions

    @contextmanager
    def transaction(
        self, now: datetime, *, write: bool = True, writes_document: bool = False
    ) -> Iterator[Tx]:
        """One SQLite transaction; read operations (`write=False`) begin DEFERRED and
        so take no write lock.

        A staged document write is prepared (temp file, fsync) before COMMIT and
        renamed over the file after it (the order docs/spec/PROTOCOL.md section 15 needs:
        a crash in between is rolled forward on reopen). A rename that *fails*
        is reported, so it must not land later: the committed transaction is
        undone (`UndoLog`) and the client gets `storage_unavailable`. Only a
        transaction opened with `writes_document` may stage a write: only it
        records its inverse (the undo triggers cost every row they watch, and a
        lease or a review has no rename to undo). A handler that raises
        `tx.fail_after_commit(error)` has its writes committed and then fails with `error`.
        """
        tx = Tx(self, self.conn, now)
        self.conn.execute("BEGIN IMMEDIATE" if write else "BEGIN DEFERRED")
        if writes_document:
            self.undo_log.arm()
        try:
            yield tx
            if tx.staged is not None:
                if not writes_document:
                    raise RuntimeError("a transaction staged a document write without"
                                       " writes_document: its rename could not be undone")
                if self.file_problem is not None:
                    raise CommonroomError(
                        "storage_unavailable",
                        f"{self.file_problem}; nothing was committed",
                        {"file": self.path.name},
                    )
                try:
                    tx.staged.temp_path = self._take_prepared(tx, tx.staged.data)
                    self._raise_if_moved(tx.now)
                except OSError as exc:
                    raise write_refused(self.path, exc) from None
            tx.trim_ring()
            self.conn.execute("COMMIT")
            tx.committed = True
            if tx.staged is not None:
                faults.reached("after_commit")
        except CommitThenFail as deferred:
            assert tx.staged is None, "a failing operation never changes the document"
            self.undo_log.disarm()
            try:
                tx.trim_ring()
                self.conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                if is_storage_fault(exc):
                    raise sidecar_refused(self.sidecar_path, exc) from None
                raise
            tx.committed = True
            self.undo_log.forget()
            self._note_journal()
            for hook in tx.after_commit:
                hook()
            raise deferred.error from None
        except BaseException as exc:
            self.undo_log.disarm()
            # SQLite rolls back by itself on some errors (a full disk): ROLLBACK
            # then fails with "no transaction is active" and would hide the cause.
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            if tx.staged is not None and tx.staged.temp_path is not None:
                self.doc.discard(tx.staged.temp_path)
            self._discard_prepared(tx)
            self._forget_uncommitted(tx)
            if isinstance(exc, sqlite3.OperationalError) and is_storage_fault(exc):
                raise sidecar_refused(self.sidecar_path, exc) from None
            raise
        self.undo_log.disarm()
        if tx.staged is not None:
            assert tx.staged.temp_path is not None
            try:
                self._sync_journal()  # the version is durable before the file has it
                self._raise_if_moved(tx.now)  # the last look before the rename
                stamp = self.doc.install(tx.staged.temp_path, release=self._close_later)
            except (OSError, FileSettling) as exc:
                # Only an OSError is a refused write (and a moved file a write that
                # must wait); anything else (a crash, SystemExit) leaves the version
                # for the roll-forward on reopen.
                self.doc.discard(tx.staged.temp_path)
                self.undo_log.undo()
                self._forget_uncommitted(tx)
                tx.committed = False
                tx.events.clear()
                tx.after_commit.clear()
                if isinstance(exc, FileSettling):
                    raise
                raise write_refused(self.path, exc) from None
            self.settle.settled(stamp)
            # The commit has landed (sidecar and file agree); if even this flag
            # cannot be written, reopening sees the file equal to the version
            # and sets it, so the client is not told a landed commit failed.
            with suppress(sqlite3.Error):
                self.conn.execute(
                    "UPDATE versions SET file_written = 1 WHERE version = ?", (tx.staged.version,)
                )
            faults.reached("after_mark_written")
        self.undo_log.forget()
        if write:
            self._note_journal()
        for hook in tx.after_commit:
            hook()

    def _note_journal(self) -> None:
        """After a write's COMMIT: is a checkpoint due (`config.caller_checkpoints`)?"""
        if self.config.caller_checkpoints:
            self.checkpoint_due = self._journal_bytes() > WAL_CHECKPOINT_BYTES

    def _journal_bytes(self) -> int:
        """The size of the sidecar's WAL file: one stat (see `WAL_CHECKPOINT_BYTES`)."""
        try:
            return os.stat(f"{self.sidecar_path}-wal").st_size
        except OSError:
            return 0

    def checkpoint(self) -> None:
        """Copy the WAL into the database (PASSIVE: it never waits), as SQLite's own
        automatic checkpoint would (`config.caller_checkpoints`); fsyncs both files."""
        self.checkpoint_due = False
        try:
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.OperationalError as exc:
            if is_storage_fault(exc):
                raise sidecar_refused(self.sidecar_path, exc) from None
            raise

    def _raise_if_moved(self, now: datetime) -> None:
        """Before a write lands: the file must still be the one its version was based on.

        If it moved, the host is saving (or just saved): the write waits for that
        save to settle and be recorded, then runs again under the usual rules.
        """
        stamp = self.doc.stat()
        if stamp != self.settle.known:
            self.settle.look(now, stamp)
            raise FileSettling(self.settle.deadline or now)

    def _take_prepared(self, tx: Tx, data: bytes) -> Path:
        """The staged bytes' fsynced temp file: the one being written, or a new one."""
        prepared, tx.prepared = tx.prepared, None
        if prepared is not None:
            if prepared.data is data:
                try:
                    prepared.filled.result()  # raises the write's OSError
                except BaseException:
                    self._drop_prepared(prepared)
                    raise
                os.close(prepared.fd)
                return prepared.temp
            self._drop_prepared(prepared)
        return self.doc.prepare(data)

    def _discard_prepared(self, tx: Tx) -> None:
        prepared, tx.prepared = tx.prepared, None
        if prepared is not None:
            self._drop_prepared(prepared)

    def _drop_prepared(self, prepared: PreparedFile) -> None:
        """Wait for the writer to be done with the temp file, then remove it."""
        try:
            prepared.filled.result()
        except OSError:
            pass  # the write's own failure: the file goes all the same
        finally:
            os.close(prepared.fd)
            self.doc.discard(prepared.temp)

    def _prepare_on_writer(self, data: bytes) -> PreparedFile | None:
        """Start writing `data` to a temp file on the writer thread (`DocumentFile.fill_temp`).

        None when the folder refuses the temp file: `_take_prepared` writes it again
        before COMMIT, where the refusal is reported as a refused write.
        """
        try:
            fd, temp = self.doc.open_temp()
        except OSError:
            return None
        try:
            filled = self._doc_writer().submit(self.doc.fill_temp, fd, data)
        except BaseException:
            os.close(fd)
            self.doc.discard(temp)
            raise
        return PreparedFile(data, fd, temp, filled)

    def _close_later(self, fd: int) -> None:
        """Close `fd` on the writer thread: closing the last descriptor of a replaced
        document frees its blocks, which need not delay the commit's answer."""
        try:
            self._doc_writer().submit(os.close, fd)
        except RuntimeError:  # the writer is shut down: the engine is closing
            os.close(fd)

    def _sync_journal(self) -> None:
        """fsync the sidecar's WAL: every transaction committed so far survives power loss.

        What ``synchronous=FULL`` does at every COMMIT, done only where a version
        is at stake. Raises OSError like a failed COMMIT would (the caller undoes).
        """
        fd = os.open(f"{self.sidecar_path}-wal", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _forget_uncommitted(self, tx: Tx) -> None:
        """The transaction did not stand: drop the versions it made from memory.

        Any version, not only a staged one: an external edit stages no file write,
        and a refused one must not stay the current version in memory only.
        """
        if self.current_version != tx.version_at_start:
            for version in [v for v in self._snapshots if v > tx.version_at_start]:
                del self._snapshots[version]
            self.current_version = tx.version_at_start

    # ------------------------------------------------------------- the room

    def set_transport(self, name: str, hint: TransportHint | None) -> None:
        """Remember how the room is reached now (and for `ce invite` while no room runs)."""
        self.transport_name = name
        self.transport_hint = hint
        value = json.dumps(hint.to_json() if hint is not None else None)
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES ('transport_hint', ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (value,),
        )

    def last_ingress_port(self) -> int | None:
        raw = self._meta("transport_hint")
        hint = json.loads(raw) if raw else None
        port = hint.get("port") if isinstance(hint, dict) else None
        return port if isinstance(port, int) else None

    def saved_port(self, key: str) -> int | None:
        """A listener's port from last time (`owner_port`), kept so open tabs survive restarts."""
        raw = self._meta(key)
        return int(raw) if raw is not None and raw.isdigit() else None

    def save_port(self, key: str, port: int) -> None:
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, str(port)),
        )

    def refresh(self, now: datetime, events: list[Event] | None = None) -> list[Event]:
        """External edits and due expiries, each committed on its own; returns their events.

        Each step's events are appended to `events` as soon as it committed, so a
        caller that passes its own list keeps them when a later step raises (an
        external edit recorded, then the expiry refused by a full disk).
        """
        events = [] if events is None else events
        events.extend(self._look_at_file(now))
        if self._expiry_due(now):
            with self.transaction(now) as tx:
                self._expire(tx)
            events.extend(tx.events)
        return events

    def watch(self) -> tuple[list[Event], datetime | None]:
        """For the room's file watcher: one look at the file; its events, and when
        to look again at the latest (None: the file is steady)."""
        events = self._look_at_file(self.clock())
        return events, self.settle.deadline

    @property
    def file_state(self) -> str:
        """`settling` (a change is not recorded yet), `unusable` (`file_problem`) or `settled`."""
        if self.settle.settling:
            return "settling"
        return "unusable" if self.file_problem is not None else "settled"

    def without_room(self) -> None:
        """A host command opened the sidecar while no room runs: the status says `stopped`."""
        self.lifecycle = "stopped"

    def begin_stopping(self) -> None:
        """The room is stopping: diagnostics say so (the last state change of a served engine)."""
        self.lifecycle = "stopping"

    def file_changing(self, now: datetime, deadline: datetime) -> CommonroomError:
        """What a write that found the file settling answers once the room stopped waiting."""
        wait = max(1, math.ceil((deadline - now).total_seconds()))
        return CommonroomError(
            "storage_unavailable",
            f"{self.path.name} is being changed (a save in progress, or the file is gone);"
            " nothing was committed: retry once it is saved",
            {"file": self.path.name, "reason": "file_changing"},
            retry_after_seconds=wait,
        )

    def _look_at_file(self, now: datetime) -> list[Event]:
        """One look at the file under the settle rules; a settled change is recorded.

        One `stat` when nothing changed. Never raises for the file's sake: the
        watcher calls this too, and a file the room cannot use must not stop the
        room (`file_problem` then says why, and writes are refused with it). Only
        a sidecar that refuses to record a settled edit raises: then every request
        answers `storage_unavailable` until it is recorded (docs/protocol.md).
        """
        name = self.path.name
        try:
            stamp = self.doc.stat()
        except OSError as exc:
            self.file_problem = f"{name} cannot be read ({exc.strerror})"
            self.settle.settled(None)  # not known any more: settled and read again once it can be
            return []
        step = self.settle.look(now, stamp)
        if step is Step.RESTORE:
            self._restore(now)
            return []
        if step is not Step.READ:
            return []
        try:
            data, before, after = self.doc.read()
        except FileNotFoundError:
            self.settle.look(now, None)
            return []
        except NotRegularFile:
            # Like a file that is not UTF-8: the last version is served, writes are refused,
            # and the file is read again once something else stands at its path.
            self.file_problem = f"{name} is not a regular file (a FIFO, socket or device)"
            self.settle.settled(stamp)
            return []
        except OSError as exc:
            self.file_problem = f"{name} cannot be read ({exc.strerror})"
            self.settle.retry_later(now)
            return []
        digest = sha256_hex(data)
        if not self.settle.check(now, Reading(before, after, digest)):
            return []
        return self._take_settled(now, data, digest, before)

    def _take_settled(self, now: datetime, data: bytes, digest: str, stamp: FileStamp) -> list[Event]:
        """The file settled as `data`: record it as an external edit (or note why not)."""
        if digest == self.current().content_hash:
            self.file_problem = None
            self.settle.settled(stamp)
            return []
        if not is_text(data):
            # Not recorded: a version is text (regions, diffs). The room keeps
            # serving its last version and refuses writes, which would
            # overwrite the edit, until the file is UTF-8 text again.
            self.file_problem = f"{self.path.name} is not UTF-8 text any more"
            self.settle.settled(stamp)
            return []
        hold = self.human_hold_minutes
        if self.settle.at_open:
            self.human_hold_minutes = 0.0  # made while no room ran: nobody is typing now
        try:
            # A refusal (say the sidecar's disk is full) leaves the settle where it
            # is: the next look reads the file again instead of taking it as known.
            with self.transaction(now) as tx:
                self._record_external_edit(tx, data)
        finally:
            self.human_hold_minutes = hold
        self.file_problem = None
        self.settle.settled(stamp)
        return tx.events

    def _restore(self, now: datetime) -> None:
        """The file has been gone for `restore_after`: put the current version back.

        Never over a file that came back meanwhile (the next look settles that one).
        """
        try:
            stamp = self.doc.restore(self.current().data)
        except FileExistsError:
            return
        except OSError as exc:
            self.file_problem = f"{self.path.name} is gone and could not be restored ({exc.strerror})"
            self.settle.retry_later(now)
            return
        self.file_problem = None
        self.settle.settled(stamp)

    def sessions_ended(self, tx: Tx, hashes: list[bytes]) -> None:
        """Sessions ended in `tx` leave `live_sessions` once it committed (`engine.sessions`)."""
        def forget(session_hash: bytes) -> None:
            self.live_sessions.pop(session_hash, None)

        for session_hash in hashes:
            tx.after_commit.append(partial(forget, bytes(session_hash)))

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

    def _expiry_due(self, now: datetime) -> bool:
        due = self.next_expiry()
        return due is not None and due <= now

    def _expire(self, tx: Tx) -> None:
        for hook in self.hooks.on_expiry:
            hook(tx)

    # ------------------------------------------------------------ versions

    def current(self) -> Snapshot:
        return self.snapshot(self.current_version)

    def snapshot(self, version: int) -> Snapshot:
        cached = self._snapshots.get(version)
        if cached is not None and (cached.in_memory or version != self.current_version):
            self._snapshots.move_to_end(version)
            return cached
        row = self.conn.execute(
            "SELECT manifest, content_hash FROM versions WHERE version = ?", (version,)
        ).fetchone()
        if row is None:
            raise CommonroomError(
                "version_not_found",
                f"version {version} does not exist",
                {"version": version},
                current_version=self.current_version,
            )
        manifest, content_hash = row
        index = load_index(self.conn, version)
        if index is not None and version != self.current_version:
            # an old version: its heading index only, no text
            outline = StoredOutline(self.conn, blobs.Manifest(self.conn, manifest), index)
            return self._remember(Snapshot(version, None, content_hash, outline))
        data, layout = blobs.load_layout(self.conn, manifest)
        if sha256_hex(data) != content_hash:
            raise RuntimeError(f"version {version} does not match its content hash")
        full = Outline(decode_text(data))
        if index is None:
            # a version written before the heading index: backfill it, best effort
            index = build_index(full, data, layout)
            with suppress(sqlite3.Error):
                store_index(self.conn, version, index)
        if version != self.current_version:
            outline = StoredOutline(self.conn, blobs.Manifest.of(layout.ids), index)
            return self._remember(Snapshot(version, None, content_hash, outline))
        return self._remember(Snapshot(version, data, content_hash, full, layout, index))

    def _remember(self, snap: Snapshot) -> Snapshot:
        """Cache `snap`; old versions are evicted, oldest use first, past SNAPSHOT_CACHE_BYTES."""
        cache = self._snapshots
        cache[snap.version] = snap
        cache.move_to_end(snap.version)
        total = sum(s.footprint() for v, s in cache.items() if v != self.current_version)
        for version in list(cache):
            if total <= SNAPSHOT_CACHE_BYTES:
                break
            if version != self.current_version and version != snap.version:
                total -= cache.pop(version).footprint()
        return snap

    def _insert_version(
        self,
        tx: Tx,
        data: bytes,
        summary: str,
        participant_id: str | None,
        region: str | None,
        source: str,
        proposal_id: str | None,
        *,
        outline: Outline | None = None,
        edit: tuple[int, int, int] | None = None,
        text_edit: tuple[int, int, int] | None = None,
    ) -> Snapshot:
        """Store `data` as the next version.

        `outline` is its outline when the caller has it; `edit` says which bytes
        changed against the current version (start, old end, new end), so only
        the blocks around them are cut, hashed and stored again; `text_edit` is the
        same stretch in characters (`Snapshot.edit`).
        """
        version = self.current_version + 1
        # First: hashing releases the interpreter lock, so the writer thread, just handed
        # the temp file (`_write_version`), takes it at once to start its write.
        content_hash = sha256_hex(data)
        before = self._snapshots.get(self.current_version)
        if edit is not None and before is not None and before.layout is not None:
            layout = blobs.store_replacement(tx.conn, before.layout, data, *edit)
        else:
            layout = blobs.store_blocks(tx.conn, data)
        manifest = layout.manifest(tx.conn, before.layout if before else None)
        if outline is None:
            outline = Outline(decode_text(data))
        previous = before.index if before is not None else None
        same_paths = previous is not None and before is not None and outline._paths is before.outline._paths
        index = build_index(
            outline, data, layout, previous.headings if same_paths and previous else None,
            previous if edit is not None else None,
        )
        store_index(tx.conn, version, index)
        tx.conn.execute(
            "INSERT INTO versions (version, content_hash, size, manifest, summary, participant_id,"
            " region, source, proposal_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (version, content_hash, len(data), manifest, summary, participant_id, region, source,
             proposal_id, tx.now_s),
        )
        faults.reached("after_version_row")
        self.current_version = version
        if before is not None:
            # the version it supersedes leaves memory with its text; read again, it
            # comes back as a stored outline (its heading index, a chunk at a time)
            self._snapshots.pop(before.version, None)
        return self._remember(Snapshot(version, data, content_hash, outline, layout, index, text_edit))

    def write_version(
        self,
        tx: Tx,
        new_text: str,
        *,
        summary: str,
        participant_id: str | None,
        region: str,
        source: str,
        proposal_id: str | None = None,
        reverts: int | None = None,
        restores: int | None = None,
        undoes: list[ev.UndoneChange] | None = None,
    ) -> Snapshot:
        """Record a new version, stage the file write, and settle what it changed.

        The changed stretch is found by comparing the bytes (at C speed); when
        both texts are one byte per character, the outline and the blocks are
        then updated around it only, as in `write_replacement`.
        """
        before = self.current()
        data = encode_text(new_text)
        outline: Outline | None = None
        edit: tuple[int, int, int] | None = None
        if len(before.data) == len(before.text) and len(data) == len(new_text):
            edit = blobs.changed_range(before.data, data)
            start, old_end, new_end = edit
            outline = before.outline.replaced(
                Span(WHOLE, start, old_end), new_text[start:new_end], text=new_text
            )
        return self._write_version(
            tx, data, outline, edit, edit, summary=summary, participant_id=participant_id,
            region=region, source=source, proposal_id=proposal_id, reverts=reverts,
            restores=restores, undoes=undoes,
        )

    def write_replacement(
        self,
        tx: Tx,
        span: Span,
        content: str,
        *,
        summary: str,
        participant_id: str | None,
        region: str,
        source: str,
        proposal_id: str | None = None,
        reverts: int | None = None,
        restores: int | None = None,
        outline: Outline | None = None,
    ) -> Snapshot:
        """`write_version` of the current text with `span` replaced by `content`.

        The cost follows the change: the new bytes are the old ones around the
        new content (one copy), the outline is re-scanned around the change
        only (`Outline.replaced`) and only the blocks around it are stored.
        `outline`, when given, is ``current().outline.replaced(span, content)``
        already built by the caller (it holds the new text too).
        """
        before = self.current()
        old_data, old_text = before.data, before.text
        if len(old_data) == len(old_text):  # one byte per character: offsets agree
            byte_start, byte_end = span.start, span.end
        else:
            byte_start = len(encode_text(old_text[: span.start]))
            byte_end = byte_start + len(encode_text(old_text[span.start : span.end]))
        raw = encode_text(content)
        view = memoryview(old_data)
        data = b"".join((view[:byte_start], raw, view[byte_end:]))
        if outline is None:
            outline = before.outline.replaced(span, content, text=decode_text(data))
        return self._write_version(
            tx, data, outline, (byte_start, byte_end, byte_start + len(raw)),
            (span.start, span.end, span.start + len(content)), summary=summary,
            participant_id=participant_id, region=region, source=source, proposal_id=proposal_id,
            reverts=reverts, restores=restores,
        )

    def _write_version(
        self,
        tx: Tx,
        data: bytes,
        outline: Outline | None,
        edit: tuple[int, int, int] | None,
        text_edit: tuple[int, int, int] | None,
        *,
        summary: str,
        participant_id: str | None,
        region: str,
        source: str,
        proposal_id: str | None,
        reverts: int | None = None,
        restores: int | None = None,
        undoes: list[ev.UndoneChange] | None = None,
    ) -> Snapshot:
        """Store and stage the new bytes; `edit` and `text_edit` hold the changed stretch
        in bytes and in characters when the caller knows it (`_insert_version`)."""
        before = self.current()
        if source != "external" and self.settle.settling:
            # Never write over a save in progress: the room waits for it, records
            # it, and runs this operation again (`room.core.Room.execute`).
            raise FileSettling(self.settle.deadline or tx.now)
        if source != "external" and self.file_problem is None and tx.prepared is None:
            # The temp file is written and fsynced on the writer thread while this
            # one hashes the bytes and stores them; the transaction waits for it
            # before COMMIT. (Hashing on a second writer thread was tried: no gain
            # on two cores, the write itself is CPU in the kernel.)
            tx.prepared = self._prepare_on_writer(data)
        snap = self._insert_version(
            tx, data, summary, participant_id, region, source, proposal_id, outline=outline, edit=edit,
            text_edit=text_edit,
        )
        if source != "external":
            tx.staged = StagedWrite(snap.version, data)
        if reverts is not None or restores is not None:  # provenance (docs/spec/PROTOCOL.md section 18)
            tx.conn.execute("UPDATE versions SET reverts = ?, restores = ? WHERE version = ?",
                            (reverts, restores, snap.version))
        if undoes:  # a host's save that took back others' changes (PROTOCOL.md 16)
            tx.conn.execute("UPDATE versions SET undoes = ? WHERE version = ?", (
                json.dumps([{"version": u.version, "participant_id": u.participant_id}
                            for u in undoes]), snap.version))
        tx.emit(ev.ChangeCommitted(
            version=snap.version, summary=summary, participant_id=participant_id, region=region,
            source=source, reverts=reverts, restores=restores, undoes=undoes or None,
        ))
        self._after_change(tx, before, snap, proposal_id)
        return snap

    def _record_external_edit(self, tx: Tx, data: bytes) -> None:
        text = decode_text(data)
        find_undone = self.hooks.undone_by_save
        self.write_version(
            tx,
            text,
            summary="external edit",
            participant_id=None,
            region=WHOLE,
            source="external",
            undoes=None if find_undone is None else find_undone(tx, self.current(), text),
        )
        tx.conn.execute(
            "UPDATE versions SET file_written = 1 WHERE version = ?", (self.current_version,)
        )

    def _after_change(
        self, tx: Tx, before: Snapshot, after: Snapshot, committed_proposal: str | None
    ) -> None:
        for hook in self.hooks.on_document_change:
            hook(tx, before, after, committed_proposal)

    def resolve(self, region: str, version: int | None = None) -> tuple[Snapshot, Span]:
        snap = self.current() if version is None else self.snapshot(version)
        return snap, snap.outline.resolve(region)
