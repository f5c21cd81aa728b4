"""The engine's one face for everything above it (the room, the adapters, the service, the host CLI).

Nothing outside `engine/` imports a feature module: `room/`, `http/`, `mcp/`,
`service.py`, `discovery.py`, `openapi.py` and `cli/` import this module (and
`protocol/`). The import-linter contracts (`.importlinter`) hold that. Above the
engine an open engine is an `EngineFace`: the `Protocol` below lists every
attribute and method those layers use, and nothing else (`Engine`, the class,
is not exported; `tests/unit/test_engine_face.py` holds both, and
`mypy --strict` every use). What is here, and why each is needed above the engine:

- opening and running: `EngineConfig`, `open_engine`, `execute` (the one way an
  operation runs), `EngineFace` / `Outcome` / `Actor` / `StreamStart` /
  `AppRequestStart` (the types the room passes around; the last is an app request
  the room carries to a page, docs/spec/PROTOCOL.md 20), `SIDECAR_SUFFIX`,
  `record_event` (the room's lifecycle events);
- a call that found the file settling: `SettleWait` (how long to wait before it
  runs again), `LOOK_SLACK` (how late to look after a settle deadline);
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

The engine's functions that take an engine are exported typed on the face
(`_on_face`): the same function objects, no wrapper on the hot path. `Engine` is
the face's one implementation (only `open_engine` makes one), so that is sound.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar, cast

from commonroom.engine import access, dispatch, owner_logins, reads, sessions
from commonroom.engine.addressing import addressed
from commonroom.engine.config import EngineConfig, GitOptions
from commonroom.engine.core import SIDECAR_SUFFIX, Engine
from commonroom.engine.dispatch import NOT_READY, NotReady
from commonroom.engine.gitsync import check_work_tree as check_git_work_tree
from commonroom.engine.gitsync import export as export_git
from commonroom.engine.ids import hash_secret
from commonroom.engine.linediff import resolved as resolve_later
from commonroom.engine.observe import StreamStart
from commonroom.engine.regions import related
from commonroom.engine.settle import LOOK_SLACK, SettleWait
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.task_surfaces import AppRequestStart
from commonroom.engine.tx import Actor, Outcome
from commonroom.protocol import events as ev
from commonroom.protocol.events import Event
from commonroom.protocol.invitation import TransportHint


class PresenceFace(Protocol):
    """What the room asks of who is present: is an arrival waiting to be announced?"""

    def pending(self) -> bool: ...


class PortsFace(Protocol):
    """How the room is reached: the transport and the listeners' ports it keeps (`engine/ports.py`)."""

    @property
    def transport_name(self) -> str: ...
    @property
    def transport_hint(self) -> TransportHint | None: ...
    def set_transport(self, name: str, hint: TransportHint | None) -> None: ...
    def last_ingress_port(self) -> int | None: ...
    def saved_port(self, key: str) -> int | None: ...
    def save_port(self, key: str, port: int) -> None: ...


class EngineFace(Protocol):
    """What the room, the adapters, the service and the host CLI use of an open engine: all of it.

    Live-session and invitation look-ups are methods (they lock: the gates ask on
    the event loop while the store thread changes them); everything else runs
    on the store thread (`Room.run_sync`) or before the room starts. Every member
    is read-only here: nothing above the engine sets an engine attribute.
    """

    @property
    def path(self) -> Path: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...
    @property
    def workspace_id(self) -> str: ...
    @property
    def host_participant_id(self) -> str: ...
    @property
    def presence(self) -> PresenceFace: ...
    @property
    def ports(self) -> PortsFace: ...
    @property
    def current_version(self) -> int: ...
    @property
    def checkpoint_due(self) -> bool: ...
    def current(self) -> Snapshot: ...
    def session_participant(self, session_hash: bytes) -> str | None: ...
    def knows_invitation(self, secret_hash: bytes) -> bool: ...
    def watch(self) -> tuple[list[Event], datetime | None]: ...
    def sweep(self) -> tuple[list[Event], datetime | None]: ...
    def checkpoint(self) -> None: ...
    def without_room(self) -> None: ...
    def begin_stopping(self) -> None: ...
    def close(self) -> None: ...


def _conforms(engine: Engine) -> EngineFace:
    return engine  # mypy checks here that `Engine` has all of `EngineFace`


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _on_face(function: Callable[Concatenate[Engine, _P], _R]) -> Callable[Concatenate[EngineFace, _P], _R]:
    """`function`, typed to take the face (see the module docstring)."""
    return cast("Callable[Concatenate[EngineFace, _P], _R]", function)


def _opens_a_face(function: Callable[_P, Engine]) -> Callable[_P, EngineFace]:
    return function  # an `Engine` is an `EngineFace` (`_conforms`)


def _record_event(engine: Engine, payload: ev.Payload) -> list[Event]:
    """Append a room-lifecycle event (workspace.started / stopped) in its own transaction;
    the events to publish."""
    with engine.transaction(engine.clock()) as tx:
        tx.emit(payload)
    return tx.events


open_engine = _opens_a_face(dispatch.open_engine)
execute = _on_face(dispatch.execute)
read = _on_face(dispatch.read)  # the read path: read-only operations beside the writer (engine/readpath.py)
record_event = _on_face(_record_event)
capabilities_of = _on_face(sessions.capabilities_of)
check_streams = _on_face(sessions.check_streams)
mint_host_session = _on_face(sessions.mint_host_session)
end_host_session = _on_face(sessions.end_host_session)
end_stale_host_sessions = _on_face(sessions.end_stale_host_sessions)
newest_event_id = _on_face(reads.newest_event_id)
ring_window = _on_face(reads.ring_window)
load_owner_logins = _on_face(owner_logins.load)
save_owner_login = _on_face(owner_logins.save)
end_owner_logins = _on_face(owner_logins.end_all)
unused_start_invitation = _on_face(access.unused_start_invitation)


__all__ = [
    "LOOK_SLACK",
    "NOT_READY",
    "SIDECAR_SUFFIX",
    "Actor",
    "AppRequestStart",
    "EngineConfig",
    "EngineFace",
    "GitOptions",
    "NotReady",
    "Outcome",
    "PortsFace",
    "PresenceFace",
    "SettleWait",
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
    "record_event",
    "related",
    "resolve_later",
    "ring_window",
    "save_owner_login",
    "unused_start_invitation",
]
