"""The room's status machines, declared as data, and `move`, the one writer of a status.

In the style of h11's `_state.py`: each machine (proposals, handoffs, tasks)
is a `Machine` value — which action moves which status to which, whose move
each action is, which statuses are open and which terminal — and nothing
else. The features (`proposals.py`, `handoffs.py`, `tasks.py`) decide *when*
to make a move and check who may; `move` checks that the move exists, writes
the new status (with any columns that change with it) and returns it. No
other code writes a `status` column of these tables. The SQL filters of open
and terminal rows come from `open_states` / `terminal` (`Machine.open_sql`),
and the statuses themselves from `protocol/vocabulary.py`, which the client,
`ce` and the page read too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from commonroom.engine.tx import Tx
from commonroom.protocol import vocabulary
from commonroom.protocol.errors import CommonroomError


@attrs.frozen
class Machine:
    kind: str
    """The vocabulary's name of the machine: `proposal`, `handoff`, `task`."""
    table: str
    key: str
    transitions: Mapping[str, Mapping[str, str]]
    """action -> {from status: to status}."""
    actor: Mapping[str, str]
    """action -> whose move it is (the feature checks the caller is that one)."""
    terminal: tuple[str, ...]
    open_states: tuple[str, ...]
    resting: tuple[str, ...] = ()
    """Neither open nor terminal: moves may leave them (a thread resolved, changes requested)."""
    revivable: tuple[str, ...] = ()
    """Terminal statuses some action may still leave (a superseded proposal revised)."""

    def __attrs_post_init__(self) -> None:
        parts = (set(self.open_states), set(self.resting), set(self.terminal))
        statuses = set().union(*parts)
        if (statuses != set(vocabulary.STATUSES[self.kind])
                or sum(len(part) for part in parts) != len(statuses)
                or not set(self.revivable) <= set(self.terminal)):
            raise ValueError(f"{self.kind}: open, resting and terminal statuses must split the"
                             " vocabulary's")
        if self.transitions.keys() != self.actor.keys():
            raise ValueError(f"{self.kind}: every action has one actor")
        for action, moves in self.transitions.items():
            for source, target in moves.items():
                leavable = (*self.open_states, *self.resting, *self.revivable)
                if source not in leavable or target not in statuses:
                    raise ValueError(f"{self.kind}: {action} {source} -> {target} leaves a final status")

    @property
    def statuses(self) -> tuple[str, ...]:
        return vocabulary.STATUSES[self.kind]

    def target(self, action: str, status: str) -> str | None:
        """Where `action` moves a row in `status`; None when it may not."""
        return self.transitions[action].get(status)

    @property
    def open_sql(self) -> str:
        """`status IN (...)` of the open statuses, for a WHERE clause."""
        return _status_in(self.open_states)

    @property
    def terminal_sql(self) -> str:
        return _status_in(self.terminal)


def _status_in(statuses: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{status}'" for status in statuses) + ")"


def move(
    tx: Tx, machine: Machine, key: str, status: str, action: str, *,
    refuse: Callable[[], CommonroomError], **columns: Any,
) -> str:
    """Move row `key` (now in `status`) by `action`: write the new status and `columns`,
    return the new status; `refuse()` is raised when the machine has no such move."""
    target = machine.target(action, status)
    if target is None:
        raise refuse()
    sets = ", ".join(f"{name} = ?" for name in ("status", "updated_at", *columns))
    tx.conn.execute(
        f"UPDATE {machine.table} SET {sets} WHERE {machine.key} = ?",
        (target, tx.now_s, *columns.values(), key),
    )
    return target


PROPOSAL: Final = Machine(
    kind="proposal", table="proposals", key="proposal_id",
    transitions={
        "approve": {"pending": "approved"},
        "reject": {"pending": "rejected"},
        "commit": {"approved": "committed"},
        "conflict": {"approved": "conflicted"},
        "withdraw": {"pending": "withdrawn", "approved": "withdrawn",
                     "changes_requested": "withdrawn"},
        # Only pending proposals are superseded (docs/protocol.md): an approved one
        # meets stale_version at commit, which carries the recovery fields.
        "supersede": {"pending": "superseded"},
        # -- the review conversation (docs/spec/PROTOCOL.md section 17)
        "request_changes": {"pending": "changes_requested"},
        # The author revises in place: a new revision, back to pending.
        "revise": dict.fromkeys(vocabulary.PROPOSAL_REVISABLE, "pending"),
        # An applied rebase is a revision too; a reviewer may also rebase an approved one.
        "rebase": dict.fromkeys(vocabulary.PROPOSAL_REBASABLE, "pending"),
    },
    actor={
        "approve": "reviewer", "reject": "reviewer", "commit": "committer", "conflict": "room",
        "withdraw": "author", "supersede": "room", "request_changes": "reviewer",
        "revise": "author", "rebase": "author",
    },
    terminal=vocabulary.PROPOSAL_TERMINAL,
    open_states=vocabulary.PROPOSAL_OPEN,
    resting=vocabulary.PROPOSAL_RESTING,
    revivable=vocabulary.PROPOSAL_REVIVABLE,
)

HANDOFF: Final = Machine(
    kind="handoff", table="handoffs", key="handoff_id",
    transitions={
        "accept": {"requested": "accepted"},
        "decline": {"requested": "declined"},
        "complete": {"accepted": "completed"},
        "fail": {"accepted": "failed"},
        "cancel": {"requested": "cancelled", "accepted": "cancelled"},
        "abandon": {"requested": "failed", "accepted": "failed"},
    },
    # "room" moves are the room's own (a participant left).
    actor={
        "accept": "target", "decline": "target", "complete": "target", "fail": "target",
        "cancel": "requester", "abandon": "room",
    },
    terminal=vocabulary.HANDOFF_TERMINAL,
    open_states=vocabulary.HANDOFF_OPEN,
)

# A task's actions are the statuses it is moved to: its assignee reports the four
# reportable ones; cancelling is the requester's (through the handoff).
TASK: Final = Machine(
    kind="task", table="tasks", key="task_id",
    transitions={
        **{status: dict.fromkeys(vocabulary.TASK_OPEN, status) for status in vocabulary.TASK_REPORTABLE},
        "cancelled": dict.fromkeys(vocabulary.TASK_OPEN, "cancelled"),
    },
    actor={**dict.fromkeys(vocabulary.TASK_REPORTABLE, "target"), "cancelled": "requester"},
    terminal=vocabulary.TASK_TERMINAL,
    open_states=vocabulary.TASK_OPEN,
)

# A thread (the review conversation): resolved by its author or the host, reopened, or outdated by the
# re-anchoring after a version when its region or quote is gone (never deleted), and
# open again when a later version brings both back.
THREAD: Final = Machine(
    kind="thread", table="threads", key="thread_id",
    transitions={
        "resolve": {"open": "resolved", "outdated": "resolved"},
        "reopen": {"resolved": "open"},
        "outdate": {"open": "outdated"},
        # Its region and quote are back (a save seen half-way, then whole): open again.
        "reanchor": {"outdated": "open"},
    },
    actor={"resolve": "author", "reopen": "author", "outdate": "room", "reanchor": "room"},
    terminal=(),
    open_states=vocabulary.THREAD_OPEN,
    resting=tuple(s for s in vocabulary.THREAD_STATUSES if s not in vocabulary.THREAD_OPEN),
)

MACHINES: Final = {machine.kind: machine for machine in (PROPOSAL, HANDOFF, TASK, THREAD)}
