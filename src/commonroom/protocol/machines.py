"""The room's status machines as data: which action moves which status to which, and whose.

Each machine (proposals, handoffs, tasks, review threads) is one `Machine` value: its statuses
in the order the wire shows them (the first is where a row starts), its transitions and the
actor of each action. Everything else a reader needs is derived from the transitions, never
listed beside them:

- `terminal`: a status no action leaves, but a revival (`revivals`: a superseded proposal
  revised or rebased by its author);
- `resting`: entered by a `rests` action (changes requested, a thread resolved or outdated)
  and left again: neither open nor terminal;
- `open_states`: the others: the row may still move as it stands;
- `overtaken`: the terminal statuses the `document` moves to (another change landed first);
- `sources(action)`: what an action accepts (`PROPOSAL.sources("rebase")` is what a rebase
  takes).

The engine writes statuses only through `engine/_state.move` over these machines (with the
table each lives in); `protocol/vocabulary.py` names their sets for the parameter records and
`/protocol`; the client, `ce` and the page read them there. This module imports nothing of
commonroom, and not attrs (a dataclass: `ce --help` loads the vocabulary, never attrs), so
the client may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

DOCUMENT: Final = "document"
"""The actor of a move the document's change makes (a conflict, a supersession, an outdating)."""
ROOM: Final = "room"
"""The actor of a move the room makes on its own (a participant left)."""


@dataclass(frozen=True)
class Machine:
    kind: str
    """The vocabulary's name of the machine: `proposal`, `handoff`, `task`, `thread`."""
    statuses: tuple[str, ...]
    """Every status, in the wire's order; the first is a new row's."""
    transitions: Mapping[str, Mapping[str, str]]
    """action -> {from status: to status}."""
    actor: Mapping[str, str]
    """action -> whose move it is (the feature checks the caller is that one; `document` and
    `room` moves are the room's own)."""
    revivals: frozenset[str] = frozenset()
    """Actions that may leave a terminal status (its author takes a superseded proposal back)."""
    rests: frozenset[str] = frozenset()
    """Actions that move to a status the row waits in, neither open nor terminal."""

    def __post_init__(self) -> None:
        if len(set(self.statuses)) != len(self.statuses):
            raise ValueError(f"{self.kind}: a status is listed twice")
        if self.transitions.keys() != self.actor.keys():
            raise ValueError(f"{self.kind}: every action has one actor")
        if not (self.revivals | self.rests) <= self.transitions.keys():
            raise ValueError(f"{self.kind}: revivals and rests are actions of the machine")
        for action, moves in self.transitions.items():
            for source, target in moves.items():
                if source not in self.statuses or target not in self.statuses:
                    raise ValueError(f"{self.kind}: {action} {source} -> {target}: unknown status")
        if self.statuses[0] in self.terminal:
            raise ValueError(f"{self.kind}: a new row cannot start terminal")

    @property
    def initial(self) -> str:
        return self.statuses[0]

    @property
    def terminal(self) -> tuple[str, ...]:
        """The statuses only a revival leaves (most no action leaves at all)."""
        left = {source for action, moves in self.transitions.items()
                if action not in self.revivals for source in moves}
        return tuple(status for status in self.statuses if status not in left)

    @property
    def resting(self) -> tuple[str, ...]:
        rested = {target for action in self.rests for target in self.transitions[action].values()}
        return tuple(s for s in self.statuses if s in rested and s not in self.terminal)

    @property
    def open_states(self) -> tuple[str, ...]:
        ended = {*self.terminal, *self.resting}
        return tuple(status for status in self.statuses if status not in ended)

    @property
    def revivable(self) -> tuple[str, ...]:
        """Terminal statuses some revival may still leave."""
        return tuple(s for s in self.terminal
                     if any(s in self.transitions[action] for action in self.revivals))

    @property
    def overtaken(self) -> tuple[str, ...]:
        """Terminal statuses the document's moves end a row in: another change landed first."""
        reached = {target for action, moves in self.transitions.items()
                   if self.actor[action] == DOCUMENT for target in moves.values()}
        return tuple(s for s in self.terminal if s in reached)

    def sources(self, action: str) -> tuple[str, ...]:
        """The statuses `action` accepts, in the order its transitions list them."""
        return tuple(self.transitions[action])

    def target(self, action: str, status: str) -> str | None:
        """Where `action` moves a row in `status`; None when it may not."""
        return self.transitions[action].get(status)


PROPOSAL: Final = Machine(
    kind="proposal",
    statuses=("pending", "approved", "rejected", "committed", "conflicted", "withdrawn",
              "superseded", "changes_requested"),
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
        "revise": {"pending": "pending", "changes_requested": "pending", "superseded": "pending"},
        # An applied rebase is a revision too; a reviewer may also rebase an approved one.
        "rebase": {"pending": "pending", "changes_requested": "pending", "superseded": "pending",
                   "approved": "pending"},
    },
    actor={
        "approve": "reviewer", "reject": "reviewer", "commit": "committer", "conflict": DOCUMENT,
        "withdraw": "author", "supersede": DOCUMENT, "request_changes": "reviewer",
        "revise": "author", "rebase": "author",
    },
    revivals=frozenset({"revise", "rebase"}),
    rests=frozenset({"request_changes"}),
)

HANDOFF: Final = Machine(
    kind="handoff",
    statuses=("requested", "accepted", "declined", "completed", "failed", "cancelled"),
    transitions={
        "accept": {"requested": "accepted"},
        "decline": {"requested": "declined"},
        "complete": {"accepted": "completed"},
        "fail": {"accepted": "failed"},
        "cancel": {"requested": "cancelled", "accepted": "cancelled"},
        "abandon": {"requested": "failed", "accepted": "failed"},
    },
    # "abandon" is the room's own move (a participant left).
    actor={
        "accept": "target", "decline": "target", "complete": "target", "fail": "target",
        "cancel": "requester", "abandon": ROOM,
    },
)

_TASK_OPEN: Final = ("working", "input_required")
# A task's actions are the statuses it is moved to: its assignee reports the four
# reportable ones; cancelling is the requester's (through the handoff).
_TASK_REPORTABLE: Final = ("working", "input_required", "completed", "failed")
TASK: Final = Machine(
    kind="task",
    statuses=(*_TASK_OPEN, "completed", "failed", "cancelled"),
    transitions={
        **{status: dict.fromkeys(_TASK_OPEN, status) for status in _TASK_REPORTABLE},
        "cancelled": dict.fromkeys(_TASK_OPEN, "cancelled"),
    },
    actor={**dict.fromkeys(_TASK_REPORTABLE, "target"), "cancelled": "requester"},
)

# A thread: resolved by its author or the host, reopened, or outdated by the re-anchoring
# after a version when its region or quote is gone (never deleted), and open again when a
# later version brings both back. No status is terminal.
THREAD: Final = Machine(
    kind="thread",
    statuses=("open", "resolved", "outdated"),
    transitions={
        "resolve": {"open": "resolved", "outdated": "resolved"},
        "reopen": {"resolved": "open"},
        "outdate": {"open": "outdated"},
        # Its region and quote are back (a save seen half-way, then whole): open again.
        "reanchor": {"outdated": "open"},
    },
    actor={"resolve": "author", "reopen": "author", "outdate": DOCUMENT, "reanchor": DOCUMENT},
    rests=frozenset({"resolve", "outdate"}),
)

MACHINES: Final[dict[str, Machine]] = {m.kind: m for m in (PROPOSAL, HANDOFF, TASK, THREAD)}
