"""Resident agents' state in the room (docs/spec/PROTOCOL.md section 19).

The runtime itself (`ce agent`) is a client: it holds the observe stream, runs
the agent and decides when to wake it. The room only keeps what the host must
see and answer, as rows and events:

- **Runtime reports** (`workspace.runtime`): one row per participant, the
  caller's own (a body never names another), shown as `runtime` in
  participants and announced as `participant.runtime`.
- **Permission requests** (`permission.request`): the agent's prompt with its
  exact options, pending until the host (or a session with `approve`) answers
  one of those options, or until `expires_at` (5 minutes), when the
  `on_expiry` hook marks it `expired` (the runtime then answers the agent
  `cancelled`: it fails closed). The asking participant never answers its own
  request, whatever its capabilities; room text never answers one.
- **Interrupt and resume** (`runtime.interrupt`, `runtime.resume`): events the
  runtime acts on from its stream; an interrupt names the turn, so a late one
  never cancels the next turn.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from commonroom.engine import handoffs
from commonroom.engine.access import list_participants
from commonroom.engine.ids import new_id
from commonroom.engine.runtimes import runtime_of
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import (
    Participant,
    PermissionOptionRecord,
    PermissionRequest,
    PermissionRequests,
    Runtime,
    RuntimeControl,
)
from commonroom.protocol.requests import (
    InterruptParams,
    PermissionAnswerParams,
    PermissionIdParams,
    PermissionParams,
    PermissionsParams,
    ResumeParams,
    RuntimeParams,
)
from commonroom.protocol.timefmt import format_ts, parse_ts

_PERMISSION_COLUMNS = (
    "permission_id, participant_id, title, tool, input_preview, options, status, option_id,"
    " answered_by, created_at, expires_at, answered_at"
)


# -- runtime reports ------------------------------------------------------------------------


def report(tx: Tx, p: RuntimeParams) -> Participant:
    """`workspace.runtime`: the caller's runtime state; an unchanged report emits nothing."""
    pid = tx.actor.participant_id
    if p.turn_started_at is not None:
        try:
            parse_ts(p.turn_started_at)
        except ValueError:
            raise invalid_request("turn_started_at must be an RFC 3339 timestamp",
                                  "turn_started_at") from None
    before = runtime_of(tx, pid)
    new = (p.state, p.harness, p.queued, p.turn, p.turn_started_at, p.note)
    if before is None or (before.state, before.harness, before.queued, before.turn,
                          before.turn_started_at, before.note) != new:
        tx.conn.execute(
            "INSERT INTO participant_runtimes (participant_id, state, harness, queued, turn,"
            " turn_started_at, note, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (participant_id) DO UPDATE SET state = excluded.state,"
            " harness = excluded.harness, queued = excluded.queued, turn = excluded.turn,"
            " turn_started_at = excluded.turn_started_at, note = excluded.note,"
            " updated_at = excluded.updated_at",
            (pid, *new, tx.now_s),
        )
        tx.emit(ev.ParticipantRuntime(pid, p.state, p.harness, p.queued, p.turn,
                                      p.turn_started_at, p.note))
    return next(part for part in list_participants(tx) if part.participant_id == pid)


def _require_runtime(tx: Tx, participant_id: str) -> Runtime:
    handoffs.check_participant(tx, participant_id, "participant_id")
    runtime = runtime_of(tx, participant_id)
    if runtime is None:
        raise invalid_request(
            f"participant {participant_id!r} has no resident runtime (`ce agent`)", "participant_id")
    return runtime


def interrupt(tx: Tx, p: InterruptParams) -> RuntimeControl:
    """`runtime.interrupt`: tell the runtime to cancel turn `p.turn` (it ignores any other)."""
    runtime = _require_runtime(tx, p.participant_id)
    tx.emit(ev.RuntimeInterrupted(p.participant_id, p.turn, tx.actor.participant_id))
    return RuntimeControl(p.participant_id, p.turn, runtime)


def resume(tx: Tx, p: ResumeParams) -> RuntimeControl:
    """`runtime.resume`: a paused runtime takes wakes again (it reports `idle` itself)."""
    runtime = _require_runtime(tx, p.participant_id)
    tx.emit(ev.RuntimeResumed(p.participant_id, tx.actor.participant_id))
    return RuntimeControl(p.participant_id, None, runtime)


# -- permission requests ----------------------------------------------------------------------


def _permission(row: tuple[Any, ...]) -> PermissionRequest:
    (permission_id, participant_id, title, tool, preview, options, status, option_id,
     answered_by, created_at, expires_at, answered_at) = row
    return PermissionRequest(
        permission_id, participant_id, title, tool, preview,
        [PermissionOptionRecord(**option) for option in json.loads(options)], status, option_id,
        answered_by, created_at, expires_at, answered_at,
    )


def _get(tx: Tx, permission_id: str) -> PermissionRequest:
    row = tx.conn.execute(
        f"SELECT {_PERMISSION_COLUMNS} FROM permission_requests WHERE permission_id = ?",
        (permission_id,),
    ).fetchone()
    if row is None:
        raise CommonroomError("permission_not_found", f"no permission request {permission_id!r}",
                              {"permission_id": permission_id})
    return _permission(row)


def request(tx: Tx, p: PermissionParams) -> PermissionRequest:
    """`permission.request`: the caller's agent asks the host; pending for 5 minutes."""
    pid = tx.actor.participant_id
    if not 1 <= len(p.options) <= limits.PERMISSION_OPTIONS_MAX:
        raise invalid_request(
            f"a permission request offers 1 to {limits.PERMISSION_OPTIONS_MAX} options", "options")
    ids = [option.option_id for option in p.options]
    if len(set(ids)) != len(ids):
        raise invalid_request("each option_id is offered once", "options")
    open_count = tx.conn.execute(
        "SELECT count(*) FROM permission_requests WHERE participant_id = ? AND status = 'pending'",
        (pid,),
    ).fetchone()[0]
    if open_count >= limits.PERMISSIONS_OPEN_MAX:
        raise CommonroomError(
            "limit_exceeded",
            f"at most {limits.PERMISSIONS_OPEN_MAX} pending permission requests per participant",
            {"scope": "permissions", "limit": limits.PERMISSIONS_OPEN_MAX},
            retry_after_seconds=limits.PERMISSION_TTL_SECONDS,
        )
    permission_id = new_id("pm_")
    expires_at = format_ts(tx.now + timedelta(seconds=limits.PERMISSION_TTL_SECONDS))
    options = [{"option_id": o.option_id, "name": o.name, "kind": o.kind} for o in p.options]
    tx.conn.execute(
        f"INSERT INTO permission_requests ({_PERMISSION_COLUMNS}) VALUES"
        " (?, ?, ?, ?, ?, ?, 'pending', NULL, NULL, ?, ?, NULL)",
        (permission_id, pid, p.title, p.tool, p.input_preview, json.dumps(options), tx.now_s,
         expires_at),
    )
    tx.emit(ev.PermissionRequested(permission_id, pid, p.title, p.tool, expires_at))
    return _get(tx, permission_id)


def list_permissions(tx: Tx, p: PermissionsParams) -> PermissionRequests:
    rows = tx.conn.execute(
        f"SELECT {_PERMISSION_COLUMNS} FROM permission_requests WHERE status = ?"
        " ORDER BY created_at, permission_id LIMIT ?",
        (p.status or "pending", limits.LIST_MAX),
    ).fetchall()
    return PermissionRequests([_permission(row) for row in rows])


def answer(tx: Tx, p: PermissionAnswerParams) -> PermissionRequest:
    """`permission.answer`: one of the request's exact options, by anyone with `approve` but
    the participant that asked."""
    pending = _get(tx, p.permission_id)
    actor = tx.actor.participant_id
    if pending.participant_id == actor:
        raise CommonroomError(
            "permission_denied", "a participant never answers its own permission request",
            {"permission_id": p.permission_id},
        )
    if pending.status != "pending":
        raise CommonroomError(
            "permission_conflict", f"permission request {p.permission_id!r} is {pending.status}",
            {"permission_id": p.permission_id, "status": pending.status},
        )
    if p.option_id not in {option.option_id for option in pending.options}:
        raise invalid_request(
            f"option_id must be one of {', '.join(o.option_id for o in pending.options)}",
            "option_id",
        )
    tx.conn.execute(
        "UPDATE permission_requests SET status = 'answered', option_id = ?, answered_by = ?,"
        " answered_at = ? WHERE permission_id = ?",
        (p.option_id, actor, tx.now_s, p.permission_id),
    )
    tx.emit(ev.PermissionAnswered(p.permission_id, pending.participant_id, p.option_id, actor))
    return _get(tx, p.permission_id)


def withdraw(tx: Tx, p: PermissionIdParams) -> PermissionRequest:
    """`permission.withdraw`: the asker's own pending request, once nothing waits for it."""
    pending = _get(tx, p.permission_id)
    if pending.participant_id != tx.actor.participant_id:
        raise CommonroomError("permission_denied", "only the participant that asked withdraws it",
                              {"permission_id": p.permission_id})
    if pending.status != "pending":
        raise CommonroomError(
            "permission_conflict", f"permission request {p.permission_id!r} is {pending.status}",
            {"permission_id": p.permission_id, "status": pending.status},
        )
    tx.conn.execute("UPDATE permission_requests SET status = 'withdrawn' WHERE permission_id = ?",
                    (p.permission_id,))
    tx.emit(ev.PermissionWithdrawn(p.permission_id, pending.participant_id))
    return _get(tx, p.permission_id)


def expire(tx: Tx) -> None:
    """The `on_expiry` hook: a request unanswered by its `expires_at` is expired (fail closed)."""
    for permission_id, participant_id in tx.conn.execute(
        "SELECT permission_id, participant_id FROM permission_requests"
        " WHERE status = 'pending' AND expires_at <= ? ORDER BY expires_at",
        (tx.now_s,),
    ).fetchall():
        tx.conn.execute("UPDATE permission_requests SET status = 'expired' WHERE permission_id = ?",
                        (permission_id,))
        tx.emit(ev.PermissionExpired(permission_id, participant_id))


def next_expiry(tx: Tx) -> datetime | None:
    row = tx.conn.execute(
        "SELECT min(expires_at) FROM permission_requests WHERE status = 'pending'"
    ).fetchone()
    return datetime.fromisoformat(row[0]) if row[0] is not None else None
