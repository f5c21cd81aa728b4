"""The room's worker threads run below the trio thread's CPU priority (room/background.py)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
import trio

from commonroom.engine.config import EngineConfig
from commonroom.engine.dispatch import open_engine
from commonroom.protocol.timefmt import ManualClock
from commonroom.room.background import BACKGROUND_NICENESS, lower_this_thread, run_in_background


def _niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
async def test_a_worker_runs_lowered_and_the_trio_thread_does_not() -> None:
    loop = _niceness()
    limiter = trio.CapacityLimiter(1)
    first = await run_in_background(_niceness, limiter=limiter)
    again = await run_in_background(_niceness, limiter=limiter)  # once lowered, not lowered again
    assert first == again == min(loop + BACKGROUND_NICENESS, 19)
    assert _niceness() == loop


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
def test_the_engines_writer_thread_starts_lowered(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    doc.write_text("# Idea\n")
    engine = open_engine(doc, EngineConfig(writer_thread_start=lower_this_thread),
                         sidecar=tmp_path / "idea.md.commonroom", clock=ManualClock())
    try:
        writer = engine.txn._doc_writer()
        assert writer.submit(_niceness).result() == min(_niceness() + BACKGROUND_NICENESS, 19)
    finally:
        engine.close()
