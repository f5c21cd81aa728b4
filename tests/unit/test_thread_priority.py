"""The engine's bulk threads run below the room's other threads' CPU priority, and step
aside between steps (commonroom/thread_priority.py)."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from commonroom.engine.config import EngineConfig
from commonroom.engine.content_hash import HASH_PAUSE_MARKS, hash_marked
from commonroom.engine.dispatch import execute, open_engine
from commonroom.engine.sessions import mint_host_session
from commonroom.engine.txn import BULK_BYTES
from commonroom.protocol.timefmt import ManualClock
from commonroom.store.document import WRITE_STEP_BYTES, DocumentFile
from commonroom.thread_priority import (
    BACKGROUND_NICENESS,
    STEP_ASIDE_SECONDS,
    lower_this_thread,
    step_aside,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="a thread's own niceness is Linux's")


def _niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def _bulk_niceness(*, pause: object = None) -> int:
    """`_niceness` as bulk work (`Transactions.as_bulk` gives it a ``pause``)."""
    return _niceness()


@linux_only
def test_a_thread_is_lowered_once_and_alone() -> None:
    main = _niceness()
    seen: list[int] = []

    def lowered_twice() -> None:
        assert lower_this_thread() and lower_this_thread()
        seen.append(_niceness())

    thread = threading.Thread(target=lowered_twice)
    thread.start()
    thread.join()
    assert seen == [min(main + BACKGROUND_NICENESS, 19)]
    assert _niceness() == main  # the calling thread's own, not the process's


@linux_only
def test_the_engines_bulk_work_runs_lowered_and_a_small_documents_does_not(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    doc.write_text("# Idea\n")
    engine = open_engine(doc, EngineConfig(bulk_thread_start=lower_this_thread),
                         sidecar=tmp_path / "idea.md.commonroom", clock=ManualClock())
    try:
        own = _niceness()
        small = engine.txn.as_bulk(BULK_BYTES - 1, _bulk_niceness)
        assert engine.txn.hash_thread().submit(small).result() == own
        large = engine.txn.as_bulk(BULK_BYTES, _bulk_niceness)
        lowered = min(own + BACKGROUND_NICENESS, 19)
        assert engine.txn.hash_thread().submit(large).result() == lowered
        assert engine.txn._doc_writer().submit(large).result() == lowered
    finally:
        engine.close()
    plain = open_engine(doc, sidecar=tmp_path / "plain.commonroom", clock=ManualClock())
    try:  # without the setting (tests, the host's CLI): the process's own, whatever the size
        large = plain.txn.as_bulk(BULK_BYTES, _bulk_niceness)
        assert plain.txn.hash_thread().submit(large).result() == _niceness()
    finally:
        plain.close()


def test_bulk_work_steps_aside_between_its_steps_and_gives_the_same_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * (5 * WRITE_STEP_BYTES // 256) + b"tail"
    steps: list[str] = []

    def record() -> None:
        steps.append("pause")

    marks = hash_marked(data, pause=record)
    assert marks.hexdigest == hashlib.sha256(data).hexdigest()
    assert len(steps) == (len(marks.states) - 1) // HASH_PAUSE_MARKS  # one per half megabyte
    steps.clear()
    fd = os.open(tmp_path / "temp", os.O_WRONLY | os.O_CREAT)
    try:
        DocumentFile.fill_temp(fd, data, pause=record)
    finally:
        os.close(fd)
    assert (tmp_path / "temp").read_bytes() == data
    assert len(steps) == 5  # between the six writes, none after the last


def test_a_large_commit_steps_aside_on_both_bulk_threads(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    sections = [f"## Section {i}\n\n" + "words " * 170 + "\n\n" for i in range(3000)]
    doc.write_text("# Idea\n\n" + "".join(sections))
    threads: list[str] = []
    engine = open_engine(doc, EngineConfig(bulk_step_aside=lambda: threads.append(
        threading.current_thread().name)), sidecar=tmp_path / "idea.md.commonroom", clock=ManualClock())
    try:
        assert doc.stat().st_size >= 2 * WRITE_STEP_BYTES
        host = mint_host_session(engine)
        region = "Idea/Section 10"  # near the start: most of the document is hashed again
        proposed = execute(engine, "workspace.propose", host, {
            "region": region, "base_version": engine.current_version, "summary": "edit",
            "content": "## Section 10\n\nnew words\n\n"})
        assert proposed.error is None, proposed.error
        assert execute(engine, "workspace.review", host, {
            "proposal_id": proposed.result.proposal_id, "revision": 1, "decision": "approve",
        }).error is None
        committed = execute(engine, "workspace.commit", host,
                            {"proposal_id": proposed.result.proposal_id})
        assert committed.error is None, committed.error
        on_disk = doc.read_bytes()
        assert committed.result.content_hash == hashlib.sha256(on_disk).hexdigest()
        assert b"new words" in on_disk
    finally:
        engine.close()
    assert {name.rsplit("_", 1)[0] for name in threads} == {"commonroom-doc", "commonroom-hash"}
    # between the writes: a megabyte at a time of the head, the new text and the tail
    writes = -(-len(on_disk) // WRITE_STEP_BYTES)
    assert writes - 1 <= threads.count("commonroom-doc_0") <= writes + 1


def test_a_small_documents_work_never_steps_aside(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    doc.write_text("# Idea\n")
    paused: list[object] = []
    engine = open_engine(doc, EngineConfig(bulk_step_aside=lambda: paused.append(1)),
                         sidecar=tmp_path / "idea.md.commonroom", clock=ManualClock())
    try:
        def given_pause(*, pause: object = None) -> object:
            return pause

        assert engine.txn.as_bulk(BULK_BYTES - 1, given_pause)() is None
        assert engine.txn.as_bulk(BULK_BYTES, given_pause)() is engine.config.bulk_step_aside
    finally:
        engine.close()
    assert paused == []


def test_stepping_aside_sleeps() -> None:
    started = time.perf_counter()
    step_aside()
    assert time.perf_counter() - started >= STEP_ASIDE_SECONDS
