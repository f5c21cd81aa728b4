"""The one operation table.

Every operation of the room is declared here once: its name (also the MCP
tool name), HTTP method and path, the capability it needs, its parameter
record, its result record and its engine handler, plus the hints MCP reports
(`read_only`, `destructive`, `idempotent`). REST routes on both listeners,
MCP tools, the protocol document, the OpenAPI document and the skill are all
generated from `OPERATIONS`; nothing else may add an operation, so the
adapters cannot drift apart.

`kind` is `call` (one request, one result record) or `stream` (observe,
observe/ws and the long-poll wait: the handler authorizes and answers a
`StreamStart`; the room runs the stream and the adapter frames it; `result`
is the record a stream's answer has, when it has one: the wait's).

`capability=None` marks the one unauthenticated operation (`session.join`).
Only `engine.dispatch` imports this table inside the engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import attrs

from commonroom.engine import (
    access,
    attachments,
    handoffs,
    leases,
    messages,
    observe,
    proposals,
    reads,
    revisions,
    surfaces,
    tasks,
    threads,
)
from commonroom.engine.core import Handler
from commonroom.protocol import limits
from commonroom.protocol import records as r
from commonroom.protocol.capabilities import require


@attrs.frozen
class Operation:
    name: str
    method: str
    path: str
    capability: str | None
    params: type[Any]
    result: type[Any] | None
    handler: Handler
    summary: str
    kind: str = "call"
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    body_bytes: int | None = None
    """A larger request body limit for this route than the listener's (attachments)."""

    def check(self, held: Iterable[str], params: Any) -> None:
        """The capability rule; handlers add finer rules (holder, author, admin for raw commit)."""
        if self.capability is not None:
            require(tuple(held), self.capability)


_READ = {"read_only": True, "idempotent": True}
_STREAM = {"kind": "stream", "read_only": True}
NoParams = access.NoParams


def _op(
    name: str, method: str, path: str, capability: str | None, params: type[Any],
    result: type[Any] | None, handler: Handler, summary: str, **flags: Any,
) -> Operation:
    return Operation(name, method, path, capability, params, result, handler, summary, **flags)


OPERATIONS: Final[tuple[Operation, ...]] = (
    _op("session.join", "POST", "/session/join", None, access.JoinParams, r.Joined, access.join,
        "Join the room with an invitation; returns the session bearer once. Keep it secret."),
    _op("workspace.status", "GET", "/workspace/status", "read", NoParams, r.Status, reads.status,
        "Workspace id, current version and hash, counts of participants, leases, proposals.",
        **_READ),
    _op("workspace.summary", "GET", "/workspace/summary", "read", NoParams, r.Summary,
        reads.summary, "The heading outline and the first lines of the document.", **_READ),
    _op("workspace.regions", "GET", "/workspace/regions", "read", NoParams, r.Regions,
        reads.regions,
        "Every region (heading path) with its title, level and line: use these names to read,"
        " lease and propose.", **_READ),
    _op("workspace.read", "GET", "/workspace/read", "read", reads.ReadParams, r.ReadAnswer,
        reads.read,
        "Read a region (or the whole document) at the current or a given version; note the"
        " version to propose on.", **_READ),
    _op("workspace.diff", "GET", "/workspace/diff", "read", reads.DiffParams, r.DiffAnswer,
        reads.diff, "Unified diff between two versions, of one region or the whole document.",
        **_READ),
    _op("workspace.changes_since", "GET", "/workspace/changes_since", "read",
        reads.ChangesParams, r.Changes, reads.changes_since,
        "The versions after a given version (who changed what, when).", **_READ),
    _op("workspace.history", "GET", "/workspace/history", "read", reads.HistoryParams,
        r.History, reads.history, "Retained events, newest first.", **_READ),
    _op("workspace.participants", "GET", "/workspace/participants", "read", NoParams,
        r.Participants, access.participants,
        "Who is in the room: kind, capabilities, advertised tokens, presence.", **_READ),
    _op("workspace.leases", "GET", "/workspace/leases", "read", NoParams, r.Leases,
        leases.leases, "Active leases: who holds which region until when.", **_READ),
    _op("workspace.proposals", "GET", "/workspace/proposals", "read", proposals.ProposalsParams,
        r.Proposals, proposals.list_proposals, "Proposals, newest first, optionally by status.",
        **_READ),
    _op("workspace.proposal", "GET", "/workspace/proposal", "read",
        proposals.ProposalDetailParams, r.ProposalDetail, proposals.proposal_detail,
        "One proposal with its content and the diff from the region's current text; its"
        " revisions, and ?revision=N for an earlier one's content.", **_READ),
    _op("workspace.room", "GET", "/workspace/room", "read", NoParams, r.RoomSnapshot, reads.room,
        "One consistent snapshot of the room plus latest_event_id to observe from.", **_READ),
    _op("workspace.diagnostics", "GET", "/workspace/diagnostics", "read", NoParams,
        r.Diagnostics, reads.diagnostics, "Protocol, transport kind, event ring and limits.",
        **_READ),
    _op("workspace.invitations", "GET", "/workspace/invitations", "invite", access.ListParams,
        r.Invitations, access.list_invitations,
        "Invitations and their state (never their secrets).", **_READ),
    _op("workspace.observe", "GET", "/workspace/observe", "observe", observe.ObserveParams, None,
        observe.open_observe,
        "Server-sent events: replay after Last-Event-ID / since_event_id, then live.", **_STREAM),
    _op("workspace.observe_ws", "GET", "/workspace/observe/ws", "observe", observe.ObserveParams,
        None, observe.open_observe,
        "The same events over a WebSocket, one JSON event per text frame.", **_STREAM),
    _op("workspace.wait", "GET", "/workspace/wait", "observe", observe.WaitParams, r.WaitAnswer,
        observe.open_wait,
        "Long-poll: the events after cursor (at most 200), holding up to timeout_seconds (max"
        " 25) when there are none.", **_STREAM),
    _op("workspace.checkout", "POST", "/workspace/checkout", "checkout", leases.CheckoutParams,
        r.Lease, leases.checkout,
        "Lease a region for some minutes so others keep out (renews when you hold it already)."),
    _op("workspace.renew", "POST", "/workspace/renew", "checkout", leases.RenewParams, r.Lease,
        leases.renew, "Extend your lease, never past 120 minutes from acquisition."),
    _op("workspace.release", "POST", "/workspace/release", "checkout", leases.LeaseIdParams,
        r.Released, leases.release, "Release a lease (yours, or anyone's with approve)."),
    _op("workspace.propose", "POST", "/workspace/propose", "propose", proposals.ProposeParams,
        r.Proposal, proposals.propose,
        "Propose new text for a region (content replaces the region, heading line included),"
        " based on the version you read; a person reviews it."),
    _op("workspace.review", "POST", "/workspace/proposal/review", "approve",
        proposals.ReviewParams, r.Reviewed, proposals.review,
        "Approve, reject or request changes of a pending proposal, with a comment for its"
        " author (request_changes needs one; a comment opens a thread on the region)."),
    _op("workspace.withdraw", "POST", "/workspace/proposal/withdraw", "propose",
        proposals.ProposalIdParams, r.Proposal, proposals.withdraw,
        "Withdraw your own proposal."),
    _op("workspace.commit", "POST", "/workspace/commit", "commit", proposals.CommitParams,
        r.Committed, proposals.commit,
        "Commit an approved proposal (it lands in the file); or, with admin, a raw"
        " whole-document commit."),
    _op("workspace.invite", "POST", "/workspace/invite", "invite", access.InviteParams,
        r.InvitationCreatedAnswer, access.create_invitation,
        "Create an invitation (a subset of your capabilities)."),
    _op("workspace.revoke_invitation", "POST", "/workspace/invite/revoke", "invite",
        access.InviteIdParams, r.InvitationInfo, access.revoke_invitation,
        "Revoke an invitation.", destructive=True, idempotent=True),
    _op("session.revoke", "POST", "/workspace/session/revoke", "admin",
        access.ParticipantIdParams, r.SessionsRevoked, access.revoke_sessions,
        "End every session of a participant (their open streams close).", destructive=True,
        idempotent=True),
    _op("workspace.leave", "POST", "/workspace/leave", "read", NoParams, r.Left, access.leave,
        "Leave: your sessions end and your leases are released.", destructive=True),
    # -- handoffs, tasks, room text, attachments, surfaces (PROTOCOL.md 9, 10, 10.1)
    _op("handoff.request", "POST", "/workspace/handoff", "handoff", handoffs.RequestParams,
        r.Handoff, handoffs.request,
        "Ask another participant to take on something (a region, a review); the target"
        " decides. Pass a request_id to make retries safe."),
    _op("handoff.respond", "POST", "/workspace/handoff/respond", "handoff",
        handoffs.RespondParams, r.Handoff, handoffs.respond,
        "Accept or decline a handoff addressed to you; accepting creates its task."),
    _op("handoff.result", "POST", "/workspace/handoff/result", "handoff", handoffs.ResultParams,
        r.Handoff, handoffs.result,
        "Report an accepted handoff of yours completed or failed, with a summary."),
    _op("handoff.cancel", "POST", "/workspace/handoff/cancel", "handoff",
        handoffs.HandoffIdParams, r.Handoff, handoffs.cancel,
        "Cancel a handoff you requested (while requested or accepted).", destructive=True),
    _op("workspace.handoffs", "GET", "/workspace/handoffs", "read", handoffs.HandoffsParams,
        r.Handoffs, handoffs.list_handoffs, "Handoffs, newest first, optionally by status.",
        **_READ),
    _op("workspace.handoff", "GET", "/workspace/handoff", "read", handoffs.HandoffIdParams,
        r.Handoff, handoffs.handoff_one, "One handoff.", **_READ),
    _op("task.get", "GET", "/workspace/task", "handoff", tasks.TaskIdParams, r.Task,
        tasks.get_task, "The task of an accepted handoff: status, message, result.", **_READ),
    _op("task.update", "POST", "/workspace/task/update", "handoff", tasks.TaskUpdateParams,
        r.Task, tasks.update_task,
        "Report on a task you were handed: working, input_required, completed or failed."),
    _op("task.cancel", "POST", "/workspace/task/cancel", "handoff", tasks.TaskIdParams, r.Task,
        tasks.cancel_task,
        "Cancel the task of a handoff you requested (a finished task is left as it is).",
        destructive=True, idempotent=True),
    _op("workspace.message", "POST", "/workspace/message", "message", messages.MessageParams,
        r.Message, messages.send,
        "Room text for everyone who reads; `to` addresses the turn to participants,"
        " `handoff_id` keeps it in that handoff's thread."),
    _op("workspace.messages", "GET", "/workspace/messages", "read", messages.MessagesParams,
        r.Messages, messages.list_messages, "Room text in seq order, after a seq.", **_READ),
    _op("workspace.advertise", "POST", "/workspace/capabilities", "read",
        access.AdvertiseParams, r.Participant, access.advertise,
        "Replace your self-reported capability tokens (hints for others, never authority).",
        idempotent=True),
    _op("attachment.add", "POST", "/workspace/attachment", "message", attachments.AddParams,
        r.Attachment, attachments.add,
        "Share a small file (text, markdown, csv, json, yaml, png, jpeg, webp; <= 768 KiB),"
        " in the room or in one handoff.", body_bytes=limits.ATTACHMENT_BODY_BYTES),
    _op("attachment.get", "GET", "/workspace/attachment", "read",
        attachments.AttachmentIdParams, r.AttachmentData, attachments.get,
        "One attachment with its bytes (base64).", **_READ),
    _op("attachment.delete", "POST", "/workspace/attachment/delete", "message",
        attachments.AttachmentIdParams, r.AttachmentDeleted, attachments.delete,
        "Delete an attachment you uploaded (the host deletes any).", destructive=True),
    _op("surface.publish", "POST", "/workspace/surface", "message", surfaces.PublishParams,
        r.Surface, surfaces.publish,
        "Publish one snapshot image of your own workspace (replaces the previous one).",
        body_bytes=limits.ATTACHMENT_BODY_BYTES),
    _op("surface.read", "GET", "/workspace/surface", "read", surfaces.SurfaceParams,
        r.SurfaceData, surfaces.read, "A participant's current surface image, if any.", **_READ),
    _op("surface.clear", "POST", "/workspace/surface/clear", "message", NoParams,
        r.SurfaceClearedAnswer, surfaces.clear, "Remove your surface.", idempotent=True),
    # -- the review conversation: threads, revisions, rebase (PROTOCOL.md 17, issue 22)
    _op("thread.open", "POST", "/workspace/thread", "message", threads.OpenParams, r.Thread,
        threads.open_thread,
        "Ask or note something about a region (optionally an exact quote of its text);"
        " blocking: a question you wait on with workspace.wait (nobody else is held)."),
    _op("thread.reply", "POST", "/workspace/thread/reply", "message", threads.ReplyParams,
        r.Thread, threads.reply, "Reply in a thread (it wakes its author's wait)."),
    _op("thread.resolve", "POST", "/workspace/thread/resolve", "message", threads.ResolveParams,
        r.Thread, threads.resolve,
        "Resolve a thread (resolved: false reopens it); its author or the host."),
    _op("workspace.threads", "GET", "/workspace/threads", "read", threads.ThreadsParams,
        r.Threads, threads.list_threads,
        "Threads, newest first, by region, status (open, resolved, outdated) or proposal.",
        **_READ),
    _op("workspace.thread", "GET", "/workspace/thread", "read", threads.ThreadIdParams,
        r.Thread, threads.thread_one, "One thread with its comments.", **_READ),
    _op("workspace.proposal.revise", "POST", "/workspace/proposal/revise", "propose",
        revisions.ReviseParams, r.Proposal, revisions.revise,
        "Revise your proposal in place (pending, changes_requested or superseded): a new"
        " revision, back to pending."),
    _op("workspace.proposal.rebase", "POST", "/workspace/proposal/rebase", "read",
        revisions.RebaseParams, r.Rebased, revisions.rebase,
        "Three-way merge of a stale proposal onto the region's current text (author, or a"
        " reviewer with approve); apply: true makes a clean merge a new revision."),
)

OPERATIONS_BY_NAME: Final[dict[str, Operation]] = {op.name: op for op in OPERATIONS}
OPERATIONS_BY_ROUTE: Final[dict[tuple[str, str], Operation]] = {
    (op.method, op.path): op for op in OPERATIONS
}
BODY_LIMITS: Final[dict[str, int]] = {
    op.path: op.body_bytes for op in OPERATIONS if op.body_bytes is not None
}
"""Route path -> its larger body limit (the listeners' serving layer consults it)."""
CALLS: Final[tuple[Operation, ...]] = tuple(op for op in OPERATIONS if op.kind == "call")
STREAMS: Final[tuple[Operation, ...]] = tuple(op for op in OPERATIONS if op.kind == "stream")
