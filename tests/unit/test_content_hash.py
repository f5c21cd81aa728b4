"""The content hash resumed from the change (engine/content_hash.py): always the sha256 of the bytes."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from commonroom.engine.content_hash import HASH_MARK_BYTES, HashMarks, hash_marked
from commonroom.engine.dispatch import open_engine
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import ManualClock
from tests.conftest import Driver

STEP = HASH_MARK_BYTES


def _check(marks: HashMarks, data: bytes) -> None:
    assert marks.hexdigest == hashlib.sha256(data).hexdigest()
    assert marks.size == len(data)
    assert len(marks.states) == len(data) // STEP + 1
    for i, state in enumerate(marks.states):
        assert state.hexdigest() == hashlib.sha256(data[: i * STEP]).hexdigest()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    size=st.sampled_from([0, 1, STEP - 1, STEP, STEP + 1, 3 * STEP, 4 * STEP + 17]),
    edits=st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, STEP + 3), st.integers(0, STEP + 3)),
        min_size=1, max_size=4,
    ),
)
def test_a_resumed_hash_is_the_hash_of_the_new_bytes(
    seed: int, size: int, edits: list[tuple[float, int, int]]
) -> None:
    rng = random.Random(seed)
    data = rng.randbytes(size)
    marks = hash_marked(data)
    _check(marks, data)
    for where, removed, inserted in edits:
        start = int(where * len(data))
        end = min(len(data), start + removed)
        middle = rng.randbytes(inserted)
        new = data[:start] + middle + data[end:]
        view = memoryview(data)
        pieces = (view[:start], middle, view[end:])  # what a commit hashes: no join
        marks = hash_marked(pieces, marks, start)
        _check(marks, new)
        data = new


def test_a_wrong_head_is_never_trusted_past_the_bytes() -> None:
    """An `unchanged` larger than either version (a caller's whole-length guess) resumes
    no further than the shorter of the two."""
    data = bytes(range(256)) * (3 * STEP // 256)
    marks = hash_marked(data)
    shorter = data[: STEP + 5]
    _check(hash_marked(shorter, marks, len(data)), shorter)
    longer = data + b"tail"
    _check(hash_marked(longer, marks, len(longer)), longer)


@pytest.mark.parametrize("line", ["line", "ligne déjà"])  # one byte per character, or not
def test_every_commit_on_a_large_document_hashes_as_its_file(tmp_path: Path, line: str) -> None:
    """Region commits anywhere in a document of many marks: each version's content hash
    is the sha256 of the file on disk, and of its bytes read back after a reopen."""
    path = tmp_path / "big.md"
    sections = [f"# Section {i}\n\n" + f"{line} {i} of the text.\n" * 1000 for i in range(60)]
    path.write_text("".join(sections))
    assert path.stat().st_size > 8 * STEP
    clock = ManualClock()
    engine = open_engine(path, clock=clock)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    room = Driver(engine, clock)
    agent = room.join()["session_id"]
    hashes: dict[int, str] = {}
    for n, section in enumerate([59, 0, 31, 30, 58, 1]):
        region = f"Section {section}"
        proposal = room.call("workspace.propose", agent, region=region, base_version=room.version,
                             summary=f"edit {n}", content=f"# Section {section}\n\nnew text {n}\n" * (n + 1))
        room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"],
                  revision=proposal["revision"], decision="approve")
        done = room.call("workspace.commit", agent, proposal_id=proposal["proposal_id"])
        on_disk = path.read_bytes()
        current = room.engine.current()
        assert current.version == done["version"]
        assert done["content_hash"] == current.content_hash == hashlib.sha256(on_disk).hexdigest()
        assert current.hash_marks is not None
        _check(current.hash_marks, on_disk)
        hashes[done["version"]] = done["content_hash"]
    room.engine.close()
    reopened = open_engine(path, clock=ManualClock())
    try:
        for version, content_hash in hashes.items():
            reopened.versions.cache.clear()
            assert hashlib.sha256(reopened.snapshot(version).data).hexdigest() == content_hash
    finally:
        reopened.close()


def test_a_commit_takes_the_outline_its_propose_built(tmp_path: Path) -> None:
    """The new text is built once per proposal: the current snapshot remembers the outline
    the propose built (`Snapshot.replaced`), and the commit's version holds that very one."""
    path = tmp_path / "doc.md"
    path.write_text("".join(f"# Section {i}\n\nline {i}\n" for i in range(20)))
    clock = ManualClock()
    engine = open_engine(path, clock=clock)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    room = Driver(engine, clock)
    agent = room.join()["session_id"]
    content = "# Section 7\n\nnew words\n"
    proposal = room.call("workspace.propose", agent, region="Section 7", base_version=room.version,
                         summary="edit", content=content)
    before = engine.current()
    span = before.outline.resolve("Section 7")
    built = before.replaced(span, content)
    assert before.replaced(span, content) is built  # remembered, not built again
    other = before.replaced(span, "# Section 7\n\nother words\n")
    assert other is not built and other.text == before.outline.replace(span, "# Section 7\n\nother words\n")
    built = before.replaced(span, content)  # asked again after another: built anew, and remembered
    room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"],
              revision=proposal["revision"], decision="approve")
    room.call("workspace.commit", agent, proposal_id=proposal["proposal_id"])
    assert engine.current().outline is built
    assert engine.current().text == path.read_text() == built.text
    engine.close()
