"""Handoffs and the tasks they own (docs/spec/PROTOCOL.md 9 and 10.1).

A handoff is a correlated request from one participant to another; it is
never a remote function call: the target decides. Who may make which move and
from which status is data (`TRANSITIONS`, `ACTOR`), never decided by a client:

    requested -> accepted | declined            (the target)
    accepted  -> completed | failed             (the target)
    requested | accepted -> cancelled           (the requester)
    requested | accepted -> failed              (the target left: `abandon`)

Accepting creates the handoff's task (`tk_...`, status `working`), the MCP
tasks-extension view of the same work. Every move goes through `_move`, which
changes the handoff and its task in the same transaction and emits the
handoff event and `task.updated`, so task and handoff status never disagree,
whichever operation (handoff.* or task.*) made the move. `TASK_STATUS` says
which task status each handoff status implies; while the handoff is
`accepted`, the target may move its task between `working` and
`input_required` (tasks.py).

Errors: a participant other than the one the move belongs to ->
`permission_denied` (never `handoff_not_found`, which is for unknown ids);
a move the status does not allow -> `handoff_conflict`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import attrs

from commonroom.engine import guard
from commonroom.engine._state import HANDOFF, TASK, move
from commonroom.engine.ids import new_id
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits, vocabulary
from commonroom.protocol.capabilities import allows
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import Handoff, Handoffs
from commonroom.protocol.requests import (
    HandoffIdParams,
    HandoffsParams,
    RequestParams,
    RespondParams,
    ResultParams,
)

STATUSES: Final = vocabulary.HANDOFF_STATUSES

TRANSITIONS: Final = HANDOFF.transitions
ACTOR: Final = HANDOFF.actor
EVENT: Final[dict[str, type[ev._HandoffPayload]]] = {
    "requested": ev.HandoffRequested,
    "accepted": ev.HandoffAccepted,
    "declined": ev.HandoffDeclined,
    "completed": ev.HandoffCompleted,
    "failed": ev.HandoffFailed,
    "cancelled": ev.HandoffCancelled,
}
# handoff status -> the status its task has on entering it
TASK_STATUS: Final[dict[str, str]] = {
    "accepted": "working", "completed": "completed", "failed": "failed", "cancelled": "cancelled",
}
PARTICIPANT_LEFT: Final = "participant_left"


# ------------------------------------------------------------------ params



# ------------------------------------------------------------------ storage

_COLUMNS = (
    "handoff_id, request_id, from_participant_id, to_participant_id, summary, details, region,"
    " attachment_ids, status, task_id, result_summary, result_details, reason, created_at,"
    " updated_at"
)


def _row(row: tuple[Any, ...]) -> Handoff:
    values = list(row)
    values[7] = json.loads(values[7])
    return Handoff(*values)


def get(tx: Tx, handoff_id: str) -> Handoff:
    row = tx.conn.execute(
        f"SELECT {_COLUMNS} FROM handoffs WHERE handoff_id = ?", (handoff_id,)
    ).fetchone()
    if row is None:
        raise CommonroomError(
            "handoff_not_found", f"no handoff {handoff_id!r}", {"handoff_id": handoff_id}
        )
    return _row(row)


def open_handoffs(tx: Tx) -> list[Handoff]:
    return [
        _row(row)
        for row in tx.conn.execute(
            f"SELECT {_COLUMNS} FROM handoffs WHERE {HANDOFF.open_sql}"
            " ORDER BY created_at, rowid"
        )
    ]


def is_party(handoff: Handoff, participant_id: str) -> bool:
    return participant_id in (handoff.from_participant_id, handoff.to_participant_id)


def require_party_or_host(tx: Tx, handoff: Handoff, what: str) -> None:
    """Only the handoff's two participants and the host (its thread, its attachments)."""
    pid = tx.actor.participant_id
    if not is_party(handoff, pid) and pid != tx.engine.host_participant_id:
        raise CommonroomError(
            "permission_denied",
            f"only the handoff's two participants and the host may {what}",
            {"handoff_id": handoff.handoff_id},
        )


def _text(value: str | None, field: str, maximum: int, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise invalid_request(f"{field} is required", field)
        return None
    value = value.strip()
    if required and not value:
        raise invalid_request(f"{field} must not be empty", field)
    if len(value) > maximum:
        raise invalid_request(f"{field} must be at most {maximum} characters", field)
    return value or None


def check_participant(tx: Tx, participant_id: str, field: str) -> tuple[str, ...]:
    """A participant still in the room (its capabilities), else `invalid_request` naming `field`."""
    row = tx.conn.execute(
        "SELECT capabilities FROM participants WHERE participant_id = ? AND left_at IS NULL",
        (participant_id,),
    ).fetchone()
    if row is None:
        raise invalid_request(f"no participant {participant_id!r} in the room", field)
    return tuple(json.loads(row[0]))


def _move(
    tx: Tx, handoff: Handoff, action: str, *, result_summary: str | None = None,
    result_details: str | None = None, reason: str | None = None,
    status_message: str | None = None,
) -> Handoff:
    """The one way a handoff (and its task) changes status."""
    role = ACTOR[action]
    pid = tx.actor_or_none.participant_id if tx.actor_or_none is not None else None
    if role == "target" and pid != handoff.to_participant_id:
        raise CommonroomError(
            "permission_denied", "only the handoff's target answers and reports it",
            {"handoff_id": handoff.handoff_id},
        )
    if role == "requester" and pid != handoff.from_participant_id:
        raise CommonroomError(
            "permission_denied", "only the handoff's requester cancels it",
            {"handoff_id": handoff.handoff_id},
        )
    def refuse() -> CommonroomError:
        return CommonroomError(
            "handoff_conflict", f"cannot {action} a {handoff.status} handoff",
            {"handoff_id": handoff.handoff_id, "status": handoff.status},
        )

    if HANDOFF.target(action, handoff.status) is None:
        raise refuse()
    task_id = handoff.task_id
    if HANDOFF.target(action, handoff.status) == "accepted":
        task_id = new_id("tk_")
        tx.conn.execute(
            "INSERT INTO tasks (task_id, handoff_id, status, status_message, created_at,"
            " updated_at) VALUES (?, ?, 'working', ?, ?, ?)",
            (task_id, handoff.handoff_id, status_message, tx.now_s, tx.now_s),
        )
    columns: dict[str, Any] = {
        "task_id": task_id,
        "result_summary": result_summary if result_summary is not None else handoff.result_summary,
        "result_details": result_details if result_details is not None else handoff.result_details,
        "reason": reason if reason is not None else handoff.reason,
    }
    target = move(tx, HANDOFF, handoff.handoff_id, handoff.status, action, refuse=refuse, **columns)
    moved = attrs.evolve(handoff, status=target, updated_at=tx.now_s, **columns)
    tx.emit(EVENT[target](moved.handoff_id, moved.from_participant_id,
                          moved.to_participant_id, moved.summary))
    if task_id is not None and target in TASK_STATUS:
        message = status_message if status_message is not None else (reason or result_summary)
        set_task_status(tx, task_id, moved.handoff_id, TASK_STATUS[target], message)
    return moved


def set_task_status(tx: Tx, task_id: str, handoff_id: str, status: str,
                    status_message: str | None) -> None:
    """Move a task to `status` (a move of `_state.TASK`, with `task.updated`); only `_move`
    and tasks.py call it, after checking the move is the caller's."""
    row = tx.conn.execute("SELECT status FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    current = str(row[0])

    def refuse() -> CommonroomError:
        return CommonroomError(
            "handoff_conflict", f"the task is {current}; it cannot become {status}",
            {"task_id": task_id, "handoff_id": handoff_id, "status": current},
        )

    move(tx, TASK, task_id, current, status, refuse=refuse, status_message=status_message)
    tx.emit(ev.TaskUpdated(task_id, handoff_id, status, status_message))


def complete_or_fail(tx: Tx, handoff: Handoff, status: str, summary: str,
                     details: str | None, status_message: str | None = None) -> Handoff:
    action = "complete" if status == "completed" else "fail"
    return _move(tx, handoff, action, result_summary=summary, result_details=details,
                 status_message=status_message)


def cancel_handoff(tx: Tx, handoff: Handoff) -> Handoff:
    return _move(tx, handoff, "cancel")


# ---------------------------------------------------------------- handlers


def _request_hash(p: RequestParams) -> str:
    body = [p.to_participant_id, p.summary, p.details, p.region, p.attachment_ids or []]
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()


def request(tx: Tx, p: RequestParams) -> Handoff:
    pid = tx.actor.participant_id
    summary = _text(p.summary, "summary", limits.SUMMARY_MAX, required=True)
    assert summary is not None
    details = _text(p.details, "details", limits.HANDOFF_DETAILS_MAX, required=False)
    request_hash = _request_hash(p)
    if p.request_id is not None:
        if not p.request_id or len(p.request_id) > limits.REQUEST_ID_MAX:
            raise invalid_request(
                f"request_id must be 1 to {limits.REQUEST_ID_MAX} characters", "request_id"
            )
        row = tx.conn.execute(
            f"SELECT {_COLUMNS}, request_hash FROM handoffs"
            " WHERE from_participant_id = ? AND request_id = ?",
            (pid, p.request_id),
        ).fetchone()
        if row is not None:
            if row[-1] != request_hash:
                raise CommonroomError(
                    "handoff_conflict",
                    "this request_id was used for a different request",
                    {"handoff_id": row[0], "request_id": p.request_id},
                )
            return _row(row[:-1])  # the same request again: the same handoff, no event
    if p.to_participant_id == pid:
        raise invalid_request("a handoff goes to another participant", "to_participant_id")
    held = check_participant(tx, p.to_participant_id, "to_participant_id")
    if not allows(held, "handoff"):
        raise invalid_request(
            "that participant cannot answer handoffs (it lacks the handoff capability)",
            "to_participant_id",
        )
    region = None
    if p.region is not None:
        region = tx.engine.resolve(p.region)[1].region
    attachment_ids = list(dict.fromkeys(p.attachment_ids or []))
    if len(attachment_ids) > limits.HANDOFF_ATTACHMENTS_MAX:
        raise invalid_request(
            f"a handoff carries at most {limits.HANDOFF_ATTACHMENTS_MAX} attachments",
            "attachment_ids",
        )
    for attachment_id in attachment_ids:
        found = tx.conn.execute(
            "SELECT 1 FROM attachments WHERE attachment_id = ?", (attachment_id,)
        ).fetchone()
        if found is None:
            raise CommonroomError(
                "attachment_not_found", f"no attachment {attachment_id!r}",
                {"attachment_id": attachment_id},
            )
    guard.admit(tx, pid, [p.to_participant_id], "handoff")
    handoff = Handoff(
        new_id("ho_"), p.request_id, pid, p.to_participant_id, summary, details, region,
        attachment_ids, "requested", None, None, None, None, tx.now_s, tx.now_s,
    )
    values = list(attrs.astuple(handoff, recurse=False))
    values[7] = json.dumps(attachment_ids)
    tx.conn.execute(
        f"INSERT INTO handoffs ({_COLUMNS}, request_hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*values, request_hash),
    )
    tx.emit(ev.HandoffRequested(handoff.handoff_id, pid, handoff.to_participant_id, summary))
    return handoff


def respond(tx: Tx, p: RespondParams) -> Handoff:
    handoff = get(tx, p.handoff_id)
    note = _text(p.summary, "summary", limits.SUMMARY_MAX, required=False)
    if p.decision == "accept":
        return _move(tx, handoff, "accept", status_message=note)
    return _move(tx, handoff, "decline", result_summary=note)


def result(tx: Tx, p: ResultParams) -> Handoff:
    handoff = get(tx, p.handoff_id)
    summary = _text(p.summary, "summary", limits.SUMMARY_MAX, required=True)
    assert summary is not None
    details = _text(p.details, "details", limits.HANDOFF_DETAILS_MAX, required=False)
    return complete_or_fail(tx, handoff, p.status, summary, details)


def cancel(tx: Tx, p: HandoffIdParams) -> Handoff:
    return cancel_handoff(tx, get(tx, p.handoff_id))


def handoff_one(tx: Tx, p: HandoffIdParams) -> Handoff:
    return get(tx, p.handoff_id)


def list_handoffs(tx: Tx, p: HandoffsParams) -> Handoffs:
    if p.status is None:
        rows = tx.conn.execute(
            f"SELECT {_COLUMNS} FROM handoffs ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (p.limit,),
        )
    else:
        rows = tx.conn.execute(
            f"SELECT {_COLUMNS} FROM handoffs WHERE status = ?"
            " ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (p.status, p.limit),
        )
    return Handoffs([_row(row) for row in rows])


def on_leave(tx: Tx, participant_id: str) -> None:
    """The participant left: what it was asked to do fails, what it asked for is cancelled."""
    for handoff in open_handoffs(tx):
        if handoff.to_participant_id == participant_id:
            _move(tx, handoff, "abandon", reason=PARTICIPANT_LEFT)
        elif handoff.from_participant_id == participant_id:
            # The requester's own cancel, made by the room on its way out.
            _move(tx, handoff, "cancel", reason=PARTICIPANT_LEFT)
