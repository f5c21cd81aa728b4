"""The checks every request to a room passes before any view runs.

The Host allow-list (DNS rebinding) and the Origin check (`request_refusal`;
`host_and_origin` reads them from raw ASGI headers, for the checks that run
before the app, say before a too-large body is refused) and the rate limits
(`Gate`: which window each request is charged to). Both ports use the Host/Origin checks; the ingress (and `/mcp`, which
is registered on the ingress app) also passes the gate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

from commonroom.engine.facade import hash_secret
from commonroom.http.common import rate_limited
from commonroom.protocol.errors import CommonroomError
from commonroom.ratelimit import RateLimiter, acquire_all

__all__ = ["Gate", "host_allowed", "host_and_origin", "origin_allowed", "request_refusal", "scope_header_check"]

_HOST = re.compile(r"^(commonroom|localhost(:\d{1,5})?|127\.0\.0\.1(:\d{1,5})?)$", re.IGNORECASE)
_ORIGIN = re.compile(r"^https?://(localhost|127\.0\.0\.1)(:\d{1,5})?$", re.IGNORECASE)


def host_allowed(host: str | None) -> bool:
    return host is not None and bool(_HOST.match(host))


def origin_allowed(origin: str | None) -> bool:
    return origin is None or bool(_ORIGIN.match(origin))


class Gate:
    """Rate limits keyed by hashes, participant ids and client addresses; never a bearer or secret.

    Which windows a request is charged to:

    - a bearer the engine knows as a live session: its own window *and* its
      participant's (both `requests_per_minute`), from its first request; a
      request one of them refuses is charged to neither;
    - anything else (no bearer, an unknown or ended one): the client address's
      window (`anonymous_per_minute`), so guessing bearers runs at that rate;
    - discovery documents: a window of their own per address, so a flood of
      them (every loopback client shares 127.0.0.1) blocks only discovery;
    - `POST /session/join`: the window of the invitation's secret hash when
      the room minted that secret (`anonymous_per_minute` per invitation), else
      one small window per address for every unknown or malformed one (a third
      of the anonymous rate): guessing secrets is slow and never locks out a
      joiner holding a real invitation.

    `live_sessions` (session hash -> participant id) and `invitations` (secret
    hashes) are the engine's in-memory views: lookups, no store call, on the
    hot path.
    """

    def __init__(
        self,
        *,
        per_bearer_per_minute: int,
        per_address_per_minute: int,
        clock: Callable[[], float],
        live_sessions: Mapping[bytes, str],
        invitations: Container[bytes] = frozenset(),
    ) -> None:
        self.per_bearer = RateLimiter(per_bearer_per_minute, 60.0, clock)
        self.per_participant = RateLimiter(per_bearer_per_minute, 60.0, clock)
        self.per_address = RateLimiter(per_address_per_minute, 60.0, clock)
        self.discovery = RateLimiter(per_address_per_minute, 60.0, clock)
        self.per_invitation = RateLimiter(per_address_per_minute, 60.0, clock)
        self.unknown_invitations = RateLimiter(max(1, per_address_per_minute // 3), 60.0, clock)
        self.live_sessions = live_sessions
        self.invitations = invitations

    def admit(self, bearer: str | None, address: str) -> None:
        if bearer is not None:
            key = hash_secret(bearer)  # the engine's one hash: what `live_sessions` holds
            participant = self.live_sessions.get(key)
            if participant is not None:
                _charge((self.per_bearer, key), (self.per_participant, participant))
                return
        _charge((self.per_address, address))

    def admit_discovery(self, address: str) -> None:
        _charge((self.discovery, address))

    def admit_join(self, secret: str | None, address: str) -> None:
        """A join attempt with `secret` (None: the body named none, or not readably)."""
        try:
            key = hash_secret(secret) if secret else None
        except UnicodeEncodeError:  # a lone surrogate: no secret the room minted
            key = None
        if key is not None and key in self.invitations:
            _charge((self.per_invitation, key))
        else:
            _charge((self.unknown_invitations, address))

    def sweep(self) -> None:
        for limiter in (self.per_bearer, self.per_participant, self.per_address, self.discovery,
                        self.per_invitation, self.unknown_invitations):
            limiter.sweep()


def _charge(*charges: tuple[RateLimiter, object]) -> None:
    wait = acquire_all(*charges)
    if wait is not None:
        raise rate_limited(wait)


def request_refusal(host: str | None, origin: str | None) -> CommonroomError | None:
    """The Host allow-list (DNS rebinding) and the Origin check, before anything else."""
    if not host_allowed(host):
        return CommonroomError("permission_denied", "Host not allowed")
    if not origin_allowed(origin):
        return CommonroomError("permission_denied", "Origin not allowed")
    return None


def host_and_origin(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str | None, str | None]:
    """The Host and Origin of raw ASGI headers (for checks that run before the app)."""
    found: dict[bytes, str] = {}
    for name, value in headers:
        lowered = name.lower()
        if lowered in (b"host", b"origin"):
            found[lowered] = value.decode("latin-1")
    return found.get(b"host"), found.get(b"origin")


def scope_header_check(scope: Mapping[str, Any]) -> CommonroomError | None:
    """The ingress's `HEADER_CHECK`: Host and Origin of an ASGI scope."""
    return request_refusal(*host_and_origin(scope["headers"]))
