"""Version storage as content-addressed blocks.

Theory of operation: a version's text is cut into blocks at cheap,
content-defined boundaries (before a line that starts with `#`, and inside long
sections after a line whose CRC says so), so a one-line edit changes one block
and every other block is shared with the previous version. Blocks are stored
once, keyed by their sha256, zlib-compressed. A version row holds a *manifest*:
the block row ids. Reading a version back concatenates its blocks: byte-exact
by construction, and checked against the version's content hash by the caller.

The boundaries do not need to be real headings; they only need to be
deterministic so equal text makes equal blocks. Where the cutter stands after
a cut depends on nothing before it, so a new version made by replacing one
stretch of the previous one (`store_replacement`) is cut again only from the
last boundary before the change until a boundary of the old version comes
back; only those blocks are hashed, looked up (in one query) and stored.

Manifests: the first format (still read) is zlib'd zigzag-delta varints; new
versions write ``0x03`` (``0x04`` when ids need 64 bits) + the compressed list
of the block ids of its *pieces*: runs of 256 block ids (the first, then each
minus the one before, as little-endian integers, byte-shuffled: all first
bytes, then all second bytes, ...), stored as content-addressed blocks like
the text. Versions share the pieces they have in common, so a commit stores
about one new piece; a commit re-encodes only the pieces that changed; a
region read decodes only the piece that holds its blocks' ids.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
import sys
import weakref
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import accumulate, repeat
from operator import add, sub
from typing import Final, TypeVar

import attrs

MIN_BLOCK = 512  # no content-defined cut before this many bytes
MAX_BLOCK = 64 * 1024  # always cut after this many bytes


def _cuts(data: bytes, start: int = 0) -> Iterator[int]:
    """The offsets where blocks end, cutting from `start` (a boundary) on."""
    pos = start
    n = len(data)
    while pos < n:
        nl = data.find(b"\n", pos)
        line_end = n if nl < 0 else nl + 1
        # A line starting with '#' begins a new block (keeps sections apart).
        if pos > start and data[pos : pos + 1] == b"#":
            yield pos
            start = pos
        pos = line_end
        size = pos - start
        if size >= MAX_BLOCK or (
            size >= MIN_BLOCK and zlib.crc32(data[pos - min(64, size) : pos]) & 31 == 0
        ):
            yield pos
            start = pos
    if start < n:
        yield n


def split_blocks(data: bytes) -> Iterator[bytes]:
    start = 0
    for end in _cuts(data):
        yield data[start:end]
        start = end


@attrs.frozen
class Layout:
    """Where a version's blocks lie: their row ids and the offset where each one ends."""

    ids: list[int]
    ends: list[int]
    changed: tuple[int, int, int] | None = attrs.field(default=None, eq=False)
    """(first, tail, rejoin) after `store_replacement`: blocks [first, tail) are new,
    those from `tail` on are the old ones from `rejoin` on."""
    changed_from: weakref.ref[Layout] | None = attrs.field(default=None, eq=False, repr=False)
    """The layout `changed` is relative to (not kept alive by this one)."""
    _pieces: list[int] = attrs.field(factory=list, eq=False, init=False, repr=False)
    _wide: bool = attrs.field(default=False, eq=False, init=False, repr=False)

    def manifest(self, conn: sqlite3.Connection, previous: Layout | None = None) -> bytes:
        """Encoded, its pieces stored (those the same as in `previous`'s manifest are reused)."""
        reuse = previous if previous is not self else None
        derived = (reuse is not None and self.changed_from is not None
                   and self.changed_from() is reuse)
        self._pieces.clear()
        encoded = encode_manifest(conn, self.ids, reuse, self._pieces,
                                  self.changed if derived else None)
        object.__setattr__(self, "_wide", encoded[:1] == b"\x04")
        return encoded


def shuffle(values: Sequence[int], typecode: str = "q") -> bytes:
    """Integers as little-endian fixed-width bytes, byte-shuffled (compresses well)."""
    packed = array(typecode, values)
    if sys.byteorder == "big":
        packed.byteswap()
    raw = packed.tobytes()
    size = packed.itemsize
    return b"".join(raw[i::size] for i in range(size))


def unshuffle(data: bytes, typecode: str = "q") -> array[int]:
    """The inverse of `shuffle`."""
    out = array(typecode)
    size = out.itemsize
    count = len(data) // size
    raw = bytearray(len(data))
    for i in range(size):
        raw[i::size] = data[i * count : (i + 1) * count]
    out.frombytes(bytes(raw))
    if sys.byteorder == "big":
        out.byteswap()
    return out


MANIFEST_CHUNK: Final = 256  # block ids per piece of a manifest
_MANIFEST: Final = struct.Struct("<II")  # id count, chunk size


def encode_manifest(
    conn: sqlite3.Connection,
    ids: Sequence[int],
    reuse: Layout | None = None,
    pieces_out: list[int] | None = None,
    changed: tuple[int, int, int] | None = None,
) -> bytes:
    """The manifest of `ids`, its pieces stored as blocks.

    Pieces of `MANIFEST_CHUNK` ids (the first id, then each minus the one
    before, byte-shuffled) are content-addressed blocks, so versions share
    them; a piece equal to one of `reuse`'s manifest is not even hashed. The
    manifest itself is the compressed list of piece ids.

    `changed`, (first, tail, rejoin) of `ids` against `reuse.ids` (`Layout.changed`):
    ids before `first` are `reuse`'s, those from `tail` on are `reuse`'s from `rejoin`
    on. Then only the pieces around the change are looked at (a commit's cost follows
    its change); the manifest is the same.
    """
    size = MANIFEST_CHUNK
    starts = range(0, len(ids), size)
    known: list[int | None] = [None] * len(starts)
    if reuse is not None and changed is not None and not reuse._wide and reuse._pieces:
        first, tail, rejoin = changed
        new_ids = ids[first:tail]
        wide = bool(new_ids) and (max(new_ids) >= 2**31 or min(new_ids) < 0)
        if not wide:
            old_pieces = reuse._pieces
            for number in range(min(first // size, len(old_pieces))):  # wholly before the change
                known[number] = old_pieces[number]
            if tail == rejoin:  # the same count: the pieces wholly after it are the same too
                for number in range(-(-tail // size), min(len(starts), len(old_pieces))):
                    known[number] = old_pieces[number]
    else:
        wide = bool(ids) and (max(ids) >= 2**31 or min(ids) < 0)
        if reuse is not None and reuse._pieces and reuse._wide == wide:
            old = reuse.ids
            for number, start in enumerate(starts):
                if number < len(reuse._pieces) and old[start : start + size] == ids[start : start + size]:
                    known[number] = reuse._pieces[number]
    typecode = "q" if wide else "i"
    todo = [number for number, piece in enumerate(known) if piece is None]
    raws = []
    for number in todo:
        part = ids[number * size : (number + 1) * size]
        raws.append(shuffle([part[0], *map(sub, part[1:], part[:-1])], typecode))
    for number, block_id in zip(todo, _store_blocks(conn, raws), strict=True):
        known[number] = block_id
    pieces = [piece for piece in known if piece is not None]
    if pieces_out is not None:
        pieces_out.extend(pieces)
    header = _MANIFEST.pack(len(ids), size) + shuffle(pieces, "q")
    return (b"\x04" if wide else b"\x03") + zlib.compress(header, 6)


class Manifest:
    """A decoded manifest: the block ids of a version, sliced without decoding them all."""

    __slots__ = ("_conn", "_count", "_decoded", "_ids", "_pieces", "_size", "_typecode")

    def __init__(self, conn: sqlite3.Connection | None, manifest: bytes) -> None:
        self._conn = conn
        self._ids: list[int] | None = None
        self._pieces: array[int] | None = None
        self._decoded: dict[int, list[int]] = {}
        kind = manifest[:1]
        if kind in (b"\x03", b"\x04"):  # pieces stored as blocks
            header = zlib.decompress(manifest[1:])
            self._count, self._size = _MANIFEST.unpack_from(header)
            self._pieces = unshuffle(header[_MANIFEST.size :], "q")
            self._typecode = "q" if kind == b"\x04" else "i"
        else:  # the first format: zigzag-delta varints
            self._ids = _unvarints(zlib.decompress(manifest))

    @classmethod
    def of(cls, ids: Sequence[int]) -> Manifest:
        """The manifest of these ids, without encoding it."""
        manifest = cls(None, zlib.compress(b""))
        manifest._ids = list(ids)
        return manifest

    def __len__(self) -> int:
        if self._pieces is not None:
            return int(self._count)
        return len(self._ids or ())

    def ids(self, start: int = 0, stop: int | None = None) -> list[int]:
        """The ids of blocks ``[start, stop)``."""
        if self._pieces is None:
            return (self._ids or [])[start:stop]
        stop = self._count if stop is None else min(stop, self._count)
        if start >= stop:
            return []
        size = self._size
        numbers = range(start // size, (stop - 1) // size + 1)
        missing = [n for n in numbers if n not in self._decoded]
        if missing:
            assert self._conn is not None
            raws = load_blocks(self._conn, [self._pieces[n] for n in missing])
            for number, raw in zip(missing, raws, strict=True):
                self._decoded[number] = list(accumulate(unshuffle(raw, self._typecode)))
        out: list[int] = []
        for number in numbers:
            out.extend(self._decoded[number])
        first = numbers[0] * size
        return out[start - first : stop - first]


def decode_manifest(conn: sqlite3.Connection | None, manifest: bytes) -> list[int]:
    return Manifest(conn, manifest).ids()


def _varints(values: list[int]) -> bytes:
    out = bytearray()
    prev = 0
    for value in values:
        delta = value - prev
        prev = value
        zz = (delta << 1) ^ (delta >> 63)  # zigzag: small negatives stay small
        while True:
            byte = zz & 0x7F
            zz >>= 7
            if zz:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                break
    return bytes(out)


def _unvarints(data: bytes) -> list[int]:
    values: list[int] = []
    prev = 0
    shift = 0
    acc = 0
    for byte in data:
        acc |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        delta = (acc >> 1) ^ -(acc & 1)
        prev += delta
        values.append(prev)
        acc = 0
        shift = 0
    return values


def _store_blocks(conn: sqlite3.Connection, blocks: list[bytes]) -> list[int]:
    """Row ids of `blocks` (in order), inserting those not stored yet; one lookup query per 500."""
    digests = [hashlib.sha256(block).digest() for block in blocks]
    known: dict[bytes, int] = {}
    unique = list(dict.fromkeys(digests))
    for i in range(0, len(unique), 500):
        chunk = unique[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for digest, block_id in conn.execute(
            f"SELECT hash, id FROM blocks WHERE hash IN ({marks})", chunk
        ):
            known[bytes(digest)] = int(block_id)
    ids: list[int] = []
    for block, digest in zip(blocks, digests, strict=True):
        block_id = known.get(digest)
        if block_id is None:
            cur = conn.execute(
                "INSERT INTO blocks (hash, data) VALUES (?, ?)", (digest, zlib.compress(block, 6))
            )
            assert cur.lastrowid is not None
            block_id = known[digest] = cur.lastrowid
        ids.append(block_id)
    return ids


def store_blocks(conn: sqlite3.Connection, data: bytes) -> Layout:
    """Store `data` as blocks (sharing existing ones); return where they lie."""
    ends = list(_cuts(data))
    blocks = [data[a:b] for a, b in zip([0, *ends], ends, strict=False)]
    return Layout(_store_blocks(conn, blocks), ends)


def store_replacement(
    conn: sqlite3.Connection, before: Layout, data: bytes, start: int, old_end: int, new_end: int
) -> Layout:
    """Store `data`, the previous version (laid out as `before`) with its bytes
    ``[start, old_end)`` replaced by ``data[start:new_end]``.

    Blocks are cut again from the last boundary before `start` until the cutter
    lands on an old boundary after the change; every other block id is reused.
    The result is exactly `store_blocks(conn, data)`'s.
    """
    old_ends = before.ends
    if not old_ends or not data:
        return store_blocks(conn, data)
    delta = new_end - old_end
    first = bisect_left(old_ends, start)  # the first block that ends at or after the change
    restart = old_ends[first - 1] if first else 0
    new_ends: list[int] = []
    rejoin = len(old_ends)
    for cut in _cuts(data, restart):
        new_ends.append(cut)
        if cut >= new_end:
            old = cut - delta
            index = bisect_left(old_ends, old, first)
            if index < len(old_ends) and old_ends[index] == old:
                rejoin = index + 1
                break
    blocks = [data[a:b] for a, b in zip([restart, *new_ends], new_ends, strict=False)]
    ids = before.ids[:first] + _store_blocks(conn, blocks) + before.ids[rejoin:]
    ends = old_ends[:first] + new_ends + list(map(add, old_ends[rejoin:], repeat(delta)))
    return Layout(ids, ends, (first, first + len(new_ends), rejoin), weakref.ref(before))


_Text = TypeVar("_Text", bytes, str)


def changed_range(
    old: _Text, new: _Text, within: tuple[int, int, int] | None = None
) -> tuple[int, int, int]:
    """(start, old end, new end): ``new`` is ``old`` with ``old[start:old_end]``
    replaced by ``new[start:new_end]``, the unchanged head and tail as long as can be.

    Compares 64 KiB slices at C speed, then narrows down inside the one that differs.
    Works on text too (engine/blame.py finds the changed lines of two versions with it).

    `within` (start, old end, new end), when the caller knows a stretch that holds the
    whole change (the head before it and the tail after it equal): the answer is the same,
    but only the bytes around that stretch are compared.
    """
    size = min(len(old), len(new))
    step = 1 << 16
    start = 0 if within is None else min(within[0], size)
    while start < size:
        stop = min(start + step, size)
        if old[start:stop] != new[start:stop]:
            while stop - start > 64:
                middle = (start + stop) // 2
                if old[start:middle] == new[start:middle]:
                    start = middle
                else:
                    stop = middle
            while start < stop and old[start] == new[start]:
                start += 1
            break
        start = stop
    # the same from the end, never back past `start`
    room = size - start
    tail = 0 if within is None else min(len(old) - within[1], room)
    while tail < room:
        take = min(step, room - tail)
        if old[len(old) - tail - take : len(old) - tail] != new[len(new) - tail - take : len(new) - tail]:
            low, high = tail, tail + take
            while high - low > 64:
                middle = (low + high) // 2
                if old[len(old) - middle : len(old) - low] == new[len(new) - middle : len(new) - low]:
                    low = middle
                else:
                    high = middle
            while low < high and old[len(old) - low - 1] == new[len(new) - low - 1]:
                low += 1
            tail = low
            break
        tail += take
    return start, len(old) - tail, len(new) - tail


def load_blocks(conn: sqlite3.Connection, ids: Sequence[int]) -> list[bytes]:
    """The blocks with these row ids, in this order (repeats allowed)."""
    unique = sorted(set(ids))
    blocks: dict[int, bytes] = {}
    # Fetch in chunks: SQLite limits the number of bound parameters.
    for i in range(0, len(unique), 500):
        chunk = unique[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for block_id, blob in conn.execute(
            f"SELECT id, data FROM blocks WHERE id IN ({marks})", chunk
        ):
            blocks[int(block_id)] = zlib.decompress(blob)
    return [blocks[i] for i in ids]


def load_layout(conn: sqlite3.Connection, manifest: bytes) -> tuple[bytes, Layout]:
    """A version's bytes and where its blocks lie."""
    ids = decode_manifest(conn, manifest)
    blocks = load_blocks(conn, ids)
    return b"".join(blocks), Layout(ids, list(accumulate(map(len, blocks))))

