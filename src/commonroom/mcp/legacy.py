"""The legacy streamable-HTTP eras on `/mcp`: sessions opened with `initialize`.

Most MCP clients in use are set up with a URL and speak the streamable HTTP
transport of revisions 2025-03-26, 2025-06-18 or 2025-11-25: they `POST`
`initialize`, get an `Mcp-Session-Id`, send it (and `MCP-Protocol-Version`)
on every later request, may hold `GET /mcp` as the session's notification
stream and end the session with `DELETE /mcp`. This module owns those
sessions; the methods they call are the 2026-07-28 endpoint's handlers (one
table feeds both eras), and only the framing differs (`legacy_result`).

Rules (docs/spec/PROTOCOL.md section 12; docs/protocol.md says why where it chooses):

- `initialize` negotiates the newest legacy revision the client offers: the
  one it asks for when it is one of the three, else 2025-11-25.
- A session belongs to the bearer that opened it (`bearer_hash`, the hash the
  engine keeps; none for a client without a bearer, which can only list and
  read public metadata). Another bearer, or none, is told 404, as for an
  unknown session; so is any request once the bearer ended (left, revoked,
  expired): the session ends with it. A bearer that is not a live session
  cannot open one (401).
- Sessions live in the room process: a room restart forgets them and the
  client initializes again (404 first). At most `SESSIONS_PER_BEARER` per
  bearer and `ANONYMOUS_SESSIONS` without one; opening one more ends the
  oldest (a client that re-initializes after a lost connection is never
  refused).
- A session has at most one notification stream: a new `GET` ends the old
  one (a reconnecting client's old connection may linger half-open).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from typing import Any, Final, Protocol

import attrs

from commonroom.mcp import wire

SESSIONS_PER_BEARER: Final = 16
ANONYMOUS_SESSIONS: Final = 64
NEGOTIATED_DEFAULT: Final = wire.LEGACY_VERSIONS[0]

# Result fields only the 2026-07-28 framing has.
_MODERN_ONLY: Final = frozenset({"resultType", "ttlMs", "cacheScope"})


class Stoppable(Protocol):
    def stop(self) -> None: ...


@attrs.define(eq=False)
class LegacySession:
    """One `initialize`d session. Never on the wire but its id; never logged."""

    session_id: str
    bearer_hash: bytes | None
    protocol_version: str
    client_capabilities: dict[str, Any]
    subscriptions: set[str] = attrs.Factory(set)
    initialized: bool = False  # `notifications/initialized` arrived
    stream: Stoppable | None = None  # the open GET stream, if any
    ended: bool = False

    def owned_by(self, bearer_hash: bytes | None) -> bool:
        if self.bearer_hash is None or bearer_hash is None:
            return self.bearer_hash is bearer_hash
        return hmac.compare_digest(self.bearer_hash, bearer_hash)

    def meta(self) -> dict[str, Any]:
        """The `_meta` a 2026-07-28 request would carry: what the handlers read."""
        return {wire.META_VERSION: self.protocol_version,
                wire.META_CAPABILITIES: self.client_capabilities}

    def attach_stream(self, stream: Stoppable) -> None:
        """A new GET stream is the session's one stream: the previous one ends."""
        previous, self.stream = self.stream, stream
        if previous is not None and previous is not stream:
            previous.stop()

    def detach_stream(self, stream: Stoppable) -> None:
        if self.stream is stream:
            self.stream = None

    def end(self) -> None:
        self.ended = True
        self.subscriptions.clear()
        if self.stream is not None:
            self.stream.stop()
            self.stream = None


class LegacySessions:
    """The room's legacy sessions, by id and by owner (oldest first)."""

    def __init__(self, session_participant: Callable[[bytes], str | None]) -> None:
        self._participant = session_participant  # the engine's live sessions: a look-up
        self._by_id: dict[str, LegacySession] = {}
        self._by_owner: dict[bytes | None, dict[str, None]] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def bearer_alive(self, bearer_hash: bytes | None) -> bool:
        return bearer_hash is None or self._participant(bearer_hash) is not None

    def open(self, bearer_hash: bytes | None, protocol_version: str,
             client_capabilities: dict[str, Any]) -> LegacySession:
        """A new session for this bearer (None: no bearer); past the bearer's bound the
        oldest ends. Its GET stream takes a stream slot in `McpEndpoint.stream_response`."""
        self._purge_ended_bearers()
        owned = self._by_owner.setdefault(bearer_hash, {})
        limit = ANONYMOUS_SESSIONS if bearer_hash is None else SESSIONS_PER_BEARER
        while len(owned) >= limit:
            self._end(self._by_id[next(iter(owned))])
        session = LegacySession(secrets.token_urlsafe(24), bearer_hash, protocol_version,
                                client_capabilities)
        self._by_id[session.session_id] = session
        owned[session.session_id] = None
        return session

    def find(self, session_id: str, bearer_hash: bytes | None) -> LegacySession | None:
        """The caller's live session with this id, or None (the 404 of the legacy spec)."""
        session = self._by_id.get(session_id)
        if session is None:
            return None
        if not self.bearer_alive(session.bearer_hash):
            self._end(session)  # its bearer ended: so did the session
            return None
        return session if session.owned_by(bearer_hash) else None

    def end(self, session: LegacySession) -> None:
        self._end(session)

    def end_all(self) -> None:
        for session in list(self._by_id.values()):
            self._end(session)

    def _end(self, session: LegacySession) -> None:
        self._by_id.pop(session.session_id, None)
        owned = self._by_owner.get(session.bearer_hash)
        if owned is not None:
            owned.pop(session.session_id, None)
            if not owned:
                del self._by_owner[session.bearer_hash]
        session.end()

    def _purge_ended_bearers(self) -> None:
        for owner in [o for o in self._by_owner if not self.bearer_alive(o)]:
            for session_id in list(self._by_owner.get(owner, ())):
                self._end(self._by_id[session_id])


def negotiate(requested: Any) -> str:
    """The revision to answer `initialize` with: the client's when we speak it, else the newest."""
    return requested if requested in wire.LEGACY_VERSIONS else NEGOTIATED_DEFAULT


def initialize_params(params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(requested version, client capabilities) of an `initialize`; raises McpError."""
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise wire.invalid_params("initialize needs params.protocolVersion (a string)")
    capabilities = params.get("capabilities", {})
    if not isinstance(capabilities, dict):
        raise wire.invalid_params("initialize params.capabilities must be an object")
    return requested, capabilities


def legacy_result(body: dict[str, Any]) -> dict[str, Any]:
    """A handler's result as a legacy result: without the 2026-07-28 framing fields."""
    return {key: value for key, value in body.items() if key not in _MODERN_ONLY}


def check_version_header(session: LegacySession, header: str | None) -> None:
    """`MCP-Protocol-Version`, when sent, must be the session's (the legacy spec's 400)."""
    if header is not None and header != session.protocol_version:
        raise wire.McpError(
            wire.INVALID_REQUEST,
            f"Bad Request: MCP-Protocol-Version {header!r} is not this session's"
            f" ({session.protocol_version})",
            {"supported": list(wire.SUPPORTED_VERSIONS), "requested": header})
