"""Tasks: the MCP tasks-extension view of accepted handoffs (docs/spec/PROTOCOL.md 9, 10.1).

A task exists from the moment its handoff is accepted; the handoff owns it.
`task.get`, `task.update` and `task.cancel` are what the MCP endpoint's
`tasks/get`, `tasks/update` and `tasks/cancel` call (docs/protocol.md has the
mapping). Terminal moves go through the handoff (`handoffs._move`), so
completing the task completes the handoff and the other way round.

`TASK_TRANSITIONS[status]` lists the statuses the target may report from
there; `working` <-> `input_required` changes only the task (its handoff stays
`accepted`), `completed` / `failed` move the handoff too.
"""

from __future__ import annotations

from typing import Final

from commonroom.engine import handoffs
from commonroom.engine._state import TASK
from commonroom.engine.tx import Tx
from commonroom.protocol import limits, vocabulary
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import Handoff, Task, TaskResult
from commonroom.protocol.requests import TaskIdParams, TaskUpdateParams

REPORTABLE: Final = vocabulary.TASK_REPORTABLE
TASK_TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    status: frozenset(action for action in REPORTABLE if TASK.target(action, status) is not None)
    for status in TASK.statuses
}
"""status -> what the assignee may report from it (derived from `_state.TASK`)."""
FINISHED: Final = tuple(status for status in REPORTABLE if status in TASK.terminal)
"""The ends the assignee reports, with a result (completed, failed): the handoff's
statuses of the same names (`handoffs.TASK_STATUS`)."""



def _load(tx: Tx, task_id: str) -> tuple[Handoff, str, str | None, str]:
    """(handoff, task status, status message, created_at)."""
    row = tx.conn.execute(
        "SELECT handoff_id, status, status_message, created_at FROM tasks WHERE task_id = ?",
        (task_id,),
    ).fetchone()
    if row is None:
        # The protocol has no task code: a task is its handoff's, so it is the handoff's.
        raise CommonroomError("handoff_not_found", f"no task {task_id!r}", {"task_id": task_id})
    return handoffs.get(tx, row[0]), row[1], row[2], row[3]


def _task(tx: Tx, task_id: str) -> Task:
    handoff, status, message, created_at = _load(tx, task_id)
    updated_at = tx.conn.execute(
        "SELECT updated_at FROM tasks WHERE task_id = ?", (task_id,)
    ).fetchone()[0]
    result = None
    if handoff.status in FINISHED:
        result = TaskResult(handoff.result_summary, handoff.result_details)
    return Task(task_id, handoff.handoff_id, status, message, handoff.from_participant_id,
                handoff.to_participant_id, created_at, updated_at, result)


def get_task(tx: Tx, p: TaskIdParams) -> Task:
    return _task(tx, p.task_id)


def update_task(tx: Tx, p: TaskUpdateParams) -> Task:
    handoff, status, _, _ = _load(tx, p.task_id)
    if tx.actor.participant_id != handoff.to_participant_id:
        raise CommonroomError(
            "permission_denied", "only the handoff's target reports on its task",
            {"task_id": p.task_id, "handoff_id": handoff.handoff_id},
        )
    if p.status not in TASK_TRANSITIONS[status]:
        raise CommonroomError(
            "handoff_conflict", f"the task is {status}; it cannot become {p.status}",
            {"task_id": p.task_id, "handoff_id": handoff.handoff_id, "status": status},
        )
    message = p.status_message
    if message is not None and len(message) > limits.MESSAGE_MAX_CHARS:
        raise invalid_request(
            f"status_message must be at most {limits.MESSAGE_MAX_CHARS} characters",
            "status_message",
        )
    if p.status in FINISHED:
        summary = (p.result_summary or message or "").strip()
        if not summary:
            raise invalid_request("a finished task needs result_summary", "result_summary")
        if len(summary) > limits.SUMMARY_MAX:
            raise invalid_request(
                f"result_summary must be at most {limits.SUMMARY_MAX} characters",
                "result_summary",
            )
        details = p.result_details
        if details is not None and len(details) > limits.HANDOFF_DETAILS_MAX:
            raise invalid_request(
                f"result_details must be at most {limits.HANDOFF_DETAILS_MAX} characters",
                "result_details",
            )
        handoffs.complete_or_fail(tx, handoff, p.status, summary, details, message)
    else:
        handoffs.set_task_status(tx, p.task_id, handoff.handoff_id, p.status, message)
    return _task(tx, p.task_id)


def cancel_task(tx: Tx, p: TaskIdParams) -> Task:
    """The requester cancels; on a finished task it is an acknowledgement (no change, no event)."""
    handoff, status, _, _ = _load(tx, p.task_id)
    if tx.actor.participant_id != handoff.from_participant_id:
        raise CommonroomError(
            "permission_denied", "only the handoff's requester cancels its task",
            {"task_id": p.task_id, "handoff_id": handoff.handoff_id},
        )
    if TASK_TRANSITIONS[status]:
        handoffs.cancel_handoff(tx, handoff)
    return _task(tx, p.task_id)
