"""The wire records: what every operation answers (PROTOCOL.md section 11), as frozen attrs classes.

Operations return these records; `to_wire` (cattrs) turns them into JSON
values at the edge only, and `from_wire` turns an answer back into its record
(the Python client does that). `protocol.schema.json_schema` derives the JSON
Schema of each one for MCP's `outputSchema` and the OpenAPI document, so the
shapes are written once, here.

Fields are the ones PROTOCOL.md requires plus the additive ones
`docs/protocol.md` lists. A field that is `X | None` is always present and
may be null.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs
import cattrs

from commonroom.protocol.events import Event, from_dict, payload_json

T = TypeVar("T")

converter = cattrs.Converter()
converter.register_unstructure_hook(tuple, lambda t: [converter.unstructure(x) for x in t])
converter.register_unstructure_hook(Event, lambda event: event.to_dict())
converter.register_structure_hook(Event, lambda raw, _: from_dict(raw))


def to_wire(value: Any) -> Any:
    """Records (and containers of records) to plain JSON values."""
    return converter.unstructure(value)


def from_wire(raw: Any, cls: type[T]) -> T:
    """A wire JSON value back into its record (unknown extra fields are ignored)."""
    return converter.structure(raw, cls)


__all__ = ["from_wire", "payload_json", "to_wire"]


# -- participants, sessions, invitations -------------------------------------------


@attrs.frozen
class Joined:
    """`session.join`: the session bearer appears in this answer only."""

    session_id: str
    participant_id: str
    workspace_id: str
    kind: str
    name: str
    capabilities: list[str]
    expires_at: str


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
class Participants:
    participants: list[Participant]


@attrs.frozen
class Left:
    participant_id: str
    left: bool


@attrs.frozen
class SessionsRevoked:
    participant_id: str
    revoked_sessions: int


@attrs.frozen
class InvitationCreatedAnswer:
    """`workspace.invite`: the `commonroom://` URI appears in this answer only."""

    invite_id: str
    invitation: str
    expires_at: str
    capabilities: list[str]
    max_uses: int | None


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
class Invitations:
    invitations: list[InvitationInfo]


# -- leases ---------------------------------------------------------------------


@attrs.frozen
class Lease:
    lease_id: str
    participant_id: str
    region: str
    acquired_at: str
    expires_at: str


@attrs.frozen
class Leases:
    leases: list[Lease]


@attrs.frozen
class Released:
    lease_id: str
    released: bool


# -- proposals and commits --------------------------------------------------------


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
class Proposals:
    proposals: list[Proposal]


@attrs.frozen
class ProposalDetail:
    """One proposal with its text and the diff from the region's current text."""

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
    content: str
    current_version: int
    diff: str
    stale: bool
    """The region's text moved on since the base: a commit would be refused."""
    original_content: str | None
    """The author's text when a reviewer amended it before approving, else null."""


@attrs.frozen
class Reviewed:
    proposal_id: str
    status: str
    reviewer_id: str


@attrs.frozen
class Committed:
    version: int
    content_hash: str
    summary: str
    region: str
    proposal_id: str | None  # null for a raw commit


# -- reads ----------------------------------------------------------------------


@attrs.frozen
class Status:
    workspace_id: str
    version: int
    content_hash: str
    name: str
    substrate: str
    lifecycle: str
    participants: int
    active_leases: int
    pending_proposals: int


@attrs.frozen
class OutlineEntry:
    region: str
    title: str
    level: int


@attrs.frozen
class Summary:
    version: int
    outline: list[OutlineEntry]
    excerpt: str
    size: int


@attrs.frozen
class RegionInfo:
    region: str
    title: str
    level: int
    line: int


@attrs.frozen
class Regions:
    version: int
    regions: list[RegionInfo]


@attrs.frozen
class ReadAnswer:
    version: int
    region: str
    content: str
    truncated: bool


@attrs.frozen
class DiffAnswer:
    base_version: int
    current_version: int
    to_version: int
    region: str
    diff: str


@attrs.frozen
class Change:
    version: int
    summary: str
    participant_id: str | None
    created_at: str


@attrs.frozen
class Changes:
    from_version: int
    to_version: int
    current_version: int
    changes: list[Change]


@attrs.frozen
class History:
    events: list[Event]


@attrs.frozen
class RoomSnapshot:
    """One consistent snapshot plus the event id it is current to (observe from there)."""

    status: Status
    participants: list[Participant]
    leases: list[Lease]
    proposals: list[Proposal]
    handoffs: list[dict[str, Any]]
    latest_event_id: int


@attrs.frozen
class TransportInfo:
    type: str
    encrypted: bool
    mode: str | None


@attrs.frozen
class RingInfo:
    oldest_event_id: int
    latest_event_id: int
    ring_size: int


@attrs.frozen
class LimitsInfo:
    requests_per_minute: int
    anonymous_requests_per_minute: int
    body_bytes: int
    proposal_bytes: int
    list_max: int


@attrs.frozen
class Diagnostics:
    """What is running, never where: the transport is named, its address is not."""

    workspace_id: str
    protocol: str
    protocol_version: str
    transport: TransportInfo
    version: int
    events: RingInfo
    limits: LimitsInfo


# -- streams ----------------------------------------------------------------------


@attrs.frozen
class WaitAnswer:
    """`workspace.wait`: the events after the cursor (or `resync`), and the new cursor."""

    events: list[Event]
    cursor: int
    resync: bool
    latest_event_id: int
