"""Where each operation lives on the wire, for the client (no engine import).

The operation table (`commonroom.engine.operations.OPERATIONS`) is the one
source of truth, but importing it pulls in the engine, which a client must
not load (a script's start-up time; PROTOCOL.md section 13). So the client
carries this copy of the three facts it needs per operation — method, path,
result record — and `tests/unit/test_client_surface.py` checks it against
the table entry by entry, so it cannot drift.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Route(NamedTuple):
    method: str
    path: str
    result: str | None  # the name of the result record in `commonroom.protocol.records`


ROUTES: Final[dict[str, Route]] = {
    "session.join": Route("POST", "/session/join", "Joined"),
    "workspace.status": Route("GET", "/workspace/status", "Status"),
    "workspace.summary": Route("GET", "/workspace/summary", "Summary"),
    "workspace.regions": Route("GET", "/workspace/regions", "Regions"),
    "workspace.read": Route("GET", "/workspace/read", "ReadAnswer"),
    "workspace.diff": Route("GET", "/workspace/diff", "DiffAnswer"),
    "workspace.changes_since": Route("GET", "/workspace/changes_since", "Changes"),
    "workspace.history": Route("GET", "/workspace/history", "History"),
    "workspace.participants": Route("GET", "/workspace/participants", "Participants"),
    "workspace.leases": Route("GET", "/workspace/leases", "Leases"),
    "workspace.proposals": Route("GET", "/workspace/proposals", "Proposals"),
    "workspace.proposal": Route("GET", "/workspace/proposal", "ProposalDetail"),
    "workspace.room": Route("GET", "/workspace/room", "RoomSnapshot"),
    "workspace.diagnostics": Route("GET", "/workspace/diagnostics", "Diagnostics"),
    "workspace.invitations": Route("GET", "/workspace/invitations", "Invitations"),
    "workspace.observe": Route("GET", "/workspace/observe", None),
    "workspace.observe_ws": Route("GET", "/workspace/observe/ws", None),
    "workspace.wait": Route("GET", "/workspace/wait", "WaitAnswer"),
    "workspace.checkout": Route("POST", "/workspace/checkout", "Lease"),
    "workspace.renew": Route("POST", "/workspace/renew", "Lease"),
    "workspace.release": Route("POST", "/workspace/release", "Released"),
    "workspace.propose": Route("POST", "/workspace/propose", "Proposal"),
    "workspace.review": Route("POST", "/workspace/proposal/review", "Reviewed"),
    "workspace.withdraw": Route("POST", "/workspace/proposal/withdraw", "Proposal"),
    "workspace.commit": Route("POST", "/workspace/commit", "Committed"),
    "workspace.invite": Route("POST", "/workspace/invite", "InvitationCreatedAnswer"),
    "workspace.revoke_invitation": Route("POST", "/workspace/invite/revoke", "InvitationInfo"),
    "session.revoke": Route("POST", "/workspace/session/revoke", "SessionsRevoked"),
    "workspace.leave": Route("POST", "/workspace/leave", "Left"),
    "handoff.request": Route("POST", "/workspace/handoff", "Handoff"),
    "handoff.respond": Route("POST", "/workspace/handoff/respond", "Handoff"),
    "handoff.result": Route("POST", "/workspace/handoff/result", "Handoff"),
    "handoff.cancel": Route("POST", "/workspace/handoff/cancel", "Handoff"),
    "workspace.handoffs": Route("GET", "/workspace/handoffs", "Handoffs"),
    "workspace.handoff": Route("GET", "/workspace/handoff", "Handoff"),
    "task.get": Route("GET", "/workspace/task", "Task"),
    "task.update": Route("POST", "/workspace/task/update", "Task"),
    "task.cancel": Route("POST", "/workspace/task/cancel", "Task"),
    "workspace.message": Route("POST", "/workspace/message", "Message"),
    "workspace.messages": Route("GET", "/workspace/messages", "Messages"),
    "workspace.advertise": Route("POST", "/workspace/capabilities", "Participant"),
    "attachment.add": Route("POST", "/workspace/attachment", "Attachment"),
    "attachment.get": Route("GET", "/workspace/attachment", "AttachmentData"),
    "attachment.delete": Route("POST", "/workspace/attachment/delete", "AttachmentDeleted"),
    "surface.publish": Route("POST", "/workspace/surface", "Surface"),
    "surface.read": Route("GET", "/workspace/surface", "SurfaceData"),
    "surface.clear": Route("POST", "/workspace/surface/clear", "SurfaceClearedAnswer"),
    # -- the review conversation (issue 22)
    "thread.open": Route("POST", "/workspace/thread", "Thread"),
    "thread.reply": Route("POST", "/workspace/thread/reply", "Thread"),
    "thread.resolve": Route("POST", "/workspace/thread/resolve", "Thread"),
    "workspace.threads": Route("GET", "/workspace/threads", "Threads"),
    "workspace.thread": Route("GET", "/workspace/thread", "Thread"),
    "workspace.proposal.revise": Route("POST", "/workspace/proposal/revise", "Proposal"),
    "workspace.proposal.rebase": Route("POST", "/workspace/proposal/rebase", "Rebased"),
}
