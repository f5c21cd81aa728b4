"""Handoffs and their tasks (engine/handoffs.py, engine/tasks.py; docs/spec/PROTOCOL.md 9, 10.1).

The expected moves are written out here independently of the engine's
`TRANSITIONS`, and every (status, move, actor) combination is tried.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Driver

# (status before, move) -> status after; anything not listed is handoff_conflict.
EXPECTED: dict[tuple[str, str], str] = {
    ("requested", "accept"): "accepted",
    ("requested", "decline"): "declined",
    ("accepted", "complete"): "completed",
    ("accepted", "fail"): "failed",
    ("requested", "cancel"): "cancelled",
    ("accepted", "cancel"): "cancelled",
}
MOVES = ("accept", "decline", "complete", "fail", "cancel")
WHO = {"accept": "to", "decline": "to", "complete": "to", "fail": "to", "cancel": "from"}
STATES = ("requested", "accepted", "declined", "completed", "failed", "cancelled")


class Trio:
    def __init__(self, room: Driver) -> None:
        self.room = room
        self.a = room.join("alice")
        self.b = room.join("bob")
        self.c = room.join("carol")
        self.bearer = {"from": self.a["session_id"], "to": self.b["session_id"],
                       "third": self.c["session_id"]}

    def request(self, **extra: Any) -> dict[str, Any]:
        params = {"to_participant_id": self.b["participant_id"], "summary": "take Risks", **extra}
        result: dict[str, Any] = self.room.call("handoff.request", self.bearer["from"], **params)
        return result

    def move(self, handoff_id: str, move: str, who: str) -> Any:
        op, params = _move_call(handoff_id, move)
        return self.room.call(op, self.bearer[who], **params)

    def move_error(self, handoff_id: str, move: str, who: str) -> Any:
        op, params = _move_call(handoff_id, move)
        return self.room.error(op, self.bearer[who], **params)

    def in_state(self, state: str) -> dict[str, Any]:
        handoff = self.request()
        path = {"requested": [], "accepted": ["accept"], "declined": ["decline"],
                "completed": ["accept", "complete"], "failed": ["accept", "fail"],
                "cancelled": ["cancel"]}[state]
        for move in path:
            handoff = self.move(handoff["handoff_id"], move, WHO[move])
        assert handoff["status"] == state
        return handoff

    def events(self, since: int) -> list[dict[str, Any]]:
        history = self.room.call("workspace.history", self.room.host, limit=200)["events"]
        return [e for e in reversed(history) if e["event_id"] > since]

    def latest(self) -> int:
        return int(self.room.call("workspace.room", self.room.host)["latest_event_id"])


def _move_call(handoff_id: str, move: str) -> tuple[str, dict[str, Any]]:
    if move in ("accept", "decline"):
        return "handoff.respond", {"handoff_id": handoff_id, "decision": move}
    if move in ("complete", "fail"):
        status = "completed" if move == "complete" else "failed"
        return "handoff.result", {"handoff_id": handoff_id, "status": status, "summary": "did it"}
    return "handoff.cancel", {"handoff_id": handoff_id}


@pytest.fixture
def trio_(room: Driver) -> Trio:
    return Trio(room)


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("move", MOVES)
def test_every_move_from_every_state(trio_: Trio, state: str, move: str) -> None:
    handoff = trio_.in_state(state)
    hid = handoff["handoff_id"]
    # A third participant never acts, and the wrong one of the two never either:
    # permission_denied whatever the state (never handoff_not_found).
    assert trio_.move_error(hid, move, "third").code == "permission_denied"
    other = "from" if WHO[move] == "to" else "to"
    assert trio_.move_error(hid, move, other).code == "permission_denied"
    expected = EXPECTED.get((state, move))
    before = trio_.latest()
    if expected is None:
        err = trio_.move_error(hid, move, WHO[move])
        assert err.code == "handoff_conflict" and err.http_status == 409
        assert err.details["status"] == state
        assert trio_.events(before) == []
        return
    moved = trio_.move(hid, move, WHO[move])
    assert moved["status"] == expected
    assert trio_.room.call("workspace.handoff", trio_.bearer["third"], handoff_id=hid) == moved
    types = [e["type"] for e in trio_.events(before)]
    assert types[0] == f"handoff.{expected}"
    payload = trio_.events(before)[0]["payload"]
    assert payload == {"handoff_id": hid, "from_participant_id": trio_.a["participant_id"],
                       "to_participant_id": trio_.b["participant_id"], "summary": "take Risks"}
    # A task exists from acceptance on, and every change of its status is an event.
    task_expected = {"accepted": "working", "completed": "completed", "failed": "failed",
                     "cancelled": "cancelled"}.get(expected)
    if moved["task_id"] is not None:
        assert task_expected is not None
        task = trio_.room.call("task.get", trio_.bearer["from"], task_id=moved["task_id"])
        assert task["status"] == task_expected
        assert types[1:] == ["task.updated"]
    else:
        assert expected in ("declined", "cancelled") and state == "requested"
        assert types[1:] == []


def test_unknown_ids_are_handoff_not_found(trio_: Trio) -> None:
    for move in MOVES:
        err = trio_.move_error("ho_nope", move, WHO[move])
        assert err.code == "handoff_not_found" and err.http_status == 404
    assert trio_.room.error("workspace.handoff", trio_.bearer["third"], handoff_id="ho_x").code == \
        "handoff_not_found"
    for op in ("task.get", "task.cancel"):
        assert trio_.room.error(op, trio_.bearer["from"], task_id="tk_x").code == "handoff_not_found"


def test_the_handoff_object_and_its_task(trio_: Trio) -> None:
    handoff = trio_.request(details="see the notes", region="Risks", request_id="k1")
    assert set(handoff) == {
        "handoff_id", "request_id", "from_participant_id", "to_participant_id", "summary",
        "details", "region", "attachment_ids", "status", "task_id", "result_summary",
        "result_details", "reason", "created_at", "updated_at"}
    assert handoff["region"] == "Plan/Risks"  # validated and canonical
    assert handoff["status"] == "requested" and handoff["task_id"] is None
    accepted = trio_.room.call("handoff.respond", trio_.bearer["to"], handoff_id=handoff["handoff_id"],
                               decision="accept", summary="on it")
    assert accepted["task_id"].startswith("tk_")
    task = trio_.room.call("task.get", trio_.bearer["to"], task_id=accepted["task_id"])
    assert task["status"] == "working" and task["status_message"] == "on it"
    assert task["result"] is None and task["handoff_id"] == handoff["handoff_id"]
    done = trio_.room.call("handoff.result", trio_.bearer["to"], handoff_id=handoff["handoff_id"],
                           status="completed", summary="rewrote it", details="3 risks added")
    assert done["result_summary"] == "rewrote it" and done["result_details"] == "3 risks added"
    task = trio_.room.call("task.get", trio_.bearer["from"], task_id=accepted["task_id"])
    assert task["status"] == "completed"
    assert task["result"] == {"summary": "rewrote it", "details": "3 risks added"}


def test_request_validation(trio_: Trio) -> None:
    room, a = trio_.room, trio_.bearer["from"]
    for target in ("pt_nobody", trio_.a["participant_id"]):
        err = room.error("handoff.request", a, to_participant_id=target, summary="x")
        assert err.code == "invalid_request" and err.details["field"] == "to_participant_id"
    reader = room.join("reader", ["read"])
    err = room.error("handoff.request", a, to_participant_id=reader["participant_id"], summary="x")
    assert err.code == "invalid_request" and err.details["field"] == "to_participant_id"
    err = room.error("handoff.request", a, to_participant_id=trio_.b["participant_id"], summary=" ")
    assert err.details["field"] == "summary"
    err = room.error("handoff.request", a, to_participant_id=trio_.b["participant_id"], summary="x",
                     region="Nowhere")
    assert err.code == "invalid_region"
    err = room.error("handoff.request", a, to_participant_id=trio_.b["participant_id"], summary="x",
                     attachment_ids=["att_missing"])
    assert err.code == "attachment_not_found"
    assert room.error("handoff.request", reader["session_id"], to_participant_id=trio_.b["participant_id"],
                      summary="x").code == "permission_denied"
    assert room.call("workspace.handoffs", room.host)["handoffs"] == []


def test_request_id_makes_a_request_idempotent(trio_: Trio) -> None:
    first = trio_.request(request_id="same", details="d")
    latest = trio_.latest()
    again = trio_.request(request_id="same", details="d")
    assert again == first
    assert trio_.events(latest) == []
    err = trio_.room.error("handoff.request", trio_.bearer["from"],
                           to_participant_id=trio_.b["participant_id"], summary="take Risks",
                           request_id="same", details="other")
    assert err.code == "handoff_conflict" and err.details["handoff_id"] == first["handoff_id"]
    # Scoped to the requester: another participant's "same" is its own handoff.
    other = trio_.room.call("handoff.request", trio_.bearer["third"],
                            to_participant_id=trio_.b["participant_id"], summary="take Risks",
                            request_id="same", details="d")
    assert other["handoff_id"] != first["handoff_id"]
    # After it moved on, the same request still answers the handoff as it is now.
    trio_.move(first["handoff_id"], "accept", "to")
    assert trio_.request(request_id="same", details="d")["status"] == "accepted"
    assert len(trio_.room.call("workspace.handoffs", trio_.room.host)["handoffs"]) == 2


def test_task_and_handoff_never_disagree_whichever_op_moves(trio_: Trio) -> None:
    room = trio_.room
    to, frm = trio_.bearer["to"], trio_.bearer["from"]

    def both(hid: str, tid: str) -> tuple[str, str]:
        return (room.call("workspace.handoff", frm, handoff_id=hid)["status"],
                room.call("task.get", frm, task_id=tid)["status"])

    # 1. task.update completes -> the handoff completes; handoff.result afterwards conflicts.
    h = trio_.move(trio_.request()["handoff_id"], "accept", "to")
    room.call("task.update", to, task_id=h["task_id"], status="input_required", status_message="?")
    assert both(h["handoff_id"], h["task_id"]) == ("accepted", "input_required")
    room.call("task.update", to, task_id=h["task_id"], status="working", status_message="ok")
    t = room.call("task.update", to, task_id=h["task_id"], status="completed",
                  result_summary="done", result_details="all")
    assert t["result"] == {"summary": "done", "details": "all"}
    assert both(h["handoff_id"], h["task_id"]) == ("completed", "completed")
    assert room.call("workspace.handoff", frm, handoff_id=h["handoff_id"])["result_summary"] == "done"
    assert trio_.move_error(h["handoff_id"], "fail", "to").code == "handoff_conflict"
    assert room.error("task.update", to, task_id=h["task_id"], status="working").code == "handoff_conflict"
    # 2. handoff.result fails -> the task fails.
    h = trio_.move(trio_.request()["handoff_id"], "accept", "to")
    trio_.move(h["handoff_id"], "fail", "to")
    assert both(h["handoff_id"], h["task_id"]) == ("failed", "failed")
    # 3. task.cancel by the requester -> the handoff is cancelled; again is an ack.
    h = trio_.move(trio_.request()["handoff_id"], "accept", "to")
    room.call("task.update", to, task_id=h["task_id"], status="input_required")
    room.call("task.cancel", frm, task_id=h["task_id"])
    assert both(h["handoff_id"], h["task_id"]) == ("cancelled", "cancelled")
    latest = trio_.latest()
    assert room.call("task.cancel", frm, task_id=h["task_id"])["status"] == "cancelled"
    assert trio_.events(latest) == []
    assert trio_.move_error(h["handoff_id"], "cancel", "from").code == "handoff_conflict"
    # 4. handoff.cancel -> the task is cancelled.
    h = trio_.move(trio_.request()["handoff_id"], "accept", "to")
    trio_.move(h["handoff_id"], "cancel", "from")
    assert both(h["handoff_id"], h["task_id"]) == ("cancelled", "cancelled")
    # Wrong actors on tasks: the requester does not report, the target does not cancel.
    h = trio_.move(trio_.request()["handoff_id"], "accept", "to")
    assert room.error("task.update", frm, task_id=h["task_id"], status="working").code == \
        "permission_denied"
    assert room.error("task.cancel", to, task_id=h["task_id"]).code == "permission_denied"
    assert room.error("task.update", trio_.bearer["third"], task_id=h["task_id"],
                      status="completed", result_summary="x").code == "permission_denied"
    assert room.error("task.update", to, task_id=h["task_id"], status="completed").details["field"] \
        == "result_summary"
    # Every task status change was a task.updated event, with the status it became.
    history = room.call("workspace.history", room.host, limit=200)["events"]
    updates = [e["payload"]["status"] for e in reversed(history) if e["type"] == "task.updated"]
    assert updates == ["working", "input_required", "working", "completed",
                       "working", "failed",
                       "working", "input_required", "cancelled",
                       "working", "cancelled",
                       "working"]


def test_leaving_fails_what_you_were_asked_and_cancels_what_you_asked(trio_: Trio) -> None:
    room = trio_.room
    asked_of_bob = trio_.move(trio_.request()["handoff_id"], "accept", "to")
    pending_for_bob = trio_.request()
    by_bob = room.call("handoff.request", trio_.bearer["to"], to_participant_id=trio_.c["participant_id"],
                       summary="check it")
    done = trio_.in_state("completed")
    room.call("workspace.leave", trio_.bearer["to"])
    get = lambda hid: room.call("workspace.handoff", trio_.bearer["from"], handoff_id=hid)  # noqa: E731
    for hid in (asked_of_bob["handoff_id"], pending_for_bob["handoff_id"]):
        assert get(hid)["status"] == "failed" and get(hid)["reason"] == "participant_left"
    assert get(by_bob["handoff_id"])["status"] == "cancelled"
    assert get(by_bob["handoff_id"])["reason"] == "participant_left"
    assert get(done["handoff_id"])["status"] == "completed"
    task = room.call("task.get", trio_.bearer["from"], task_id=asked_of_bob["task_id"])
    assert task["status"] == "failed" and task["status_message"] == "participant_left"
    # Nobody can hand anything to a participant that left.
    err = room.error("handoff.request", trio_.bearer["from"], to_participant_id=trio_.b["participant_id"],
                     summary="x")
    assert err.code == "invalid_request"


def test_room_snapshot_lists_open_handoffs(trio_: Trio) -> None:
    open_one = trio_.request()
    accepted = trio_.in_state("accepted")
    trio_.in_state("declined")
    trio_.in_state("completed")
    snapshot = trio_.room.call("workspace.room", trio_.bearer["third"])
    assert [h["handoff_id"] for h in snapshot["handoffs"]] == [
        open_one["handoff_id"], accepted["handoff_id"]]
    listed = trio_.room.call("workspace.handoffs", trio_.bearer["third"], status="declined")
    assert [h["status"] for h in listed["handoffs"]] == ["declined"]
    assert len(trio_.room.call("workspace.handoffs", trio_.bearer["third"], limit=2)["handoffs"]) == 2
