"""The transaction, its undo, the writer thread and the commit order of a document write.

Theory of operation
-------------------
`Transactions.open` is `Engine.transaction`: one SQLite transaction, whose
handle (`engine.tx.Tx`) the handler changes state through. A handler that
changes the document stages the new bytes (`Tx.staged`); their temp file is
written and fsynced on the writer thread meanwhile (`prepare_on_writer`, started
by the version write). The commit order for a document change is:

1. the new version row and its events are written (in the transaction);
2. the temp file's write is awaited (it is fsynced), and the file's stamp is
   compared with the one its version had: a save the host began meanwhile is
   never renamed over (`FileSettling`, the transaction rolled back);
3. COMMIT;
4. the WAL is fsynced (`sync_journal`: the version survives power loss), the
   stamp is compared again, and the temp file is renamed over the document;
5. the version is marked as written.

From just before 3 until the rename of 4 is done (or the transaction undone),
the commit holds the read gate (`engine.readpath`): a read transaction begins
before it or after it, never in between, so no reader sees a version that is
not in the file yet or that an undo takes back. Past the rename nothing undoes
the version, so the folder's fsync and 5 do not hold it, nor does the temp
file's write and fsync (2).

A crash between 3 and 4 leaves a version marked unwritten whose predecessor is
on disk: reopening rolls it forward (`engine.watch`). A crash before 3 leaves
only a stray temp file. A rename that *fails* (the file or folder refuses it)
is reported to the client, so the committed transaction is undone
(`store/undo.py`) and the answer is `storage_unavailable`: a reported failure
never lands later.

This module owns that order and the writer thread; what a version is belongs to
`engine.versions`, what the file looks like to `engine.watch`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from datetime import datetime
from functools import partial
from pathlib import Path
from threading import Lock
from typing import TYPE_CHECKING, Any, Final, TypeVar

from commonroom.engine.settle import FileSettling
from commonroom.engine.storage_errors import is_storage_fault, sidecar_refused, write_refused
from commonroom.engine.tx import CommitThenFail, PreparedFile, Tx
from commonroom.protocol.errors import CommonroomError
from commonroom.store import faults
from commonroom.store.document import BytePieces, FileStamp, byte_size
from commonroom.store.undo import UndoLog

BULK_BYTES: Final = 1024 * 1024
"""A new version this large or larger: its hash runs on the hash thread, and its hash and
file write on threads the room lowers (`Transactions.as_bulk`); below it, the thread hop and
the lowered priority would cost more than the work (a small commit's file write is on its
critical path)."""

_T = TypeVar("_T")

if TYPE_CHECKING:
    from commonroom.engine.core import Engine

# A caller that checkpoints itself (`EngineConfig.caller_checkpoints`) is told to once the
# WAL file is past this size. After a checkpoint SQLite cuts the file back to
# `journal_size_limit` (the same 1 MiB) and writes it from the start again, so a file past
# it holds at least 1 MiB of frames: checkpoints come as often as SQLite's own would at 256
# pages, and the WAL is never larger than with its 512.
WAL_CHECKPOINT_BYTES = 1024 * 1024


class Transactions:
    """The engine's transactions: their commit order, undo and writer thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.undo_log = UndoLog(engine.conn)
        # With `config.caller_checkpoints`: the WAL outgrew WAL_CHECKPOINT_BYTES at the
        # last write, the caller should run `checkpoint` (off its event loop).
        self.checkpoint_due = False
        self._writer: ThreadPoolExecutor | None = None
        self._hasher: ThreadPoolExecutor | None = None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.shutdown(wait=True)
        if self._hasher is not None:
            self._hasher.shutdown(wait=True)

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

    def hash_thread(self) -> ThreadPoolExecutor:
        """The one thread that hashes a large new version's bytes (`BULK_BYTES`; started on
        first use), beside the writer thread."""
        if self._hasher is None:
            self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="commonroom-hash")
        return self._hasher

    def as_bulk(self, size: int, work: Callable[..., _T]) -> Callable[..., _T]:
        """`work` for the writer or the hash thread: for `size` bytes from `BULK_BYTES` on,
        it first runs `EngineConfig.bulk_thread_start` there (the room lowers that thread's
        priority, so the threads that answer reads keep the core; once lowered, it stays),
        and it is given `EngineConfig.bulk_step_aside` as its ``pause``."""
        config = self.engine.config
        if size < BULK_BYTES:
            return work
        start, pause = config.bulk_thread_start, config.bulk_step_aside

        def started(*args: Any) -> _T:
            if start is not None:
                start()
            return work(*args, pause=pause)

        return started

    @contextmanager
    def open(self, now: datetime, *, write: bool = True, writes_document: bool = False) -> Iterator[Tx]:
        """One SQLite transaction; read operations (`write=False`) begin DEFERRED and
        so take no write lock.

        A staged document write is prepared (temp file, fsync) before COMMIT and
        renamed over the file after it (the order of this module's docstring). Only
        a transaction opened with `writes_document` may stage a write: only it
        records its inverse (the undo triggers cost every row they watch, and a
        lease or a review has no rename to undo). A handler that raises
        `tx.fail_after_commit(error)` has its writes committed and then fails with `error`.
        """
        engine = self.engine
        tx = Tx(engine, self.engine.conn, now)
        gate: Lock | None = None  # the read gate, held from COMMIT until the version landed
        self.engine.conn.execute("BEGIN IMMEDIATE" if write else "BEGIN DEFERRED")
        if writes_document:
            self.undo_log.arm()
        try:
            yield tx
            if tx.staged is not None:
                if not writes_document:
                    raise RuntimeError("a transaction staged a document write without"
                                       " writes_document: its rename could not be undone")
                if engine.file_problem is not None:
                    raise CommonroomError(
                        "storage_unavailable",
                        f"{engine.file_problem}; nothing was committed",
                        {"file": engine.path.name},
                    )
                try:
                    tx.staged.temp_path = self._take_prepared(tx, tx.staged.data)
                    self._raise_if_moved(tx.now)
                except OSError as exc:
                    raise write_refused(engine.path, exc) from None
            tx.trim_ring()
            if engine.current_version != tx.version_at_start:
                # A new version: readers begin after it landed or was undone (`_land`);
                # light reads meanwhile answer the version before it (`readpath.Standby`).
                engine.reads.pin_before_commit()
                engine.reads.gate.acquire()
                gate = engine.reads.gate
            self.engine.conn.execute("COMMIT")
            tx.committed = True
            if tx.staged is not None:
                faults.reached("after_commit")
        except CommitThenFail as deferred:
            assert tx.staged is None, "a failing operation never changes the document"
            self.undo_log.disarm()
            try:
                tx.trim_ring()
                self.engine.conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if self.engine.conn.in_transaction:
                    self.engine.conn.execute("ROLLBACK")
                if is_storage_fault(exc):
                    raise sidecar_refused(engine.sidecar_path, exc) from None
                raise
            tx.committed = True
            self.undo_log.forget()
            self._note_journal()
            for hook in tx.after_commit:
                hook()
            raise deferred.error from None
        except BaseException as exc:
            if gate is not None:
                gate.release()  # rolled back: readers see the version before it
                engine.reads.unpin()
            self.undo_log.disarm()
            # SQLite rolls back by itself on some errors (a full disk): ROLLBACK
            # then fails with "no transaction is active" and would hide the cause.
            if self.engine.conn.in_transaction:
                self.engine.conn.execute("ROLLBACK")
            if tx.staged is not None and tx.staged.temp_path is not None:
                engine.doc.discard(tx.staged.temp_path)
            self._discard_prepared(tx)
            engine.versions.forget_since(tx.version_at_start)
            if isinstance(exc, sqlite3.OperationalError) and is_storage_fault(exc):
                raise sidecar_refused(engine.sidecar_path, exc) from None
            raise
        self.undo_log.disarm()

        def reopen() -> None:
            """The version landed (or was undone): readers may begin again."""
            nonlocal gate
            if gate is not None:
                if tx.committed:
                    engine.reads.publish(engine.versions.current())
                gate.release()
                gate = None
                engine.reads.unpin()  # after the gate: a reader who found it closed is let in

        try:
            self._land(tx, reopen)
        finally:
            reopen()
        self.undo_log.forget()
        if write:
            self._note_journal()
        for hook in tx.after_commit:
            hook()

    def _land(self, tx: Tx, reopen: Callable[[], None]) -> None:
        """After COMMIT: a staged write's temp file renamed over the document and the
        version marked written (steps 4 and 5), or the transaction undone. `reopen` lets
        readers in once the rename is done: nothing can undo the version after it."""
        engine = self.engine
        if tx.staged is not None:
            assert tx.staged.temp_path is not None

            def renamed(stamp: FileStamp) -> None:
                engine.settle.settled(stamp)  # before readers look at the file again
                reopen()

            try:
                self._sync_journal()  # the version is durable before the file has it
                self._raise_if_moved(tx.now)  # the last look before the rename
                engine.doc.install(tx.staged.temp_path, release=self._close_later,
                                   renamed=renamed)
            except (OSError, FileSettling) as exc:
                # Only an OSError is a refused write (and a moved file a write that
                # must wait); anything else (a crash, SystemExit) leaves the version
                # for the roll-forward on reopen.
                engine.doc.discard(tx.staged.temp_path)
                self.undo_log.undo()
                engine.versions.forget_since(tx.version_at_start)
                tx.committed = False
                tx.events.clear()
                tx.after_commit.clear()
                if isinstance(exc, FileSettling):
                    raise
                raise write_refused(engine.path, exc) from None
            # (`renamed` told the settle the file's new stamp.)
            # The commit has landed (sidecar and file agree); if even this flag
            # cannot be written, reopening sees the file equal to the version
            # and sets it, so the client is not told a landed commit failed.
            with suppress(sqlite3.Error):
                self.engine.conn.execute(
                    "UPDATE versions SET file_written = 1 WHERE version = ?", (tx.staged.version,)
                )
            faults.reached("after_mark_written")

    def _note_journal(self) -> None:
        """After a write's COMMIT: is a checkpoint due (`config.caller_checkpoints`)?"""
        if self.engine.config.caller_checkpoints:
            self.checkpoint_due = self._journal_bytes() > WAL_CHECKPOINT_BYTES

    def _journal_bytes(self) -> int:
        """The size of the sidecar's WAL file: one stat (see `WAL_CHECKPOINT_BYTES`)."""
        try:
            return os.stat(f"{self.engine.sidecar_path}-wal").st_size
        except OSError:
            return 0

    def checkpoint(self) -> None:
        """Copy the WAL into the database (PASSIVE: it never waits), as SQLite's own
        automatic checkpoint would (`config.caller_checkpoints`); fsyncs both files."""
        self.checkpoint_due = False
        try:
            self.engine.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.OperationalError as exc:
            if is_storage_fault(exc):
                raise sidecar_refused(self.engine.sidecar_path, exc) from None
            raise

    def _raise_if_moved(self, now: datetime) -> None:
        """Before a write lands: the file must still be the one its version was based on.

        If it moved, the host is saving (or just saved): the write waits for that
        save to settle and be recorded, then runs again under the usual rules.
        """
        settle = self.engine.settle
        stamp = self.engine.doc.stat()
        if stamp != settle.known:
            settle.look(now, stamp)
            raise FileSettling(settle.deadline or now)

    def _take_prepared(self, tx: Tx, data: bytes) -> Path:
        """The staged bytes' fsynced temp file: the one being written, or a new one."""
        prepared, tx.prepared = tx.prepared, None
        if prepared is not None:
            if prepared.holds(data):
                try:
                    prepared.filled.result()  # raises the write's OSError
                except BaseException:
                    self._drop_prepared(prepared)
                    raise
                os.close(prepared.fd)
                return prepared.temp
            self._drop_prepared(prepared)
        return self.engine.doc.prepare(data)

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
            self.engine.doc.discard(prepared.temp)

    def prepare_on_writer(self, data: bytes | BytePieces) -> PreparedFile | None:
        """Start writing `data` to a temp file on the writer thread (`DocumentFile.fill_temp`).

        `data` may be pieces (a replacement's head, new bytes and tail): then the writer
        thread also reads the file back into one `bytes` (`PreparedFile.read_back`), and
        nobody joins them holding the interpreter lock.

        None when the folder refuses the temp file: `_take_prepared` writes it again
        before COMMIT, where the refusal is reported as a refused write.
        """
        doc = self.engine.doc
        try:
            fd, temp = doc.open_temp()
        except OSError:
            return None
        read_back: Future[bytes] | None = None
        fill: Callable[..., None] = doc.fill_temp
        held: bytes | Future[bytes]
        if isinstance(data, bytes):
            held = data
        else:
            read_back = Future()
            held = read_back
            fill = partial(doc.fill_temp, read_back=read_back)
        try:
            filled = self._doc_writer().submit(self.as_bulk(byte_size(data), fill), fd, data)
        except BaseException:
            os.close(fd)
            doc.discard(temp)
            raise
        if read_back is not None:
            filled.add_done_callback(partial(_never_left_waiting, read_back))
        return PreparedFile(held, fd, temp, filled)

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
        fd = os.open(f"{self.engine.sidecar_path}-wal", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _never_left_waiting(read_back: Future[bytes], filled: Future[None]) -> None:
    """The writer's job ended: if it never got to read the file back (it failed before
    `DocumentFile.fill_temp` ran), say so, so the committing thread does not wait."""
    if not read_back.done():
        read_back.set_exception(OSError("the temp file was not written"))
