"""The checks every request to a room passes before any view runs.

The Host allow-list (DNS rebinding) and the Origin check: one `HeaderRule`
per listener (`INGRESS_HEADERS`, `OWNER_HEADERS`), read from the ASGI scope
both by the listener's first guard and before a too-large body is refused.
The rate limits: `Gate`, which window each request is charged to. The ingress
(and `/mcp`, which is registered on the ingress app) passes both; the owner
port only its header rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from commonroom.engine.facade import hash_secret
from commonroom.http.common import rate_limited
from commonroom.protocol.errors import CommonroomError
from commonroom.ratelimit import RateLimiter, acquire_all

__all__ = ["INGRESS_HEADERS", "OWNER_HEADERS", "Gate", "HeaderRule", "own_origin"]

_LOOPBACK_ORIGIN: Final = re.compile(r"https?://(localhost|127\.0\.0\.1)(:\d{1,5})?", re.IGNORECASE)


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

    `session_participant` (session hash -> participant id, None when no live
    session has it) and `knows_invitation` (secret hash -> minted here) are the
    engine's look-ups (`EngineFace`): no store call on the hot path.
    """

    def __init__(
        self,
        *,
        per_bearer_per_minute: int,
        per_address_per_minute: int,
        clock: Callable[[], float],
        session_participant: Callable[[bytes], str | None],
        knows_invitation: Callable[[bytes], bool] = lambda _hash: False,
    ) -> None:
        self.per_bearer = RateLimiter(per_bearer_per_minute, 60.0, clock)
        self.per_participant = RateLimiter(per_bearer_per_minute, 60.0, clock)
        self.per_address = RateLimiter(per_address_per_minute, 60.0, clock)
        self.discovery = RateLimiter(per_address_per_minute, 60.0, clock)
        self.per_invitation = RateLimiter(per_address_per_minute, 60.0, clock)
        self.unknown_invitations = RateLimiter(max(1, per_address_per_minute // 3), 60.0, clock)
        self.session_participant = session_participant
        self.knows_invitation = knows_invitation

    def admit(self, bearer: str | None, address: str) -> None:
        if bearer is not None:
            key = hash_secret(bearer)  # the engine's one hash: what its sessions are kept as
            participant = self.session_participant(key)
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
        if key is not None and self.knows_invitation(key):
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


@attrs.frozen
class HeaderRule:
    """Which `Host` and `Origin` one listener accepts, read from an ASGI scope.

    The one check both listeners (and `/mcp`, on the ingress) run before any
    view, and again before a too-large body is refused (`HEADER_CHECK`: 403
    beats 413). Every value of a header is checked, so a second `Host` or
    `Origin` cannot smuggle a foreign one past the first. A request with no
    `Host` is refused (DNS rebinding: the name the browser resolved is the
    only sign of it); one with no `Origin` passes (not a browser's
    cross-origin call).
    """

    host: re.Pattern[str]
    origin_allowed: Callable[[str, Mapping[str, Any]], bool]
    origin_refused: str

    def __call__(self, scope: Mapping[str, Any]) -> CommonroomError | None:
        hosts: list[str] = []
        origins: list[str] = []
        for name, value in scope["headers"]:
            lowered = name.lower()
            if lowered == b"host":
                hosts.append(value.decode("latin-1"))
            elif lowered == b"origin":
                origins.append(value.decode("latin-1"))
        if not hosts or not all(self.host.fullmatch(host) for host in hosts):
            return CommonroomError("permission_denied", "Host not allowed")
        if not all(self.origin_allowed(origin, scope) for origin in origins):
            return CommonroomError("permission_denied", self.origin_refused)
        return None


def own_origin(scope: Mapping[str, Any]) -> str | None:
    """`http://127.0.0.1:<port>` of the listener serving `scope` (its ASGI `server`)."""
    server = scope.get("server")
    if not server or server[1] is None:
        return None
    return f"http://127.0.0.1:{int(server[1])}"


INGRESS_HEADERS: Final = HeaderRule(
    host=re.compile(r"commonroom|(localhost|127\.0\.0\.1)(:\d{1,5})?", re.IGNORECASE),
    origin_allowed=lambda origin, _scope: _LOOPBACK_ORIGIN.fullmatch(origin) is not None,
    origin_refused="Origin not allowed",
)
"""docs/spec/PROTOCOL.md section 11: Host `commonroom`, `localhost[:port]` or `127.0.0.1[:port]`;
an Origin of `http(s)://` localhost or 127.0.0.1, any port."""

OWNER_HEADERS: Final = HeaderRule(
    host=re.compile(r"(localhost|127\.0\.0\.1)(:\d{1,5})?", re.IGNORECASE),
    origin_allowed=lambda origin, scope: origin == own_origin(scope),
    origin_refused="Origin not allowed: only this page's own",
)
"""The owner port (docs/protocol.md "Owner page login"): Host
`localhost` or `127.0.0.1`, any port; an Origin only this listener's own,
`http://127.0.0.1:<its port>` (another port, `localhost` or `null` is another
origin)."""
