"""The room's records, as frozen attrs classes, and the converter to wire JSON.

These are what operations return; `to_wire()` (cattrs) turns them into the
JSON shapes of PROTOCOL.md section 11 at the edge.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import cattrs

converter = cattrs.Converter()
converter.register_unstructure_hook(tuple, lambda t: [converter.unstructure(x) for x in t])


def to_wire(value: Any) -> Any:
    """Records (and containers of records) to plain JSON values."""
    return converter.unstructure(value)


@attrs.frozen
class Actor:
    """Who is calling: always taken from the session, never from a body field."""

    participant_id: str
    capabilities: tuple[str, ...]
    session_hash: bytes
    kind: str
    name: str


@attrs.frozen
class Participant:
    participant_id: str
    kind: str
    name: str
    capabilities: list[str]
    advertised: list[str]
    present: bool
    joined_at: str
    last_seen: str | None


@attrs.frozen
class Lease:
    lease_id: str
    participant_id: str
    region: str
    acquired_at: str
    expires_at: str


@attrs.frozen
class Proposal:
    proposal_id: str
    participant_id: str
    region: str
    base_version: int
    summary: str
    status: str
    created_at: str
    updated_at: str
    reviewer_id: str | None
    review_comment: str | None
    committed_version: int | None


@attrs.frozen
class VersionInfo:
    version: int
    content_hash: str
    size: int
    summary: str
    participant_id: str | None
    region: str | None
    source: str
    created_at: str


@attrs.frozen
class Change:
    version: int
    summary: str
    participant_id: str | None
    created_at: str


@attrs.frozen
class InvitationInfo:
    invite_id: str
    capabilities: list[str]
    created_by: str | None
    created_at: str
    expires_at: str
    max_uses: int | None
    used_count: int
    revoked_at: str | None
    label: str | None
    state: str  # active | expired | revoked | used_up


@attrs.frozen
class Event:
    event_id: int
    type: str
    created_at: str
    payload: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(
            {
                "event_id": self.event_id,
                "type": self.type,
                "created_at": self.created_at,
                "payload": self.payload,
            },
            separators=(",", ":"),
        )
