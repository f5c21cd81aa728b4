"""The checks every request to a room passes before any view runs.

The Host allow-list (DNS rebinding) and the Origin check: one `HeaderRule`
per listener (`INGRESS_HEADERS`, `OWNER_HEADERS`), read from the ASGI scope
both by the listener's first guard and before a too-large body is refused.
The rate limits: `Gate`, which window each request is charged to, and how a
request its windows would refuse is refused early and paced (`Gate.early_refusal`,
`Gate.paced`). The ingress (and `/mcp`, which is registered on the ingress app)
passes both; the owner port only its header rule.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Final

import attrs
import trio

from commonroom.engine.facade import hash_secret
from commonroom.http.common import rate_limited
from commonroom.protocol.errors import CommonroomError
from commonroom.ratelimit import RateLimiter, RefusalPacer, acquire_all, heavy_reads_refused

__all__ = [
    "INGRESS_HEADERS", "OWNER_HEADERS", "EarlyRefusal", "Gate", "HeaderRule", "own_origin",
]

# Pacing refusals (docs/protocol.md "Refusals are cheap and paced"): per participant (or
# client address), the first few of an episode at once, then each held half a second,
# at most 8 held at a time.
PACE_FREE_REFUSALS: Final = 4
PACE_HOLD_SECONDS: Final = 0.5
PACE_MAX_HELD: Final = 8


@attrs.frozen
class EarlyRefusal:
    """A request its windows refuse, found from its headers alone (`Gate.early_refusal`).

    `make(wait)` is its error once the window opens in `wait` s, `opens_at` when
    that is on the gate's clock, `key` whose episode it counts in (`RefusalPacer`),
    `hold` the seconds to hold it before answering (0: at once).
    """

    make: Callable[[float], CommonroomError]
    opens_at: float
    key: object
    hold: float

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

    Before any of that, `early_refusal` looks at a request's headers alone (before
    quart builds a request, routes it or reads its body) and finds the ones these
    windows would refuse anyway, and, on a heavy-read route (`heavy_routes`, the
    REST routes of `limits.HEAVY_READS`), the ones the room's `heavy_reads` window
    would; `paced` holds such a refusal when its client did not wait as told
    (`RefusalPacer`). The host's participant (`is_host`) is never paced, nor
    charged heavy reads. `early_exempt(method, path)` names the routes with windows
    of their own (discovery, joins), which the guard charges as before.
    """

    def __init__(
        self,
        *,
        per_bearer_per_minute: int,
        per_address_per_minute: int,
        clock: Callable[[], float],
        session_participant: Callable[[bytes], str | None],
        knows_invitation: Callable[[bytes], bool] = lambda _hash: False,
        is_host: Callable[[str], bool] = lambda _participant: False,
        heavy_reads: RateLimiter | None = None,
        heavy_routes: frozenset[tuple[str, str]] = frozenset(),
        early_exempt: Callable[[str, str], bool] = lambda _method, _path: False,
    ) -> None:
        self.per_bearer = RateLimiter(per_bearer_per_minute, 60.0, clock)
        self.per_participant = RateLimiter(per_bearer_per_minute, 60.0, clock)
        self.per_address = RateLimiter(per_address_per_minute, 60.0, clock)
        self.discovery = RateLimiter(per_address_per_minute, 60.0, clock)
        self.per_invitation = RateLimiter(per_address_per_minute, 60.0, clock)
        self.unknown_invitations = RateLimiter(max(1, per_address_per_minute // 3), 60.0, clock)
        self.session_participant = session_participant
        self.knows_invitation = knows_invitation
        self.clock = clock
        self.is_host = is_host
        self.heavy_reads = heavy_reads
        self.heavy_routes = heavy_routes
        self.early_exempt = early_exempt
        self.pacer = RefusalPacer(free=PACE_FREE_REFUSALS, hold_seconds=PACE_HOLD_SECONDS,
                                  max_held=PACE_MAX_HELD, clock=clock)

    def admit(self, bearer: str | None, address: str) -> None:
        if bearer is not None:
            key = hash_secret(bearer)  # the engine's one hash: what its sessions are kept as
            participant = self.session_participant(key)
            if participant is not None:
                _charge((self.per_bearer, key), (self.per_participant, participant))
                return
        _charge((self.per_address, address))

    def early_refusal(self, scope: Mapping[str, Any]) -> EarlyRefusal | None:
        """The refusal an HTTP request gets from these windows, from its ASGI scope alone;
        None for anything else (the app then runs its guard, which charges it as before).

        Nothing is charged here: a request refused is never admitted, and one that
        passes is charged by the guard. A refused Host or Origin, a malformed
        `Authorization` and the routes with their own windows are left to the app,
        so what the client hears is the same, only cheaper.
        """
        if self.early_exempt(scope["method"], scope["path"]) or INGRESS_HEADERS(scope) is not None:
            return None
        header: bytes | None = None
        for name, value in scope["headers"]:
            if name.lower() == b"authorization":
                header = value
                break
        participant: str | None = None
        key: bytes | None = None
        if header is not None:
            scheme, _, value = header.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                return None  # the guard answers `unauthorized`, charged to the address
            key = hash_secret(value.strip())
            participant = self.session_participant(key)
        now = self.clock()
        if participant is None or key is None:
            client = scope.get("client")
            address = client[0] if client else "unknown"
            wait = self.per_address.wait(address)
            if wait is None:
                return None
            return self._refusal(("address", address), rate_limited, now, wait)
        waits = [wait for wait in (self.per_bearer.wait(key), self.per_participant.wait(participant))
                 if wait is not None]
        if waits:
            return self._refusal(participant, rate_limited, now, max(waits),
                                 paced=not self.is_host(participant))
        if (self.heavy_reads is not None and (scope["method"], scope["path"]) in self.heavy_routes
                and not self.is_host(participant)):
            wait = self.heavy_reads.wait(participant)
            if wait is not None:
                # (a wait in seconds: the room's window keeps trio's clock, this gate its own)
                return self._refusal(participant, heavy_reads_refused, now, wait)
        return None

    def _refusal(self, key: object, make: Callable[[float], CommonroomError], now: float,
                 wait: float, *, paced: bool = True) -> EarlyRefusal:
        hold = self.pacer.hold_for(key, wait) if paced else 0.0
        return EarlyRefusal(make=make, opens_at=now + wait, key=key, hold=hold)

    def early(self, scope: Mapping[str, Any]) -> Callable[[], Awaitable[CommonroomError]] | None:
        """`hardened_app.EARLY_REFUSAL`: the paced refusal of `scope`'s request, or None."""
        refusal = self.early_refusal(scope)
        return None if refusal is None else partial(self.paced, refusal)

    async def paced(self, refusal: EarlyRefusal) -> CommonroomError:
        """Hold `refusal` as long as its pacing says, then its error (`Retry-After` then)."""
        if refusal.hold > 0:
            with self.pacer.holding(refusal.key):
                await trio.sleep(refusal.hold)
        return refusal.make(max(0.0, refusal.opens_at - self.clock()))

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
        self.pacer.sweep()


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
