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


TRIM_PROBE = """
import sys
from commonroom.process_memory import give_back_free_memory, use_one_malloc_arena

def rss_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

use_one_malloc_arena()
# Below the mmap threshold, so they come from the heap; the last one stays, so the freed
# ones are not at the heap's top (which free() would give back by itself).
chunks = [bytearray(b"x" * 100_000) for _ in range(600)]
keep = bytearray(b"y" * 100_000)
del chunks
before = rss_kb()
if sys.argv[1] == "trim":
    assert give_back_free_memory()
print(before, rss_kb())
"""


def _rss_around(mode: str) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", TRIM_PROBE, mode], capture_output=True,
                          text=True, timeout=60, check=True)
    before, after = map(int, done.stdout.split())
    return before, after


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_memory_is_given_back_when_asked() -> None:
    before, after = _rss_around("keep")
    assert after > before - 20_000  # without the trim the ~60 MB freed stays resident
    before, after = _rss_around("trim")
    assert after < before - 40_000


FAULT_PROBE = """
import resource, sys
from commonroom.process_memory import keep_large_blocks_in_heap, use_one_malloc_arena
use_one_malloc_arena()
if sys.argv[1] == "kept":
    assert keep_large_blocks_in_heap()
size = 10_000_000
versions = [bytes(size)]
for n in range(30):
    if n == 5:
        start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    view = memoryview(versions[-1])  # a commit: the new bytes around the change, and their text
    new = b"".join((view[: size // 2], b"x", view[size // 2 + 1 :]))
    text = new.decode()
    versions.append(new)
    del text, view
    if len(versions) > 2:
        versions.pop(0)  # the version before the last leaves memory
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start) / 25)
"""


def _faults_per_version(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", FAULT_PROBE, mode], capture_output=True,
                          text=True, timeout=60, check=True)
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_new_version_reuses_the_freed_ones_pages() -> None:
    # what the setting changes: by glibc's moving thresholds, fresh pages now and then
    assert _faults_per_version("default") > 500
    assert _faults_per_version("kept") < 20
