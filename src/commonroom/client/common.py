"""What `Client` and `AsyncClient` share: typing answers, reading event streams."""

from __future__ import annotations

import json
from typing import Any, Final, TypeVar

import attrs

from commonroom.cli.http11 import SSEMessage
from commonroom.client import errors
from commonroom.protocol import records
from commonroom.protocol.events import Event, from_dict

T = TypeVar("T")

# Proposal statuses after a review or instead of one: `wait_for_review` returns on these.
DECIDED: Final = frozenset(
    {"approved", "rejected", "committed", "conflicted", "withdrawn", "superseded"}
)
# The room holds a long-poll at most 25 s.
WAIT_HOLD_SECONDS: Final = 25


@attrs.frozen
class Resync:
    """The room could not replay from the cursor: read `room()` again, then go on."""

    reason: str
    oldest_event_id: int | None
    latest_event_id: int | None


def record(answer: Any, cls: type[T]) -> T:
    """`answer` as record `cls`; a malformed answer is `TransportUnavailable`, not a traceback."""
    try:
        return records.from_wire(answer, cls)
    except Exception as exc:  # cattrs raises several kinds; all mean "not the agreed shape"
        raise errors.TransportUnavailable(
            "transport_unavailable",
            f"the room's answer is not a {cls.__name__} ({type(exc).__name__})",
        ) from None


def event_concerns(event: Event, proposal_id: str) -> bool:
    return getattr(event.payload, "proposal_id", None) == proposal_id


def sse_item(message: SSEMessage) -> Event | Resync | None:
    """The event or resync a server-sent message carries (None for comments and others)."""
    if message.is_comment:
        return None
    try:
        data = json.loads(message.data)
    except json.JSONDecodeError:
        return None
    if message.event == "resync" and isinstance(data, dict):
        oldest, latest = data.get("oldest_event_id"), data.get("latest_event_id")
        return Resync(str(data.get("reason", "")), oldest if isinstance(oldest, int) else None,
                      latest if isinstance(latest, int) else None)
    try:
        return from_dict(data)
    except Exception:
        return None  # an event type newer than this client: skip it
