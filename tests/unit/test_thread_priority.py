"""The engine's bulk threads run below the room's other threads' CPU priority
(commonroom/thread_priority.py)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from commonroom.engine.config import EngineConfig
from commonroom.engine.dispatch import open_engine
from commonroom.engine.txn import BULK_BYTES
from commonroom.protocol.timefmt import ManualClock
from commonroom.thread_priority import BACKGROUND_NICENESS, lower_this_thread

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="a thread's own niceness is Linux's")


def _niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


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


def test_the_engines_bulk_work_runs_lowered_and_a_small_documents_does_not(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    doc.write_text("# Idea\n")
    engine = open_engine(doc, EngineConfig(bulk_thread_start=lower_this_thread),
                         sidecar=tmp_path / "idea.md.commonroom", clock=ManualClock())
    try:
        own = _niceness()
        small = engine.txn.as_bulk(BULK_BYTES - 1, _niceness)
        assert engine.txn.hash_thread().submit(small).result() == own
        large = engine.txn.as_bulk(BULK_BYTES, _niceness)
        lowered = min(own + BACKGROUND_NICENESS, 19)
        assert engine.txn.hash_thread().submit(large).result() == lowered
        assert engine.txn._doc_writer().submit(large).result() == lowered
    finally:
        engine.close()
    plain = open_engine(doc, sidecar=tmp_path / "plain.commonroom", clock=ManualClock())
    try:  # without the setting (tests, the host's CLI): the process's own, whatever the size
        large = plain.txn.as_bulk(BULK_BYTES, _niceness)
        assert plain.txn.hash_thread().submit(large).result() == _niceness()
    finally:
        plain.close()
