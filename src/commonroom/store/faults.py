"""Named write points of the commit path, and the test-only crash hook on them.

The crash harness (`tools/fault/crash.py`, `tests/reliability/test_crash.py`)
sets ``COMMONROOM_FAULT=POINT:N`` for a room process: the N-th time that
process reaches POINT it writes one line to stderr and SIGKILLs itself, the
way a power cut or an OOM kill would stop it there. Without the variable
`reached` is a function call that returns at once.

The points, in the order one document change reaches them (docs/architecture.md,
"Fault points"):

- ``after_version_row``: the version row is inserted, the transaction is open;
- ``after_temp_write``: the new bytes are in the temp file, not yet fsynced;
- ``after_fsync``: the temp file is fsynced, the transaction still open;
- ``after_commit``: the sidecar transaction committed, the file is still the old one;
- ``after_rename``: the temp file is renamed over the document, not yet marked written;
- ``after_mark_written``: the version is marked as written to the file.

The variable is read once, when this module is imported; a malformed value
is refused then (a typo must not turn a crash run into a run without crashes).

In-process tests hold a commit at a point instead (`holding`): the hook they
install runs each time a thread reaches it, say blocking on a `threading.Event`
while the commit sits inside its fsync, to show what the room answers meanwhile.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

ENV: Final = "COMMONROOM_FAULT"

POINTS: Final = (
    "after_version_row",
    "after_temp_write",
    "after_fsync",
    "after_commit",
    "after_rename",
    "after_mark_written",
)


def parse(value: str) -> tuple[str, int]:
    """``POINT:N`` -> (POINT, N); ValueError naming what is wrong."""
    point, sep, count = value.partition(":")
    if point not in POINTS:
        raise ValueError(f"{ENV}={value!r}: unknown point {point!r}; one of {', '.join(POINTS)}")
    if not sep or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{ENV}={value!r}: expected {point}:N with N >= 1")
    return point, int(count)


_raw = os.environ.get(ENV)
_target: Final = parse(_raw) if _raw else None
_hits = 0
_hooks: dict[str, Callable[[], None]] = {}  # test-only, in-process (`holding`)


def reached(point: str) -> None:
    """The commit path is at `point`: run a test's hook there, if one is installed; crash
    here if this is the armed point's N-th visit."""
    if _hooks:
        hook = _hooks.get(point)
        if hook is not None:
            hook()
    if _target is None:
        return
    _crash_if_due(point)


@contextmanager
def holding(point: str, hook: Callable[[], None]) -> Iterator[None]:
    """Tests only: run `hook` on whatever thread reaches `point`, until the block ends."""
    if point not in POINTS:
        raise ValueError(f"unknown point {point!r}; one of {', '.join(POINTS)}")
    if point in _hooks:
        raise RuntimeError(f"a hook is installed at {point} already")
    _hooks[point] = hook
    try:
        yield
    finally:
        del _hooks[point]


def _crash_if_due(point: str) -> None:
    global _hits
    assert _target is not None
    if point != _target[0]:
        return
    _hits += 1
    if _hits == _target[1]:
        # One unbuffered line, so the harness can tell this kill from any other death.
        os.write(2, f"commonroom fault: SIGKILL at {point} (visit {_hits})\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)
