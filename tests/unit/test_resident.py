"""Resident agents' room side (engine/resident.py; docs/spec/PROTOCOL.md section 19):
runtime reports, permission requests and their answers and expiry, interrupt and resume."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Driver

OPTIONS = [
    {"option_id": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"option_id": "reject", "name": "Reject", "kind": "reject_once"},
]


def _events(room: Driver, since: int = 0) -> list[dict[str, Any]]:
    history = room.call("workspace.history", room.host, limit=200)["events"]
    return [e for e in reversed(history) if e["event_id"] > since]


def _ask(room: Driver, bearer: str, **extra: Any) -> dict[str, Any]:
    body = {"title": "Run shell", "tool": "execute", "input_preview": "rm -rf build/",
            "options": OPTIONS, **extra}
    result: dict[str, Any] = room.call("permission.request", bearer, **body)
    return result


def test_a_runtime_report_shows_in_participants_and_is_announced_once(room: Driver) -> None:
    bot = room.join("bot")
    report = {"state": "running", "harness": "acp:gemini", "queued": 2, "turn": 3,
              "turn_started_at": "2026-11-30T12:00:00.000000+00:00"}
    me = room.call("workspace.runtime", bot["session_id"], **report)
    assert me["participant_id"] == bot["participant_id"]
    assert me["runtime"]["state"] == "running" and me["runtime"]["queued"] == 2
    listed = room.call("workspace.participants", room.host)["participants"]
    shown = next(p for p in listed if p["participant_id"] == bot["participant_id"])
    assert shown["runtime"]["harness"] == "acp:gemini"
    assert all(p["runtime"] is None for p in listed if p["name"] != "bot")
    room.call("workspace.runtime", bot["session_id"], **report)  # unchanged: no second event
    announced = [e for e in _events(room) if e["type"] == "participant.runtime"]
    assert len(announced) == 1 and announced[0]["payload"]["queued"] == 2


def test_a_runtime_report_refuses_bad_values(room: Driver) -> None:
    bot = room.join("bot")
    error = room.error("workspace.runtime", bot["session_id"], state="asleep", harness="x")
    assert error.code == "invalid_request" and error.details["field"] == "state"
    error = room.error("workspace.runtime", bot["session_id"], state="idle", harness="x",
                       turn_started_at="yesterday")
    assert error.details["field"] == "turn_started_at"
    error = room.error("workspace.runtime", bot["session_id"], state="idle", harness="x",
                       queued=21)
    assert error.details["field"] == "queued"


def test_the_host_answers_with_one_of_the_exact_options(room: Driver) -> None:
    bot = room.join("bot")
    asked = _ask(room, bot["session_id"])
    assert asked["permission_id"].startswith("pm_") and asked["status"] == "pending"
    assert asked["options"] == OPTIONS
    pending = room.call("workspace.permissions", room.host)["permissions"]
    assert [p["permission_id"] for p in pending] == [asked["permission_id"]]
    error = room.error("permission.answer", room.host, permission_id=asked["permission_id"],
                       option_id="allow-always")
    assert error.code == "invalid_request" and error.details["field"] == "option_id"
    answered = room.call("permission.answer", room.host, permission_id=asked["permission_id"],
                         option_id="reject")
    assert answered["status"] == "answered" and answered["option_id"] == "reject"
    again = room.error("permission.answer", room.host, permission_id=asked["permission_id"],
                       option_id="allow-once")
    assert again.code == "permission_conflict"
    types = [e["type"] for e in _events(room)]
    assert types.count("permission.requested") == 1 and types.count("permission.answered") == 1
    assert room.call("workspace.permissions", room.host)["permissions"] == []


def test_the_asking_participant_never_answers_its_own_request(room: Driver) -> None:
    caps = ["read", "observe", "message", "approve"]
    bot = room.join("bot", caps=caps)
    asked = _ask(room, bot["session_id"])
    error = room.error("permission.answer", bot["session_id"],
                       permission_id=asked["permission_id"], option_id="allow-once")
    assert error.code == "permission_denied"
    # another participant without approve cannot either; one with approve can
    other = room.join("other")
    assert room.error("permission.answer", other["session_id"],
                      permission_id=asked["permission_id"],
                      option_id="allow-once").code == "permission_denied"
    reviewer = room.join("reviewer", caps=caps)
    answered = room.call("permission.answer", reviewer["session_id"],
                         permission_id=asked["permission_id"], option_id="allow-once")
    assert answered["answered_by"] == reviewer["participant_id"]


def test_an_unanswered_request_expires_after_five_minutes(room: Driver) -> None:
    bot = room.join("bot")
    asked = _ask(room, bot["session_id"])
    room.clock.advance(seconds=299)
    assert len(room.call("workspace.permissions", room.host)["permissions"]) == 1
    room.clock.advance(seconds=1)
    assert room.call("workspace.permissions", room.host)["permissions"] == []
    expired = room.call("workspace.permissions", room.host, status="expired")["permissions"]
    assert [p["permission_id"] for p in expired] == [asked["permission_id"]]
    assert expired[0]["option_id"] is None
    assert room.error("permission.answer", room.host, permission_id=asked["permission_id"],
                      option_id="allow-once").code == "permission_conflict"
    assert [e["payload"]["permission_id"] for e in _events(room)
            if e["type"] == "permission.expired"] == [asked["permission_id"]]


@pytest.mark.parametrize(("options", "field"), [
    ([], "options"),
    ([OPTIONS[0], OPTIONS[0]], "options"),
    ([{"option_id": "x", "name": "X", "kind": "maybe"}], "options.kind"),
    ([{"option_id": "x", "name": "X"}], "options.kind"),
    (["allow"], "options"),
])
def test_a_permission_request_refuses_bad_options(
    room: Driver, options: list[Any], field: str,
) -> None:
    bot = room.join("bot")
    error = room.error("permission.request", bot["session_id"], title="Run", options=options)
    assert error.code == "invalid_request" and error.details["field"] == field


def test_a_long_preview_is_refused_not_cut(room: Driver) -> None:
    bot = room.join("bot")
    error = room.error("permission.request", bot["session_id"], title="Run", options=OPTIONS,
                       input_preview="x" * 501)
    assert error.details["field"] == "input_preview"


def test_unknown_permission_is_not_found(room: Driver) -> None:
    error = room.error("permission.answer", room.host, permission_id="pm_nope", option_id="x")
    assert error.code == "permission_not_found"


def test_interrupt_and_resume_need_approve_and_a_runtime(room: Driver) -> None:
    bot = room.join("bot")
    other = room.join("other")
    error = room.error("runtime.interrupt", room.host, participant_id=bot["participant_id"],
                       turn=1)
    assert error.code == "invalid_request" and error.details["field"] == "participant_id"
    room.call("workspace.runtime", bot["session_id"], state="running", harness="acp:x", turn=4)
    assert room.error("runtime.interrupt", other["session_id"],
                      participant_id=bot["participant_id"], turn=4).code == "permission_denied"
    done = room.call("runtime.interrupt", room.host, participant_id=bot["participant_id"], turn=4)
    assert done["turn"] == 4
    room.call("runtime.resume", room.host, participant_id=bot["participant_id"])
    told = [(e["type"], e["payload"]) for e in _events(room) if e["type"].startswith("runtime.")]
    assert told == [
        ("runtime.interrupted", {"participant_id": bot["participant_id"], "turn": 4,
                                 "by": room.engine.host_participant_id}),
        ("runtime.resumed", {"participant_id": bot["participant_id"],
                             "by": room.engine.host_participant_id}),
    ]


def test_a_participant_who_left_shows_no_runtime(room: Driver) -> None:
    bot = room.join("bot")
    room.call("workspace.runtime", bot["session_id"], state="idle", harness="acp:x")
    room.call("workspace.leave", bot["session_id"])
    listed = room.call("workspace.participants", room.host)["participants"]
    gone = next(p for p in listed if p["participant_id"] == bot["participant_id"])
    assert gone["left"] and gone["runtime"] is None


def test_only_the_asker_withdraws_a_pending_request(room: Driver) -> None:
    bot = room.join("bot")
    asked = _ask(room, bot["session_id"])
    other = room.join("other")
    assert room.error("permission.withdraw", other["session_id"],
                      permission_id=asked["permission_id"]).code == "permission_denied"
    gone = room.call("permission.withdraw", bot["session_id"], permission_id=asked["permission_id"])
    assert gone["status"] == "withdrawn"
    assert room.call("workspace.permissions", room.host)["permissions"] == []
    assert room.error("permission.answer", room.host, permission_id=asked["permission_id"],
                      option_id="allow-once").code == "permission_conflict"
    assert room.error("permission.withdraw", bot["session_id"],
                      permission_id=asked["permission_id"]).code == "permission_conflict"
    assert [e["type"] for e in _events(room) if e["type"] == "permission.withdrawn"] == [
        "permission.withdrawn"]
