"""Old versions without their text: the heading index kept per version.

Theory of operation
-------------------
Every version gets a row in ``version_index`` when it is written: its length
in characters, the id of a block holding its headings (levels, canonical
paths, titles; content-addressed in ``blocks`` like the text, so versions
whose headings did not change share one), and, per heading, three positions:
its character offset, the ordinal of the block its line starts in, and its
byte offset in that block.

A `StoredOutline` answers from that alone (the positions are compressed in
chunks of 256 headings, the block ids of a manifest in chunks of 1,024, so a
read decodes one chunk of each; decoded headings blocks are cached by content
hash, `HEADINGS_CACHE_BYTES`). Resolving a path is a byte search
in the headings block; the span's end is a search for the next heading of
the same or a higher level in the levels; reading the region fetches only the
blocks from the heading's block to the end heading's. So reading a region of
any version costs the index's size in C-speed work plus the region's blocks,
never reassembling the text or re-parsing it. Title look-ups, the heading
list and the whole text are there too, at their own cost.

Versions of a sidecar from before the index get their row the first time
they are read (`index_for`), best effort: a read that cannot write (another
process holds the lock) still answers, from the full text.
"""

from __future__ import annotations

import re
import sqlite3
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import add
from typing import Final

import attrs

from commonroom.engine.regions import _RESERVED, WHOLE, Heading, Outline, Span
from commonroom.store import blobs

_HEADER: Final = struct.Struct("<II")  # heading count, length of the paths part
_LENGTH: Final = struct.Struct("<I")
POSITIONS_CHUNK: Final = 256  # headings per separately compressed piece of the positions
# the next heading of level <= n, searched in the levels bytes
_NOT_DEEPER: Final = tuple(re.compile(b"[\x01-" + bytes([max(n, 1)]) + b"]") for n in range(7))


@attrs.frozen
class HeadingIndex:
    """A version's heading index, as stored."""

    chars: int
    headings: bytes
    """Encoded levels, paths and titles (`encode_headings`)."""
    starts: Sequence[int]
    """Character offset of each heading."""
    ordinals: Sequence[int]
    """Ordinal of the block each heading starts in."""
    offsets: Sequence[int]
    """Byte offset of each heading in that block."""

    _pieces: list[list[bytes]] = attrs.field(factory=list, eq=False, init=False, repr=False)
    _reuse: tuple[HeadingIndex, int, int, int] | None = attrs.field(default=None, eq=False, repr=False)
    """(previous index, lo, hi, moved) when built around a change: chunks wholly
    before heading `lo`, or (`moved == 0`) wholly from `hi` on, keep their pieces."""

    def positions(self) -> bytes:
        """Encoded for the sidecar: three chunked arrays (a read decodes one chunk of each).

        Each chunk holds its values minus its first one, so a chunk whose
        headings all moved by the same amount is the same piece as before: a
        commit compresses again only the chunks around its change.
        """
        typecode = "q" if self.chars >= 2**31 else "i"  # 32 bits unless the text is huge
        arrays = (self.starts, self.ordinals, self.offsets)
        known: list[list[bytes | None]] = [[], [], []]
        if self._reuse is not None:
            previous, lo, hi, moved = self._reuse
            if previous._pieces and (previous.chars >= 2**31) == (typecode == "q"):
                size = POSITIONS_CHUNK
                for start in range(0, len(self.starts), size):
                    stop = min(start + size, len(self.starts))
                    number = start // size
                    same = (stop == start + size and stop <= lo) or (moved == 0 and start >= hi)
                    for which in range(3):
                        old = previous._pieces[which]
                        known[which].append(old[number] if same and number < len(old) else None)
        self._pieces.clear()
        parts: list[bytes] = []
        for values, pieces_known in zip(arrays, known, strict=True):
            blob, pieces = blobs.encode_chunks(
                values, typecode, POSITIONS_CHUNK, based=True, known=pieces_known
            )
            parts.append(blob)
            self._pieces.append(pieces)
        return typecode.encode() + b"".join(_LENGTH.pack(len(part)) + part for part in parts)

    def footprint(self) -> int:
        return len(self.headings) + 24 * len(self.starts) + 256


def encode_headings(levels: Sequence[int], paths: Sequence[str], titles: Sequence[str]) -> bytes:
    paths_part = b"\n" + b"".join(p.encode("utf-8", "surrogateescape") + b"\n" for p in paths)
    titles_part = b"\n".join(t.encode("utf-8", "surrogateescape") for t in titles)
    return _HEADER.pack(len(levels), len(paths_part)) + bytes(levels) + paths_part + titles_part


def build_index(
    outline: Outline,
    data: bytes,
    layout: blobs.Layout,
    headings: bytes | None = None,
    previous: HeadingIndex | None = None,
) -> HeadingIndex:
    """The index of a version whose text has this outline, bytes and block layout.

    `headings`, when given, is the encoded headings of a version with the same
    paths (saves encoding them again). `previous` is the index of the version
    this one replaced a stretch of (`outline` from `Outline.replaced`, `layout`
    from `blobs.store_replacement`): positions are then computed around the
    change only.
    """
    text = outline.text
    starts = outline._starts
    ends = layout.ends
    if headings is None:
        headings = encode_headings(outline._levels, outline._paths, outline._titles)
    ascii_ = len(data) == len(text)  # one byte per character: the offsets agree
    if ascii_ and previous is not None and outline._changed and layout.changed:
        first, tail, rejoin = outline._changed
        block_first, block_tail, block_rejoin = layout.changed
        # headings before both changed stretches keep their block and offset,
        # those after both keep theirs too, in blocks moved by the same count
        lo = min(first, bisect_left(starts, ends[block_first - 1] if block_first else 0))
        hi = max(tail, bisect_left(starts, ends[block_tail - 1] if block_tail else 0))
        moved = tail - rejoin
        shift = block_tail - block_rejoin
        middle = [bisect_right(ends, b) for b in starts[lo:hi]]
        ordinals = array("i", previous.ordinals[:lo])
        ordinals.extend(middle)
        ordinals.extend(map(add, previous.ordinals[hi - moved :], repeat(shift)))
        offsets = array("i", previous.offsets[:lo])
        offsets.extend(b - (ends[o - 1] if o else 0) for b, o in zip(starts[lo:hi], middle, strict=True))
        offsets.extend(previous.offsets[hi - moved :])
        return HeadingIndex(len(text), headings, starts, ordinals, offsets, reuse=(previous, lo, hi, moved))
    if ascii_:
        byte_starts = starts
    else:
        pieces = [text[a:b] for a, b in zip([0, *starts], starts, strict=False)]
        byte_starts = list(accumulate(len(p.encode("utf-8", "surrogateescape")) for p in pieces))
    ordinals_list = [bisect_right(ends, b) for b in byte_starts]
    offsets_list = [b - (ends[o - 1] if o else 0) for b, o in zip(byte_starts, ordinals_list, strict=True)]
    return HeadingIndex(len(text), headings, starts, ordinals_list, offsets_list)


def store_index(conn: sqlite3.Connection, version: int, index: HeadingIndex) -> None:
    (headings_id,) = blobs._store_blocks(conn, [index.headings])
    conn.execute(
        "INSERT OR REPLACE INTO version_index (version, chars, headings, positions) VALUES (?, ?, ?, ?)",
        (version, index.chars, headings_id, index.positions()),
    )


def load_index(conn: sqlite3.Connection, version: int) -> HeadingIndex | None:
    row = conn.execute(
        "SELECT v.chars, v.headings, v.positions, b.hash FROM version_index v"
        " JOIN blocks b ON b.id = v.headings WHERE v.version = ?",
        (version,),
    ).fetchone()
    if row is None:
        return None
    chars, headings_id, positions, digest = row
    headings = _HEADINGS.get(digest)
    if headings is None:
        (headings,) = blobs.load_blocks(conn, [int(headings_id)])
        _remember_headings(digest, headings)
    else:
        _HEADINGS.move_to_end(digest)
    typecode = positions[:1].decode()
    arrays: list[blobs.Chunks] = []
    at = 1
    for _ in range(3):
        (length,) = _LENGTH.unpack_from(positions, at)
        at += _LENGTH.size
        arrays.append(blobs.Chunks(positions[at : at + length], typecode, based=True))
        at += length
    return HeadingIndex(int(chars), headings, arrays[0], arrays[1], arrays[2])


# Decoded headings blocks by content hash: versions whose headings did not
# change share one (a cold read of an old version then decodes no heading
# list). Content-addressed, so one cache serves every sidecar in the process.
HEADINGS_CACHE_BYTES: Final = 8 * 1024 * 1024
_HEADINGS: OrderedDict[bytes, bytes] = OrderedDict()


def _remember_headings(digest: bytes, headings: bytes) -> None:
    _HEADINGS[digest] = headings
    total = sum(map(len, _HEADINGS.values()))
    while total > HEADINGS_CACHE_BYTES and len(_HEADINGS) > 1:
        total -= len(_HEADINGS.popitem(last=False)[1])


class StoredOutline(Outline):
    """The outline of a stored version, answered from its heading index; no text in memory."""

    __slots__ = ("_blocks", "_conn", "_count", "_index", "_last", "_paths_at", "_titles_at")

    def __init__(self, conn: sqlite3.Connection, blocks: blobs.Manifest, index: HeadingIndex) -> None:
        self._conn = conn
        self._blocks = blocks
        self._index = index
        count, paths_len = _HEADER.unpack_from(index.headings)
        self._count = count
        self._paths_at = _HEADER.size + count
        self._titles_at = self._paths_at + paths_len
        self._by_title = None
        self._headings = None
        self._last: tuple[int, str] = (-1, "")  # the last path looked up and its index

    # -- what resolve needs

    def _lookup(self, path: str) -> int | None:
        if "\n" in path or "\r" in path:
            return None
        blob = self._index.headings
        needle = b"\n" + path.encode("utf-8", "surrogateescape") + b"\n"
        at = blob.find(needle, self._paths_at, self._titles_at)
        if at < 0:
            return None
        index = blob.count(b"\n", self._paths_at, at)
        self._last = (index, path)
        return index

    def _size(self) -> int:
        return self._index.chars

    def _end_index(self, index: int) -> int:
        """The index of the heading that ends `index`'s span, or the heading count."""
        blob = self._index.headings
        level = blob[_HEADER.size + index]
        found = _NOT_DEEPER[level].search(blob, _HEADER.size + index + 1, self._paths_at)
        return self._count if found is None else found.start() - _HEADER.size

    def _span(self, index: int) -> Span:
        end = self._end_index(index)
        starts = self._index.starts
        return Span(
            self._path(index), starts[index], starts[end] if end < self._count else self._index.chars
        )

    def _path(self, index: int) -> str:
        return self._last[1] if self._last[0] == index else self.paths()[index]

    def _split(self, start: int, stop: int) -> list[str]:
        return self._index.headings[start:stop].decode("utf-8", "surrogateescape").split("\n")

    def _titles_index(self) -> dict[str, list[str]]:
        if self._by_title is None:
            by_title: dict[str, list[str]] = {}
            titles = self._split(self._titles_at, len(self._index.headings)) if self._count else []
            for title, path in zip(titles, self.paths(), strict=True):
                by_title.setdefault(title, []).append(path)
            self._by_title = by_title
        return self._by_title

    # -- the rest of Outline

    @property
    def text(self) -> str:
        return b"".join(blobs.load_blocks(self._conn, self._blocks.ids())).decode("utf-8", "surrogateescape")

    @property
    def headings(self) -> tuple[Heading, ...]:
        # line numbers are not in the index: the rare caller pays for a scan
        return Outline(self.text).headings

    def paths(self) -> tuple[str, ...]:
        if not self._count:
            return ()
        return tuple(self._split(self._paths_at + 1, self._titles_at - 1))

    def has_path(self, path: str) -> bool:
        return path == WHOLE or (path not in _RESERVED and self._lookup(path) is not None)

    def region_text(self, span: Span) -> str:
        index = self._lookup(span.region) if span.region != WHOLE else None
        if index is None or self._span(index) != span:
            return self.text[span.start : span.end]
        end = self._end_index(index)
        ordinals, offsets = self._index.ordinals, self._index.offsets
        first = ordinals[index]
        # the end heading's block too when the region ends inside it
        last = len(self._blocks) - 1 if end >= self._count else ordinals[end] - (0 if offsets[end] else 1)
        pieces = blobs.load_blocks(self._conn, self._blocks.ids(first, last + 1))
        raw = b"".join(pieces)
        stop = len(raw) - len(pieces[-1]) + offsets[end] if end < self._count and offsets[end] else len(raw)
        content = raw[offsets[index] : stop].decode("utf-8", "surrogateescape")
        if len(content) != span.end - span.start:  # never expected; the text is the truth
            return self.text[span.start : span.end]
        return content

    def replace(self, span: Span, content: str) -> str:
        return Outline(self.text).replace(span, content)

    def replaced(self, span: Span, content: str, *, text: str | None = None) -> Outline:
        return Outline(self.text).replaced(span, content, text=text)

    def footprint(self) -> int:
        return self._index.footprint() + 8 * len(self._blocks)

    def __repr__(self) -> str:
        return f"<StoredOutline {self._index.chars} chars, {self._count} headings>"
