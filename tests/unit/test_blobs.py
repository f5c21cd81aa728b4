"""store/blobs.py: incremental block storage gives exactly what a full store gives."""

from __future__ import annotations

import sqlite3
from unittest import mock

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from commonroom.store import blobs


def database() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE blocks (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, data BLOB NOT NULL)")
    return conn


lines = st.lists(
    st.one_of(
        st.sampled_from([b"# Heading\n", b"## Sub\n", b"#\n", b"\n", b"text text\n", b"x" * 700 + b"\n"]),
        st.binary(max_size=90),
    ),
    max_size=60,
).map(b"".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=lines, new=lines, data=st.data())
def test_store_replacement_equals_a_full_store(old: bytes, new: bytes, data: st.DataObject) -> None:
    conn = database()
    before = blobs.store_blocks(conn, old)
    start = data.draw(st.integers(0, len(old)))
    end = data.draw(st.integers(start, len(old)))
    replaced = old[:start] + new + old[end:]
    after = blobs.store_replacement(conn, before, replaced, start, end, start + len(new))
    full = blobs.store_blocks(conn, replaced)
    assert after == full
    assert blobs.load_layout(conn, after.manifest(conn))[0] == replaced
    _, layout = blobs.load_layout(conn, after.manifest(conn))
    assert layout == after


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=lines, new=lines, data=st.data(), chunk=st.sampled_from([1, 2, 3, 5]))
def test_a_replacements_manifest_is_the_full_stores(old: bytes, new: bytes, data: st.DataObject,
                                                     chunk: int) -> None:
    # Built from the previous manifest, only the pieces around the change are looked at:
    # the bytes are the same as encoding every piece again (small pieces, so a document
    # of a few blocks has many).
    with mock.patch.object(blobs, "MANIFEST_CHUNK", chunk):
        conn = database()
        before = blobs.store_blocks(conn, old)
        before.manifest(conn)
        start = data.draw(st.integers(0, len(old)))
        end = data.draw(st.integers(start, len(old)))
        replaced = old[:start] + new + old[end:]
        after = blobs.store_replacement(conn, before, replaced, start, end, start + len(new))
        assert after.manifest(conn, before) == blobs.store_blocks(conn, replaced).manifest(conn)


def test_only_the_changed_blocks_are_hashed_and_looked_up() -> None:
    conn = database()
    doc = b"".join(b"# Section %d\n\n" % i + b"words " * 150 + b"\n\n" for i in range(2000))
    before = blobs.store_blocks(conn, doc)
    start = doc.index(b"# Section 1000\n")
    old_end = doc.index(b"# Section 1001\n")
    section = b"# Section 1000\n\nnew words\n\n"
    edited = doc[:start] + section + doc[old_end:]
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    after = blobs.store_replacement(conn, before, edited, start, old_end, start + len(section))
    conn.set_trace_callback(None)
    assert blobs.load_layout(conn, after.manifest(conn))[0] == edited
    assert len([s for s in statements if s.startswith("SELECT")]) == 1
    assert len([s for s in statements if s.startswith("INSERT")]) <= 2
    assert after.ids[:10] == before.ids[:10] and after.ids[-10:] == before.ids[-10:]
    # its manifest compresses again only the chunks of ids that changed
    first = before.manifest(conn)
    again = after.manifest(conn, before)
    assert blobs.decode_manifest(conn, again) == after.ids
    shared = sum(piece in before._pieces for piece in after._pieces)
    assert shared >= len(after._pieces) - 2 and first != again
    assert blobs.decode_manifest(conn, first) == before.ids


def test_manifests_of_every_format_read_back() -> None:
    conn = database()
    ids = [1, 2, 3, 900, 4, 5, 5, 6]
    assert blobs.decode_manifest(conn, blobs.encode_manifest(conn, ids)) == ids
    assert blobs.Manifest(conn, blobs.encode_manifest(conn, ids)).ids(2, 5) == [3, 900, 4]
    many = [i * 7 % 5003 for i in range(5000)]
    chunked = blobs.Manifest(conn, blobs.encode_manifest(conn, many))
    assert chunked.ids() == many and chunked.ids(1000, 3100) == many[1000:3100]
    assert chunked.ids(4999) == many[4999:] and chunked.ids(255, 257) == many[255:257]
    assert chunked.ids(7, 7) == [] and len(chunked) == 5000
    import zlib

    legacy = zlib.compress(blobs._varints(ids), 9)  # the first format, as old sidecars hold it
    assert blobs.decode_manifest(conn, legacy) == ids
    assert blobs.Manifest(conn, legacy).ids(3, 4) == [900]
    # a run of 10,000 ids costs a few dozen bytes of manifest and a few small pieces
    assert len(blobs.encode_manifest(conn, list(range(1, 10_001)))) < 200
    assert blobs.decode_manifest(conn, blobs.encode_manifest(conn, [2**40, 1])) == [2**40, 1]


@settings(max_examples=300, deadline=None)
@given(head=st.binary(max_size=300), old=st.binary(max_size=200), new=st.binary(max_size=200),
       tail=st.binary(max_size=300), big=st.booleans())
def test_changed_range_finds_the_stretch_that_differs(
    head: bytes, old: bytes, new: bytes, tail: bytes, big: bool
) -> None:
    if big:  # past one 64 KiB comparison step
        head, tail = head * 400, tail * 400
    before, after = head + old + tail, head + new + tail
    start, old_end, new_end = blobs.changed_range(before, after)
    assert after == before[:start] + after[start:new_end] + before[old_end:]
    # at least the head and tail it was made of are kept
    assert start + len(before) - old_end >= len(head) + len(tail)
    assert len(after) - new_end == len(before) - old_end
    # as short as can be: the bytes at both ends of the change differ
    if start < old_end and start < new_end:
        assert before[start] != after[start]
        assert before[old_end - 1] != after[new_end - 1]
    # told where the change lies (the head and tail it was made of), the same answer
    within = (len(head), len(head) + len(old), len(head) + len(new))
    assert blobs.changed_range(before, after, within) == (start, old_end, new_end)
    assert blobs.changed_range(before.decode("latin-1"), after.decode("latin-1"), within) == (
        start, old_end, new_end)
