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
