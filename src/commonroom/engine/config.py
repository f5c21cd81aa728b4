"""What a room's engine runs with, fixed when it opens (`open_engine(path, config)`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import attrs

from commonroom.protocol import limits


@attrs.frozen
class GitOptions:
    """How the room records its versions in the git work tree around the file (engine/gitsync.py)."""

    all_saves: bool = False
    """`--git-all`: the host's own saves become commits too."""
    report: Callable[[str], None] | None = None
    """Where a git failure is told (the room keeps running without the commit)."""


@attrs.frozen
class EngineConfig:
    """What a room runs with, fixed when its engine opens (`open_engine(path, config)`).

    Nothing sets these on an engine afterwards: the service builds one from
    `ce serve`'s options, tests and the host CLI take the defaults.
    """

    serving: limits.ServingLimits = attrs.Factory(limits.ServingLimits)
    human_hold_minutes: float = limits.HUMAN_HOLD_MINUTES
    """How long an external edit holds the regions it changed (`--human-hold-minutes`)."""
    settle_ms: int = limits.SETTLE_MS
    """A changed file is read once it stayed still this long (`--settle-ms`)."""
    git: GitOptions | None = None
    """`ce serve --git` / `--git-all` (docs/spec/PROTOCOL.md 18): record versions as git commits."""
    caller_checkpoints: bool = False
    """The caller checkpoints the sidecar's WAL (`Engine.checkpoint` when
    `Engine.checkpoint_due`), SQLite never does by itself: the room runs most writes on
    its event loop and a checkpoint fsyncs, so it runs them on its store thread."""
    bulk_thread_start: Callable[[], object] | None = None
    """Run first on the engine's bulk threads (`engine.txn`: the writer thread, which writes
    and fsyncs new versions' temp files, and the hash thread): the room lowers their CPU
    priority there (`commonroom.thread_priority`)."""
    bulk_step_aside: Callable[[], object] | None = None
    """Called by a bulk thread between steps of a large version's hash and temp-file
    write (`HASH_PAUSE_MARKS`, `WRITE_STEP_BYTES`): the room leaves the core for a moment
    there, so a thread with a request to answer gets it (`commonroom.thread_priority`)."""


DEFAULT_CONFIG: Final = EngineConfig()
