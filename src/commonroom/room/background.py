"""The room's worker threads run below the trio thread's CPU priority.

The trio thread answers every request, and a light read runs on it whole (`Room._read`).
The worker threads carry the rest: the store thread's operations (a commit on a 10 MB
document hashes and cuts megabytes, outside the interpreter lock for much of it), heavy
reads, the quiet trim. On a busy core they took turns with the trio thread at equal
priority, and a read waited for its turn: beside an agent committing back to back,
a region read's p99 was 7-11 ms against ~3 ms alone (`read_during_commits`,
docs/benchmarks.md). At 10 steps of niceness below it, a worker gives the core to the
trio thread as soon as that one has work. The engine's writer thread (the temp file of a
new version, written and fsynced) is lowered the same way (`EngineConfig.writer_thread_start`).

Linux only: there a niceness is a thread's own (`setpriority` on its thread id); elsewhere
it is the process's, and nothing is changed. A process already niced keeps its own
niceness as the floor (an unprivileged thread may only lower its priority).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Final, TypeVar

import trio

BACKGROUND_NICENESS: Final = 10
"""Steps of niceness a worker thread takes below the process's own."""

_T = TypeVar("_T")
_lowered = threading.local()


def lower_this_thread() -> bool:
    """Lower the calling thread's CPU priority by `BACKGROUND_NICENESS`, once per thread;
    False where that is not a thread's own setting or the system refused."""
    if getattr(_lowered, "done", False):
        return True
    if not sys.platform.startswith("linux"):
        return False
    thread = threading.get_native_id()
    try:
        own = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(own + BACKGROUND_NICENESS, 19))
    except OSError:
        return False
    _lowered.done = True
    return True


def _lowered_then(fn: Callable[..., _T], *args: object) -> _T:
    lower_this_thread()
    return fn(*args)


async def run_in_background(fn: Callable[..., _T], *args: object,
                            limiter: trio.CapacityLimiter | None = None) -> _T:
    """`trio.to_thread.run_sync(fn, *args)` on a worker thread of lower priority.

    Trio's worker threads serve only such calls, so a thread lowered once stays lowered.
    """
    return await trio.to_thread.run_sync(_lowered_then, fn, *args, limiter=limiter)
