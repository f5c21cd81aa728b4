"""Task surfaces: a task's live view, generated app and its shared state (docs/spec/PROTOCOL.md 20).

The rules (docs/protocol.md "Task surfaces"):

- Only the task's primary agent, the handoff's target that accepted it,
  publishes a live view or an app (`permission_denied` for anyone else), and
  only while the task is open (`handoff_conflict` once it ended).
- A live view is checked whole at the edge (`protocol/task_surfaces.py`); one
  current snapshot per task. A replacement needs the same `surface_id` and a
  higher `revision` (else `invalid_request` naming `revision` or
  `surface_id`); `clear: true` (and no surface) clears it.
- One app per task; a new bundle replaces it (`revision` + 1) and resets the
  shared state to its `initialState`: state revision 0 for the first bundle,
  the next state revision for a replacement, so a `setState` of the replaced
  app is stale.
- The shared state moves by compare-and-set on its revision: `task.app_state`
  with the revision the caller last saw, else `stale_version`. Who may set it:
  the task's two participants (its agent and its requester) and the host,
  whose page does it on the app's behalf (`setState` in the bridge).
- An app request (`task.app_request`, the task's two participants and the
  host) is checked here and answered as an `AppRequestStart`: the room
  (`room/app_hosts.py`) carries it to a page and waits for the reply. The
  engine keeps nothing of it.
- Everyone who reads the room reads them (`task.surfaces`). They go
  `TASK_SURFACE_GRACE_MINUTES` (60) after the task ended, by the `expire` hook,
  so a restart keeps the rule (events `task.live_view` / `task.app` with
  reason `task_ended`).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from commonroom.engine import handoffs
from commonroom.engine._state import HANDOFF
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits, vocabulary
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import (
    AppPublished,
    AppState,
    Handoff,
    LiveView,
    LiveViewAnswer,
    TaskApp,
    TaskSurfaces,
    TaskSurfacesList,
)
from commonroom.protocol.requests import (
    AppParams,
    AppRequestParams,
    AppStateParams,
    LiveViewParams,
    TaskSurfacesParams,
)
from commonroom.protocol.task_surfaces import (
    Fault,
    bounded_json,
    check_bundle,
    check_live_view,
    refusal,
)
from commonroom.protocol.timefmt import format_ts

CLEARED: Final = "cleared"
TASK_ENDED: Final = "task_ended"


@attrs.frozen
class AppRequestStart:
    """An authorized app request, for the room to carry (never on the wire, never stored)."""

    task_id: str
    app_revision: int
    payload: Any
    participant_id: str


def _task_handoff(tx: Tx, task_id: str) -> Handoff:
    row = tx.conn.execute("SELECT handoff_id FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    if row is None:
        raise CommonroomError("handoff_not_found", f"no task {task_id!r}", {"task_id": task_id})
    return handoffs.get(tx, row[0])


def _require_open(handoff: Handoff, task_id: str, what: str) -> None:
    if handoff.status not in vocabulary.HANDOFF_OPEN:
        raise CommonroomError(
            "handoff_conflict", f"the task ended ({handoff.status}): it takes no more {what}",
            {"task_id": task_id, "handoff_id": handoff.handoff_id, "status": handoff.status},
        )


def _require_primary_agent(tx: Tx, handoff: Handoff, task_id: str) -> None:
    if tx.actor.participant_id != handoff.to_participant_id:
        raise CommonroomError(
            "permission_denied", "only the task's agent (the handoff's target) publishes its surfaces",
            {"task_id": task_id, "handoff_id": handoff.handoff_id},
        )


def _require_party_or_host(tx: Tx, handoff: Handoff, task_id: str, what: str) -> None:
    pid = tx.actor.participant_id
    if not handoffs.is_party(handoff, pid) and pid != tx.engine.host_participant_id:
        raise CommonroomError(
            "permission_denied", f"only the task's two participants and the host {what}",
            {"task_id": task_id, "handoff_id": handoff.handoff_id},
        )


def _ensure_row(tx: Tx, task_id: str, handoff_id: str) -> None:
    tx.conn.execute(
        "INSERT INTO task_surfaces (task_id, handoff_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (task_id, handoff_id),
    )


def _drop_if_empty(tx: Tx, task_id: str) -> None:
    tx.conn.execute(
        "DELETE FROM task_surfaces WHERE task_id = ? AND view_json IS NULL AND app_json IS NULL",
        (task_id,),
    )


# -- live views ---------------------------------------------------------------------


def publish_live_view(tx: Tx, p: LiveViewParams) -> LiveViewAnswer:
    handoff = _task_handoff(tx, p.task_id)
    _require_primary_agent(tx, handoff, p.task_id)
    _require_open(handoff, p.task_id, "live views")
    pid = tx.actor.participant_id
    if p.clear != (p.surface is None):
        raise invalid_request("send a surface to publish, or clear: true (and no surface) to"
                              " remove the live view", "surface")
    if p.surface is None:
        row = tx.conn.execute(
            "SELECT view_surface_id FROM task_surfaces WHERE task_id = ? AND view_json IS NOT NULL",
            (p.task_id,),
        ).fetchone()
        if row is None:
            return LiveViewAnswer(p.task_id, None, False)
        tx.conn.execute(
            "UPDATE task_surfaces SET view_json = NULL, view_surface_id = NULL,"
            " view_revision = NULL, view_by = NULL, view_at = NULL WHERE task_id = ?",
            (p.task_id,),
        )
        _drop_if_empty(tx, p.task_id)
        tx.emit(ev.TaskLiveView(p.task_id, row[0], None, pid, CLEARED))
        return LiveViewAnswer(p.task_id, None, True)
    text = check_live_view(p.surface)
    surface_id, revision = p.surface["surface_id"], p.surface["revision"]
    current = tx.conn.execute(
        "SELECT view_surface_id, view_revision FROM task_surfaces"
        " WHERE task_id = ? AND view_json IS NOT NULL", (p.task_id,),
    ).fetchone()
    if current is not None:
        if surface_id != current[0]:
            raise refusal("surface", Fault(
                "surface_id", f"the task's live view is {current[0]!r}: a replacement keeps its"
                " surface_id (clear it first to start another)"), current_surface_id=current[0])
        if revision <= current[1]:
            raise refusal("surface", Fault(
                "revision", f"the current revision is {current[1]}: a replacement needs a"
                " higher one"), current_revision=current[1])
    _ensure_row(tx, p.task_id, handoff.handoff_id)
    tx.conn.execute(
        "UPDATE task_surfaces SET view_json = ?, view_surface_id = ?, view_revision = ?,"
        " view_by = ?, view_at = ? WHERE task_id = ?",
        (text, surface_id, revision, pid, tx.now_s, p.task_id),
    )
    tx.emit(ev.TaskLiveView(p.task_id, surface_id, revision, pid))
    view = LiveView(p.task_id, surface_id, revision, p.surface["root"], p.surface["data"], pid,
                    tx.now_s)
    return LiveViewAnswer(p.task_id, view, False)


# -- generated apps -------------------------------------------------------------------


def publish_app(tx: Tx, p: AppParams) -> AppPublished:
    handoff = _task_handoff(tx, p.task_id)
    _require_primary_agent(tx, handoff, p.task_id)
    _require_open(handoff, p.task_id, "apps")
    text, title, initial_state = check_bundle(p.bundle)
    pid = tx.actor.participant_id
    row = tx.conn.execute(
        "SELECT app_revision, state_revision, app_json IS NOT NULL FROM task_surfaces"
        " WHERE task_id = ?", (p.task_id,),
    ).fetchone()
    app_revision = (row[0] if row else 0) + 1
    # A replacement's initialState is the next state revision: the replaced app's setState is stale.
    replaced = bool(row and row[2])
    state_revision = row[1] + 1 if replaced and row else 0
    _ensure_row(tx, p.task_id, handoff.handoff_id)
    size = len(text.encode("utf-8"))
    tx.conn.execute(
        "UPDATE task_surfaces SET app_json = ?, app_revision = ?, app_title = ?, app_size = ?,"
        " app_by = ?, app_at = ?, state_json = ?, state_revision = ?, state_by = NULL,"
        " state_at = ? WHERE task_id = ?",
        (text, app_revision, title, size, pid, tx.now_s, json.dumps(initial_state),
         state_revision, tx.now_s, p.task_id),
    )
    tx.emit(ev.TaskAppPublished(p.task_id, app_revision, title, pid))
    if replaced:
        tx.emit(ev.TaskAppState(p.task_id, app_revision, state_revision, pid))
    return AppPublished(p.task_id, app_revision, title, size, state_revision, pid, tx.now_s)


def set_app_state(tx: Tx, p: AppStateParams) -> AppState:
    handoff = _task_handoff(tx, p.task_id)
    _require_party_or_host(tx, handoff, p.task_id, "set its app's state")
    _require_open(handoff, p.task_id, "app state")
    row = tx.conn.execute(
        "SELECT app_revision, state_revision FROM task_surfaces"
        " WHERE task_id = ? AND app_json IS NOT NULL", (p.task_id,),
    ).fetchone()
    if row is None:
        raise CommonroomError("invalid_request", "the task has no app", {"field": "task_id",
                                                                        "task_id": p.task_id})
    app_revision, current = row
    if p.revision != current:
        raise CommonroomError(
            "stale_version", f"the app state is at revision {current}, not {p.revision}: read it"
            " again (getState) and set it on that", {"task_id": p.task_id,
                                                    "current_revision": current,
                                                    "revision": p.revision},
        )
    text = bounded_json(p.state, "state", limits.APP_STATE_MAX_BYTES)
    pid = tx.actor.participant_id
    tx.conn.execute(
        "UPDATE task_surfaces SET state_json = ?, state_revision = ?, state_by = ?, state_at = ?"
        " WHERE task_id = ?", (text, current + 1, pid, tx.now_s, p.task_id),
    )
    tx.emit(ev.TaskAppState(p.task_id, app_revision, current + 1, pid))
    return AppState(p.task_id, app_revision, current + 1, p.state, pid, tx.now_s)


def app_request(tx: Tx, p: AppRequestParams) -> AppRequestStart:
    """Check an app request; the room carries it (see the module docstring)."""
    handoff = _task_handoff(tx, p.task_id)
    _require_party_or_host(tx, handoff, p.task_id, "send requests to its app")
    _require_open(handoff, p.task_id, "app requests")
    bounded_json(p.payload, "payload", limits.APP_REQUEST_MAX_BYTES)
    row = tx.conn.execute(
        "SELECT app_revision FROM task_surfaces WHERE task_id = ? AND app_json IS NOT NULL",
        (p.task_id,),
    ).fetchone()
    if row is None:
        raise CommonroomError("invalid_request", "the task has no app to ask: publish one first"
                              " (task.app)", {"field": "task_id", "task_id": p.task_id})
    return AppRequestStart(p.task_id, row[0], p.payload, tx.actor.participant_id)


# -- reading ----------------------------------------------------------------------------

_COLUMNS: Final = (
    "s.task_id, s.handoff_id, h.summary, h.status, h.updated_at,"
    " s.view_json, s.view_by, s.view_at,"
    " s.app_json, s.app_revision, s.app_title, s.app_size, s.app_by, s.app_at,"
    " s.state_json, s.state_revision, s.state_by, s.state_at"
)


def _surfaces(row: tuple[Any, ...]) -> TaskSurfaces:
    (task_id, handoff_id, summary, status, updated_at, view_json, view_by, view_at,
     app_json, app_revision, app_title, app_size, app_by, app_at,
     state_json, state_revision, state_by, state_at) = row
    is_open = status in vocabulary.HANDOFF_OPEN
    expires_at = None if is_open else format_ts(
        datetime.fromisoformat(updated_at) + timedelta(minutes=limits.TASK_SURFACE_GRACE_MINUTES))
    view = None
    if view_json is not None:
        draft = json.loads(view_json)
        view = LiveView(task_id, draft["surface_id"], draft["revision"], draft["root"],
                        draft["data"], view_by, view_at)
    app = state = None
    if app_json is not None:
        app = TaskApp(task_id, app_revision, app_title, json.loads(app_json), app_size, app_by,
                      app_at)
        state = AppState(task_id, app_revision, state_revision, json.loads(state_json), state_by,
                         state_at)
    return TaskSurfaces(task_id, handoff_id, summary, is_open, expires_at, view, app, state)


def read_surfaces(tx: Tx, p: TaskSurfacesParams) -> TaskSurfacesList:
    if p.task_id is not None:
        _task_handoff(tx, p.task_id)  # an unknown task is handoff_not_found, as everywhere
    rows = tx.conn.execute(
        f"SELECT {_COLUMNS} FROM task_surfaces s JOIN handoffs h USING (handoff_id)"
        f" WHERE ? IS NULL OR s.task_id = ? ORDER BY h.created_at, s.rowid",
        (p.task_id, p.task_id),
    ).fetchall()
    return TaskSurfacesList([_surfaces(row) for row in rows])


# -- the end of a task ------------------------------------------------------------------

_ENDED: Final = HANDOFF.ended_sql("h.status")


def expire(tx: Tx) -> None:
    """The `on_expiry` hook: a task's surfaces go 60 minutes after the task ended."""
    before = format_ts(tx.now - timedelta(minutes=limits.TASK_SURFACE_GRACE_MINUTES))
    for task_id, surface_id, view_by, app_by, has_view, has_app in tx.conn.execute(
        "SELECT s.task_id, s.view_surface_id, s.view_by, s.app_by, s.view_json IS NOT NULL,"
        " s.app_json IS NOT NULL FROM task_surfaces s JOIN handoffs h USING (handoff_id)"
        f" WHERE {_ENDED} AND h.updated_at <= ? ORDER BY s.rowid", (before,),
    ).fetchall():
        tx.conn.execute("DELETE FROM task_surfaces WHERE task_id = ?", (task_id,))
        if has_view:
            tx.emit(ev.TaskLiveView(task_id, surface_id, None, view_by, TASK_ENDED))
        if has_app:
            tx.emit(ev.TaskAppPublished(task_id, None, None, app_by, TASK_ENDED))


def next_expiry(tx: Tx) -> datetime | None:
    ended = tx.conn.execute(
        "SELECT min(h.updated_at) FROM task_surfaces s JOIN handoffs h USING (handoff_id)"
        f" WHERE {_ENDED}"
    ).fetchone()[0]
    if ended is None:
        return None
    return datetime.fromisoformat(ended) + timedelta(minutes=limits.TASK_SURFACE_GRACE_MINUTES)
