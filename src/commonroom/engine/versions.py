"""The room's versions: the snapshot cache and the version writes.

Theory of operation
-------------------
A version in memory is an `engine.snapshot.Snapshot`. The current one holds
its text, outline, block layout and heading index; an old one, read again,
comes back as a stored outline (its heading index, read a chunk at a time),
and old ones are evicted, oldest use first, past `SNAPSHOT_CACHE_BYTES`.

A write (`write_version`, `write_replacement`) costs what it changed: the
changed stretch is known (or found at C speed), the outline is re-scanned
around it only, and its storage is one call (`store.versions.store_version`:
blocks, manifest, heading index and row together). The new bytes' temp file is
started on the writer thread first (`engine.txn`), the write is staged on the
transaction, `change.committed` is emitted and the `on_document_change` hooks
run. What the commit order then does with the staged bytes is `engine.txn`'s.
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING

from commonroom.engine.content_hash import HashMarks, hash_marked
from commonroom.engine.history import StoredOutline, build_index, load_index
from commonroom.engine.regions import WHOLE, Outline, Span
from commonroom.engine.settle import FileSettling
from commonroom.engine.snapshot import SNAPSHOT_CACHE_BYTES, Snapshot
from commonroom.engine.text import decode_text, encode_text
from commonroom.engine.tx import StagedWrite, Tx
from commonroom.engine.txn import BULK_BYTES
from commonroom.protocol import events as ev
from commonroom.protocol.errors import CommonroomError
from commonroom.store import blobs, faults
from commonroom.store.document import BytePieces, byte_size
from commonroom.store.versions import VersionRow, store_index, store_version

if TYPE_CHECKING:
    from commonroom.engine.core import Engine


class Versions:
    """The current version number, the snapshot cache, and every version write."""

    def __init__(self, engine: Engine, current_version: int = 0) -> None:
        self.engine = engine
        self.current_version = current_version
        self.cache: OrderedDict[int, Snapshot] = OrderedDict()

    # ------------------------------------------------------------ reading

    def current(self) -> Snapshot:
        return self.snapshot(self.current_version)

    def snapshot(self, version: int) -> Snapshot:
        cached = self.cache.get(version)
        if cached is not None and (cached.in_memory or version != self.current_version):
            self.cache.move_to_end(version)
            return cached
        row = self.engine.conn.execute(
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
        index = load_index(self.engine.conn, version)
        if index is not None and version != self.current_version:
            # an old version: its heading index only, no text
            outline = StoredOutline(self.engine.conn, blobs.Manifest(self.engine.conn, manifest), index)
            return self._remember(Snapshot(version, None, content_hash, outline))
        data, layout = blobs.load_layout(self.engine.conn, manifest)
        marks = hash_marked(data)
        if marks.hexdigest != content_hash:
            raise RuntimeError(f"version {version} does not match its content hash")
        full = Outline(decode_text(data))
        full.backed_by(data)
        if index is None:
            # a version written before the heading index: backfill it, best effort
            index = build_index(full, data, layout)
            with suppress(sqlite3.Error):
                store_index(self.engine.conn, version, index)
        if version != self.current_version:
            outline = StoredOutline(self.engine.conn, blobs.Manifest.of(layout.ids), index)
            return self._remember(Snapshot(version, None, content_hash, outline))
        return self._remember(Snapshot(version, data, content_hash, full, layout, index, hash_marks=marks))

    def _remember(self, snap: Snapshot) -> Snapshot:
        """Cache `snap`; old versions are evicted, oldest use first, past SNAPSHOT_CACHE_BYTES."""
        cache = self.cache
        cache[snap.version] = snap
        cache.move_to_end(snap.version)
        total = sum(s.footprint() for v, s in cache.items() if v != self.current_version)
        for version in list(cache):
            if total <= SNAPSHOT_CACHE_BYTES:
                break
            if version != self.current_version and version != snap.version:
                total -= cache.pop(version).footprint()
        return snap

    def forget_since(self, version: int) -> None:
        """The transaction begun at `version` did not stand: drop the versions it made.

        Any version, not only a staged one: an external edit stages no file write,
        and a refused one must not stay the current version in memory only.
        """
        if self.current_version != version:
            for newer in [v for v in self.cache if v > version]:
                del self.cache[newer]
            self.current_version = version

    # ------------------------------------------------------------ writing

    def insert(
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
        marks: HashMarks | None = None,
    ) -> Snapshot:
        """Store `data` as the next version.

        `outline` is its outline when the caller has it; `edit` says which bytes
        changed against the current version (start, old end, new end), so only
        the blocks around them are cut, hashed and stored again; `text_edit` is the
        same stretch in characters (`Snapshot.edit`); `marks` its content hash when
        the caller computed it (`hash_of`).
        """
        version = self.current_version + 1
        before = self.cache.get(self.current_version)
        if marks is None:
            marks = self.hash_of(data, edit)
        content_hash = marks.hexdigest
        if outline is None:
            outline = Outline(decode_text(data))
        outline.backed_by(data)  # one-byte text: its bytes are its text (`document_text`)
        previous = before.index if before is not None else None
        same_paths = previous is not None and before is not None and outline._paths is before.outline._paths
        new_outline = outline
        row = VersionRow(version, content_hash, len(data), summary, participant_id, region, source,
                         proposal_id, tx.now_s)
        layout, index = store_version(
            tx.conn, row, data, previous=before.layout if before is not None else None,
            edit=edit if before is not None and before.layout is not None else None,
            index_of=lambda layout: build_index(
                new_outline, data, layout, previous.headings if same_paths and previous else None,
                previous if edit is not None else None,
            ),
        )
        self.current_version = version  # (in memory only: the point below is the same on disk)
        faults.reached("after_version_row")
        if before is not None:
            # the version it supersedes leaves memory with its text; read again, it
            # comes back as a stored outline (its heading index, a chunk at a time)
            self.cache.pop(before.version, None)
        return self._remember(
            Snapshot(version, data, content_hash, outline, layout, index, text_edit, hash_marks=marks)
        )

    def hash_of(self, data: bytes | BytePieces, edit: tuple[int, int, int] | None, *,
                pause: Callable[[], object] | None = None) -> HashMarks:
        """The content hash of `data`, the next version: only the bytes from `edit`'s
        start on are hashed again (`engine.content_hash`; `pause` as there)."""
        before = self.cache.get(self.current_version)
        if before is None or edit is None:
            return hash_marked(data, pause=pause)
        return hash_marked(data, before.hash_marks, edit[0], pause=pause)

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
        if len(before.data) == before.outline._size() and len(data) == len(new_text):
            edit = blobs.changed_range(before.data, data)
            start, old_end, new_end = edit
            outline = before.outline.replaced(
                Span(WHOLE, start, old_end), new_text[start:new_end], text=new_text
            )
        return self._write(
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
        outline: Outline | Callable[[], Outline] | None = None,
    ) -> Snapshot:
        """`write_version` of the current text with `span` replaced by `content`.

        The cost follows the change: the new bytes are the old ones around the
        new content (one copy), the outline is re-scanned around the change
        only (`Outline.replaced`) and only the blocks around it are stored.
        `outline`, when given, is ``current().outline.replaced(span, content)``
        already built by the caller (it holds the new text too), or what builds it (and
        may refuse the change by raising): that is called once the new bytes' temp file is
        being written, so building the new text overlaps the write.
        """
        before = self.current()
        old_data, old_outline = before.data, before.outline
        if len(old_data) == old_outline._size():  # one byte per character: offsets agree
            byte_start, byte_end = span.start, span.end
        else:
            byte_start = len(encode_text(old_outline.window(0, span.start)))
            byte_end = byte_start + len(encode_text(old_outline.window(span.start, span.end)))
        raw = encode_text(content)
        view = memoryview(old_data)
        pieces = (view[:byte_start], raw, view[byte_end:])
        # A large version's bytes are joined by the writer thread reading its temp file
        # back (`Transactions.prepare_on_writer`): no 10 MB copy holding the lock here.
        data = pieces if len(old_data) - (byte_end - byte_start) + len(raw) >= BULK_BYTES \
            else b"".join(pieces)
        return self._write(
            tx, data,
            outline if outline is not None else lambda: before.outline.replaced(span, content),
            (byte_start, byte_end, byte_start + len(raw)),
            (span.start, span.end, span.start + len(content)), summary=summary,
            participant_id=participant_id, region=region, source=source, proposal_id=proposal_id,
            reverts=reverts, restores=restores,
        )

    def record_external_edit(self, tx: Tx, data: bytes, *, found_at_open: bool) -> None:
        """The file settled as `data`: its version, already on disk (`engine.watch`).

        `found_at_open`: the edit was made while no room ran, so nobody is typing
        now and it holds nothing (`Tx.edit_found_at_open`, read by the hold hook).
        """
        text = decode_text(data)
        find_undone = self.engine.hooks.undone_by_save
        tx.edit_found_at_open = found_at_open
        self.write_version(
            tx, text, summary="external edit", participant_id=None, region=WHOLE, source="external",
            undoes=None if find_undone is None else find_undone(tx, self.current(), text),
        )
        tx.conn.execute(
            "UPDATE versions SET file_written = 1 WHERE version = ?", (self.current_version,)
        )

    def _write(
        self,
        tx: Tx,
        data: bytes | BytePieces,
        outline: Outline | Callable[[], Outline] | None,
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
        """Store and stage the new bytes (or the pieces they are, from `write_replacement`);
        `edit` and `text_edit` hold the changed stretch in bytes and in characters when the
        caller knows it (`insert`). `outline` is the new outline, or what builds it once
        the temp file is being written (`write_replacement`)."""
        engine = self.engine
        before = self.current()
        if source != "external" and engine.settle.settling:
            # Never write over a save in progress: the room waits for it, records
            # it, and runs this operation again (`room.core.Room.execute`).
            raise FileSettling(engine.settle.deadline or tx.now)
        if source != "external" and engine.file_problem is None and tx.prepared is None:
            # The temp file is written and fsynced on the writer thread while the hash
            # thread hashes the bytes and this one builds the outline and stores them;
            # the transaction waits for the file before COMMIT.
            tx.prepared = engine.txn.prepare_on_writer(data)
        if not isinstance(data, bytes) and tx.prepared is None:  # no temp file on the writer
            data = b"".join(data)
        size = byte_size(data)
        if size >= BULK_BYTES:  # hashed beside the outline's build, on the hash thread
            hashing = engine.txn.hash_thread().submit(engine.txn.as_bulk(size, self.hash_of),
                                                      data, edit)
            if callable(outline):
                outline = outline()
            marks = hashing.result()
        else:  # a small one: a thread hop would cost more than its hash
            marks = self.hash_of(data, edit)
            if callable(outline):
                outline = outline()
        if not isinstance(data, bytes):  # the bytes the writer read back from the file
            assert tx.prepared is not None
            read = tx.prepared.read_back()
            # None: the write failed, and is refused at COMMIT (`Transactions._take_prepared`)
            data = b"".join(data) if read is None else read
        snap = self.insert(
            tx, data, summary, participant_id, region, source, proposal_id, outline=outline, edit=edit,
            text_edit=text_edit, marks=marks,
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

    def _after_change(self, tx: Tx, before: Snapshot, after: Snapshot, committed_proposal: str | None
                      ) -> None:
        for hook in self.engine.hooks.on_document_change:
            hook(tx, before, after, committed_proposal)
