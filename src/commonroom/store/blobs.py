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
versions write ``0x01`` (``0x02`` when 64 bits are needed) + zlib of id minus
position as little-endian 32-bit integers, byte-shuffled (all first bytes, then all second bytes, ...), which compresses
unchanged runs of ids about as well and decodes at C speed, so reading one
region of a big version does not cost a Python loop over all its blocks.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import accumulate, repeat
from operator import add, sub

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

    def manifest(self) -> bytes:
        return encode_manifest(self.ids)


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


def encode_manifest(ids: Sequence[int]) -> bytes:
    # id - position: a run of blocks stored one after the other is one repeated value
    values = list(map(sub, ids, range(len(ids))))
    wide = bool(values) and (max(values) >= 2**31 or min(values) < -(2**31))
    return (b"\x02" if wide else b"\x01") + zlib.compress(shuffle(values, "q" if wide else "i"), 6)


class Manifest:
    """A decoded manifest: the block ids of a version, sliced without decoding them all."""

    __slots__ = ("_ids", "_offsets")

    def __init__(self, manifest: bytes) -> None:
        self._offsets: array[int] | None = None
        self._ids: list[int] | None = None
        if manifest[:1] in (b"\x01", b"\x02"):  # 32- or 64-bit
            self._offsets = unshuffle(zlib.decompress(manifest[1:]), "i" if manifest[0] == 1 else "q")
        else:
            self._ids = _unvarints(zlib.decompress(manifest))

    @classmethod
    def of(cls, ids: Sequence[int]) -> Manifest:
        """The manifest of these ids, without encoding it."""
        manifest = cls.__new__(cls)
        manifest._offsets = None
        manifest._ids = list(ids)
        return manifest

    def __len__(self) -> int:
        return len(self._offsets) if self._offsets is not None else len(self._ids or ())

    def ids(self, start: int = 0, stop: int | None = None) -> list[int]:
        """The ids of blocks ``[start, stop)``."""
        if self._offsets is None:
            return (self._ids or [])[start:stop]
        stop = len(self._offsets) if stop is None else min(stop, len(self._offsets))
        return list(map(add, self._offsets[start:stop], range(start, stop)))


def decode_manifest(manifest: bytes) -> list[int]:
    return Manifest(manifest).ids()


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
    return Layout(ids, ends, (first, first + len(new_ends), rejoin))


def store_text(conn: sqlite3.Connection, data: bytes) -> bytes:
    """Store `data` as blocks (sharing existing ones); return its manifest."""
    return store_blocks(conn, data).manifest()


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
    ids = list(decode_manifest(manifest))
    blocks = load_blocks(conn, ids)
    return b"".join(blocks), Layout(ids, list(accumulate(map(len, blocks))))


def load_text(conn: sqlite3.Connection, manifest: bytes) -> bytes:
    return b"".join(load_blocks(conn, list(decode_manifest(manifest))))
