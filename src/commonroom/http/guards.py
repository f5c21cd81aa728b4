"""The checks every request to a room passes before any view runs.

The Host allow-list (DNS rebinding) and the Origin check (`request_refusal`;
`host_and_origin` reads them from raw ASGI headers, for the checks that run
before the app, say before a too-large body is refused) and the rate limits
(`Gate`). Both ports use the Host/Origin checks; the ingress (and `/mcp`, which
is registered on the ingress app) also passes the gate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable

from commonroom.engine.core import hash_secret
from commonroom.http.common import rate_limited
from commonroom.protocol.errors import CommonroomError
from commonroom.ratelimit import RateLimiter

__all__ = ["Gate", "host_allowed", "host_and_origin", "origin_allowed", "request_refusal", "scope_header_check"]

_HOST = re.compile(r"^(commonroom|localhost(:\d{1,5})?|127\.0\.0\.1(:\d{1,5})?)$", re.IGNORECASE)
_ORIGIN = re.compile(r"^https?://(localhost|127\.0\.0\.1)(:\d{1,5})?$", re.IGNORECASE)


def host_allowed(host: str | None) -> bool:
    return host is not None and bool(_HOST.match(host))


def origin_allowed(origin: str | None) -> bool:
    return origin is None or bool(_ORIGIN.match(origin))


class Gate:
    """Rate limits keyed by the hash of a bearer (never the bearer) or the client address.

    A bearer the engine knows as a live session is charged to its own
    window from its first request; anything else (no bearer, an unknown or
    ended one) is charged to the client address, so guessing bearers runs at
    the anonymous rate. `live_sessions` is the engine's set of live session
    hashes: a set lookup, no store call, on the hot path.
    """

    def __init__(
        self,
        *,
        per_bearer_per_minute: int,
        per_address_per_minute: int,
        clock: Callable[[], float],
        live_sessions: Container[bytes],
    ) -> None:
        self.per_bearer = RateLimiter(per_bearer_per_minute, 60.0, clock)
        self.per_address = RateLimiter(per_address_per_minute, 60.0, clock)
        self.live_sessions = live_sessions

    def admit(self, bearer: str | None, address: str) -> None:
        if bearer is not None:
            key = hash_secret(bearer)  # the engine's one hash: what `live_sessions` holds
            if key in self.live_sessions:
                wait = self.per_bearer.acquire(key)
                if wait is not None:
                    raise rate_limited(wait)
                return
        wait = self.per_address.acquire(address)
        if wait is not None:
            raise rate_limited(wait)

    def sweep(self) -> None:
        self.per_bearer.sweep()
        self.per_address.sweep()


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


def scope_header_check(headers: Iterable[tuple[bytes, bytes]]) -> CommonroomError | None:
    return request_refusal(*host_and_origin(headers))
