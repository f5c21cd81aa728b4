"""A host's save that takes back someone's recent change says so (docs/spec/PROTOCOL.md 16, wave 4).

The host's editor held the file from before an agent's commit; the host saved
an edit elsewhere, and the save removed the agent's line. The save is recorded
as it is (the file is the host's) with `undoes`, and nothing else happens until
the host chooses: Re-apply (a new version with the agent's change merged back)
or Keep mine.
"""

from __future__ import annotations

from typing import Any

from commonroom.protocol import limits
from tests.conftest import SAMPLE, Driver
from tests.editing import let_settle, save_like_an_editor

AGENTS_GOALS = "## Goals\n\n- ship it\n- ship it with tests\n\n"


def host_saves(room: Driver, text: str) -> list[Any]:
    save_like_an_editor(room.engine.path, text)
    events = let_settle(room.engine, room.clock)
    room.clock.advance(minutes=limits.HUMAN_HOLD_MINUTES + 1)
    return events


def approve(room: Driver, pid: str) -> None:
    shown = room.call("workspace.proposal", room.host, proposal_id=pid)
    room.call("workspace.review", room.host, proposal_id=pid, revision=shown["revision"],
              decision="approve")


def agent_commits(room: Driver) -> tuple[str, int]:
    agent = room.join("ada")
    pid = room.call("workspace.propose", agent["session_id"], region="Goals",
                    base_version=room.version, summary="tests", content=AGENTS_GOALS)["proposal_id"]
    approve(room, pid)
    version = room.call("workspace.commit", agent["session_id"], proposal_id=pid)["version"]
    return agent["participant_id"], version


def test_a_stale_buffer_save_records_what_it_undid_and_reapply_brings_it_back(room: Driver) -> None:
    ada, committed = agent_commits(room)
    stale = SAMPLE.replace("Nothing yet.", "Rain in May.")  # the buffer from before the commit
    events = host_saves(room, stale)
    saved = room.version
    assert room.engine.path.read_text() == stale  # recorded as it is
    change = next(e for e in events if e.type == "change.committed")
    assert [(u.version, u.participant_id) for u in change.payload.undoes] == [(committed, ada)]
    listed = room.call("workspace.undone", room.host)["saves"]
    assert [(s["version"], s["settled"]) for s in listed] == [(saved, None)]
    assert listed[0]["undoes"] == [{"version": committed, "participant_id": ada}]

    answer = room.call("workspace.reapply", room.host, version=saved)
    assert answer["settled"] == "reapplied" and answer["new_version"] == saved + 1
    text = room.engine.path.read_text()
    assert "- ship it with tests\n" in text and "Rain in May." in text
    assert text == SAMPLE.replace("## Goals\n\n- ship it\n\n", AGENTS_GOALS).replace(
        "Nothing yet.", "Rain in May.")
    assert room.call("workspace.undone", room.host)["saves"][0]["settled"] == "reapplied"
    again = room.error("workspace.reapply", room.host, version=saved)
    assert again.code == "invalid_request" and again.details["settled"] == "reapplied"


def test_keep_mine_writes_nothing(room: Driver) -> None:
    agent_commits(room)
    host_saves(room, SAMPLE.replace("Nothing yet.", "Rain in May."))
    saved = room.version
    answer = room.call("workspace.reapply", room.host, version=saved, keep=True)
    assert (answer["settled"], answer["new_version"]) == ("kept", None)
    assert room.version == saved
    assert room.call("workspace.undone", room.host)["saves"][0]["settled"] == "kept"


def test_editing_the_agents_line_into_something_new_is_no_undo(room: Driver) -> None:
    agent_commits(room)
    text = room.engine.path.read_text().replace("- ship it with tests", "- ship it with many tests")
    events = host_saves(room, text)
    change = next(e for e in events if e.type == "change.committed")
    assert change.payload.undoes is None
    assert room.call("workspace.undone", room.host)["saves"] == []
    error = room.error("workspace.reapply", room.host, version=room.version)
    assert error.code == "invalid_request"


def test_only_the_host_reapplies(room: Driver) -> None:
    agent_commits(room)
    host_saves(room, SAMPLE)
    bob = room.join("bob")["session_id"]
    assert room.error("workspace.reapply", bob, version=room.version).code == "permission_denied"


def test_a_change_the_hosts_previous_save_kept_is_the_hosts_to_take_back(room: Driver) -> None:
    agent_commits(room)
    kept = room.engine.path.read_text()
    host_saves(room, kept.replace("Nothing yet.", "Rain in May."))  # the buffer held the line
    events = host_saves(room, SAMPLE.replace("Nothing yet.", "Rain in May."))  # now removed
    change = next(e for e in events if e.type == "change.committed")
    assert change.payload.undoes is None
