"""The engine: one room's rules over its sidecar and its file.

Theory of operation
-------------------
`Engine.execute(name, bearer, params)` is the one entry point adapters reach
(through the room service, which runs it on the single store thread):

1. the file is checked with one `stat`; if it changed, its content becomes a
   version (`external edit`) before anything else reads or writes;
2. due lease and session expiries are applied (so an expired lease never
   blocks anyone, even between sweeper wake-ups);
3. the bearer is authenticated and the operation's capability checked;
4. the operation's handler runs inside one SQLite transaction and appends its
   events there; a handler that changes the document stages the new bytes;
5. commit order for a document change: the new version row and its events are
   written, the new file content is written to a temp file and fsynced, the
   transaction commits, the temp file is renamed over the document, and the
   version is marked as written. A crash between commit and rename leaves a
   version marked unwritten whose predecessor is on disk: reopening rolls it
   forward. A crash before commit leaves only a stray temp file.

`execute` never raises a `CommonroomError`: it returns an `Outcome` holding
the result or the error *and* the events that did commit (an expiry swept on
the way, or a proposal marked `conflicted` by a refused commit), so the room
can publish them either way.

The engine does no networking, runs no threads, and reads time only from the
injected clock.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

import attrs

from commonroom.engine import limits
from commonroom.engine.history import HeadingIndex, StoredOutline, build_index, load_index, store_index
from commonroom.engine.records import Actor, Event
from commonroom.engine.regions import WHOLE, Outline, Span
from commonroom.protocol.capabilities import HOST
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import Clock, format_ts, system_clock
from commonroom.store import blobs
from commonroom.store.document import DocumentFile
from commonroom.store.schema import migrate

SIDECAR_SUFFIX = ".commonroom.db"


def new_id(prefix: str, nbytes: int = 12) -> str:
    return prefix + secrets.token_urlsafe(nbytes)


def new_workspace_id() -> str:
    return "ws_" + base64.b32encode(secrets.token_bytes(16)).decode("ascii").lower()[:26]


def hash_secret(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


def decode_text(data: bytes) -> str:
    # surrogateescape keeps any byte sequence round-trippable, so a file that
    # is not valid UTF-8 still reads back byte-exact. (Strict first: for valid
    # UTF-8 it is the same text, and many times faster.)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


def encode_text(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


SNAPSHOT_CACHE_BYTES: Final = 16 * 1024 * 1024
"""What the cached outlines of old versions may take in memory, about (their heading
indexes and block ids; an old version's text is never cached). The current
version, text and all, is outside this bound: it is always in memory."""


class Snapshot:
    """One version of the document, parsed once and shared while cached.

    The current version has its bytes, text and full outline in memory; an
    old one only its `StoredOutline` (regions are read from their blocks), and
    `data`/`text` load the whole version when asked.
    """

    __slots__ = ("_data", "content_hash", "index", "layout", "outline", "version")

    def __init__(
        self,
        version: int,
        data: bytes | None,
        content_hash: str,
        outline: Outline,
        layout: blobs.Layout | None = None,
        index: HeadingIndex | None = None,
    ) -> None:
        self.version = version
        self._data = data
        self.content_hash = content_hash
        self.outline = outline
        self.layout = layout
        """Where the blocks lie (the current version: new versions are stored against it)."""
        self.index = index
        """Its heading index (the current version: the next one's is built from it)."""

    @property
    def data(self) -> bytes:
        if self._data is not None:
            return self._data
        data = self.outline.data() if isinstance(self.outline, StoredOutline) else encode_text(self.text)
        if sha256_hex(data) != self.content_hash:
            raise RuntimeError(f"version {self.version} does not match its content hash")
        return data

    @property
    def text(self) -> str:
        return self.outline.text

    @property
    def in_memory(self) -> bool:
        """Is the whole text held (the current version)?"""
        return self._data is not None

    def footprint(self) -> int:
        """About what it holds in memory, in bytes."""
        if isinstance(self.outline, StoredOutline):
            return self.outline.footprint()
        size = len(self._data or b"")
        return 2 * size + 200 * len(self.outline._starts) + 1024


@attrs.frozen
class Outcome:
    result: Any
    error: CommonroomError | None
    events: list[Event]


@attrs.define
class StagedWrite:
    version: int
    data: bytes
    temp_path: Path | None = None


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
        self.deferred_error: CommonroomError | None = None

    @property
    def actor(self) -> Actor:
        assert self.actor_or_none is not None, "operation needs an authenticated actor"
        return self.actor_or_none

    def emit(self, type_: str, **payload: Any) -> None:
        cur = self.conn.execute(
            "INSERT INTO events (type, created_at, payload) VALUES (?, ?, ?)",
            (type_, self.now_s, json.dumps(payload, separators=(",", ":"))),
        )
        event_id = cur.lastrowid
        assert event_id is not None
        # The ring: one indexed range delete; only the row that fell off is
        # left below the bound, so the cost does not grow with history.
        self.conn.execute("DELETE FROM events WHERE event_id <= ?", (event_id - limits.EVENT_RING,))
        self.events.append(Event(event_id, type_, self.now_s, payload))

    def fail_after_commit(self, error: CommonroomError) -> None:
        """Commit what the handler wrote (e.g. a proposal marked conflicted), then fail."""
        self.deferred_error = error


Handler = Callable[[Tx, Any], Any]


class Engine:
    def __init__(
        self,
        path: Path,
        *,
        sidecar: Path | None = None,
        clock: Clock = system_clock,
        name: str | None = None,
    ) -> None:
        self.path = Path(path).resolve()
        self.sidecar_path = sidecar or self.path.with_name(self.path.name + SIDECAR_SUFFIX)
        self.clock = clock
        self.doc = DocumentFile(self.path)
        self.transport_hint: TransportHint | None = None
        self.transport_name = "none"
        self.lifecycle = "open"
        # Presence is a room-process fact (who called in the last 90 s); it is
        # kept in memory and written to the sidecar only when a participant leaves.
        self.last_seen: dict[str, datetime] = {}
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()
        self.conn = sqlite3.connect(
            self.sidecar_path, isolation_level=None, check_same_thread=False
        )
        self.conn.execute("PRAGMA journal_mode=WAL")
        # FULL: an acknowledged commit survives power loss, not only kill -9.
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        migrate(self.conn)
        self._open(name)

    # ------------------------------------------------------------------ setup

    def close(self) -> None:
        self.conn.close()

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _open(self, name: str | None) -> None:
        self._remove_stray_temp_files()
        now = self.clock()
        if self._meta("workspace_id") is None:
            data = self.doc.read() if self.doc.exists() else b""
            if not self.doc.exists():
                self.doc.write(data)
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
                tx.conn.execute(
                    "INSERT INTO participants (participant_id, kind, name, capabilities,"
                    " joined_at, is_host) VALUES (?, 'human', 'host', ?, ?, 1)",
                    (new_id("pt_"), json.dumps(list(HOST)), tx.now_s),
                )
                self._insert_version(tx, data, "initial version", None, None, "initial", None)
                tx.conn.execute("UPDATE versions SET file_written = 1 WHERE version = 1")
                tx.emit("workspace.created", version=1)
        else:
            self.workspace_id = str(self._meta("workspace_id"))
            row = self.conn.execute("SELECT max(version) FROM versions").fetchone()
            self.current_version = int(row[0])
            self._recover(now)
        self.name = str(self._meta("name"))
        saved_hint = self._meta("transport_hint")
        if saved_hint and saved_hint != "null":
            self.transport_hint = TransportHint(**json.loads(saved_hint))
            self.transport_name = self.transport_hint.type
        host = self.conn.execute(
            "SELECT participant_id FROM participants WHERE is_host = 1"
        ).fetchone()
        self.host_participant_id = str(host[0])

    def _remove_stray_temp_files(self) -> None:
        prefix = f".{self.path.name}."
        for entry in self.path.parent.glob(prefix + "*.tmp"):
            with suppress(OSError):
                entry.unlink()

    def _recover(self, now: datetime) -> None:
        """Bring file and sidecar together after a stop or a crash (PROTOCOL.md section 15)."""
        latest = self.snapshot(self.current_version)
        written = self.conn.execute(
            "SELECT file_written FROM versions WHERE version = ?", (self.current_version,)
        ).fetchone()[0]
        if not self.doc.exists():
            # The file vanished: the room's last version is the best copy there is.
            self.doc.write(latest.data)
            return
        data = self.doc.read()
        digest = sha256_hex(data)
        if digest == latest.content_hash:
            if not written:
                self.conn.execute(
                    "UPDATE versions SET file_written = 1 WHERE version = ?", (latest.version,)
                )
            return
        if not written and latest.version > 1:
            before = self.snapshot(latest.version - 1)
            if digest == before.content_hash:
                # Crash between sidecar commit and rename: finish the write.
                self.doc.write(latest.data)
                self.conn.execute(
                    "UPDATE versions SET file_written = 1 WHERE version = ?", (latest.version,)
                )
                return
        # The file wins: someone edited it while the room was closed.
        with self.transaction(now) as tx:
            self._record_external_edit(tx, data)

    # ---------------------------------------------------------- transactions

    @contextmanager
    def transaction(self, now: datetime, *, write: bool = True) -> Iterator[Tx]:
        """One SQLite transaction; read operations (`write=False`) begin DEFERRED and
        so take no write lock."""
        tx = Tx(self, self.conn, now)
        self.conn.execute("BEGIN IMMEDIATE" if write else "BEGIN DEFERRED")
        try:
            yield tx
            if tx.staged is not None:
                tx.staged.temp_path = self.doc.prepare(tx.staged.data)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            if tx.staged is not None and tx.staged.temp_path is not None:
                self.doc.discard(tx.staged.temp_path)
            self._forget_uncommitted(tx)
            raise
        if tx.staged is not None:
            assert tx.staged.temp_path is not None
            self.doc.install(tx.staged.temp_path)
            self.conn.execute(
                "UPDATE versions SET file_written = 1 WHERE version = ?", (tx.staged.version,)
            )

    def _forget_uncommitted(self, tx: Tx) -> None:
        if tx.staged is not None:
            self._snapshots.pop(tx.staged.version, None)
            row = self.conn.execute("SELECT max(version) FROM versions").fetchone()
            self.current_version = int(row[0])

    # --------------------------------------------------------------- execute

    def execute(
        self,
        name: str,
        bearer: str | None,
        raw_params: Mapping[str, Any],
        *,
        from_query: bool = False,
    ) -> Outcome:
        from commonroom.engine.operations import OPERATIONS_BY_NAME
        from commonroom.engine.params import parse_params

        events: list[Event] = []
        try:
            op = OPERATIONS_BY_NAME.get(name)
            if op is None:
                raise CommonroomError("invalid_request", f"unknown operation {name!r}")
            params = parse_params(op.params, raw_params, from_query=from_query)
            now = self.clock()
            events.extend(self.refresh(now))
            with self.transaction(now, write=not op.read_only) as tx:
                if op.capability is not None:
                    tx.actor_or_none = self.authenticate(tx, bearer)
                    op.check(tx.actor.capabilities, params)
                result = op.handler(tx, params)
            events.extend(tx.events)
            if tx.deferred_error is not None:
                return Outcome(None, tx.deferred_error, events)
            return Outcome(result, None, events)
        except CommonroomError as error:
            return Outcome(None, error, events)

    def authorize(self, bearer: str | None, capability: str) -> Outcome:
        """For streams, which are not operations: authenticate and check one capability.

        The result is the `Actor`; the events are any expiries applied on the way.
        """
        from commonroom.protocol.capabilities import require

        events: list[Event] = []
        try:
            now = self.clock()
            events.extend(self.refresh(now))
            with self.transaction(now) as tx:
                actor = self.authenticate(tx, bearer)
                require(actor.capabilities, capability)
            return Outcome(actor, None, events)
        except CommonroomError as error:
            return Outcome(None, error, events)

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

    def refresh(self, now: datetime) -> list[Event]:
        """External edits and due expiries, each committed on its own; returns their events."""
        events: list[Event] = []
        if self.doc.changed():
            if not self.doc.exists():
                # The file vanished under the room: put the current version back.
                self.doc.write(self.current().data)
                return events
            with self.transaction(now) as tx:
                data = self.doc.read()
                if sha256_hex(data) != self.current().content_hash:
                    self._record_external_edit(tx, data)
            events.extend(tx.events)
        if self._expiry_due(now):
            with self.transaction(now) as tx:
                self._expire(tx)
            events.extend(tx.events)
        return events

    def sweep(self) -> tuple[list[Event], datetime | None]:
        """For the room's sweeper: apply due expiries; return events and the next due time."""
        now = self.clock()
        events = self.refresh(now)
        return events, self.next_expiry()

    def next_expiry(self) -> datetime | None:
        times = [
            row[0]
            for row in self.conn.execute(
                "SELECT min(expires_at) FROM leases WHERE ended_at IS NULL "
                "UNION ALL SELECT min(expires_at) FROM sessions WHERE ended_at IS NULL"
            )
            if row[0] is not None
        ]
        return datetime.fromisoformat(min(times)) if times else None

    def _expiry_due(self, now: datetime) -> bool:
        due = self.next_expiry()
        return due is not None and due <= now

    def _expire(self, tx: Tx) -> None:
        for lease_id, pid, region in tx.conn.execute(
            "SELECT lease_id, participant_id, region FROM leases "
            "WHERE ended_at IS NULL AND expires_at <= ? ORDER BY expires_at",
            (tx.now_s,),
        ).fetchall():
            tx.conn.execute(
                "UPDATE leases SET ended_at = ?, end_reason = 'expired' WHERE lease_id = ?",
                (tx.now_s, lease_id),
            )
            tx.emit("lease.expired", lease_id=lease_id, participant_id=pid, region=region)
        for session_hash, pid in tx.conn.execute(
            "SELECT session_hash, participant_id FROM sessions "
            "WHERE ended_at IS NULL AND expires_at <= ? ORDER BY expires_at",
            (tx.now_s,),
        ).fetchall():
            tx.conn.execute(
                "UPDATE sessions SET ended_at = ?, end_reason = 'expired' WHERE session_hash = ?",
                (tx.now_s, session_hash),
            )
            tx.emit("session.expired", participant_id=pid)

    # ------------------------------------------------------------ sessions

    def authenticate(self, tx: Tx, bearer: str | None) -> Actor:
        if not bearer:
            raise CommonroomError("unauthorized", "a bearer session is required")
        # Looking up the sha256 of the bearer (never the bearer itself) keeps
        # the comparison from leaking the secret through timing.
        row = tx.conn.execute(
            "SELECT s.participant_id, s.capabilities, s.expires_at, s.ended_at, s.end_reason,"
            " p.kind, p.name FROM sessions s JOIN participants p USING (participant_id)"
            " WHERE s.session_hash = ?",
            (hash_secret(bearer),),
        ).fetchone()
        if row is None:
            raise CommonroomError("unauthorized", "unknown or ended session")
        pid, caps, expires_at, ended_at, end_reason, kind, name = row
        if ended_at is not None:
            if end_reason == "expired":
                raise CommonroomError("session_expired", "the session has expired; join again")
            raise CommonroomError("unauthorized", "unknown or ended session")
        if expires_at <= tx.now_s:
            raise CommonroomError("session_expired", "the session has expired; join again")
        self.last_seen[pid] = tx.now
        return Actor(pid, tuple(json.loads(caps)), hash_secret(bearer), kind, name)

    def session_alive(self, session_hash: bytes) -> bool:
        """For the room's streams: is this session still usable right now?"""
        row = self.conn.execute(
            "SELECT expires_at, ended_at FROM sessions WHERE session_hash = ?", (session_hash,)
        ).fetchone()
        return row is not None and row[1] is None and row[0] > format_ts(self.clock())

    def touch(self, participant_id: str) -> None:
        """A held stream counts as presence."""
        self.last_seen[participant_id] = self.clock()

    def create_session(
        self, tx: Tx, participant_id: str, capabilities: tuple[str, ...], minutes: int
    ) -> tuple[str, str]:
        """Returns (bearer, expires_at). Only the hash is stored."""
        # The limit is on guests: the room's own host sessions (one per start,
        # one per host command without a room) never lock anyone out.
        active = tx.conn.execute(
            "SELECT count(*) FROM sessions WHERE ended_at IS NULL AND expires_at > ?"
            " AND participant_id != ?",
            (tx.now_s, self.host_participant_id),
        ).fetchone()[0]
        if participant_id != self.host_participant_id and active >= limits.MAX_ACTIVE_SESSIONS:
            raise CommonroomError(
                "limit_exceeded",
                f"the room already has {limits.MAX_ACTIVE_SESSIONS} active sessions",
                {"limit": limits.MAX_ACTIVE_SESSIONS},
                retry_after_seconds=60,
            )
        bearer = "ses_" + secrets.token_urlsafe(32)
        expires_at = format_ts(tx.now + timedelta(minutes=minutes))
        tx.conn.execute(
            "INSERT INTO sessions (session_hash, participant_id, capabilities, created_at,"
            " expires_at) VALUES (?, ?, ?, ?, ?)",
            (hash_secret(bearer), participant_id, json.dumps(list(capabilities)), tx.now_s,
             expires_at),
        )
        tx.emit("session.created", participant_id=participant_id, expires_at=expires_at)
        return bearer, expires_at

    def end_host_session(self, bearer: str) -> None:
        """The room stops: its host session ends with it (the credential file is gone too)."""
        with self.transaction(self.clock()) as tx:
            tx.conn.execute(
                "UPDATE sessions SET ended_at = ?, end_reason = 'stopped'"
                " WHERE session_hash = ? AND participant_id = ? AND ended_at IS NULL",
                (tx.now_s, hash_secret(bearer), self.host_participant_id),
            )

    def mint_host_session(self, minutes: int = limits.SESSION_MAX_MINUTES) -> str:
        """A `*` session for the owner page and the host CLI; never in an invitation."""
        with self.transaction(self.clock()) as tx:
            bearer, _ = self.create_session(tx, self.host_participant_id, HOST, minutes)
        return bearer

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
    ) -> Snapshot:
        """Store `data` as the next version.

        `outline` is its outline when the caller has it; `edit` says which bytes
        changed against the current version (start, old end, new end), so only
        the blocks around them are cut, hashed and stored again.
        """
        version = self.current_version + 1
        before = self._snapshots.get(self.current_version)
        if edit is not None and before is not None and before.layout is not None:
            layout = blobs.store_replacement(tx.conn, before.layout, data, *edit)
        else:
            layout = blobs.store_blocks(tx.conn, data)
        digest = sha256_hex(data)
        tx.conn.execute(
            "INSERT INTO versions (version, content_hash, size, manifest, summary, participant_id,"
            " region, source, proposal_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (version, digest, len(data), layout.manifest(tx.conn, before.layout if before else None), summary,
             participant_id, region, source,
             proposal_id, tx.now_s),
        )
        if outline is None:
            outline = Outline(decode_text(data))
        previous = before.index if before is not None else None
        same_paths = previous is not None and before is not None and outline._paths is before.outline._paths
        index = build_index(
            outline, data, layout, previous.headings if same_paths and previous else None,
            previous if edit is not None else None,
        )
        store_index(tx.conn, version, index)
        self.current_version = version
        if before is not None:
            # the version it supersedes leaves memory with its text; read again, it
            # comes back as a stored outline (its heading index, a chunk at a time)
            self._snapshots.pop(before.version, None)
        return self._remember(Snapshot(version, data, digest, outline, layout, index))

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
            tx, data, outline, edit, summary=summary, participant_id=participant_id,
            region=region, source=source, proposal_id=proposal_id,
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
    ) -> Snapshot:
        """`write_version` of the current text with `span` replaced by `content`.

        The cost follows the change: the new bytes are the old ones around the
        new content (one copy), the outline is re-scanned around the change
        only (`Outline.replaced`) and only the blocks around it are stored.
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
        outline = before.outline.replaced(span, content, text=decode_text(data))
        return self._write_version(
            tx, data, outline, (byte_start, byte_end, byte_start + len(raw)), summary=summary,
            participant_id=participant_id, region=region, source=source, proposal_id=proposal_id,
        )

    def _write_version(
        self,
        tx: Tx,
        data: bytes,
        outline: Outline | None,
        edit: tuple[int, int, int] | None,
        *,
        summary: str,
        participant_id: str | None,
        region: str,
        source: str,
        proposal_id: str | None,
    ) -> Snapshot:
        before = self.current()
        snap = self._insert_version(
            tx, data, summary, participant_id, region, source, proposal_id, outline=outline, edit=edit
        )
        if source != "external":
            tx.staged = StagedWrite(snap.version, data)
        tx.emit(
            "change.committed",
            version=snap.version,
            summary=summary,
            participant_id=participant_id,
            region=region,
            source=source,
        )
        self._after_change(tx, before, snap, proposal_id)
        return snap

    def _record_external_edit(self, tx: Tx, data: bytes) -> None:
        self.write_version(
            tx,
            decode_text(data),
            summary="external edit",
            participant_id=None,
            region=WHOLE,
            source="external",
        )
        tx.conn.execute(
            "UPDATE versions SET file_written = 1 WHERE version = ?", (self.current_version,)
        )

    def _after_change(
        self, tx: Tx, before: Snapshot, after: Snapshot, committed_proposal: str | None
    ) -> None:
        # Leases on regions that no longer exist end.
        for lease_id, pid, region in tx.conn.execute(
            "SELECT lease_id, participant_id, region FROM leases WHERE ended_at IS NULL"
        ).fetchall():
            if region != WHOLE and not after.outline.has_path(region):
                tx.conn.execute(
                    "UPDATE leases SET ended_at = ?, end_reason = 'region_removed'"
                    " WHERE lease_id = ?",
                    (tx.now_s, lease_id),
                )
                tx.emit(
                    "lease.released",
                    lease_id=lease_id,
                    participant_id=pid,
                    region=region,
                    reason="region_removed",
                )
        # Pending proposals whose region text moved on are superseded; those on
        # untouched regions stay pending. (Approved ones are left to meet
        # `stale_version` at commit, which carries the recovery fields.)
        from commonroom.engine.proposals import region_digest

        for proposal_id, region, base_digest in tx.conn.execute(
            "SELECT proposal_id, region, base_region_hash FROM proposals WHERE status = 'pending'"
        ).fetchall():
            if proposal_id == committed_proposal:
                continue
            if region_digest(after, region) != base_digest:
                tx.conn.execute(
                    "UPDATE proposals SET status = 'superseded', updated_at = ?"
                    " WHERE proposal_id = ?",
                    (tx.now_s, proposal_id),
                )
                tx.emit("proposal.superseded", proposal_id=proposal_id)

    def resolve(self, region: str, version: int | None = None) -> tuple[Snapshot, Span]:
        snap = self.current() if version is None else self.snapshot(version)
        return snap, snap.outline.resolve(region)
