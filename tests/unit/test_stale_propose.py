"""Proposing on a base whose region moved on is `stale_version`, with no proposal (issue 8, item 6)."""

from __future__ import annotations

from tests.conftest import Driver

GOALS = "## Goals\n\n- ship it\n- ship it well\n\n"


def _commit_goals(room: Driver, agent: str) -> int:
    prop = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="first", content="## Goals\n\n- ship it soon\n\n")
    room.call("workspace.review", room.host, proposal_id=prop["proposal_id"],
            revision=prop["revision"], decision="approve")
    return int(room.call("workspace.commit", agent, proposal_id=prop["proposal_id"])["version"])


def _proposal_rows(room: Driver) -> int:
    return int(room.engine.conn.execute("SELECT count(*) FROM proposals").fetchone()[0])


def test_a_moved_region_is_stale_with_every_recovery_field_and_no_row(room: Driver) -> None:
    agent = room.join()["session_id"]
    current = _commit_goals(room, agent)
    rows, events = _proposal_rows(room), room.engine.conn.execute(
        "SELECT max(event_id) FROM events").fetchone()[0]
    err = room.error("workspace.propose", agent, region="Goals", base_version=1, summary="late",
                     content=GOALS)
    assert err.code == "stale_version" and err.http_status == 409
    wire = err.to_wire()
    assert wire["base_version"] == 1 and wire["expected_version"] == 1
    assert wire["current_version"] == current and wire["region"] == "Plan/Goals"
    assert "-- ship it" in wire["diff"] and "+- ship it soon" in wire["diff"]
    assert [c["version"] for c in wire["changes"]] == [current]
    assert "proposal_id" not in wire
    assert _proposal_rows(room) == rows
    assert room.engine.conn.execute("SELECT max(event_id) FROM events").fetchone()[0] == events


def test_an_old_base_with_an_unchanged_region_stays_pending(room: Driver) -> None:
    agent = room.join()["session_id"]
    _commit_goals(room, agent)
    prop = room.call("workspace.propose", agent, region="Risks", base_version=1,
                     summary="risks", content="## Risks\n\nSome.\n\n")
    assert prop["status"] == "pending" and prop["base_version"] == 1


def test_conflict_messages_use_the_right_article(room: Driver) -> None:
    agent = room.join()["session_id"]
    prop = room.call("workspace.propose", agent, region="Goals", base_version=1,
                     summary="s", content=GOALS)
    room.call("workspace.review", room.host, proposal_id=prop["proposal_id"],
            revision=prop["revision"], decision="approve")
    err = room.error("workspace.review", room.host, proposal_id=prop["proposal_id"], revision=prop["revision"],
                     decision="approve")
    assert err.message == "cannot approve an approved proposal"
    room.call("workspace.withdraw", agent, proposal_id=prop["proposal_id"])
    err = room.error("workspace.review", room.host, proposal_id=prop["proposal_id"],
                     decision="reject")
    assert err.message == "cannot reject a withdrawn proposal"
