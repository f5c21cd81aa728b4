"""The event catalogue: every event type of docs/spec/PROTOCOL.md section 8, as data.

Theory of operation
-------------------
Each event type is one frozen attrs record (its payload, typed) that names its
type in `TYPE`. The engine emits records, never strings (`Tx.emit(LeaseReleased(...))`),
so an unknown type or a missing payload field cannot be written: mypy and the
record's constructor refuse it. `EVENTS` says, for each type, which MCP
resources its commit changes (`RESOURCES`; the MCP layer derives its
`notifications/resources/updated` from this and from nothing else) and, with
`ends_streams`, that it ends the open streams of the participant its payload
names (a revoked, expired or left session).

`Event` is one stored event: id, type, time and payload record. `Event.wire`
is the one serializer (`{"event_id", "type", "created_at", "payload"}`,
compact JSON), computed once per event and shared by SSE, WebSocket,
long-poll, history and MCP. `load` turns a row of the sidecar's ring back into
an `Event`.

This module lives in `protocol/` (not `engine/`) because clients decode
events too and must not import the engine.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any, ClassVar, Final

import attrs
import cattrs

# The resources an event can touch. The first five are the subscribable MCP
# resources (docs/spec/PROTOCOL.md section 12); the others are reported for the page
# and for `subscriptions/listen` task streams.
RESOURCES: Final[tuple[str, ...]] = (
    "status",
    "document",
    "proposals",
    "leases",
    "participants",
    "handoffs",
    "messages",
    # -- the review conversation (PROTOCOL.md 17): threads, for the page and subscriptions/listen
    "threads",
    # -- task surfaces (docs/spec/PROTOCOL.md 20): live views and apps, for the page's task cards
    "task_surfaces",
    # -- the host's invitations, for the page's Invitations panel (its panels are chosen by resource)
    "invitations",
)


class Payload:
    """Base of every event payload record; subclasses set `TYPE`."""

    TYPE: ClassVar[str]


# -- workspace ------------------------------------------------------------------


@attrs.frozen
class WorkspaceCreated(Payload):
    TYPE: ClassVar[str] = "workspace.created"
    version: int


@attrs.frozen
class WorkspaceStarted(Payload):
    TYPE: ClassVar[str] = "workspace.started"
    version: int


@attrs.frozen
class WorkspaceStopped(Payload):
    TYPE: ClassVar[str] = "workspace.stopped"
    version: int


# -- participants and sessions --------------------------------------------------


@attrs.frozen
class ParticipantJoined(Payload):
    TYPE: ClassVar[str] = "participant.joined"
    participant_id: str
    kind: str
    name: str
    capabilities: list[str]


@attrs.frozen
class ParticipantLeft(Payload):
    TYPE: ClassVar[str] = "participant.left"
    participant_id: str


@attrs.frozen
class ParticipantPresent(Payload):
    TYPE: ClassVar[str] = "participant.present"
    participant_id: str


@attrs.frozen
class ParticipantAway(Payload):
    TYPE: ClassVar[str] = "participant.away"
    participant_id: str


@attrs.frozen
class SessionCreated(Payload):
    TYPE: ClassVar[str] = "session.created"
    participant_id: str
    expires_at: str


@attrs.frozen
class SessionExpired(Payload):
    TYPE: ClassVar[str] = "session.expired"
    participant_id: str


@attrs.frozen
class SessionRevoked(Payload):
    TYPE: ClassVar[str] = "session.revoked"
    participant_id: str


# -- invitations ----------------------------------------------------------------


@attrs.frozen
class InvitationCreated(Payload):
    TYPE: ClassVar[str] = "invitation.created"
    invite_id: str
    capabilities: list[str]
    expires_at: str
    max_uses: int | None


@attrs.frozen
class InvitationRedeemed(Payload):
    TYPE: ClassVar[str] = "invitation.redeemed"
    invite_id: str
    participant_id: str


@attrs.frozen
class InvitationRevoked(Payload):
    TYPE: ClassVar[str] = "invitation.revoked"
    invite_id: str


# -- leases ---------------------------------------------------------------------


@attrs.frozen
class LeaseAcquired(Payload):
    TYPE: ClassVar[str] = "lease.acquired"
    lease_id: str
    participant_id: str
    region: str
    expires_at: str


@attrs.frozen
class LeaseRenewed(Payload):
    TYPE: ClassVar[str] = "lease.renewed"
    lease_id: str
    participant_id: str
    region: str
    expires_at: str


@attrs.frozen
class LeaseReleased(Payload):
    TYPE: ClassVar[str] = "lease.released"
    lease_id: str
    participant_id: str
    region: str
    reason: str  # released | left | region_removed | revoked


@attrs.frozen
class LeaseExpired(Payload):
    TYPE: ClassVar[str] = "lease.expired"
    lease_id: str
    participant_id: str
    region: str


# -- proposals and changes ------------------------------------------------------


@attrs.frozen
class ProposalCreated(Payload):
    TYPE: ClassVar[str] = "proposal.created"
    proposal_id: str
    participant_id: str
    region: str
    base_version: int
    summary: str


@attrs.frozen
class ProposalApproved(Payload):
    TYPE: ClassVar[str] = "proposal.approved"
    proposal_id: str
    reviewer_id: str
    # docs/spec/PROTOCOL.md section 7: the comment reaches the author in the review event.
    comment: str | None = None
    # docs/spec/PROTOCOL.md section 18: set when an auto-approve policy approved it (reviewer "policy:po_…").
    policy_id: str | None = None


@attrs.frozen
class ProposalRejected(Payload):
    TYPE: ClassVar[str] = "proposal.rejected"
    proposal_id: str
    reviewer_id: str
    comment: str | None = None


@attrs.frozen
class ProposalAmended(Payload):
    TYPE: ClassVar[str] = "proposal.amended"
    proposal_id: str
    reviewer_id: str


@attrs.frozen
class ProposalCommitted(Payload):
    TYPE: ClassVar[str] = "proposal.committed"
    proposal_id: str
    version: int


@attrs.frozen
class ProposalConflicted(Payload):
    TYPE: ClassVar[str] = "proposal.conflicted"
    proposal_id: str


@attrs.frozen
class ProposalSuperseded(Payload):
    TYPE: ClassVar[str] = "proposal.superseded"
    proposal_id: str


@attrs.frozen
class ProposalWithdrawn(Payload):
    TYPE: ClassVar[str] = "proposal.withdrawn"
    proposal_id: str


# -- the review conversation (docs/spec/PROTOCOL.md section 17) ---------------------------


@attrs.frozen
class ProposalChangesRequested(Payload):
    """A reviewer asked for changes; the comment reaches the author here (and in a thread)."""

    TYPE: ClassVar[str] = "proposal.changes_requested"
    proposal_id: str
    reviewer_id: str
    comment: str


@attrs.frozen
class ProposalRevised(Payload):
    TYPE: ClassVar[str] = "proposal.revised"
    proposal_id: str
    participant_id: str
    revision: int
    base_version: int
    summary: str
    rebased: bool
    by: str | None = None
    """`host_editor`: the room rebased it onto a host's save (PROTOCOL.md 16); else absent."""


@attrs.frozen
class ThreadOpened(Payload):
    TYPE: ClassVar[str] = "thread.opened"
    thread_id: str
    region: str
    participant_id: str
    blocking: bool
    proposal_id: str | None


@attrs.frozen
class ThreadReplied(Payload):
    TYPE: ClassVar[str] = "thread.replied"
    thread_id: str
    region: str
    participant_id: str
    comment_id: str


@attrs.frozen
class ThreadResolved(Payload):
    """`resolved` false: the thread was reopened."""

    TYPE: ClassVar[str] = "thread.resolved"
    thread_id: str
    region: str
    participant_id: str
    resolved: bool


@attrs.frozen
class ThreadOutdated(Payload):
    """Its region or its quote is gone at `version` (the thread is kept)."""

    TYPE: ClassVar[str] = "thread.outdated"
    thread_id: str
    region: str
    version: int


@attrs.frozen
class ThreadReanchored(Payload):
    """An outdated thread's region and quote are back at `version`: it is open again."""

    TYPE: ClassVar[str] = "thread.reanchored"
    thread_id: str
    region: str
    version: int


@attrs.frozen
class UndoneChange:
    """A version by someone else whose change a host's save took back."""

    version: int
    participant_id: str


@attrs.frozen
class ChangeCommitted(Payload):
    TYPE: ClassVar[str] = "change.committed"
    version: int
    summary: str
    participant_id: str | None
    region: str
    source: str  # proposal | raw | external | revert | restore
    # provenance (docs/spec/PROTOCOL.md section 18): the version a revert undid / a restore went back to
    reverts: int | None = None
    restores: int | None = None
    # a host's save that took back recent changes by others (PROTOCOL.md 16, wave 4)
    undoes: list[UndoneChange] | None = None


# -- handoffs, tasks, messages --------------------------------------------------


@attrs.frozen
class _HandoffPayload(Payload):
    handoff_id: str
    from_participant_id: str
    to_participant_id: str
    summary: str


@attrs.frozen
class HandoffRequested(_HandoffPayload):
    TYPE: ClassVar[str] = "handoff.requested"


@attrs.frozen
class HandoffAccepted(_HandoffPayload):
    TYPE: ClassVar[str] = "handoff.accepted"


@attrs.frozen
class HandoffDeclined(_HandoffPayload):
    TYPE: ClassVar[str] = "handoff.declined"


@attrs.frozen
class HandoffCompleted(_HandoffPayload):
    TYPE: ClassVar[str] = "handoff.completed"


@attrs.frozen
class HandoffFailed(_HandoffPayload):
    TYPE: ClassVar[str] = "handoff.failed"


@attrs.frozen
class HandoffCancelled(_HandoffPayload):
    TYPE: ClassVar[str] = "handoff.cancelled"


@attrs.frozen
class TaskUpdated(Payload):
    TYPE: ClassVar[str] = "task.updated"
    task_id: str
    handoff_id: str
    status: str
    status_message: str | None


@attrs.frozen
class MessageSent(Payload):
    TYPE: ClassVar[str] = "message.sent"
    message_id: str
    participant_id: str
    to: list[str]
    text: str
    handoff_id: str | None


@attrs.frozen
class AttachmentAdded(Payload):
    TYPE: ClassVar[str] = "attachment.added"
    attachment_id: str
    participant_id: str
    handoff_id: str | None
    mime_type: str
    size: int


@attrs.frozen
class AttachmentRemoved(Payload):
    TYPE: ClassVar[str] = "attachment.removed"
    attachment_id: str
    reason: str


@attrs.frozen
class SurfacePublished(Payload):
    TYPE: ClassVar[str] = "surface.published"
    participant_id: str


@attrs.frozen
class SurfaceCleared(Payload):
    TYPE: ClassVar[str] = "surface.cleared"
    participant_id: str


@attrs.frozen
class GuardTripped(Payload):
    TYPE: ClassVar[str] = "guard.tripped"
    participant_id: str
    target_participant_id: str
    kind: str  # message | handoff
    retry_after_seconds: int


# -- task surfaces (docs/spec/PROTOCOL.md 20) -------------------------------------


@attrs.frozen
class TaskLiveView(Payload):
    """A task's live view was published or replaced (`revision`), or went (`reason`:
    `cleared` by its agent, `task_ended` 60 minutes after the task ended)."""

    TYPE: ClassVar[str] = "task.live_view"
    task_id: str
    surface_id: str | None
    revision: int | None
    participant_id: str
    reason: str | None = None


@attrs.frozen
class TaskAppPublished(Payload):
    """A task's app was published or replaced (`revision`), or went (`reason`: `task_ended`)."""

    TYPE: ClassVar[str] = "task.app"
    task_id: str
    revision: int | None
    title: str | None
    participant_id: str
    reason: str | None = None


@attrs.frozen
class TaskAppState(Payload):
    """A task's app state moved to `revision` (a compare-and-set, or a new bundle's initialState)."""

    TYPE: ClassVar[str] = "task.app_state"
    task_id: str
    app_revision: int
    revision: int
    participant_id: str


# -- resident agents (docs/spec/PROTOCOL.md section 19) -----------------------------------------


@attrs.frozen
class ParticipantRuntime(Payload):
    """A resident runtime reported its state (`POST /workspace/runtime`)."""

    TYPE: ClassVar[str] = "participant.runtime"
    participant_id: str
    state: str
    harness: str
    queued: int
    turn: int
    turn_started_at: str | None
    note: str | None = None


@attrs.frozen
class PermissionRequested(Payload):
    TYPE: ClassVar[str] = "permission.requested"
    permission_id: str
    participant_id: str
    title: str
    tool: str
    expires_at: str


@attrs.frozen
class PermissionAnswered(Payload):
    TYPE: ClassVar[str] = "permission.answered"
    permission_id: str
    participant_id: str
    option_id: str
    answered_by: str


@attrs.frozen
class PermissionExpired(Payload):
    TYPE: ClassVar[str] = "permission.expired"
    permission_id: str
    participant_id: str


@attrs.frozen
class PermissionWithdrawn(Payload):
    """The asking runtime withdrew its request: the turn that asked ended before an answer."""

    TYPE: ClassVar[str] = "permission.withdrawn"
    permission_id: str
    participant_id: str


@attrs.frozen
class RuntimeInterrupted(Payload):
    """The host asked the runtime of `participant_id` to cancel turn `turn` (that turn only)."""

    TYPE: ClassVar[str] = "runtime.interrupted"
    participant_id: str
    turn: int
    by: str


@attrs.frozen
class RuntimeResumed(Payload):
    """The host resumed a paused runtime."""

    TYPE: ClassVar[str] = "runtime.resumed"
    participant_id: str
    by: str


# -- the catalogue --------------------------------------------------------------


@attrs.frozen
class EventSpec:
    """What the room knows about one event type."""

    name: str
    payload: type[Payload]
    resources: frozenset[str]
    """The resources whose content a commit of this event changes."""
    ends_streams: bool = False
    """The event ends the open streams of `payload.participant_id` (if its session is dead)."""
    schedules_expiry: bool = False
    """Its commit may bring the next expiry closer (something new that expires, or an end that
    starts a grace period): the room's sweeper, asleep until the earliest expiry it knew of,
    looks again (`Room._expires_before_the_sweep`; an `expires_at` in the payload lets it
    skip a look that would find nothing earlier)."""


def _spec(payload: type[Payload], resources: tuple[str, ...] = (), *, ends_streams: bool = False,
          schedules_expiry: bool = False) -> EventSpec:
    unknown = set(resources) - set(RESOURCES)
    if unknown:
        raise ValueError(f"{payload.TYPE}: unknown resources {sorted(unknown)}")
    return EventSpec(payload.TYPE, payload, frozenset(resources), ends_streams, schedules_expiry)


_S, _D, _PR, _L, _PA, _H, _M, _T, *_LATER = RESOURCES

EVENTS: Final[dict[str, EventSpec]] = {
    spec.name: spec
    for spec in (
        _spec(WorkspaceCreated, (_S, _D)),
        _spec(WorkspaceStarted, (_S,)),
        _spec(WorkspaceStopped, (_S,)),
        _spec(ParticipantJoined, (_S, _PA)),
        _spec(ParticipantLeft, (_S, _PA), ends_streams=True),
        _spec(ParticipantPresent, (_PA,)),
        _spec(ParticipantAway, (_PA,)),
        _spec(SessionCreated, schedules_expiry=True),
        _spec(SessionExpired, ends_streams=True),
        _spec(SessionRevoked, ends_streams=True),
        _spec(InvitationCreated, ("invitations",)),
        _spec(InvitationRedeemed, ("invitations",)),
        _spec(InvitationRevoked, ("invitations",)),
        _spec(LeaseAcquired, (_S, _L), schedules_expiry=True),
        _spec(LeaseRenewed, (_L,), schedules_expiry=True),
        _spec(LeaseReleased, (_S, _L)),
        _spec(LeaseExpired, (_S, _L)),
        _spec(ProposalCreated, (_S, _PR)),
        _spec(ProposalApproved, (_S, _PR)),
        _spec(ProposalRejected, (_S, _PR)),
        _spec(ProposalAmended, (_PR,)),
        _spec(ProposalCommitted, (_S, _PR)),
        _spec(ProposalConflicted, (_S, _PR)),
        _spec(ProposalSuperseded, (_S, _PR)),
        _spec(ProposalWithdrawn, (_S, _PR)),
        _spec(ChangeCommitted, (_S, _D)),
        _spec(HandoffRequested, (_H,)),
        _spec(HandoffAccepted, (_H,)),
        _spec(HandoffDeclined, (_H,), schedules_expiry=True),
        _spec(HandoffCompleted, (_H,), schedules_expiry=True),
        _spec(HandoffFailed, (_H,), schedules_expiry=True),
        _spec(HandoffCancelled, (_H,), schedules_expiry=True),
        _spec(TaskUpdated, (_H,), schedules_expiry=True),
        _spec(MessageSent, (_M,)),
        _spec(AttachmentAdded, (_M,), schedules_expiry=True),
        _spec(AttachmentRemoved, (_M,)),
        _spec(SurfacePublished, (_PA,)),
        _spec(SurfaceCleared, (_PA,)),
        _spec(GuardTripped),
        # -- the review conversation (PROTOCOL.md 17)
        _spec(ProposalChangesRequested, (_S, _PR)),
        _spec(ProposalRevised, (_S, _PR)),
        _spec(ThreadOpened, (_T,)),
        _spec(ThreadReplied, (_T,)),
        _spec(ThreadResolved, (_T,)),
        _spec(ThreadOutdated, (_T,)),
        # -- task surfaces (docs/spec/PROTOCOL.md 20): only the page's task cards show them
        _spec(TaskLiveView, ("task_surfaces",)),
        _spec(TaskAppPublished, ("task_surfaces",)),
        _spec(TaskAppState, ("task_surfaces",)),

        # -- resident agents (section 19): shown with the participants
        _spec(ParticipantRuntime, (_PA,)),
        _spec(PermissionRequested, (_PA,), schedules_expiry=True),
        _spec(PermissionAnswered, (_PA,)),
        _spec(PermissionExpired, (_PA,)),
        _spec(PermissionWithdrawn, (_PA,)),
        _spec(RuntimeInterrupted, (_PA,)),
        _spec(RuntimeResumed, (_PA,)),

        # -- the host's saves (PROTOCOL.md 16, wave 4)
        _spec(ThreadReanchored, (_T,)),
    )
}

_converter = cattrs.Converter()


def payload_json(payload: Payload) -> dict[str, Any]:
    data: dict[str, Any] = _converter.unstructure(payload)
    return data


@attrs.frozen
class Event:
    """One event of the ring: id, type, time, typed payload."""

    event_id: int
    type: str
    created_at: str
    payload: Payload
    addressed: bool = False
    """True only in the copy an addressee receives (docs/spec/PROTOCOL.md 10.1 "Addressed")."""
    caused_by: bytes | None = attrs.field(default=None, eq=False, repr=False)
    """The hash of the session whose operation emitted it, for live events only (never on
    the wire): a held wait is not answered early by the caller's own events."""

    @property
    def spec(self) -> EventSpec:
        return EVENTS[self.type]

    @property
    def resources(self) -> frozenset[str]:
        return EVENTS[self.type].resources

    def participant(self) -> str | None:
        """The participant the payload is about (`participant_id`), if it has one."""
        value = getattr(self.payload, "participant_id", None)
        return value if isinstance(value, str) else None

    def to_dict(self) -> dict[str, Any]:
        """The event's wire object (`addressed` only when it is true)."""
        out: dict[str, Any] = {
            "event_id": self.event_id,
            "type": self.type,
            "created_at": self.created_at,
            "payload": payload_json(self.payload),
        }
        if self.addressed:
            out["addressed"] = True
        return out

    def addressed_copy(self) -> Event:
        """This event as one of its addressees receives it."""
        return attrs.evolve(self, addressed=True)

    @cached_property
    def wire(self) -> str:
        """The event's wire JSON, serialized once and shared by every stream."""
        return json.dumps(self.to_dict(), separators=(",", ":"))


def check(payload: Payload) -> None:
    """Refuse a payload that is not a record of the catalogue."""
    spec = EVENTS.get(getattr(payload, "TYPE", ""))
    if spec is None or not isinstance(payload, spec.payload):
        raise TypeError(f"{type(payload).__name__} is not in the event catalogue")


def make(event_id: int, created_at: str, payload: Payload, caused_by: bytes | None = None) -> Event:
    check(payload)
    return Event(event_id, payload.TYPE, created_at, payload, caused_by=caused_by)


def load(event_id: int, type_: str, created_at: str, payload_text: str) -> Event:
    """An event read back from the sidecar's ring."""
    return _build(event_id, type_, created_at, json.loads(payload_text))


def from_dict(raw: Any) -> Event:
    """An event from its wire object (what a client receives)."""
    if not isinstance(raw, dict):
        raise ValueError("an event is a JSON object")
    event = _build(raw["event_id"], raw["type"], raw["created_at"], raw.get("payload") or {})
    return attrs.evolve(event, addressed=True) if raw.get("addressed") else event


def _build(event_id: int, type_: str, created_at: str, payload: Any) -> Event:
    spec = EVENTS.get(type_)
    if spec is None:
        raise ValueError(f"event {event_id} has an unknown type {type_!r}")
    return Event(event_id, type_, created_at, _converter.structure(payload, spec.payload))
