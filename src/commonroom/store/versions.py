"""A version's storage, in one call: its blocks, its manifest, its heading index and its row.

`store_version` is the storage half of a version write (`engine.versions`): the
bytes are stored as content-addressed blocks (only those around `edit` are cut
and hashed again), the manifest pieces shared with the previous layout are
reused, the heading index the engine builds from the new layout is stored, and
the version row is inserted. The engine knows what a heading is; this module
knows only that an index stores itself (`StorableIndex`), so the store stays
below the engine.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Protocol, TypeVar

import attrs

from commonroom.store import blobs


class StorableIndex(Protocol):
    """What the store keeps of a version's heading index (`engine.history.HeadingIndex`)."""

    @property
    def chars(self) -> int: ...

    @property
    def headings(self) -> bytes: ...

    def store_positions(self, conn: sqlite3.Connection) -> bytes: ...


IndexT = TypeVar("IndexT", bound=StorableIndex)


@attrs.frozen
class VersionRow:
    """The `versions` row of a new version (its manifest is added by `store_version`)."""

    version: int
    content_hash: str
    size: int
    summary: str
    participant_id: str | None
    region: str | None
    source: str
    proposal_id: str | None
    created_at: str


def store_index(conn: sqlite3.Connection, version: int, index: StorableIndex) -> None:
    """Store `version`'s heading index (its headings as one block, its positions as chunks)."""
    (headings_id,) = blobs._store_blocks(conn, [index.headings])
    conn.execute(
        "INSERT OR REPLACE INTO version_index (version, chars, headings, positions) VALUES (?, ?, ?, ?)",
        (version, index.chars, headings_id, index.store_positions(conn)),
    )


def store_version(
    conn: sqlite3.Connection,
    row: VersionRow,
    data: bytes,
    *,
    previous: blobs.Layout | None,
    edit: tuple[int, int, int] | None,
    index_of: Callable[[blobs.Layout], IndexT],
) -> tuple[blobs.Layout, IndexT]:
    """Store `data` as version `row.version`: blocks, manifest, heading index, row.

    `previous` is the current version's layout when it is in memory; with `edit`
    (start, old end, new end in bytes) only the blocks around the change are
    stored again. `index_of` builds the heading index from the new layout.
    """
    if edit is not None and previous is not None:
        layout = blobs.store_replacement(conn, previous, data, *edit)
    else:
        layout = blobs.store_blocks(conn, data)
    manifest = layout.manifest(conn, previous)
    index = index_of(layout)
    store_index(conn, row.version, index)
    conn.execute(
        "INSERT INTO versions (version, content_hash, size, manifest, summary, participant_id,"
        " region, source, proposal_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (row.version, row.content_hash, row.size, manifest, row.summary, row.participant_id,
         row.region, row.source, row.proposal_id, row.created_at),
    )
    return layout, index
