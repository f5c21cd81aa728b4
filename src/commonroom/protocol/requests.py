"""The parameter record of every operation: what a call may carry, and its bounds.

One frozen attrs class per operation (shared where two take the same). Each
field's metadata holds its constraints, which the one parser
(`protocol/params.parse_params`) enforces and the schemas (`protocol/schema`:
MCP's inputSchema, `/protocol`, OpenAPI) advertise: `choices`, `min` / `max`,
`max_length`, `pattern` (a regular expression the whole value must match),
`document` (carriage return is text), `doc`. The operation specs
(`protocol/operations.py`) name them; the engine's handlers take them typed.
Here, not in `engine/`, because the adapters and the client read them and may
not import the engine.
"""

from __future__ import annotations

from typing import Any

import attrs

from commonroom.protocol import limits, vocabulary
from commonroom.protocol.schema import NONBLANK

_LIMIT = {"min": 1, "max": limits.LIST_MAX}
_MINUTES = {"min": 1, "max": limits.LEASE_MAX_MINUTES}


@attrs.frozen
class JoinParams:
    invite: str = attrs.field(metadata={"doc": "the invitation secret or the full commonroom:// URI"})
    name: str = attrs.field(metadata={"doc": f"display name, 1-{limits.NAME_MAX} characters",
                                      "pattern": NONBLANK, "max_length": limits.NAME_MAX})
    kind: str = attrs.field(default="agent", metadata={"choices": ("agent", "human")})
    transport: str | None = attrs.field(default=None, metadata={"doc": "how the client dialled (informational)"})


@attrs.frozen
class InviteParams:
    capabilities: list[str] | None = attrs.field(default=None, metadata={"doc": "default: the agent set"})
    expires_in_minutes: int | None = attrs.field(
        default=None, metadata={"min": 1, "max": limits.INVITATION_MAX_MINUTES}
    )
    max_uses: int | None = attrs.field(default=1, metadata={"min": 1, "doc": "null = unlimited"})
    label: str | None = attrs.field(default=None, metadata={"max_length": limits.NAME_MAX})
    max_sessions: int | None = attrs.field(default=None, metadata={
        "min": 1, "max": limits.INVITATION_SESSIONS_MAX,
        "doc": f"active sessions joined through it at once (default {limits.INVITATION_SESSIONS_DEFAULT})",
    })


@attrs.frozen
class InviteIdParams:
    invite_id: str


@attrs.frozen
class ListParams:
    limit: int = attrs.field(default=limits.LIST_DEFAULT, metadata={"min": 1, "max": limits.LIST_MAX})


@attrs.frozen
class ParticipantIdParams:
    participant_id: str


@attrs.frozen
class NoParams:
    pass


@attrs.frozen
class AdvertiseParams:
    capabilities: list[str] = attrs.field(
        metadata={"doc": f"your self-reported tokens (at most {limits.ADVERTISED_MAX_TOKENS} of"
                  f" at most {limits.ADVERTISED_TOKEN_MAX} characters): hints, never authority",
                  "item_max_length": limits.ADVERTISED_TOKEN_MAX}
    )


@attrs.frozen
class ReadParams:
    region: str = attrs.field(
        default=vocabulary.WHOLE,
        metadata={"doc": "heading path, bare unique title, or workspace", "pattern": NONBLANK},
    )
    version: int | None = attrs.field(default=None, metadata={"min": 1})
    max_lines: int | None = attrs.field(default=None, metadata={"min": 1})
    max_bytes: int | None = attrs.field(default=None, metadata={"min": 1})


@attrs.frozen
class DiffParams:
    base_version: int = attrs.field(metadata={"min": 1})
    to_version: int | None = attrs.field(default=None, metadata={"min": 1})
    region: str | None = attrs.field(default=None, metadata={"pattern": NONBLANK})


@attrs.frozen
class ChangesParams:
    version: int = attrs.field(metadata={"min": 0})
    limit: int = attrs.field(default=limits.LIST_DEFAULT, metadata=_LIMIT)


@attrs.frozen
class HistoryParams:
    limit: int = attrs.field(default=limits.LIST_DEFAULT, metadata=_LIMIT)
    before_event_id: int | None = attrs.field(default=None, metadata={"min": 1})


@attrs.frozen
class CheckoutParams:
    region: str = attrs.field(metadata={"doc": "heading path, bare unique title, or workspace",
                                        "pattern": NONBLANK})
    minutes: int = attrs.field(default=limits.LEASE_DEFAULT_MINUTES, metadata=_MINUTES)


@attrs.frozen
class RenewParams:
    lease_id: str
    minutes: int = attrs.field(default=limits.LEASE_DEFAULT_MINUTES, metadata=_MINUTES)


@attrs.frozen
class LeaseIdParams:
    lease_id: str


@attrs.frozen
class ProposeParams:
    region: str = attrs.field(metadata={"doc": "heading path, bare unique title, or workspace",
                                        "pattern": NONBLANK})
    base_version: int = attrs.field(metadata={"min": 1})
    summary: str = attrs.field(metadata={"doc": f"1-{limits.SUMMARY_MAX} characters",
                                         "pattern": NONBLANK, "max_length": limits.SUMMARY_MAX})
    content: str = attrs.field(metadata={
        "doc": "replaces the whole region span, starting with its heading line; the room gives"
               " it the region's line breaks and trailing blank lines",
        "document": True})


@attrs.frozen
class ReviewParams:
    proposal_id: str
    decision: str = attrs.field(metadata={"choices": ("approve", "reject", "request_changes")})
    comment: str | None = attrs.field(default=None, metadata={
        "doc": "for the author (needed by request_changes); opens a thread on the region",
        "document": True})
    content: str | None = attrs.field(default=None, metadata={
        "doc": "approve only: the text to approve instead of the proposed one (edit before approve)",
        "document": True,
    })
    # The review binds to what the reviewer saw (docs/spec/PROTOCOL.md section 7).
    revision: int | None = attrs.field(default=None, metadata={
        "min": 1,
        "doc": "the proposal's revision you read (GET /workspace/proposal); required with approve"
               " and request_changes: when the author revised it since, nothing is decided"
               " (proposal_conflict, reason revised)"})


@attrs.frozen
class ProposalIdParams:
    proposal_id: str


@attrs.frozen
class ProposalDetailParams:
    proposal_id: str
    revision: int | None = attrs.field(default=None, metadata={
        "min": 1, "doc": "this revision's content (default: the latest)"})


@attrs.frozen
class ProposalsParams:
    status: str | None = attrs.field(default=None, metadata={"choices": vocabulary.PROPOSAL_STATUSES})
    limit: int = attrs.field(default=limits.LIST_DEFAULT, metadata={"min": 1, "max": limits.LIST_MAX})


@attrs.frozen
class CommitParams:
    proposal_id: str | None = None
    base_version: int | None = attrs.field(default=None, metadata={"min": 1})
    summary: str | None = attrs.field(default=None, metadata={"max_length": limits.SUMMARY_MAX})
    content: str | None = attrs.field(default=None, metadata={"document": True})


@attrs.frozen
class RequestParams:
    to_participant_id: str = attrs.field(metadata={"doc": "who you ask (a participant id)"})
    summary: str = attrs.field(metadata={"doc": f"what you ask for, 1-{limits.SUMMARY_MAX} characters",
                                         "pattern": NONBLANK, "max_length": limits.SUMMARY_MAX})
    details: str | None = attrs.field(default=None, metadata={"max_length": limits.HANDOFF_DETAILS_MAX})
    region: str | None = attrs.field(default=None, metadata={"doc": "the region it is about"})
    attachment_ids: list[str] | None = attrs.field(
        default=None, metadata={"max_items": limits.HANDOFF_ATTACHMENTS_MAX})
    request_id: str | None = attrs.field(
        default=None,
        metadata={"doc": "your idempotency key: the same request_id with the same body returns"
                  " the same handoff", "max_length": limits.REQUEST_ID_MAX},
    )


@attrs.frozen
class RespondParams:
    handoff_id: str
    decision: str = attrs.field(metadata={"choices": ("accept", "decline")})
    summary: str | None = attrs.field(default=None, metadata={"max_length": limits.SUMMARY_MAX})


@attrs.frozen
class ResultParams:
    handoff_id: str
    status: str = attrs.field(metadata={"choices": ("completed", "failed")})
    summary: str = attrs.field(metadata={"pattern": NONBLANK, "max_length": limits.SUMMARY_MAX})
    details: str | None = attrs.field(default=None, metadata={"max_length": limits.HANDOFF_DETAILS_MAX})


@attrs.frozen
class HandoffIdParams:
    handoff_id: str


@attrs.frozen
class HandoffsParams:
    status: str | None = attrs.field(default=None, metadata={"choices": vocabulary.HANDOFF_STATUSES})
    limit: int = attrs.field(
        default=limits.LIST_DEFAULT, metadata={"min": 1, "max": limits.LIST_MAX}
    )


@attrs.frozen
class TaskIdParams:
    task_id: str


@attrs.frozen
class TaskUpdateParams:
    task_id: str
    status: str = attrs.field(metadata={"choices": vocabulary.TASK_REPORTABLE})
    status_message: str | None = attrs.field(default=None, metadata={"max_length": limits.MESSAGE_MAX_CHARS})
    result_summary: str | None = attrs.field(
        default=None, metadata={"doc": "for completed/failed (default: status_message)",
                                "max_length": limits.SUMMARY_MAX}
    )
    result_details: str | None = attrs.field(default=None, metadata={"max_length": limits.HANDOFF_DETAILS_MAX})


@attrs.frozen
class MessageParams:
    text: str = attrs.field(metadata={"doc": f"1-{limits.MESSAGE_MAX_CHARS} characters",
                                      "pattern": NONBLANK, "max_length": limits.MESSAGE_MAX_CHARS})
    to: list[str] | None = attrs.field(
        default=None, metadata={"doc": "participant ids this turn is addressed to"}
    )
    handoff_id: str | None = attrs.field(default=None, metadata={"doc": "post in this handoff's thread"})


@attrs.frozen
class MessagesParams:
    after: int = attrs.field(default=0, metadata={"min": 0, "doc": "return messages with seq > after"})
    limit: int = attrs.field(
        default=limits.LIST_DEFAULT, metadata={"min": 1, "max": limits.LIST_MAX}
    )
    handoff_id: str | None = attrs.field(default=None, metadata={"doc": "only this handoff's thread"})


@attrs.frozen
class AddParams:
    file_name: str = attrs.field(metadata={"max_length": limits.FILE_NAME_MAX})
    mime_type: str = attrs.field(metadata={"doc": "the declared type; the content decides"})
    data_base64: str = attrs.field(metadata={"doc": "the file, base64 (at most 768 KiB decoded)"})
    handoff_id: str | None = attrs.field(
        default=None, metadata={"doc": "share it only in this handoff (needs handoff)"}
    )


@attrs.frozen
class AttachmentIdParams:
    attachment_id: str


@attrs.frozen
class PublishParams:
    data_base64: str = attrs.field(metadata={"doc": "a PNG, JPEG or WebP image, base64 (<= 768 KiB)"})
    mime_type: str | None = attrs.field(
        default=None, metadata={"doc": "informational: the content decides the type"}
    )


@attrs.frozen
class SurfaceParams:
    participant_id: str | None = attrs.field(default=None, metadata={"doc": "default: yours"})


@attrs.frozen
class ObserveParams:
    since_event_id: int | None = attrs.field(
        default=None,
        metadata={"min": 0, "doc": "replay the retained events after this id first (also the"
                  " Last-Event-ID header, which wins); absent: live from now"},
    )


@attrs.frozen
class WaitParams:
    cursor: int = attrs.field(default=0, metadata={"min": 0, "doc": "the last event id you have"})
    timeout_seconds: float = attrs.field(
        default=0.0, metadata={"min": 0, "max": limits.WAIT_MAX_SECONDS,
                               "doc": "how long to hold the request when nothing is new"},
    )


# -- waiting for a person: one call, no cursor (docs/spec/PROTOCOL.md 12)

_HOLD_DOC = ("how long to hold the request while nothing changed (default and most:"
             f" {limits.WAIT_MAX_SECONDS}); call again while the answer says waiting")


@attrs.frozen
class ProposalWaitParams:
    proposal_id: str
    timeout_seconds: float = attrs.field(default=float(limits.WAIT_MAX_SECONDS), metadata={
        "min": 0, "max": limits.WAIT_MAX_SECONDS, "doc": _HOLD_DOC})


@attrs.frozen
class ThreadWaitParams:
    thread_id: str
    timeout_seconds: float = attrs.field(default=float(limits.WAIT_MAX_SECONDS), metadata={
        "min": 0, "max": limits.WAIT_MAX_SECONDS, "doc": _HOLD_DOC})


# -- provenance: blame, revert and restore, auto-approve policies (docs/spec/PROTOCOL.md 18)


@attrs.frozen
class BlameParams:
    region: str = attrs.field(default=vocabulary.WHOLE, metadata={
        "doc": "heading path, bare unique title, or workspace", "pattern": NONBLANK})
    version: int | None = attrs.field(default=None, metadata={"min": 1})


@attrs.frozen
class RevertParams:
    version: int = attrs.field(metadata={"min": 1, "doc": "the version whose change to undo"})
    region: str | None = attrs.field(default=None, metadata={
        "doc": "undo it in this region only (default: everywhere it changed)", "pattern": NONBLANK})


@attrs.frozen
class ReapplyParams:
    version: int = attrs.field(metadata={
        "min": 2, "doc": "the host's save that undid someone's change (its `undoes`)"})
    keep: bool = attrs.field(default=False, metadata={
        "doc": "keep the save as it is (Keep mine) instead of re-applying what it undid"})


@attrs.frozen
class RestoreParams:
    region: str = attrs.field(metadata={"doc": "heading path, bare unique title, or workspace",
                                        "pattern": NONBLANK})
    version: int = attrs.field(metadata={"min": 1, "doc": "the version to take its text from"})


@attrs.frozen
class PolicyParams:
    region_pattern: str = attrs.field(metadata={
        "doc": "glob over heading paths (fnmatch; `*` crosses `/`); must match a region now",
        "pattern": NONBLANK})
    max_changed_lines: int = attrs.field(metadata={"min": 1, "max": limits.POLICY_MAX_CHANGED_LINES})
    participant_id: str | None = attrs.field(default=None, metadata={
        "doc": "the participant it approves for (or label)"})
    name_pattern: str | None = attrs.field(default=None, metadata={
        "doc": "refused: a display name is whatever a joiner chose; name participants by"
               " participant_id or label", "pattern": NONBLANK})
    expires_at: str | None = attrs.field(default=None, metadata={
        "doc": "ISO 8601 UTC time after which it approves nothing"})
    label: str | None = attrs.field(default=None, metadata={
        "doc": "the participants that joined through an invitation the host labelled so"
               " (ce invite --label) (or participant_id)", "pattern": NONBLANK,
        "max_length": limits.NAME_MAX})


@attrs.frozen
class PolicyIdParams:
    policy_id: str


@attrs.frozen
class PauseParams:
    all: bool = attrs.field(default=False, metadata={"doc": "every policy (the kill switch)"})
    policy_id: str | None = None
    paused: bool = attrs.field(default=True, metadata={"doc": "false resumes"})
# -- the review conversation: threads, revisions, rebase (docs/spec/PROTOCOL.md 17)

@attrs.frozen
class OpenThreadParams:
    region: str = attrs.field(metadata={"doc": "heading path, bare unique title, or workspace",
                                        "pattern": NONBLANK})
    body: str = attrs.field(metadata={
        "doc": f"the question or note, 1 to {limits.THREAD_BODY_MAX_BYTES} bytes",
        "pattern": NONBLANK, "document": True})
    quote: str | None = attrs.field(default=None, metadata={
        "doc": f"an exact span of the region's current text (at most {limits.THREAD_QUOTE_MAX}"
               " characters)", "document": True})
    blocking: bool = attrs.field(default=False, metadata={
        "doc": "a question you wait on (only you are held; ce wait THREAD wakes on a reply)"})


@attrs.frozen
class ReplyParams:
    thread_id: str
    body: str = attrs.field(metadata={
        "doc": f"1 to {limits.THREAD_BODY_MAX_BYTES} bytes", "pattern": NONBLANK,
        "document": True})


@attrs.frozen
class ResolveParams:
    thread_id: str
    resolved: bool = attrs.field(default=True, metadata={"doc": "false reopens the thread"})


@attrs.frozen
class ThreadIdParams:
    thread_id: str


@attrs.frozen
class ThreadsParams:
    region: str | None = attrs.field(default=None, metadata={
        "doc": "only this region's threads (heading path or bare unique title)"})
    status: str | None = attrs.field(default=None, metadata={"choices": vocabulary.THREAD_STATUSES})
    proposal_id: str | None = attrs.field(default=None, metadata={
        "doc": "only the threads of this proposal's review"})
    limit: int = attrs.field(default=limits.LIST_DEFAULT,
                             metadata={"min": 1, "max": limits.LIST_MAX})
    since: str | None = attrs.field(default=None, metadata={
        "doc": "only the threads that changed (a comment, a status) at or after this time:"
               " the newest updated_at you hold"})


@attrs.frozen
class ReviseParams:
    proposal_id: str
    content: str = attrs.field(metadata={"doc": "the new text of the region, heading included",
                                         "document": True})
    summary: str | None = attrs.field(default=None, metadata={
        "doc": f"1-{limits.SUMMARY_MAX} characters (default: the proposal's)"})
    base_version: int | None = attrs.field(default=None, metadata={
        "min": 1, "doc": "the version the new text was written on (default: the proposal's base)"})


@attrs.frozen
class RebaseParams:
    proposal_id: str
    apply: bool = attrs.field(default=False, metadata={
        "doc": "a clean merge becomes a new revision based on the current version"})


# -- task surfaces: live views, generated apps, app requests (docs/spec/PROTOCOL.md 20)


@attrs.frozen
class LiveViewParams:
    task_id: str
    surface: dict[str, Any] | None = attrs.field(default=None, metadata={
        "doc": "{surface_id, revision, root, data}: a declarative view of Text, Value, Button,"
               " Input, Row, Column and Card nodes (<= 16 KiB JSON, depth <= 8, <= 200 nodes);"
               " start at revision 1, replace with a higher one and the same surface_id"})
    clear: bool = attrs.field(default=False, metadata={
        "doc": "true (and no surface): remove the task's live view"})


@attrs.frozen
class AppParams:
    task_id: str
    bundle: dict[str, Any] = attrs.field(metadata={
        "doc": "{version: 1, manifest: {title, networkOrigins: []}, html, css, js,"
               " initialState} (<= 48 KiB JSON): one self-contained app, run sandboxed with no"
               " network; it replaces the task's app (revision + 1)"})


@attrs.frozen
class AppStateParams:
    task_id: str
    revision: int = attrs.field(metadata={
        "min": 0, "doc": "the state revision you last saw (0: the app's initialState)"})
    state: Any = attrs.field(metadata={"doc": "the new shared state, any JSON (<= 64 KiB)"})


@attrs.frozen
class AppRequestParams:
    task_id: str
    payload: Any = attrs.field(metadata={
        "doc": "one opaque JSON request (<= 8 KiB) for the app's onRequest handler"})


@attrs.frozen
class TaskSurfacesParams:
    task_id: str | None = attrs.field(default=None, metadata={
        "doc": "one task's surfaces (default: every task that has any)"})

# -- resident agents (docs/spec/PROTOCOL.md section 19) -----------------------------------------


@attrs.frozen
class RuntimeParams:
    state: str = attrs.field(metadata={"choices": vocabulary.RUNTIME_STATES})
    harness: str = attrs.field(metadata={
        "doc": "what runs the agent: `acp:gemini`, `acp:<command>`, `exec:<command>`",
        "pattern": NONBLANK, "max_length": limits.RUNTIME_HARNESS_MAX})
    queued: int = attrs.field(default=0, metadata={
        "min": 0, "max": limits.RUNTIME_QUEUED_MAX, "doc": "wakes waiting for the next turn"})
    turn: int = attrs.field(default=0, metadata={
        "min": 0, "doc": "the number of the turn running (or last run)"})
    turn_started_at: str | None = attrs.field(default=None, metadata={
        "doc": "when the running turn started (RFC 3339)", "max_length": 40})
    note: str | None = attrs.field(default=None, metadata={
        "doc": "why it is paused, for the host", "max_length": 200})


@attrs.frozen
class PermissionOption:
    option_id: str = attrs.field(metadata={"pattern": NONBLANK,
                                           "max_length": limits.PERMISSION_OPTION_FIELD_MAX})
    name: str = attrs.field(metadata={"pattern": NONBLANK,
                                      "max_length": limits.PERMISSION_OPTION_FIELD_MAX})
    kind: str = attrs.field(metadata={"choices": vocabulary.PERMISSION_OPTION_KINDS})


@attrs.frozen
class PermissionParams:
    title: str = attrs.field(metadata={"pattern": NONBLANK,
                                       "max_length": limits.PERMISSION_TITLE_MAX})
    tool: str = attrs.field(default="", metadata={
        "doc": "the tool the agent asks to run", "max_length": limits.PERMISSION_TITLE_MAX})
    input_preview: str = attrs.field(default="", metadata={
        "doc": f"the tool's input, at most {limits.PERMISSION_PREVIEW_MAX} characters",
        "max_length": limits.PERMISSION_PREVIEW_MAX, "document": True})
    options: list[PermissionOption] = attrs.field(factory=list, metadata={
        "doc": f"1-{limits.PERMISSION_OPTIONS_MAX} options, exactly as the agent offered them"})


@attrs.frozen
class PermissionsParams:
    status: str | None = attrs.field(default=None, metadata={
        "choices": vocabulary.PERMISSION_STATUSES, "doc": "default: pending"})


@attrs.frozen
class PermissionAnswerParams:
    permission_id: str
    option_id: str = attrs.field(metadata={"max_length": limits.PERMISSION_OPTION_FIELD_MAX})


@attrs.frozen
class PermissionIdParams:
    permission_id: str


@attrs.frozen
class InterruptParams:
    participant_id: str
    turn: int = attrs.field(metadata={"min": 1, "doc": "the turn to cancel (never a later one)"})


@attrs.frozen
class ResumeParams:
    participant_id: str
