"""Version storage as content-addressed blocks.

Theory of operation: a version's text is cut into blocks at cheap,
content-defined boundaries (before a line that starts with `#`, and inside long
sections after a line whose CRC says so), so a one-line edit changes one block
and every other block is shared with the previous version. Blocks are stored
once, keyed by their sha256, zlib-compressed. A version row holds a *manifest*:
the block row ids, delta-encoded as varints and zlib-compressed -- a few dozen
bytes even for 10,000 blocks, because unchanged runs of ids compress to
nothing. Reading a version back concatenates its blocks: byte-exact by
construction, and checked against the version's content hash by the caller.

The boundaries do not need to be real headings; they only need to be
deterministic so equal text makes equal blocks.
"""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from collections.abc import Iterator

MIN_BLOCK = 512  # no content-defined cut before this many bytes
MAX_BLOCK = 64 * 1024  # always cut after this many bytes


def split_blocks(data: bytes) -> Iterator[bytes]:
    start = 0
    pos = 0
    n = len(data)
    while pos < n:
        nl = data.find(b"\n", pos)
        line_end = n if nl < 0 else nl + 1
        # A line starting with '#' begins a new block (keeps sections apart).
        if pos > start and data[pos : pos + 1] == b"#":
            yield data[start:pos]
            start = pos
        pos = line_end
        size = pos - start
        if size >= MAX_BLOCK or (
            size >= MIN_BLOCK and zlib.crc32(data[pos - min(64, size) : pos]) & 31 == 0
        ):
            yield data[start:pos]
            start = pos
    if start < n:
        yield data[start:n]


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


def store_text(conn: sqlite3.Connection, data: bytes) -> bytes:
    """Store `data` as blocks (sharing existing ones); return its manifest."""
    ids: list[int] = []
    for block in split_blocks(data):
        digest = hashlib.sha256(block).digest()
        row = conn.execute("SELECT id FROM blocks WHERE hash = ?", (digest,)).fetchone()
        if row is None:
            cur = conn.execute(
                "INSERT INTO blocks (hash, data) VALUES (?, ?)", (digest, zlib.compress(block, 6))
            )
            assert cur.lastrowid is not None
            ids.append(cur.lastrowid)
        else:
            ids.append(int(row[0]))
    return zlib.compress(_varints(ids), 9)


def load_text(conn: sqlite3.Connection, manifest: bytes) -> bytes:
    ids = _unvarints(zlib.decompress(manifest))
    if not ids:
        return b""
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
    return b"".join(blocks[i] for i in ids)
