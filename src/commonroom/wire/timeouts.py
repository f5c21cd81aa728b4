"""The one set of timeouts every client of a room uses (`Client`, `AsyncClient`, `ce`, `ce mcp`).

Each bound answers one question, so no exchange with a room can hang:

- `connect`: how long dialling may take (a transport plugin's dial, the TCP connect);
- `call`: how long a request/response may take once it is sent, on top of what the room
  is asked to hold it (a long-poll's `timeout_seconds`, at most 25 s);
- `silence`: how long a stream (observe, `GET /mcp`, an SSE answer) may stay silent
  before it counts as dead and is re-opened. The room writes a heartbeat every 15 s, so
  three missed heartbeats mean a half-open connection, not a quiet room;
- `retry`: the reconnection delay until the room names its own (SSE `retry:`).

`ce` reads overrides from `CE_TIMEOUTS` (`connect=5,silence=20`), for slow links and
for tests that make a room go silent. No I/O here, and nothing heavier than dataclasses.
"""

from __future__ import annotations

import dataclasses
from typing import Final


@dataclasses.dataclass(frozen=True)
class Timeouts:
    connect: float = 15.0
    call: float = 60.0
    silence: float = 45.0
    retry: float = 5.0

    @classmethod
    def parse(cls, text: str, base: Timeouts | None = None) -> Timeouts:
        """`base` (default: the defaults) with `name=seconds,...` applied; ValueError if malformed."""
        known = {field.name for field in dataclasses.fields(cls)}
        values: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, equals, raw = item.partition("=")
            name = name.strip()
            if not equals or name not in known:
                raise ValueError(f"{item!r}: write NAME=SECONDS with NAME one of {', '.join(sorted(known))}")
            try:
                seconds = float(raw)
            except ValueError:
                raise ValueError(f"{item!r}: {raw.strip()!r} is not a number of seconds") from None
            if not seconds > 0 or seconds == float("inf"):
                raise ValueError(f"{item!r}: the seconds must be positive and finite")
            values[name] = seconds
        return dataclasses.replace(base or DEFAULT, **values)


DEFAULT: Final = Timeouts()
