"""Timestamps: RFC 3339, numeric offset `+00:00`, microsecond precision, always.

`2026-11-30T17:09:23.000123+00:00` -- never `Z`, never without microseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]
"""Returns an aware UTC datetime. Injected everywhere time matters."""


def system_clock() -> datetime:
    return datetime.now(UTC)


def format_ts(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("naive datetime")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_ts(text: str) -> datetime:
    """Parse a protocol timestamp; raises ValueError when it is not one."""
    if not isinstance(text, str) or len(text) != 32 or text[-6:] != "+00:00" or text[19] != ".":
        raise ValueError(f"not an RFC 3339 microsecond +00:00 timestamp: {text!r}")
    moment = datetime.fromisoformat(text)
    if moment.utcoffset() != timedelta(0):
        raise ValueError("offset must be +00:00")
    return moment


class ManualClock:
    """A clock tests move by hand (the engine never sleeps, it compares)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)
