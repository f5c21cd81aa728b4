"""Old versions without their text: the heading index kept per version.

Theory of operation
-------------------
Every version gets a row in ``version_index`` when it is written: its length
in characters, the id of a block holding its headings (levels, canonical
paths, titles; content-addressed in ``blocks`` like the text, so versions
whose headings did not change share one), and, per heading, three positions:
its character offset, the ordinal of the block its line starts in, and its
byte offset in that block.

A `StoredOutline` answers from that alone (the positions are stored in
chunks of 128 headings, the block ids of a manifest in chunks of 1,024, so a
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
import threading
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from itertools import accumulate, repeat
from operator import add, sub
from typing import Final, overload

import attrs

from commonroom.engine.regions import _RESERVED, WHOLE, Heading, Outline, Span
from commonroom.store import blobs

_HEADER: Final = struct.Struct("<II")  # heading count, length of the paths part
_POSITIONS: Final = struct.Struct("<II")  # heading count, chunk size
POSITIONS_CHUNK: Final = 128  # headings per separately stored piece of the positions
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

    _pieces: list[list[int]] = attrs.field(factory=list, eq=False, init=False, repr=False)
    """The blocks rows of its position chunks, once stored (one list per array)."""
    _reuse: tuple[HeadingIndex, int, int, int] | None = attrs.field(default=None, eq=False, repr=False)
    """(previous index, lo, hi, moved) when built around a change: chunks wholly
    before heading `lo`, or (`moved == 0`) wholly from `hi` on, keep their rows."""

    def store_positions(self, conn: sqlite3.Connection) -> bytes:
        """Store the position chunks as blocks; return what the version row keeps.

        Each chunk of `POSITIONS_CHUNK` headings holds its values minus its
        first one, byte-shuffled; chunks are content-addressed blocks, so a
        chunk whose headings all moved by the same amount is the block it was,
        and a commit stores (and hashes) only the chunks around its change. The
        row keeps, per array, the first value and the block id of each chunk.
        """
        typecode = "q" if self.chars >= 2**31 else "i"  # 32 bits unless the text is huge
        size = POSITIONS_CHUNK
        count = len(self.starts)
        arrays = (self.starts, self.ordinals, self.offsets)
        numbers = range(0, count, size)
        known: list[list[int | None]] = [[None] * len(numbers) for _ in arrays]
        if self._reuse is not None:
            previous, lo, hi, moved = self._reuse
            if previous._pieces and (previous.chars >= 2**31) == (typecode == "q"):
                for number, start in enumerate(numbers):
                    stop = min(start + size, count)
                    if (stop == start + size and stop <= lo) or (moved == 0 and start >= hi):
                        for which in range(3):
                            old = previous._pieces[which]
                            if number < len(old):
                                known[which][number] = old[number]
        todo: list[tuple[int, int]] = []
        raws: list[bytes] = []
        bases: list[array[int]] = []
        for which, values in enumerate(arrays):
            firsts = array("q")
            for number, start in enumerate(numbers):
                part = values[start : start + size]
                firsts.append(part[0])
                if known[which][number] is None:
                    todo.append((which, number))
                    raws.append(blobs.shuffle(list(map(sub, part, repeat(part[0]))), typecode))
            bases.append(firsts)
        for (which, number), block_id in zip(todo, blobs._store_blocks(conn, raws), strict=True):
            known[which][number] = block_id
        self._pieces.clear()
        object.__setattr__(self, "_reuse", None)  # never a chain of every earlier index
        out: list[bytes] = []
        for which in range(3):
            ids = [i for i in known[which] if i is not None]
            self._pieces.append(ids)
            out.append(blobs.shuffle(bases[which], "q") + blobs.shuffle(ids, "q"))
        return typecode.encode() + _POSITIONS.pack(count, size) + zlib.compress(b"".join(out), 6)

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
    size = outline._size()
    starts = outline._starts
    ends = layout.ends
    if headings is None:
        headings = encode_headings(outline._levels, outline._paths, outline._titles)
    ascii_ = len(data) == size  # one byte per character: the offsets agree
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
        after = previous.ordinals[hi - moved :]
        # (the same block count, the usual case: the ordinals after it are the old ones)
        ordinals.extend(map(add, after, repeat(shift)) if shift else after)
        offsets = array("i", previous.offsets[:lo])
        offsets.extend(b - (ends[o - 1] if o else 0) for b, o in zip(starts[lo:hi], middle, strict=True))
        offsets.extend(previous.offsets[hi - moved :])
        return HeadingIndex(size, headings, starts, ordinals, offsets, reuse=(previous, lo, hi, moved))
    if ascii_:
        byte_starts = starts
    else:
        text = outline.text
        pieces = [text[a:b] for a, b in zip([0, *starts], starts, strict=False)]
        byte_starts = list(accumulate(len(p.encode("utf-8", "surrogateescape")) for p in pieces))
    ordinals_list = [bisect_right(ends, b) for b in byte_starts]
    offsets_list = [b - (ends[o - 1] if o else 0) for b, o in zip(byte_starts, ordinals_list, strict=True)]
    return HeadingIndex(size, headings, starts, ordinals_list, offsets_list)


def load_index(conn: sqlite3.Connection, version: int) -> HeadingIndex | None:
    row = conn.execute(
        "SELECT v.chars, v.headings, v.positions, b.hash FROM version_index v"
        " JOIN blocks b ON b.id = v.headings WHERE v.version = ?",
        (version,),
    ).fetchone()
    if row is None:
        return None
    chars, headings_id, positions, digest = row
    headings = _cached_headings(digest)
    if headings is None:
        (headings,) = blobs.load_blocks(conn, [int(headings_id)])
        _remember_headings(digest, headings)
    stored = StoredPositions(conn, positions)
    return HeadingIndex(int(chars), headings, stored.column(0), stored.column(1), stored.column(2))


class StoredPositions:
    """The positions of a stored version: chunks fetched from their blocks when asked."""

    __slots__ = ("_bases", "_conn", "_count", "_decoded", "_ids", "_size", "_typecode")

    def __init__(self, conn: sqlite3.Connection, blob: bytes) -> None:
        self._conn = conn
        self._typecode = blob[:1].decode()
        self._count, self._size = _POSITIONS.unpack_from(blob, 1)
        chunks = -(-self._count // self._size) if self._count else 0
        blob = zlib.decompress(blob[1 + _POSITIONS.size :])
        at = 0
        self._bases: list[array[int]] = []
        self._ids: list[array[int]] = []
        for _ in range(3):
            self._bases.append(blobs.unshuffle(blob[at : at + 8 * chunks], "q"))
            at += 8 * chunks
            self._ids.append(blobs.unshuffle(blob[at : at + 8 * chunks], "q"))
            at += 8 * chunks
        self._decoded: dict[tuple[int, int], array[int]] = {}

    def column(self, which: int) -> _Column:
        return _Column(self, which)

    def prefetch(self, indices: Sequence[int]) -> None:
        """Fetch the chunks holding these headings' positions, all arrays, in one query."""
        keys = sorted({(which, i // self._size) for i in indices if 0 <= i < self._count
                       for which in range(3)} - self._decoded.keys())
        if not keys:
            return
        raws = blobs.load_blocks(self._conn, [self._ids[which][number] for which, number in keys])
        for (which, number), raw in zip(keys, raws, strict=True):
            self._decoded[which, number] = array(
                "q", map(add, blobs.unshuffle(raw, self._typecode), repeat(self._bases[which][number]))
            )

    def chunk(self, which: int, number: int) -> array[int]:
        piece = self._decoded.get((which, number))
        if piece is None:
            self.prefetch([number * self._size])
            piece = self._decoded[which, number]
        return piece

    def __len__(self) -> int:
        return int(self._count)


class _Column(Sequence[int]):
    """One array of `StoredPositions` (character starts, block ordinals or offsets)."""

    __slots__ = ("_store", "_which")

    def __init__(self, store: StoredPositions, which: int) -> None:
        self._store = store
        self._which = which

    def __len__(self) -> int:
        return len(self._store)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        count = len(self._store)
        size = self._store._size
        if isinstance(index, slice):
            start, stop, step = index.indices(count)
            assert step == 1
            out: list[int] = []
            while start < stop:
                number, offset = divmod(start, size)
                take = min(stop - start, size - offset)
                out.extend(self._store.chunk(self._which, number)[offset : offset + take])
                start += take
            return out
        if not -count <= index < count:
            raise IndexError(index)
        index %= count
        value: int = self._store.chunk(self._which, index // size)[index % size]
        return value

    def __iter__(self) -> Iterator[int]:
        return iter(self[0 : len(self)])


# Decoded headings blocks by content hash: versions whose headings did not
# change share one (a cold read of an old version then decodes no heading
# list). Content-addressed, so one cache serves every sidecar in the process.
HEADINGS_CACHE_BYTES: Final = 8 * 1024 * 1024
_HEADINGS: OrderedDict[bytes, bytes] = OrderedDict()


_HEADINGS_LOCK: Final = threading.Lock()  # rooms in one process run on their own store threads


def _cached_headings(digest: bytes) -> bytes | None:
    with _HEADINGS_LOCK:
        headings = _HEADINGS.get(digest)
        if headings is not None:
            _HEADINGS.move_to_end(digest)
        return headings


def _remember_headings(digest: bytes, headings: bytes) -> None:
    with _HEADINGS_LOCK:
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
        self._by_folded = None
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
        if isinstance(self._index.starts, _Column):
            self._index.starts._store.prefetch([index, end])
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

    def data(self) -> bytes:
        """The version's bytes, from all its blocks."""
        return b"".join(blobs.load_blocks(self._conn, self._blocks.ids()))

    @property
    def text(self) -> str:
        return self.data().decode("utf-8", "surrogateescape")

    def window(self, start: int, end: int) -> str:
        return self.text[start:end]

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
