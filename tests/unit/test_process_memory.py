"""A room process keeps one malloc arena (process_memory.py): one reserve of freed memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys, threading
from commonroom.process_memory import use_one_malloc_arena
if sys.argv[1] == "one":
    assert use_one_malloc_arena()
barrier = threading.Barrier(4)
held = []
def allocate():
    held.append(bytearray(4_000_000))  # above the interpreter's own small-object allocator
    barrier.wait()  # all four threads alive at once: each would want an arena of its own
threads = [threading.Thread(target=allocate) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()  # one "Arena N:" paragraph per arena, on stderr
"""


def _arenas(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                          timeout=60, check=True)
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_threads_share_the_one_arena() -> None:
    assert _arenas("many") > 1  # what the limit changes: four threads, several arenas
    assert _arenas("one") == 1
