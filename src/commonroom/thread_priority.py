"""The room's bulk threads run below its other threads' CPU priority, and step aside.

A commit on a 10 MB document hashes its bytes and writes them to a temp file: CPU work
outside the interpreter lock, on the engine's hash thread and writer thread
(`engine.txn`). On a busy core that work took turns with the trio thread that answers
every request, and a read waited for its turn: beside an agent committing back to back, a
region read's p99 was 7-11 ms against ~3 ms alone (`read_during_commits`,
docs/benchmarks.md). Two things keep the core for the threads that answer:

- **Niceness.** At 10 steps of niceness below the rest of the room, a bulk thread gets
  little of a core other threads want.
- **Stepping aside.** Niceness alone is not enough: Linux's fair scheduler lets a running
  thread finish its slice (about 3 ms here; a kernel without preemption does not even stop
  one inside a 10 MB ``write``), so a woken request thread still waited a slice behind a
  hash or a write (seen with ``perf sched``: the trio thread runnable for 3.3 ms while the
  hash thread ran). So the bulk work goes in steps (half a megabyte of hashing, a megabyte
  of writing) and between steps the thread sleeps for a moment (`step_aside`): off the run
  queue, it leaves the core to any thread waiting for it. Each step costs a sleep of
  ~60 µs (the kernel's timer slack), ~0.6 ms on a 10 MB commit.

Only those two threads: they hold the interpreter lock for moments (entering and leaving
their C calls), so a machine busy elsewhere, which gives a lowered thread little of the
core, never leaves the room's other threads waiting behind one of them for the lock. The
store thread keeps its priority for that reason.

Linux only for the niceness: there a niceness is a thread's own (`setpriority` on its
thread id); elsewhere it is the process's, and nothing is changed. A process already niced
keeps its own niceness as the floor (an unprivileged thread may only lower its priority).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Final

BACKGROUND_NICENESS: Final = 10
"""Steps of niceness a bulk thread takes below the process's own."""

STEP_ASIDE_SECONDS: Final = 0.00001
"""How long a bulk thread sleeps between steps: as short as asked (the sleep's point is to
leave the run queue, and the timer slack makes it ~60 µs anyway)."""

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


def step_aside() -> None:
    """Leave the core for a moment between two steps of bulk work (the module docstring)."""
    time.sleep(STEP_ASIDE_SECONDS)
