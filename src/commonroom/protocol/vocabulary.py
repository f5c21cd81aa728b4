"""The status vocabularies of the room's state machines, one source for every reader.

The engine's machines (`engine/_state.py`: proposals, handoffs, tasks) are
declared over these names and checked against them when the engine loads; the
parameter records take their `choices` from here; the client, `ce` and the page
(through `/protocol`'s `vocabulary`) read them from here too, never a copy.
"""

from __future__ import annotations

from typing import Final

PROPOSAL_STATUSES: Final = (
    "pending", "approved", "rejected", "committed", "conflicted", "withdrawn", "superseded",
    "changes_requested",
)
PROPOSAL_OPEN: Final = ("pending", "approved")
"""A proposal that may still land (or be decided) as it stands."""
PROPOSAL_RESTING: Final = ("changes_requested",)
"""Neither open nor final: waiting for its author's revision (the review conversation)."""
PROPOSAL_TERMINAL: Final = tuple(
    s for s in PROPOSAL_STATUSES if s not in PROPOSAL_OPEN and s not in PROPOSAL_RESTING
)
"""Final, but for `superseded`, which its author may still revise or rebase back to pending
(`PROPOSAL_REVIVABLE`); terminal proposals' texts are the ones the sidecar prunes."""
PROPOSAL_REVIVABLE: Final = ("superseded",)
PROPOSAL_REVISABLE: Final = ("pending", "changes_requested", "superseded")
"""What `workspace.proposal.revise` accepts (docs/spec/PROTOCOL.md section 17)."""
PROPOSAL_REBASABLE: Final = (*PROPOSAL_REVISABLE, "approved")
"""What `workspace.proposal.rebase` accepts: what its author may revise, and an approved
one (a reviewer may rebase it before it is committed)."""
PROPOSAL_OVERTAKEN: Final = ("superseded", "conflicted")
"""Ended because the document moved past the proposal's base: another change landed first."""
PROPOSAL_DECIDED: Final = tuple(s for s in PROPOSAL_STATUSES if s != "pending")
"""Reviewed, or ended instead of a review: a wait for the review ends on these."""
PROPOSAL_ACCEPTED: Final = ("approved", "committed")
"""The decided statuses in which the proposal's text stands (or may land)."""

HANDOFF_STATUSES: Final = ("requested", "accepted", "declined", "completed", "failed", "cancelled")
HANDOFF_OPEN: Final = ("requested", "accepted")
HANDOFF_TERMINAL: Final = tuple(s for s in HANDOFF_STATUSES if s not in HANDOFF_OPEN)

THREAD_STATUSES: Final = ("open", "resolved", "outdated")
THREAD_OPEN: Final = ("open",)

TASK_STATUSES: Final = ("working", "input_required", "completed", "failed", "cancelled")
TASK_OPEN: Final = ("working", "input_required")
TASK_TERMINAL: Final = tuple(s for s in TASK_STATUSES if s not in TASK_OPEN)
TASK_REPORTABLE: Final = ("working", "input_required", "completed", "failed")
"""What a task's assignee may report (`task.update`); cancelling is the requester's."""

WHOLE: Final = "workspace"
"""The region name of the whole document."""

STATUSES: Final[dict[str, tuple[str, ...]]] = {
    "proposal": PROPOSAL_STATUSES,
    "handoff": HANDOFF_STATUSES,
    "task": TASK_STATUSES,
    "thread": THREAD_STATUSES,
}
OPEN_STATUSES: Final[dict[str, tuple[str, ...]]] = {
    "proposal": PROPOSAL_OPEN,
    "handoff": HANDOFF_OPEN,
    "task": TASK_OPEN,
    "thread": THREAD_OPEN,
}


# Resident agents (docs/spec/PROTOCOL.md section 19).
RUNTIME_STATES: Final = ("idle", "running", "paused", "reconnecting")
PERMISSION_OPTION_KINDS: Final = ("allow_once", "allow_always", "reject_once", "reject_always")
PERMISSION_STATUSES: Final = ("pending", "answered", "expired", "withdrawn")
