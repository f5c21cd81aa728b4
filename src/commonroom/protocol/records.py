"""The wire records: what every operation answers (docs/spec/PROTOCOL.md section 11), as frozen attrs classes.

Operations return these records; `to_wire` (cattrs) turns them into JSON
values at the edge only, and `from_wire` turns an answer back into its record
(the Python client does that). `protocol.schema.json_schema` derives the JSON
Schema of each one for MCP's `outputSchema` and the OpenAPI document, so the
shapes are written once, here.

Fields are the ones docs/spec/PROTOCOL.md requires plus the additive ones
`docs/protocol.md` lists. A field that is `X | None` is always present and
may be null.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs
import cattrs

from commonroom.protocol.events import Event, UndoneChange, from_dict, payload_json

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
    left: bool = False
    """Ran `ce leave` (or left over the API): listed for history, never present again."""
    label: str | None = None
    """The label of the host's invitation it joined through (`ce invite --label`), if any."""
    runtime: Runtime | None = None
    """A resident runtime's last report (`ce agent`, PROTOCOL section 19), else null."""


@attrs.frozen
class Runtime:
    state: str
    harness: str
    queued: int
    turn: int
    turn_started_at: str | None
    note: str | None
    updated_at: str


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
    max_sessions: int
    """How many sessions joined through it may be active at once (the sessions-per-invitation limit)."""


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
    max_sessions: int


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
    reason: str | None = None
    """Null for an ordinary lease; `human_editing` for the hold an external edit placed."""
    wide: bool = False
    """It holds the whole document, its top heading or more than `WIDE_LEASE_SUBSECTIONS`
    sub-sections (set where leases are listed, for the page's release button)."""


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
    stale: bool = False
    """Open (pending/approved) and its region's text moved on since the base: a commit
    would be refused. Computed by the engine where proposals are listed."""
    amended: bool = False
    """A reviewer changed the text before approving it (docs/spec/PROTOCOL.md section 7)."""
    revision: int = 1
    """Raised by 1 by each revise (and applied rebase) of the proposal (docs/spec/PROTOCOL.md 17)."""
    rebased: bool = False
    """Its latest revision came from a rebase onto a newer version."""


@attrs.frozen
class Proposals:
    proposals: list[Proposal]


@attrs.frozen(kw_only=True)
class ProposalDetail(Proposal):
    """One proposal (every field of `Proposal`) with its text and the diff from the region's
    current text; `stale` is computed for any status here."""

    content: str
    current_version: int
    diff: str
    original_content: str | None
    """The author's text when a reviewer amended it before approving, else null."""
    pruned: bool = False
    """The room dropped this terminal proposal's text (the bound on proposal text): `content` and `diff` are empty."""
    amended: bool = False
    """A reviewer changed the text before approving it: `content` is what they approved."""
    proposed_content: str | None = None
    """The author's own text when amended (docs/spec/PROTOCOL.md section 7), else null."""
    # -- the review conversation (docs/spec/PROTOCOL.md section 17); `revision` (the latest)
    # and `rebased` come with `Proposal`.
    revisions: list[RevisionInfo] = attrs.Factory(list)
    """Every revision, oldest first (the last one is `revision`)."""
    content_revision: int = 1
    """The revision `content` and `diff` are of (`?revision=N`; default the latest)."""
    revision_diff: str = ""
    """Unified diff from the revision before `content_revision` to it ("" for the first)."""
    warnings: list[str] = attrs.field(factory=list)
    """What the change does beyond its region, for the reviewer: a link reference definition
    it adds, removes or changes that links in other sections use."""


@attrs.frozen
class RevisionInfo:
    revision: int
    base_version: int
    summary: str
    created_at: str
    rebased: bool
    by: str | None = None
    """`host_editor` when the room rebased the proposal onto a host's save (PROTOCOL.md 16)."""


@attrs.frozen
class Reviewed:
    proposal_id: str
    status: str
    reviewer_id: str


# -- the review conversation (docs/spec/PROTOCOL.md section 17) ------------------------------


@attrs.frozen
class Comment:
    comment_id: str
    participant_id: str
    body: str
    created_at: str


@attrs.frozen
class Thread:
    """A conversation anchored to a region and, optionally, an exact quote of its text."""

    thread_id: str
    region: str
    quote: str | None
    blocking: bool
    status: str
    """open | resolved | outdated (its region or quote is gone; kept, never deleted)."""
    author_id: str
    proposal_id: str | None
    """The proposal whose review comment opened it, else null."""
    created_at: str
    updated_at: str
    comments: list[Comment]


@attrs.frozen
class Threads:
    threads: list[Thread]


@attrs.frozen
class RebaseConflict:
    """One conflicting hunk: the base text, the proposal's (ours) and the current text's (theirs)."""

    base: str
    ours: str
    theirs: str


@attrs.frozen
class Rebased:
    """`workspace.proposal.rebase`: a three-way merge of the region; `applied` when it became a
    new revision."""

    proposal_id: str
    clean: bool
    content: str | None
    """The merged region text when clean, else null."""
    base_version: int
    """The version the merge is based on (the current one)."""
    conflicts: list[RebaseConflict]
    applied: bool
    revision: int
    """The proposal's revision after the call."""
    status: str
    note: str | None = None
    """Null, or why the answer is not a merge: past the merge's cost bound, "too large to
    merge: the three texts in full, as one conflict" (`conflicts` then holds the region's
    base, the proposal's and the current text whole)."""


@attrs.frozen
class Committed:
    version: int
    content_hash: str
    summary: str
    region: str
    proposal_id: str | None  # null for a raw commit


# -- handoffs, tasks, room text, attachments, surfaces (docs/spec/PROTOCOL.md 9, 10, 10.1) ---


@attrs.frozen
class Handoff:
    """Every handoff route answers this bare (docs/spec/PROTOCOL.md 10.1)."""

    handoff_id: str
    request_id: str | None
    from_participant_id: str
    to_participant_id: str
    summary: str
    details: str | None
    region: str | None
    attachment_ids: list[str]
    status: str  # requested | accepted | declined | completed | failed | cancelled
    task_id: str | None
    result_summary: str | None
    result_details: str | None
    reason: str | None
    created_at: str
    updated_at: str


@attrs.frozen
class Handoffs:
    handoffs: list[Handoff]


@attrs.frozen
class TaskResult:
    summary: str | None
    details: str | None


@attrs.frozen
class Task:
    """The MCP tasks-extension view of an accepted handoff (the handoff owns it)."""

    task_id: str
    handoff_id: str
    status: str  # working | input_required | completed | failed | cancelled
    status_message: str | None
    from_participant_id: str
    to_participant_id: str
    created_at: str
    updated_at: str
    result: TaskResult | None


@attrs.frozen
class Message:
    message_id: str
    seq: int
    participant_id: str
    to: list[str]
    handoff_id: str | None
    text: str
    created_at: str


@attrs.frozen
class Messages:
    messages: list[Message]
    latest_seq: int
    """The newest message's seq (0 when none): page with `after` up to it."""


@attrs.frozen
class Attachment:
    """An attachment's description (the add answer); `AttachmentData` adds its bytes."""

    attachment_id: str
    file_name: str
    mime_type: str
    size: int
    sha256: str
    participant_id: str
    handoff_id: str | None
    created_at: str


@attrs.frozen
class AttachmentDeleted:
    """`attachment.delete`: the attachment is gone (`attachment.removed`, reason `deleted`)."""

    attachment_id: str
    deleted: bool


@attrs.frozen(kw_only=True)
class AttachmentData(Attachment):
    """`attachment.get`: the attachment's description and its bytes."""

    data_base64: str


@attrs.frozen
class Surface:
    """A participant's current surface (the publish answer)."""

    participant_id: str
    mime_type: str
    size: int
    sha256: str
    published_at: str


@attrs.frozen
class SurfaceData:
    """`surface.read`: `published` false (and the rest null) when there is none.

    Not a subclass of `Surface` (as `ProposalDetail` is of `Proposal`): its shared fields
    are nullable where `Surface`'s are not, and `Surface` cannot carry `published` and
    `data_base64` without changing the publish answer on the wire.
    """

    participant_id: str
    published: bool
    mime_type: str | None
    size: int | None
    sha256: str | None
    published_at: str | None
    data_base64: str | None


@attrs.frozen
class SurfaceClearedAnswer:
    participant_id: str
    cleared: bool
    """False when there was nothing to clear."""


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
    # docs/spec/PROTOCOL.md section 16: "settling" while a change of the file is not recorded
    # yet (reads answer from `version`), "unusable" while the room cannot take the
    # file (not UTF-8, unreadable; writes are refused), else "settled".
    file: str = "settled"


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
    # provenance (docs/spec/PROTOCOL.md 18): what the version changed and how, for "Restore this section"
    region: str | None = None
    source: str | None = None


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
    handoffs: list[Handoff]
    """The open ones: requested or accepted."""
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
    max_sessions: int  # active guest sessions at once (`ce serve --max-sessions`)
    max_participants: int


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


@attrs.frozen
class ProposalWaited:
    """`workspace.proposal.wait`: the proposal once it left `pending`, or as it is at the
    timeout with `waiting: true` (then ask again)."""

    proposal: Proposal
    waiting: bool


@attrs.frozen
class ThreadWaited:
    """`workspace.thread.wait`: the thread once someone else has the last word (or it is no
    longer open), or as it is at the timeout with `waiting: true` (then ask again)."""

    thread: Thread
    waiting: bool


# -- workspace.ping (the walkthrough's example operation: docs/architecture.md)


@attrs.frozen
class Pong:
    """`workspace.ping`: the caller, the current version and the room's time."""

    participant_id: str
    version: int
    server_time: str


# -- provenance: blame, revert and restore, auto-approve policies (docs/spec/PROTOCOL.md 18) -----


@attrs.frozen
class BlameLine:
    """One line of a region and who last changed it (`kind`: agent | human | host_editor)."""

    line: int
    """1-based line number in the document at the blamed version."""
    text: str
    version: int
    """The version that last changed this line."""
    participant_id: str | None
    name: str
    kind: str
    proposal_id: str | None = None
    amended_by: str | None = None
    """The reviewer who changed this line in edit-before-approve (a participant or policy id)."""


@attrs.frozen
class BlameAnswer:
    version: int
    region: str
    lines: list[BlameLine]


@attrs.frozen
class PolicyApproval:
    """A proposal an auto-approve policy approved."""

    proposal_id: str
    participant_id: str
    region: str
    summary: str
    status: str
    approved_at: str


@attrs.frozen
class Policy:
    """A scoped auto-approve rule (host only)."""

    policy_id: str
    participant_id: str | None
    name_pattern: str | None
    region_pattern: str
    max_changed_lines: int
    expires_at: str | None
    paused: bool
    created_at: str
    active: bool
    """Neither paused nor expired: it approves matching proposals now."""
    approved_count: int
    approved: list[PolicyApproval]
    """The newest proposals it approved (at most 20)."""
    label: str | None = None
    """It approves for the participants that joined through an invitation the host gave this
    label (or for `participant_id`)."""


@attrs.frozen
class Policies:
    policies: list[Policy]


@attrs.frozen
class PolicyRemoved:
    policy_id: str
    removed: bool


@attrs.frozen
class PoliciesPaused:
    paused: bool
    policy_ids: list[str]


@attrs.frozen
class Reverted:
    """`workspace.revert`: the new version that undid what `reverts` changed."""

    version: int
    content_hash: str
    summary: str
    region: str
    reverts: int


@attrs.frozen
class UndoneSave:
    """A host's save that took back recent changes by others, and the host's choice
    (`reapplied`, `kept`, or None: not chosen yet). PROTOCOL.md 16, wave 4."""

    version: int
    undoes: list[UndoneChange]
    settled: str | None
    created_at: str


@attrs.frozen
class UndoneSaves:
    saves: list[UndoneSave]


@attrs.frozen
class Reapplied:
    """`workspace.reapply`: the host re-applied what the save `version` undid (a new
    version, `new_version`) or kept the save (`kept`: nothing written)."""

    version: int
    settled: str
    new_version: int | None
    content_hash: str | None


@attrs.frozen
class Restored:
    """`workspace.restore`: the new version with `region` as it was at `restores`."""

    version: int
    content_hash: str
    summary: str
    region: str
    restores: int


# -- task surfaces: live views, generated apps, app requests (docs/spec/PROTOCOL.md 20)


@attrs.frozen
class LiveView:
    """A task's current live view: the agent's declarative draft and who published it when."""

    task_id: str
    surface_id: str
    revision: int
    root: dict[str, Any]
    data: dict[str, Any]
    participant_id: str
    published_at: str


@attrs.frozen
class LiveViewAnswer:
    """`task.live_view`: the view now current (null once cleared)."""

    task_id: str
    live_view: LiveView | None
    cleared: bool


@attrs.frozen
class TaskApp:
    """A task's generated app: its bundle as published, and its revision (1 for the first)."""

    task_id: str
    revision: int
    title: str
    bundle: dict[str, Any]
    size: int
    participant_id: str
    published_at: str


@attrs.frozen
class AppPublished:
    """`task.app`: the app's new revision (the bundle is not echoed) and its state's."""

    task_id: str
    revision: int
    title: str
    size: int
    state_revision: int
    participant_id: str
    published_at: str


@attrs.frozen
class AppState:
    """The shared state of a task's app; `participant_id` null: the bundle's initialState."""

    task_id: str
    app_revision: int
    revision: int
    state: Any
    participant_id: str | None
    updated_at: str


@attrs.frozen
class TaskSurfaces:
    """Everything a task shows: `open` false once the task ended (kept until `expires_at`)."""

    task_id: str
    handoff_id: str
    summary: str
    open: bool
    expires_at: str | None
    live_view: LiveView | None
    app: TaskApp | None
    app_state: AppState | None


@attrs.frozen
class TaskSurfacesList:
    surfaces: list[TaskSurfaces]


@attrs.frozen
class AppReply:
    """`task.app_request`: the app's reply, from the page that hosted it."""

    task_id: str
    app_revision: int
    reply: Any

# -- resident agents (docs/spec/PROTOCOL.md section 19) -----------------------------------------


@attrs.frozen
class PermissionOptionRecord:
    option_id: str
    name: str
    kind: str


@attrs.frozen
class PermissionRequest:
    permission_id: str
    participant_id: str
    title: str
    tool: str
    input_preview: str
    options: list[PermissionOptionRecord]
    status: str
    """`pending`, `answered` or `expired`."""
    option_id: str | None
    """The answer: exactly one of the offered options (null while pending or once expired)."""
    answered_by: str | None
    created_at: str
    expires_at: str
    answered_at: str | None


@attrs.frozen
class PermissionRequests:
    permissions: list[PermissionRequest]


@attrs.frozen
class RuntimeControl:
    """The answer of an interrupt or a resume: what the runtime is told (by its event)."""

    participant_id: str
    turn: int | None
    runtime: Runtime | None
