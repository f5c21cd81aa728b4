"""Sliding-window rate limits: 600 requests per bearer in any 60 s, 60 per address.

(Which windows a request is charged to is `http/guards.Gate`'s business.)

docs/spec/PROTOCOL.md section 11 asks for an exact bound: at most `limit` admissions
per key in *any* window of `period` seconds. Each key keeps the times of its
admissions inside the current window (a deque, oldest first; at most `limit`
of them), so the check is exact: request `limit + 1` within a window is
refused with the seconds until the oldest admission leaves it, which is when
a retry can succeed. Refused requests are not admitted and so not recorded.

Time comes from an injected monotonic clock (trio's, so tests can use
MockClock). Keys are hashes of bearers, never bearers. `sweep` forgets keys
with no admission inside the window, so memory follows the clients active in
the last minute (at most `limit` floats each), not the history.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError


class RateLimiter:
    def __init__(self, limit: int, period: float, clock: Callable[[], float]) -> None:
        if limit < 1 or period <= 0:
            raise ValueError("limit must be at least 1 and period positive")
        self.limit = limit
        self.period = period
        self.clock = clock
        self._admitted: dict[object, deque[float]] = {}

    def acquire(self, key: object) -> float | None:
        """Admit one request for `key`: None when allowed, else the seconds until one is."""
        return acquire_all((self, key))

    def wait(self, key: object) -> float | None:
        """Without admitting anything: None when `key` may be admitted now, else the seconds until then."""
        now = self.clock()
        times = self._admitted.get(key)
        if times is None:
            times = self._admitted[key] = deque()
        horizon = now - self.period
        while times and times[0] <= horizon:
            times.popleft()
        if len(times) < self.limit:
            return None
        return times[0] + self.period - now

    def record(self, key: object) -> None:
        """Admit one request for `key` (after `wait` said it may be)."""
        self._admitted[key].append(self.clock())

    def sweep(self) -> int:
        """Forget keys with no admission in the window; returns how many remain."""
        horizon = self.clock() - self.period
        for key, times in list(self._admitted.items()):
            if not times or times[-1] <= horizon:
                del self._admitted[key]
        return len(self._admitted)

    def __len__(self) -> int:
        return len(self._admitted)


def acquire_all(*charges: tuple[RateLimiter, object]) -> float | None:
    """Admit one request on every (limiter, key) or on none of them.

    None when all admitted it; else the longest wait, and nothing was
    recorded (a request refused by one window is not charged to the others).
    """
    waits = [wait for limiter, key in charges if (wait := limiter.wait(key)) is not None]
    if waits:
        return max(waits)
    for limiter, key in charges:
        limiter.record(key)
    return None


def retry_after(seconds: float) -> int:
    """Whole seconds for `Retry-After` (never 0: a client retrying at once would be refused)."""
    return max(1, math.ceil(seconds))


def heavy_reads_refused(wait: float) -> CommonroomError:
    """The 429 of a heavy read (`limits.HEAVY_READS`) past its participant's window.

    One text for the room, which charges the window, and the ingress, which refuses
    a read past it before routing it (`http/guards.Gate.early_refusal`).
    """
    seconds = retry_after(wait)
    return CommonroomError(
        "limit_exceeded",
        f"at most {limits.HEAVY_READS_PER_MINUTE} diffs, blames and rebases a minute; try"
        f" again in {seconds} s",
        {"scope": "heavy_reads", "limit": limits.HEAVY_READS_PER_MINUTE},
        retry_after_seconds=seconds,
    )


class RefusalPacer:
    """How long to hold a refusal, so a client that ignores `Retry-After` is slowed, not served.

    A refusal is an *episode* for its key until the last `Retry-After` the key was
    told runs out. The first `free` refusals of an episode are answered at once: a
    client that honours `Retry-After` hears one per connection and comes back after
    it, when a new episode starts. A refusal past them came from a client that did
    not wait: it is held `hold_seconds` (never longer than the wait itself) before it
    is answered, so a client asking again at once on one connection makes a couple of
    requests a second instead of a thousand. At most `max_held` refusals of one key
    are held at a time (each holds a connection); past that they are answered at once
    (and their connections closed, as every 429 is). Pure bookkeeping on an injected
    clock: the caller does the holding (`http/guards.Gate.paced`).
    """

    def __init__(self, *, free: int, hold_seconds: float, max_held: int,
                 clock: Callable[[], float]) -> None:
        self.free = free
        self.hold_seconds = hold_seconds
        self.max_held = max_held
        self.clock = clock
        self._until: dict[object, float] = {}  # the end of the key's episode
        self._count: dict[object, int] = {}  # refusals in the episode so far
        self._held: dict[object, int] = {}  # refusals of the key being held now

    def hold_for(self, key: object, wait: float) -> float:
        """Seconds to hold a refusal of `key` whose window opens in `wait` s (0: answer now)."""
        now = self.clock()
        if now >= self._until.get(key, -math.inf):
            self._count[key] = 0
        self._until[key] = max(self._until.get(key, -math.inf), now + wait)
        self._count[key] = count = self._count.get(key, 0) + 1
        if count <= self.free or self._held.get(key, 0) >= self.max_held:
            return 0.0
        return max(0.0, min(self.hold_seconds, wait))

    def holding(self, key: object) -> _Held:
        """`with pacer.holding(key):` around the hold: counts it against `max_held`."""
        return _Held(self, key)

    def held(self, key: object) -> int:
        return self._held.get(key, 0)

    def sweep(self) -> int:
        """Forget keys whose episode ended and that hold nothing; returns how many remain."""
        now = self.clock()
        for key, until in list(self._until.items()):
            if until <= now and not self._held.get(key):
                del self._until[key]
                self._count.pop(key, None)
        return len(self._until)


class _Held:
    def __init__(self, pacer: RefusalPacer, key: object) -> None:
        self.pacer, self.key = pacer, key

    def __enter__(self) -> None:
        held = self.pacer._held
        held[self.key] = held.get(self.key, 0) + 1

    def __exit__(self, *_exc: object) -> None:
        held = self.pacer._held
        held[self.key] -= 1
        if not held[self.key]:
            del held[self.key]
