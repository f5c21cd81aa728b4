"""How a room process asks the C allocator to keep its memory (glibc's `mallopt`).

A room serves its operations from worker threads, and glibc gives each new thread an
arena of its own (up to eight per core). Every version of a large document allocates
its text and its bytes (10 MB each for a 10 MB document) in whichever thread runs the
commit; once freed, each arena keeps up to twice its largest block at its top for
later. With several threads taking turns, the room held a few such reserves at once:
after 30 commits on a 10 MB document it sat at 1.5 times its RSS after the first read
(docs/benchmarks.md). One arena for the process keeps one reserve, reused by every
thread; the interpreter lock serialises most allocations anyway, so the arenas bought
a room little concurrency.
"""

from __future__ import annotations

import ctypes
import sys
from functools import cache

M_ARENA_MAX = -8
"""glibc's `mallopt` parameter: the most arenas the process may create (malloc.h)."""
M_TRIM_THRESHOLD = -1
"""glibc's `mallopt` parameter: free memory at the heap's top kept before it is given back."""
M_MMAP_THRESHOLD = -3
"""glibc's `mallopt` parameter: blocks this large or larger get pages of their own (mmap)."""

LARGE_BLOCKS_IN_HEAP_BYTES = 32 * 1024 * 1024
"""The mmap threshold set: glibc's largest (half its 64 MiB heap size on 64-bit systems)."""
HEAP_TOP_KEPT_BYTES = 256 * 1024 * 1024
"""The trim threshold set: while a room commits, its freed versions stay for the next ones;
once it is quiet, `give_back_free_memory` returns them (`service`)."""


def use_one_malloc_arena() -> bool:
    """Limit the process to the main malloc arena; False where there is no glibc to ask.

    Only arenas created from now on are limited: call it before the room's threads start.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, 1))


def keep_large_blocks_in_heap() -> bool:
    """Serve blocks up to 32 MiB from the heap and keep its free top while the room is busy;
    False where there is no glibc to ask.

    Every version of a 10 MB document allocates its bytes anew. glibc's own thresholds move
    with the blocks freed: the text and bytes of a version went to fresh pages now and then
    (1,650 page faults a version, measured), and the kernel zeroed them while the interpreter
    lock was held: 5-9 ms joins of the new bytes in which no read of the room could run
    (`read_during_commits`, docs/benchmarks.md). Fixed thresholds reuse the freed blocks'
    pages (no fault a version, `tests/unit/test_process_memory.py`); the quiet trim gives them
    back once the document stops changing.
    """
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None) if libc is not None else None
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, LARGE_BLOCKS_IN_HEAP_BYTES)
                and mallopt(M_TRIM_THRESHOLD, HEAP_TOP_KEPT_BYTES))


@cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def give_back_free_memory() -> bool:
    """Return the allocator's free memory to the system (glibc's `malloc_trim(0)`); False
    where there is no glibc to ask.

    With one arena, the freed versions of a large document stay in it as one reserve for
    the next: right for a room that commits again soon, wasteful for one that went quiet
    (the room calls this once its document stopped changing: `service`). It costs a walk
    of the free lists and the page faults of the next large allocation.
    """
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is None:
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True
