"""Token buckets: 600 authenticated requests a minute per bearer, 60 a minute per address.

A bucket holds `capacity` tokens and refills at `capacity / period` per second,
so a burst of `capacity` passes and request `capacity + 1` inside the minute is
refused with the seconds until a token is back. Time comes from an injected
monotonic clock (trio's, so tests can use MockClock). Keys are hashes of
bearers, never bearers. `sweep` drops full buckets so memory follows the
number of active clients, not the history.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs


@attrs.define
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    def __init__(self, capacity: int, period: float, clock: Callable[[], float]) -> None:
        self.capacity = capacity
        self.rate = capacity / period
        self.clock = clock
        self._buckets: dict[object, _Bucket] = {}

    def _refill(self, bucket: _Bucket, now: float) -> None:
        bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.stamp) * self.rate)
        bucket.stamp = now

    def acquire(self, key: object) -> float | None:
        """Take a token; returns None when allowed, else the seconds to wait."""
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.capacity), now)
        else:
            self._refill(bucket, now)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / self.rate

    def sweep(self) -> int:
        """Forget buckets that have refilled completely; returns how many remain."""
        now = self.clock()
        for key, bucket in list(self._buckets.items()):
            self._refill(bucket, now)
            if bucket.tokens >= self.capacity:
                del self._buckets[key]
        return len(self._buckets)


def retry_after(seconds: float) -> int:
    return max(1, math.ceil(seconds))
