"""The engine's one face for everything above it (the room, the adapters, the service, the host CLI).

Nothing outside `engine/` imports a feature module: `room/`, `http/`, `mcp/`,
`service.py`, `discovery.py`, `openapi.py` and `cli/` import this module (and
`protocol/`). The import-linter contracts (`.importlinter`) hold that. What is
here, and why each is needed above the engine:

- opening and running: `EngineConfig`, `open_engine`, `execute` (the one way an
  operation runs), `Engine` / `Outcome` / `Actor` / `StreamStart` /
  `AppRequestStart` (the types the room passes around; the last is an app request
  the room carries to a page, docs/spec/PROTOCOL.md 20), `SIDECAR_SUFFIX`;
- MCP's `tools/list` for a session: `capabilities_of` (a bearer's capabilities, or None);
- the room's streams: `newest_event_id`, `ring_window` (the event ring),
  `check_streams` (session liveness and presence of held streams), `addressed`,
  `related` (region paths, for MCP's region URIs);
- the host's sessions and page logins: `mint_host_session`, `end_host_session`,
  `end_stale_host_sessions`, `load_owner_logins`, `save_owner_login`,
  `end_owner_logins`; `hash_secret` (how every secret is kept); `unused_start_invitation`
  (`ce serve` prints the last start's invitation again while nobody used it);
- git (docs/spec/PROTOCOL.md 18): `GitOptions` (an `EngineConfig` field), `check_git_work_tree`
  (`--git` outside a work tree is refused before the room opens), `export_git` (`ce export`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Protocol

from commonroom.engine.access import unused_start_invitation
from commonroom.engine.addressing import addressed
from commonroom.engine.config import EngineConfig, GitOptions
from commonroom.engine.core import SIDECAR_SUFFIX, Engine

# The read path: read-only operations beside the writer (engine/readpath.py).
from commonroom.engine.dispatch import NOT_READY, NotReady, execute, open_engine
from commonroom.engine.dispatch import read as read
from commonroom.engine.gitsync import check_work_tree as check_git_work_tree
from commonroom.engine.gitsync import export as export_git
from commonroom.engine.ids import hash_secret
from commonroom.engine.linediff import resolved as resolve_later
from commonroom.engine.observe import StreamStart
from commonroom.engine.owner_logins import end_all as end_owner_logins
from commonroom.engine.owner_logins import load as load_owner_logins
from commonroom.engine.owner_logins import save as save_owner_login
from commonroom.engine.ports import Ports
from commonroom.engine.presence import Presence
from commonroom.engine.reads import newest_event_id, ring_window
from commonroom.engine.regions import related
from commonroom.engine.sessions import (
    capabilities_of,
    check_streams,
    end_host_session,
    end_stale_host_sessions,
    mint_host_session,
)
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.task_surfaces import AppRequestStart
from commonroom.engine.tx import Actor, Outcome, Tx
from commonroom.protocol.events import Event


class EngineFace(Protocol):
    """What the room, the adapters, the service and the host CLI use of an open engine.

    Live-session and invitation look-ups are methods (they lock: the gates ask on
    the event loop while the store thread changes them); everything else runs
    on the store thread (`Room.run_sync`) or before the room starts.
    """

    path: Path
    clock: Callable[[], datetime]
    workspace_id: str
    host_participant_id: str
    presence: Presence
    ports: Ports

    @property
    def current_version(self) -> int: ...
    @property
    def checkpoint_due(self) -> bool: ...
    def current(self) -> Snapshot: ...
    def session_participant(self, session_hash: bytes) -> str | None: ...
    def knows_invitation(self, secret_hash: bytes) -> bool: ...
    def transaction(self, now: datetime, *, write: bool = True, writes_document: bool = False
                    ) -> AbstractContextManager[Tx]: ...
    def watch(self) -> tuple[list[Event], datetime | None]: ...
    def sweep(self) -> tuple[list[Event], datetime | None]: ...
    def checkpoint(self) -> None: ...
    def without_room(self) -> None: ...
    def begin_stopping(self) -> None: ...
    def close(self) -> None: ...


def _conforms(engine: Engine) -> EngineFace:
    return engine  # mypy checks here that `Engine` has all of `EngineFace`


__all__ = [
    # the read path
    "NOT_READY",
    "SIDECAR_SUFFIX",
    "Actor",
    "AppRequestStart",
    "Engine",
    "EngineConfig",
    "EngineFace",
    "GitOptions",
    "NotReady",
    "Outcome",
    "StreamStart",
    "addressed",
    "capabilities_of",
    "check_git_work_tree",
    "check_streams",
    "end_host_session",
    "end_owner_logins",
    "end_stale_host_sessions",
    "execute",
    "export_git",
    "hash_secret",
    "load_owner_logins",
    "mint_host_session",
    "newest_event_id",
    "open_engine",
    "read",
    "related",
    "resolve_later",
    "ring_window",
    "save_owner_login",
    "unused_start_invitation",
]
