"""The one operation table.

Every operation of the room is declared here once: its name (also the MCP
tool name), HTTP method and path, the capability it needs, its parameter
record and its engine handler. REST routes, MCP tools, the protocol document
and the skill are all generated from `OPERATIONS`; nothing else may add an
operation, so the adapters cannot drift apart.

`capability=None` marks the one unauthenticated operation (`session.join`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import attrs

from commonroom.engine import access, leases, proposals, reads
from commonroom.engine.core import Handler
from commonroom.protocol.capabilities import require


@attrs.frozen
class Operation:
    name: str
    method: str
    path: str
    capability: str | None
    params: type[Any]
    handler: Handler
    summary: str
    read_only: bool = False
    destructive: bool = False

    def check(self, held: Iterable[str], params: Any) -> None:
        """The capability rule; handlers add finer rules (holder, author, admin for raw commit)."""
        if self.capability is not None:
            require(tuple(held), self.capability)


def _op(
    name: str, method: str, path: str, capability: str | None, params: type[Any],
    handler: Handler, summary: str, **flags: bool,
) -> Operation:
    return Operation(name, method, path, capability, params, handler, summary, **flags)


_R = {"read_only": True}
NoParams = access.NoParams

OPERATIONS: Final[tuple[Operation, ...]] = (
    _op("session.join", "POST", "/session/join", None, access.JoinParams, access.join,
        "Join the room with an invitation; returns the session bearer once."),
    _op("workspace.status", "GET", "/workspace/status", "read", NoParams, reads.status,
        "Workspace id, current version and hash, counts of participants, leases, proposals.", **_R),
    _op("workspace.summary", "GET", "/workspace/summary", "read", NoParams, reads.summary,
        "The heading outline and the first lines of the document.", **_R),
    _op("workspace.regions", "GET", "/workspace/regions", "read", NoParams, reads.regions,
        "Every region (heading path) with its title, level and line.", **_R),
    _op("workspace.read", "GET", "/workspace/read", "read", reads.ReadParams, reads.read,
        "Read a region (or the whole document) at the current or a given version.", **_R),
    _op("workspace.diff", "GET", "/workspace/diff", "read", reads.DiffParams, reads.diff,
        "Unified diff between two versions, of one region or the whole document.", **_R),
    _op("workspace.changes_since", "GET", "/workspace/changes_since", "read",
        reads.ChangesParams, reads.changes_since, "The versions after a given version.", **_R),
    _op("workspace.history", "GET", "/workspace/history", "read", reads.HistoryParams,
        reads.history, "Retained events, newest first.", **_R),
    _op("workspace.participants", "GET", "/workspace/participants", "read", NoParams,
        access.participants, "Who is in the room, their capabilities and presence.", **_R),
    _op("workspace.leases", "GET", "/workspace/leases", "read", NoParams, leases.leases,
        "Active leases.", **_R),
    _op("workspace.proposals", "GET", "/workspace/proposals", "read", proposals.ProposalsParams,
        proposals.list_proposals, "Proposals, newest first, optionally by status.", **_R),
    _op("workspace.proposal", "GET", "/workspace/proposal", "read", proposals.ProposalIdParams,
        proposals.proposal_detail,
        "One proposal with its content and the diff from the current region text.", **_R),
    _op("workspace.room", "GET", "/workspace/room", "read", NoParams, reads.room,
        "One consistent snapshot of the room plus latest_event_id to observe from.", **_R),
    _op("workspace.diagnostics", "GET", "/workspace/diagnostics", "read", NoParams,
        reads.diagnostics, "Protocol, transport kind, event ring and limits.", **_R),
    _op("workspace.invitations", "GET", "/workspace/invitations", "invite", access.ListParams,
        access.list_invitations, "Invitations and their state (never their secrets).", **_R),
    _op("workspace.checkout", "POST", "/workspace/checkout", "checkout", leases.CheckoutParams,
        leases.checkout, "Lease a region for some minutes (renews when you hold it already)."),
    _op("workspace.renew", "POST", "/workspace/renew", "checkout", leases.RenewParams,
        leases.renew, "Extend your lease, never past 120 minutes from acquisition."),
    _op("workspace.release", "POST", "/workspace/release", "checkout", leases.LeaseIdParams,
        leases.release, "Release a lease (yours, or anyone's with approve)."),
    _op("workspace.propose", "POST", "/workspace/propose", "propose", proposals.ProposeParams,
        proposals.propose, "Propose new text for a region, based on a version."),
    _op("workspace.review", "POST", "/workspace/proposal/review", "approve",
        proposals.ReviewParams, proposals.review, "Approve or reject a pending proposal."),
    _op("workspace.withdraw", "POST", "/workspace/proposal/withdraw", "propose",
        proposals.ProposalIdParams, proposals.withdraw, "Withdraw your own proposal."),
    _op("workspace.commit", "POST", "/workspace/commit", "commit", proposals.CommitParams,
        proposals.commit,
        "Commit an approved proposal; or, with admin, a raw whole-document commit."),
    _op("workspace.invite", "POST", "/workspace/invite", "invite", access.InviteParams,
        access.create_invitation, "Create an invitation (a subset of your capabilities)."),
    _op("workspace.revoke_invitation", "POST", "/workspace/invite/revoke", "invite",
        access.InviteIdParams, access.revoke_invitation, "Revoke an invitation.",
        destructive=True),
    _op("session.revoke", "POST", "/workspace/session/revoke", "admin",
        access.ParticipantIdParams, access.revoke_sessions,
        "End every session of a participant (their open streams close).", destructive=True),
    _op("workspace.leave", "POST", "/workspace/leave", "read", NoParams, access.leave,
        "Leave: your sessions end and your leases are released.", destructive=True),
)

OPERATIONS_BY_NAME: Final[dict[str, Operation]] = {op.name: op for op in OPERATIONS}
OPERATIONS_BY_ROUTE: Final[dict[tuple[str, str], Operation]] = {
    (op.method, op.path): op for op in OPERATIONS
}
