"""The wire contract: one `OperationSpec` per operation of the room.

Every operation is declared here once: its name (the MCP tool's, `.` written `_`), HTTP
method and path, the capability it needs, its parameter record
(`protocol/requests.py`, whose field metadata holds every constraint the one
parser enforces: choices, min/max, max_length, pattern), its result record
(`protocol/records.py`), what MCP reports of it (`read_only`, `destructive`,
`idempotent`) and its kind: `call` (one request, one result record) or
`stream` (observe, observe/ws and the long-poll wait: the room runs the stream
and the adapter frames it; `result` is the record a stream's answer has, when it
has one: the wait's).

Everything is generated from `OPERATIONS`: REST routes for calls and streams on both
listeners, MCP tools, `/protocol` (with the page's event and status
vocabularies), OpenAPI, the skill, and the Python client's methods and routes.
The engine adds only the handler of each (`engine/operations.HANDLERS[name]`,
checked against `OPERATIONS` when the engine loads). This module imports nothing
but attrs, the stdlib and `protocol/`, so `ce` and the client stay light.

`capability=None` marks the one unauthenticated operation (`session.join`).
"""

from __future__ import annotations

import re
from typing import Any, Final

import attrs

from commonroom.protocol import limits
from commonroom.protocol import records as r
from commonroom.protocol import requests as rq


@attrs.frozen
class OperationSpec:
    name: str
    method: str
    path: str
    capability: str | None
    params: type[Any]
    result: type[Any] | None
    summary: str
    kind: str = "call"
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    body_bytes: int | None = None
    """A larger request body limit for this route than the listener's (attachments)."""
    framing: str | None = None
    """How a stream's answer is carried: `sse`, `websocket` or `long_poll` (None for a call).
    Each listener registers a stream route per spec with the view of its framing."""
    writes_document: bool = False
    """The operation may write the document (a temp file, fsyncs, a rename): its transaction
    records its inverse (`Engine.transaction(writes_document=True)`, the only kind the engine
    lets stage a write) and the room runs it on its store thread, never on the event loop."""
    tool: bool = attrs.field(
        default=attrs.Factory(lambda spec: spec.framing in (None, "long_poll"), takes_self=True))
    """Listed as an MCP tool. Default: every call and every long-poll (one request, one answer);
    never an SSE or WebSocket stream. False for what an agent must never call as a tool."""

    def __attrs_post_init__(self) -> None:
        if (self.kind == "stream") != (self.framing in FRAMINGS):
            raise ValueError(f"{self.name}: a stream has one of {FRAMINGS} as framing, a call none")
        if self.tool and self.framing not in (None, "long_poll"):
            raise ValueError(f"{self.name}: only a call or a long-poll can be an MCP tool")
        if self.writes_document and (self.read_only or self.kind != "call"):
            raise ValueError(f"{self.name}: only a writing call may write the document")


FRAMINGS: Final = ("sse", "websocket", "long_poll")

MCP_NAME_PATTERN: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What every MCP name (tool, prompt, resource template) must match: Claude Desktop, the OpenAI
API (Codex) and Copilot refuse a whole server when one name does not."""


def tool_name(operation: str) -> str:
    """An operation's MCP tool name: the operation's name with every `.` written `_`."""
    return operation.replace(".", "_")


_READ: Final[dict[str, Any]] = {"read_only": True, "idempotent": True}
_WRITES_DOCUMENT: Final[dict[str, Any]] = {"writes_document": True}
# Not an MCP tool: joining is the bridge's business (an MCP caller is already a session), and
# a resident runtime's own reports go over REST (`ce agent`); an agent reporting a runtime
# state or asking the host for a permission through a tool would spoof its runtime.
_NOT_A_TOOL: Final[dict[str, Any]] = {"tool": False}
_STREAM: Final[dict[str, Any]] = {"kind": "stream", "read_only": True}


def _stream(framing: str) -> dict[str, Any]:
    return {**_STREAM, "framing": framing}


def _spec(
    name: str, method: str, path: str, capability: str | None, params: type[Any],
    result: type[Any] | None, summary: str, **flags: Any,
) -> OperationSpec:
    return OperationSpec(name, method, path, capability, params, result, summary, **flags)


OPERATIONS: Final[tuple[OperationSpec, ...]] = (
    _spec("session.join", "POST", "/session/join", None, rq.JoinParams, r.Joined,
        "Join the room with an invitation; returns the session bearer once. Keep it secret.",
        **_NOT_A_TOOL),
    _spec("workspace.status", "GET", "/workspace/status", "read", rq.NoParams, r.Status,
        "Workspace id, current version and hash, counts of participants, leases, proposals.",
        **_READ),
    _spec("workspace.summary", "GET", "/workspace/summary", "read", rq.NoParams, r.Summary,
        "The heading outline and the first lines of the document.", **_READ),
    _spec("workspace.regions", "GET", "/workspace/regions", "read", rq.NoParams, r.Regions,
        "Every region (heading path) with its title, level and line: use these names to read,"
        " lease and propose.", **_READ),
    _spec("workspace.read", "GET", "/workspace/read", "read", rq.ReadParams, r.ReadAnswer,
        "Read a region (or the whole document) at the current or a given version; note the"
        " version to propose on.", **_READ),
    _spec("workspace.diff", "GET", "/workspace/diff", "read", rq.DiffParams, r.DiffAnswer,
        "Unified diff between two versions, of one region or the whole document.",
        **_READ),
    _spec("workspace.changes_since", "GET", "/workspace/changes_since", "read",
        rq.ChangesParams, r.Changes,
        "The versions after a given version (who changed what, when).", **_READ),
    _spec("workspace.history", "GET", "/workspace/history", "read", rq.HistoryParams,
        r.History, "Retained events, newest first.", **_READ),
    _spec("workspace.participants", "GET", "/workspace/participants", "read", rq.NoParams,
        r.Participants,
        "Who is in the room: kind, capabilities, advertised tokens, presence.", **_READ),
    _spec("workspace.leases", "GET", "/workspace/leases", "read", rq.NoParams, r.Leases,
        "Active leases: who holds which region until when.", **_READ),
    _spec("workspace.proposals", "GET", "/workspace/proposals", "read", rq.ProposalsParams,
        r.Proposals, "Proposals, newest first, optionally by status.",
        **_READ),
    _spec("workspace.proposal", "GET", "/workspace/proposal", "read", rq.ProposalDetailParams,
        r.ProposalDetail,
        "One proposal with its content and the diff from the region's current text; its"
        " revisions, and ?revision=N for an earlier one's content.", **_READ),
    _spec("workspace.room", "GET", "/workspace/room", "read", rq.NoParams, r.RoomSnapshot,
        "One consistent snapshot of the room plus latest_event_id to observe from.", **_READ),
    _spec("workspace.diagnostics", "GET", "/workspace/diagnostics", "read", rq.NoParams,
        r.Diagnostics, "Protocol, transport kind, event ring and limits.",
        **_READ),
    _spec("workspace.invitations", "GET", "/workspace/invitations", "invite", rq.ListParams,
        r.Invitations,
        "Invitations and their state (never their secrets).", **_READ),
    _spec("workspace.observe", "GET", "/workspace/observe", "observe", rq.ObserveParams, None,
        "Server-sent events: replay after Last-Event-ID / since_event_id, then live.", **_stream("sse")),
    _spec("workspace.observe_ws", "GET", "/workspace/observe/ws", "observe", rq.ObserveParams,
        None,
        "The same events over a WebSocket, one JSON event per text frame.", **_stream("websocket")),
    _spec("workspace.wait", "GET", "/workspace/wait", "observe", rq.WaitParams, r.WaitAnswer,
        "Long-poll: the events after cursor (at most 200), holding up to timeout_seconds (max"
        " 25) when there are none.", **_stream("long_poll")),
    _spec("workspace.checkout", "POST", "/workspace/checkout", "checkout", rq.CheckoutParams,
        r.Lease,
        "Lease a region for some minutes so others keep out (renews when you hold it already)."),
    _spec("workspace.renew", "POST", "/workspace/renew", "checkout", rq.RenewParams, r.Lease,
        "Extend your lease, never past 120 minutes from acquisition."),
    _spec("workspace.release", "POST", "/workspace/release", "checkout", rq.LeaseIdParams,
        r.Released, "Release a lease (yours, or anyone's with approve)."),
    _spec("workspace.propose", "POST", "/workspace/propose", "propose", rq.ProposeParams,
        r.Proposal,
        "Propose new text for a region (content replaces the region, heading line included),"
        " based on the version you read; a person reviews it."),
    _spec("workspace.review", "POST", "/workspace/proposal/review", "approve",
        rq.ReviewParams, r.Reviewed,
        "Approve, reject or request changes of a pending proposal, with a comment for its"
        " author (request_changes needs one; a comment opens a thread on the region)."
        " approve and request_changes name the revision you read; a proposal revised since"
        " is not decided (proposal_conflict, reason revised)."),
    _spec("workspace.withdraw", "POST", "/workspace/proposal/withdraw", "propose",
        rq.ProposalIdParams, r.Proposal,
        "Withdraw your own proposal."),
    _spec("workspace.commit", "POST", "/workspace/commit", "commit", rq.CommitParams,
        r.Committed,
        "Commit an approved proposal (it lands in the file); or, with admin, a raw"
        " whole-document commit.", **_WRITES_DOCUMENT),
    _spec("workspace.invite", "POST", "/workspace/invite", "invite", rq.InviteParams,
        r.InvitationCreatedAnswer,
        "Create an invitation (a subset of your capabilities)."),
    _spec("workspace.revoke_invitation", "POST", "/workspace/invite/revoke", "invite",
        rq.InviteIdParams, r.InvitationInfo,
        "Revoke an invitation.", destructive=True, idempotent=True),
    _spec("session.revoke", "POST", "/workspace/session/revoke", "admin",
        rq.ParticipantIdParams, r.SessionsRevoked,
        "End every session of a participant (their open streams close).", destructive=True,
        idempotent=True),
    _spec("workspace.leave", "POST", "/workspace/leave", "read", rq.NoParams, r.Left,
        "Leave: your sessions end and your leases are released.", destructive=True),
    # -- handoffs, tasks, room text, attachments, surfaces (docs/spec/PROTOCOL.md 9, 10, 10.1)
    _spec("handoff.request", "POST", "/workspace/handoff", "handoff", rq.RequestParams,
        r.Handoff,
        "Ask another participant to take on something (a region, a review); the target"
        " decides. Pass a request_id to make retries safe."),
    _spec("handoff.respond", "POST", "/workspace/handoff/respond", "handoff",
        rq.RespondParams, r.Handoff,
        "Accept or decline a handoff addressed to you; accepting creates its task."),
    _spec("handoff.result", "POST", "/workspace/handoff/result", "handoff", rq.ResultParams,
        r.Handoff,
        "Report an accepted handoff of yours completed or failed, with a summary."),
    _spec("handoff.cancel", "POST", "/workspace/handoff/cancel", "handoff",
        rq.HandoffIdParams, r.Handoff,
        "Cancel a handoff you requested (while requested or accepted).", destructive=True),
    _spec("workspace.handoffs", "GET", "/workspace/handoffs", "read", rq.HandoffsParams,
        r.Handoffs, "Handoffs, newest first, optionally by status.",
        **_READ),
    _spec("workspace.handoff", "GET", "/workspace/handoff", "read", rq.HandoffIdParams,
        r.Handoff, "One handoff.", **_READ),
    _spec("task.get", "GET", "/workspace/task", "handoff", rq.TaskIdParams, r.Task,
        "The task of an accepted handoff: status, message, result.", **_READ),
    _spec("task.update", "POST", "/workspace/task/update", "handoff", rq.TaskUpdateParams,
        r.Task,
        "Report on a task you were handed: working, input_required, completed or failed."),
    _spec("task.cancel", "POST", "/workspace/task/cancel", "handoff", rq.TaskIdParams, r.Task,
        "Cancel the task of a handoff you requested (a finished task is left as it is).",
        destructive=True, idempotent=True),
    _spec("workspace.message", "POST", "/workspace/message", "message", rq.MessageParams,
        r.Message,
        "Room text for everyone who reads; `to` addresses the turn to participants,"
        " `handoff_id` keeps it in that handoff's thread."),
    _spec("workspace.messages", "GET", "/workspace/messages", "read", rq.MessagesParams,
        r.Messages, "Room text in seq order, after a seq.", **_READ),
    _spec("workspace.advertise", "POST", "/workspace/capabilities", "read",
        rq.AdvertiseParams, r.Participant,
        "Replace your self-reported capability tokens (hints for others, never authority).",
        idempotent=True),
    _spec("attachment.add", "POST", "/workspace/attachment", "message", rq.AddParams,
        r.Attachment,
        "Share a small file (text, markdown, csv, json, yaml, png, jpeg, webp; <= 768 KiB),"
        " in the room or in one handoff.", body_bytes=limits.ATTACHMENT_BODY_BYTES),
    _spec("attachment.get", "GET", "/workspace/attachment", "read",
        rq.AttachmentIdParams, r.AttachmentData,
        "One attachment with its bytes (base64).", **_READ),
    _spec("attachment.delete", "POST", "/workspace/attachment/delete", "message",
        rq.AttachmentIdParams, r.AttachmentDeleted,
        "Delete an attachment you uploaded (the host deletes any).", destructive=True),
    _spec("surface.publish", "POST", "/workspace/surface", "message", rq.PublishParams,
        r.Surface,
        "Publish one snapshot image of your own workspace (replaces the previous one).",
        body_bytes=limits.ATTACHMENT_BODY_BYTES),
    _spec("surface.read", "GET", "/workspace/surface", "read", rq.SurfaceParams,
        r.SurfaceData, "A participant's current surface image, if any.", **_READ),
    _spec("surface.clear", "POST", "/workspace/surface/clear", "message", rq.NoParams,
        r.SurfaceClearedAnswer, "Remove your surface.", idempotent=True),
    # -- workspace.ping (the walkthrough's example: an operation is its spec and its handler, nothing else)
    _spec("workspace.ping", "GET", "/workspace/ping", "read", rq.NoParams, r.Pong,
        "Is the room there, and who am I in it: your participant id, the current version, the"
        " room's time.", **_READ),
    # -- provenance: blame, revert and restore, auto-approve policies (docs/spec/PROTOCOL.md 18)
    _spec("workspace.blame", "GET", "/workspace/blame", "read", rq.BlameParams, r.BlameAnswer,
        "Who last changed each line of a region (participant, kind, version, proposal, and"
        " amended_by where a reviewer changed it), at the current or a given version.", **_READ),
    _spec("workspace.revert", "POST", "/workspace/revert", "admin", rq.RevertParams,
        r.Reverted,
        "Host: a new version undoing what one version changed (in one region when given), by a"
        " three-way merge; later changes to the same lines -> stale_version, nothing written.",
        **_WRITES_DOCUMENT),
    _spec("workspace.restore", "POST", "/workspace/restore", "admin", rq.RestoreParams,
        r.Restored, "Host: set a region back to its text at a version.", **_WRITES_DOCUMENT),
    # -- a host's save that undid someone's change (docs/spec/PROTOCOL.md 16, wave 4)
    _spec("workspace.undone", "GET", "/workspace/undone", "read", rq.NoParams, r.UndoneSaves,
        "The host's saves that took back a recent change by someone else (`undoes`), newest"
        " first, with the host's choice (reapplied, kept, or none yet).", **_READ),
    _spec("workspace.reapply", "POST", "/workspace/reapply", "admin", rq.ReapplyParams,
        r.Reapplied,
        "Host: re-apply what a save undid (a three-way revert of the undo, a new version), or"
        " keep the save as it is (keep: true); later changes to the same lines ->"
        " stale_version, nothing written.", **_WRITES_DOCUMENT),
    _spec("workspace.policy_add", "POST", "/workspace/policy", "admin", rq.PolicyParams,
        r.Policy,
        "Host: an auto-approve policy (participant or name pattern, region glob, max changed"
        " lines, optional expiry)."),
    _spec("workspace.policy_remove", "POST", "/workspace/policy/remove", "admin",
        rq.PolicyIdParams, r.PolicyRemoved, "Host: remove a policy.", destructive=True),
    _spec("workspace.policy_pause", "POST", "/workspace/policy/pause", "admin",
        rq.PauseParams, r.PoliciesPaused,
        "Host: pause (or resume) one policy, or all of them: the kill switch.", idempotent=True),
    _spec("workspace.policies", "GET", "/workspace/policies", "admin", rq.NoParams, r.Policies,
        "Host: every policy and the proposals it approved.", **_READ),
    # -- the review conversation: threads, revisions, rebase (docs/spec/PROTOCOL.md 17)
    _spec("thread.open", "POST", "/workspace/thread", "message", rq.OpenThreadParams, r.Thread,
        "Ask or note something about a region (optionally an exact quote of its text);"
        " blocking: a question you wait on with workspace.wait (nobody else is held)."),
    _spec("thread.reply", "POST", "/workspace/thread/reply", "message", rq.ReplyParams,
        r.Thread, "Reply in a thread (it wakes its author's wait)."),
    _spec("thread.resolve", "POST", "/workspace/thread/resolve", "message", rq.ResolveParams,
        r.Thread, "Resolve a thread (resolved: false reopens it); its author or the host."),
    _spec("workspace.threads", "GET", "/workspace/threads", "read", rq.ThreadsParams,
        r.Threads,
        "Threads, newest first, by region, status (open, resolved, outdated) or proposal.",
        **_READ),
    _spec("workspace.thread", "GET", "/workspace/thread", "read", rq.ThreadIdParams,
        r.Thread, "One thread with its comments.", **_READ),
    _spec("workspace.proposal.revise", "POST", "/workspace/proposal/revise", "propose",
        rq.ReviseParams, r.Proposal,
        "Revise your proposal in place (pending, changes_requested or superseded): a new"
        " revision, back to pending."),
    _spec("workspace.proposal.rebase", "POST", "/workspace/proposal/rebase", "read",
        rq.RebaseParams, r.Rebased,
        "Three-way merge of a stale proposal onto the region's current text (author, or a"
        " reviewer with approve); apply: true makes a clean merge a new revision."),
    # -- task surfaces: live views, generated apps, app requests (docs/spec/PROTOCOL.md 20)
    _spec("task.live_view", "POST", "/workspace/task/live_view", "handoff", rq.LiveViewParams,
        r.LiveViewAnswer,
        "Your task's agent only: publish or replace its live view, a small declarative view"
        " (Text, Value, Button, Input, Row, Column, Card; local increment/set actions) the host's"
        " page draws, e.g. a checklist with counts; a higher revision replaces it, clear: true removes it."
        " Plain text and attachments are the default: use it for structured progress."),
    _spec("task.app", "POST", "/workspace/task/app", "handoff", rq.AppParams, r.AppPublished,
        "Your task's agent only: publish or replace its one generated app (<= 48 KiB html/css/js,"
        " no network), run sandboxed in the host's page with a revisioned shared state; for a"
        " choice or a small form a live view cannot hold."),
    _spec("task.app_state", "POST", "/workspace/task/app/state", "handoff", rq.AppStateParams,
        r.AppState,
        "Set a task app's shared state by compare-and-set on the revision you last saw"
        " (stale -> stale_version); the task's participants and the host."),
    _spec("task.app_request", "POST", "/workspace/task/app/request", "handoff",
        rq.AppRequestParams, r.AppReply,
        "Ask the task's app, open in the host's page, one question (JSON <= 8 KiB) and wait up to"
        " 15 s for its reply; no page hosting it -> transport_unavailable (no_app_host) at once."
        " Never queued or retried."),
    _spec("task.surfaces", "GET", "/workspace/task/surfaces", "read", rq.TaskSurfacesParams,
        r.TaskSurfacesList,
        "The tasks' live views, apps and app states (one task's with task_id).", **_READ),

    # -- waiting for a person is one call (docs/spec/PROTOCOL.md 12): long-polls without a cursor
    _spec("workspace.proposal.wait", "GET", "/workspace/proposal/wait", "read",
        rq.ProposalWaitParams, r.ProposalWaited,
        "Wait for a person's review: answers once the proposal leaves pending, or after"
        " timeout_seconds (max 25) with waiting: true; then call again.",
        **_stream("long_poll")),
    _spec("workspace.thread.wait", "GET", "/workspace/thread/wait", "read",
        rq.ThreadWaitParams, r.ThreadWaited,
        "Wait for a reply: answers once someone else has the thread's last word (or it is"
        " resolved), or after timeout_seconds (max 25) with waiting: true.",
        **_stream("long_poll")),

    # -- resident agents (docs/spec/PROTOCOL.md section 19) ------------------------------------
    _spec("workspace.runtime", "POST", "/workspace/runtime", "observe", rq.RuntimeParams,
        r.Participant,
        "A resident runtime (`ce agent`) reports its state on its own participant:"
        " idle, running, paused or reconnecting, its harness and its queued wakes.",
        idempotent=True, **_NOT_A_TOOL),
    _spec("permission.request", "POST", "/workspace/permission", "observe",
        rq.PermissionParams, r.PermissionRequest,
        "A resident runtime relays its agent's permission prompt to the host: the tool, an"
        " input preview and the exact options. Expires (fails closed) after 5 minutes.",
        **_NOT_A_TOOL),
    _spec("workspace.permissions", "GET", "/workspace/permissions", "read",
        rq.PermissionsParams, r.PermissionRequests,
        "Permission requests (default: the pending ones), oldest first.", **_READ),
    _spec("permission.answer", "POST", "/workspace/permission/answer", "approve",
        rq.PermissionAnswerParams, r.PermissionRequest,
        "Answer a pending permission request with one of its exact options (the host or a"
        " session with approve; never the participant that asked)."),
    _spec("permission.withdraw", "POST", "/workspace/permission/withdraw", "observe",
        rq.PermissionIdParams, r.PermissionRequest,
        "Withdraw your own pending permission request (its turn ended: nothing waits for it).",
        **_NOT_A_TOOL),
    _spec("runtime.interrupt", "POST", "/workspace/runtime/interrupt", "approve",
        rq.InterruptParams, r.RuntimeControl,
        "Cancel a resident agent's running turn (that turn only)."),
    _spec("runtime.resume", "POST", "/workspace/runtime/resume", "approve",
        rq.ResumeParams, r.RuntimeControl,
        "Resume a resident agent its runtime paused (three turns in a row with no room action)."),
)

OPERATIONS_BY_NAME: Final[dict[str, OperationSpec]] = {spec.name: spec for spec in OPERATIONS}
OPERATIONS_BY_ROUTE: Final[dict[tuple[str, str], OperationSpec]] = {
    (spec.method, spec.path): spec for spec in OPERATIONS
}
BODY_LIMITS: Final[dict[str, int]] = {
    spec.path: spec.body_bytes for spec in OPERATIONS if spec.body_bytes is not None
}
"""Route path -> its larger body limit (the listeners' serving layer consults it)."""
CALLS: Final[tuple[OperationSpec, ...]] = tuple(spec for spec in OPERATIONS if spec.kind == "call")
STREAMS: Final[tuple[OperationSpec, ...]] = tuple(spec for spec in OPERATIONS if spec.kind == "stream")
