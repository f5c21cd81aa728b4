"""The status vocabularies of the room's state machines, one source for every reader.

Every set here is derived from the machines' transitions (`protocol/machines.py`), never
listed beside them; the parameter records take their `choices` from here; the client, `ce`
and the page (through `/protocol`'s `vocabulary`) read them from here too, never a copy.
"""

from __future__ import annotations

from typing import Final

from commonroom.protocol.machines import HANDOFF, MACHINES, PROPOSAL, TASK, THREAD

PROPOSAL_STATUSES: Final = PROPOSAL.statuses
PROPOSAL_OPEN: Final = PROPOSAL.open_states
"""A proposal that may still land (or be decided) as it stands."""
PROPOSAL_RESTING: Final = PROPOSAL.resting
"""Neither open nor final: waiting for its author's revision."""
PROPOSAL_TERMINAL: Final = PROPOSAL.terminal
"""Final, but for `superseded`, which its author may still revise or rebase back to pending
(`PROPOSAL_REVIVABLE`); terminal proposals' texts are the ones the sidecar prunes."""
PROPOSAL_REVIVABLE: Final = PROPOSAL.revivable
PROPOSAL_REVISABLE: Final = PROPOSAL.sources("revise")
"""What `workspace.proposal.revise` accepts (docs/spec/PROTOCOL.md section 17)."""
PROPOSAL_REBASABLE: Final = PROPOSAL.sources("rebase")
"""What `workspace.proposal.rebase` accepts: what its author may revise, and an approved
one (a reviewer may rebase it before it is committed)."""
PROPOSAL_REVIEWABLE: Final = PROPOSAL.sources("request_changes")
"""What a reviewer may still decide (approve, reject, request changes): pending."""
PROPOSAL_OVERTAKEN: Final = PROPOSAL.overtaken
"""Ended because the document moved past the proposal's base: another change landed first."""
PROPOSAL_DECIDED: Final = tuple(s for s in PROPOSAL_STATUSES if s != PROPOSAL.initial)
"""Reviewed, or ended instead of a review: a wait for the review ends on these."""
PROPOSAL_ACCEPTED: Final = (PROPOSAL.sources("commit")[0], *PROPOSAL.transitions["commit"].values())
"""The decided statuses in which the proposal's text stands (or may land): approved, committed."""

HANDOFF_STATUSES: Final = HANDOFF.statuses
HANDOFF_OPEN: Final = HANDOFF.open_states
HANDOFF_TERMINAL: Final = HANDOFF.terminal

THREAD_STATUSES: Final = THREAD.statuses
THREAD_OPEN: Final = THREAD.open_states

TASK_STATUSES: Final = TASK.statuses
TASK_OPEN: Final = TASK.open_states
TASK_TERMINAL: Final = TASK.terminal
TASK_REPORTABLE: Final = tuple(s for s in TASK_STATUSES if TASK.actor.get(s) == "target")
"""What a task's assignee may report (`task.update`); cancelling is the requester's."""

WHOLE: Final = "workspace"
"""The region name of the whole document."""

STATUSES: Final[dict[str, tuple[str, ...]]] = {
    kind: machine.statuses for kind, machine in MACHINES.items()}
OPEN_STATUSES: Final[dict[str, tuple[str, ...]]] = {
    kind: machine.open_states for kind, machine in MACHINES.items()}


# Resident agents (docs/spec/PROTOCOL.md section 19).
RUNTIME_STATES: Final = ("idle", "running", "paused", "reconnecting")
PERMISSION_OPTION_KINDS: Final = ("allow_once", "allow_always", "reject_once", "reject_always")
PERMISSION_STATUSES: Final = ("pending", "answered", "expired", "withdrawn")
