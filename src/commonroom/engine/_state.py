"""The room's status machines over their tables, and `move`, the one writer of a status.

In the style of h11's `_state.py`: each machine (proposals, handoffs, tasks, threads) is
data, declared once in `protocol/machines.py` (which action moves which status to which,
whose move each action is; open and terminal statuses derived from the transitions), where
the client, `ce` and the page read it too. Here each gets the table its rows live in. The
features (`proposals.py`, `handoffs.py`, `tasks.py`, `threads.py`) decide *when* to make a
move and check who may; `move` checks that the move exists, writes the new status (with any
columns that change with it) and returns it. No other code writes a `status` column of these
tables. The SQL filters of open and terminal rows are `Machine.open_sql` / `terminal_sql`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from commonroom.engine.tx import Tx
from commonroom.protocol import machines
from commonroom.protocol.errors import CommonroomError


@attrs.frozen
class Machine:
    """A machine of `protocol/machines.py` with the table its rows live in."""

    spec: machines.Machine
    table: str
    key: str

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def statuses(self) -> tuple[str, ...]:
        return self.spec.statuses

    @property
    def transitions(self) -> Mapping[str, Mapping[str, str]]:
        return self.spec.transitions

    @property
    def actor(self) -> Mapping[str, str]:
        return self.spec.actor

    @property
    def open_states(self) -> tuple[str, ...]:
        return self.spec.open_states

    @property
    def terminal(self) -> tuple[str, ...]:
        return self.spec.terminal

    def target(self, action: str, status: str) -> str | None:
        """Where `action` moves a row in `status`; None when it may not."""
        return self.spec.target(action, status)

    @property
    def open_sql(self) -> str:
        """`status IN (...)` of the open statuses, for a WHERE clause."""
        return _status_in(self.open_states)

    @property
    def terminal_sql(self) -> str:
        return _status_in(self.terminal)

    def ended_sql(self, column: str = "status") -> str:
        """`column NOT IN (...)` of the open statuses: ended or resting rows (a join's
        `h.status`)."""
        return f"{column} NOT IN (" + ", ".join(f"'{status}'" for status in self.open_states) + ")"


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


PROPOSAL: Final = Machine(machines.PROPOSAL, "proposals", "proposal_id")
HANDOFF: Final = Machine(machines.HANDOFF, "handoffs", "handoff_id")
TASK: Final = Machine(machines.TASK, "tasks", "task_id")
THREAD: Final = Machine(machines.THREAD, "threads", "thread_id")

MACHINES: Final = {machine.kind: machine for machine in (PROPOSAL, HANDOFF, TASK, THREAD)}
