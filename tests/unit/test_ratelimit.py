"""The sliding window is exact: at most `limit` admissions in any `period` (issue 8, item 7)."""

from __future__ import annotations

import pytest

from commonroom.ratelimit import RateLimiter, retry_after


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_601st_in_any_minute_is_refused_until_the_oldest_leaves() -> None:
    clock = Clock()
    limiter = RateLimiter(600, 60.0, clock)
    for i in range(600):
        clock.now = i * 0.09  # 600 admissions spread over 54 s
        assert limiter.acquire("k") is None
    clock.now = 59.5
    assert limiter.acquire("k") == pytest.approx(0.5)  # the one at t=0 leaves at t=60
    clock.now = 60.0
    assert limiter.acquire("k") is None
    assert limiter.acquire("k") == pytest.approx(0.09)  # next to leave: t=0.09


def test_bursts_never_exceed_the_limit_in_any_window() -> None:
    clock = Clock()
    limiter = RateLimiter(600, 60.0, clock)
    admitted: list[float] = []
    # A client hammering 20 requests every 0.5 s for 3 minutes.
    for step in range(360):
        clock.now = step * 0.5
        for _ in range(20):
            if limiter.acquire("k") is None:
                admitted.append(clock.now)
    for start in admitted:
        inside = [t for t in admitted if start <= t < start + 60.0]
        assert len(inside) <= 600
    # A token bucket would have let 600 + 10/s through; the window lets 600 a minute.
    assert len([t for t in admitted if t < 60.0]) == 600
    assert len(admitted) == 1800


def test_keys_are_separate_and_idle_ones_are_forgotten() -> None:
    clock = Clock()
    limiter = RateLimiter(2, 60.0, clock)
    for key in range(1000):
        assert limiter.acquire(key) is None
    assert limiter.acquire(1) is None and limiter.acquire(1) is not None
    assert limiter.acquire(2) is None
    clock.now = 30.0
    assert limiter.sweep() == 1000
    clock.now = 60.0
    assert limiter.sweep() == 0 and len(limiter) == 0


def test_retry_after_is_whole_seconds_and_never_zero() -> None:
    assert retry_after(0.01) == 1 and retry_after(1.0) == 1 and retry_after(58.2) == 59
