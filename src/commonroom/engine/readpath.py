"""The read path: read-only operations on their own connection, never behind a commit.

Theory of operation
-------------------
Every write runs on the engine's connection (`Engine.conn`) in the commit order
of `engine.txn`; a 10 MB commit holds it for the temp file's write and fsync.
A read-only operation (`OperationSpec.read_only`) does not wait for that: it runs
on a connection of its own (`Reader.conn`, the same sidecar in WAL mode, with
``query_only`` on), in a DEFERRED transaction, which is a consistent snapshot of
the last COMMIT.

What a reader must never see is a half-made version: between a document write's
COMMIT and its rename (a rename that fails undoes the committed transaction).
So a commit that changes the version holds the *gate* (`ReadPath.gate`) from just
before its COMMIT until its file is renamed into place (nothing can undo it then),
or it is undone (`Transactions.open`); a reader takes the gate only to BEGIN, take its snapshot
and pin the version the snapshot says is current. The long part of a commit (the
temp file's write and fsync, before COMMIT) never holds it.

A light read that finds the gate closed does not wait for the commit's WAL fsync
and rename either: just before it takes the gate, the writer pins a *standby*
snapshot (`ReadPath.pin_before_commit`): a read transaction begun on a third
connection while the new version was not yet committed, so it holds exactly the
version before it, whose file is still in place. Light reads during the commit's
landing share that transaction (`Standby`), one at a time; once the gate opens it
is ended. A writer that finds the standby in use does not pin, and readers then
wait for the gate as before.

The text a reader answers is the version its own snapshot holds: the writer
publishes each new current `Snapshot` under the gate (`publish`) once it landed,
so the pinned one is found by version id; a reader whose snapshot is another
version (none published yet) loads it from the store. Snapshots are immutable
once made: a later version's write builds new lists and never changes them.

A read does not write. Before an operation the writer's path looks at the file
and applies due expiries (`Engine.refresh`), which may record a version; the read
path does neither: it answers `None` (the caller runs the operation the writer's
way) when the file's stamp is not the one the current version has, a change is
settling, or an expiry is due in its snapshot (`RefreshDue`). It never touches
the settle state. The file is looked at holding the gate: a commit tells the
settle its file's new stamp before it lets readers in.

What a read handler touches of the engine's memory is safe beside the writer's
thread: the read transaction sees an `Engine` view whose `conn` and `versions`
are the reader's own; presence and the live keys take locks; the settle state
and the file's problem are only read.

One read transaction at a time uses a connection (`Reader.lock`): the
interpreter lock gives no parallelism worth a pool, and what matters is not
waiting behind fsyncs. There are two: one for every read, one for the heavy
reads (`limits.HEAVY_READS`), whose transaction loads whole old versions.
Where they run is the room's choice (`room.core`).
"""

from __future__ import annotations

import copy
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from commonroom.engine.snapshot import Snapshot
from commonroom.engine.storage_errors import is_storage_fault, sidecar_refused
from commonroom.engine.tx import Tx
from commonroom.engine.versions import Versions
from commonroom.protocol.errors import CommonroomError

if TYPE_CHECKING:
    from commonroom.engine.core import Engine

# How long a reader waits for SQLite's own locks (a WAL restart, recovery): never
# behind a writer's transaction, which WAL readers do not wait for.
READ_BUSY_TIMEOUT_MS = 5000


def open_read_connection(sidecar_path: Path) -> sqlite3.Connection:
    """A second connection to the sidecar, in WAL mode already (the writer's set it), that
    refuses every write (``query_only``): a read that tried one would fail, not write."""
    conn = sqlite3.connect(sidecar_path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout={READ_BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only=ON")
        # A first read opens the journal's files now, not during the first request
        # (a room's descriptors are all open once it is up).
        conn.execute("SELECT count(*) FROM meta").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


class ReadPath:
    """The gate commits hold, the published current version, and the readers' connections:
    one for every read, one for the heavy reads (`limits.HEAVY_READS`: a diff's transaction
    loads whole old versions), so a status never waits behind a diff's transaction either."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Held by a commit that changes the version from before COMMIT until its file is
        # renamed (or it is undone); a reader holds it only while it begins (module docstring).
        self.gate = threading.Lock()
        self._latest: Snapshot | None = None  # set under `gate`
        self.light = Reader(self, open_read_connection(engine.sidecar_path))
        self.heavy = Reader(self, None)  # its connection opens at its first read
        self.standby = Standby(self)

    def close(self) -> None:
        self.light.close()
        self.heavy.close()
        self.standby.close()

    def pin_before_commit(self) -> None:
        """The writer, its new version not yet committed and the gate not yet taken:
        pin the snapshot of the version before it for light reads during the landing.
        Never waits: a standby in use is left unpinned (readers wait for the gate)."""
        self.standby.pin(self._latest)

    def unpin(self) -> None:
        """The writer, once the gate is open again: the standby snapshot is ended."""
        self.standby.unpin()

    def publish(self, snap: Snapshot) -> None:
        """The writer, holding `gate` (or before any reader exists): `snap` is now current."""
        self._latest = snap

    def reader(self, *, heavy: bool) -> Reader:
        return self.heavy if heavy else self.light


class Reader:
    """One read connection: one read transaction at a time (`lock`), whose holder also owns
    the connection's cache of old versions and of the next expiry."""

    def __init__(self, path: ReadPath, conn: sqlite3.Connection | None) -> None:
        self.path = path
        self.engine = path.engine
        self._conn = conn
        self.lock = threading.Lock()
        # Old versions this connection loaded (their outlines read blocks through it).
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        # (PRAGMA data_version, the earliest due expiry then): asked before every read.
        self._expiry: tuple[int, datetime | None] | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection (opened now if it was not yet); the caller holds `lock`."""
        if self._conn is None:
            try:
                self._conn = open_read_connection(self.engine.sidecar_path)
            except sqlite3.Error as exc:
                raise sidecar_refused(self.engine.sidecar_path, exc) from None
        return self._conn

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def transaction(self, now: datetime, *, block: bool = True) -> Iterator[Tx]:
        """One read transaction on its snapshot; the caller holds `lock`.

        Yields a `Tx` whose engine is a view of the engine at the snapshot's version;
        its `after_commit` hooks (presence) run once it ended without error. With
        `block=False` a commit that is landing raises `GateClosed` instead of waiting.
        """
        conn = self.conn
        gate = self.path.gate
        if not gate.acquire(blocking=block):
            raise GateClosed
        try:
            try:
                # Looked at holding the gate: a commit's own rename is never taken for a
                # change (it tells the settle its stamp before it lets readers in).
                if self.engine.file.moved():
                    raise RefreshDue
                conn.execute("BEGIN DEFERRED")
                try:
                    version = int(conn.execute("SELECT max(version) FROM versions").fetchone()[0])
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                latest = self.path._latest
            finally:
                gate.release()
        except sqlite3.OperationalError as exc:
            if is_storage_fault(exc):
                raise sidecar_refused(self.engine.sidecar_path, exc) from None
            raise
        view = self._view(version, latest if latest is not None and latest.version == version
                          else None)
        tx = Tx(view, conn, now)
        try:
            yield tx
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")  # a read: nothing to keep
        for hook in tx.after_commit:
            hook()

    def raise_if_expiry_due(self, tx: Tx) -> None:
        """`RefreshDue` when an expiry is due at `tx.now` in this snapshot (the writer's
        path applies it first).

        The earliest due time is kept until another connection commits (SQLite's
        `data_version` moves), so an idle room costs one pragma per read.
        """
        stamp = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        cached = self._expiry
        if cached is None or cached[0] != stamp:
            finders = self.engine.hooks.next_expiry
            times = [due for find in finders if (due := find(tx)) is not None]
            cached = self._expiry = (stamp, min(times) if times else None)
        if cached[1] is not None and cached[1] <= tx.now:
            raise RefreshDue

    def _view(self, version: int, pinned: Snapshot | None) -> Engine:
        """The engine as this read sees it: its connection, and `version` current.

        A shallow copy: everything else (presence, live keys, the file's state, the
        hooks) is the engine's own, shared and safe to read from this thread.
        """
        view = copy.copy(self.engine)
        view.conn = self.conn
        versions = Versions(view, version)
        cache = self._cache
        for old in [v for v, snap in cache.items() if snap.in_memory or v >= version]:
            del cache[old]  # a current version of before, or one this snapshot does not have
        if pinned is not None:
            cache[version] = pinned
        versions.cache = cache
        view.versions = versions
        return view


class Standby(Reader):
    """The snapshot of the version before a landing commit (module docstring).

    `state` guards `pinned` and the end of the pinned transaction: a reader releases
    the connection's `lock` only holding it, so `unpin` either finds the connection
    free and ends the transaction itself, or the reader still inside it ends it.
    """

    def __init__(self, path: ReadPath) -> None:
        super().__init__(path, None)
        self.state = threading.Lock()
        # (the pinned version, its published snapshot if it is that version) or None.
        self.pinned: tuple[int, Snapshot | None] | None = None

    def pin(self, latest: Snapshot | None) -> None:
        if not self.lock.acquire(blocking=False):
            return
        try:
            with self.state:
                conn = self.conn
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                conn.execute("BEGIN DEFERRED")
                try:
                    version = conn.execute("SELECT max(version) FROM versions").fetchone()[0]
                    if version is None:  # the first version: nothing before it to answer
                        raise LookupError("no version yet")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                self.pinned = (version, latest if latest is not None
                               and latest.version == version else None)
        except (sqlite3.Error, CommonroomError, LookupError):
            self.pinned = None  # not pinned: readers wait for the gate, nothing is lost
        finally:
            self.lock.release()

    def unpin(self) -> None:
        with self.state:
            self.pinned = None
            if self.lock.acquire(blocking=False):
                try:
                    self._end()
                finally:
                    self.lock.release()

    def _end(self) -> None:
        conn = self._conn
        if conn is not None and conn.in_transaction:
            with suppress(sqlite3.Error):  # a read transaction: nothing of it to keep either way
                conn.execute("ROLLBACK")

    @contextmanager
    def pinned_transaction(self, now: datetime, *, block: bool) -> Iterator[Tx | None]:
        """A read transaction on the pinned snapshot, or None (not pinned, or with
        `block=False` in use). The caller does not hold `lock`: this takes it."""
        if not self.lock.acquire(blocking=block):
            yield None
            return
        try:
            pinned = self.pinned
            tx: Tx | None = None
            if pinned is not None:
                version, snap = pinned
                tx = Tx(self._view(version, snap), self.conn, now)
            yield tx
        finally:
            with self.state:
                if self.pinned is None:
                    self._end()
                self.lock.release()
        if tx is not None:
            for hook in tx.after_commit:
                hook()

    def close(self) -> None:
        with self.state:
            self.pinned = None
        super().close()


class GateClosed(Exception):
    """A commit is landing (it holds the gate) and the reader asked not to wait."""


class RefreshDue(Exception):
    """The file moved or an expiry is due: the writer's path records it first."""
