"""Proposals and commits (engine/proposals.py)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Driver

GOALS = "## Goals\n\n- ship it\n- ship it well\n\n"
RISKS = "## Risks\n\nThe sky may fall.\n\n```python\n# not a heading\n```\n\n"


def approve(room: Driver, proposal: dict[str, Any]) -> None:
    room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"], revision=proposal["revision"],
              decision="approve")


def test_propose_review_commit_writes_the_file(room: Driver) -> None:
    agent = room.join()["session_id"]
    base = room.version
    prop = room.call("workspace.propose", agent, region="Goals", base_version=base,
                     summary="sharpen goals", content=GOALS)
    assert prop["status"] == "pending" and prop["region"] == "Plan/Goals"
    detail = room.call("workspace.proposal", agent, proposal_id=prop["proposal_id"])
    assert detail["content"] == GOALS
    assert "+- ship it well" in detail["diff"]
    approve(room, prop)
    done = room.call("workspace.commit", agent, proposal_id=prop["proposal_id"])
    assert done["version"] == base + 1 and done["proposal_id"] == prop["proposal_id"]
    assert done["region"] == "Plan/Goals"
    on_disk = room.engine.path.read_text()
    assert "- ship it well" in on_disk and on_disk.startswith("# Plan\n")
    assert room.call("workspace.proposal", agent, proposal_id=prop["proposal_id"])["status"] == (
        "committed"
    )


def test_agent_without_approve_cannot_review(room: Driver) -> None:
    agent = room.join()["session_id"]
    prop = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="s", content=GOALS)
    err = room.error("workspace.review", agent, proposal_id=prop["proposal_id"], revision=prop["revision"],
                     decision="approve")
    assert err.code == "permission_denied"


def test_commit_of_unapproved_proposal_is_a_conflict(room: Driver) -> None:
    agent = room.join()["session_id"]
    prop = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="s", content=GOALS)
    err = room.error("workspace.commit", agent, proposal_id=prop["proposal_id"])
    assert err.code == "proposal_conflict" and err.to_wire()["proposal_id"] == prop["proposal_id"]
    room.call("workspace.review", room.host, proposal_id=prop["proposal_id"], decision="reject")
    assert room.error("workspace.commit", agent, proposal_id=prop["proposal_id"]).code == (
        "proposal_conflict"
    )
    assert room.error("workspace.commit", agent, proposal_id="pr_nope").code == (
        "proposal_not_found"
    )


def test_disjoint_regions_from_the_same_base_both_commit(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    base = room.version
    pa = room.call("workspace.propose", a, region="Goals", base_version=base, summary="g",
                   content=GOALS)
    pb = room.call("workspace.propose", b, region="Risks", base_version=base, summary="r",
                   content=RISKS)
    approve(room, pa)
    approve(room, pb)
    assert room.call("workspace.commit", a, proposal_id=pa["proposal_id"])["version"] == base + 1
    assert room.call("workspace.commit", b, proposal_id=pb["proposal_id"])["version"] == base + 2
    text = room.engine.path.read_text()
    assert "ship it well" in text and "The sky may fall." in text


def test_overlapping_second_commit_gets_stale_version_with_recovery(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    base = room.version
    pa = room.call("workspace.propose", a, region="Goals", base_version=base, summary="g",
                   content=GOALS)
    pb = room.call("workspace.propose", b, region="Plan", base_version=base, summary="p",
                   content="# Plan\n\nRewritten.\n")
    approve(room, pa)
    approve(room, pb)
    room.call("workspace.commit", a, proposal_id=pa["proposal_id"])
    err = room.error("workspace.commit", b, proposal_id=pb["proposal_id"])
    assert err.code == "stale_version" and err.http_status == 409
    wire = err.to_wire()
    assert wire["base_version"] == base and wire["expected_version"] == base
    assert wire["current_version"] == base + 1
    assert "+- ship it well" in wire["diff"]
    assert [c["version"] for c in wire["changes"]] == [base + 1]
    assert set(wire["changes"][0]) == {"version", "summary", "participant_id", "created_at",
                                       "region", "source"}
    assert wire["proposal_id"] == pb["proposal_id"] and wire["region"] == "Plan"
    status = room.call("workspace.proposal", b, proposal_id=pb["proposal_id"])["status"]
    assert status == "conflicted"
    history = [e["type"] for e in room.call("workspace.history", room.host)["events"]]
    assert "proposal.conflicted" in history


def test_whole_document_proposal_needs_current_base(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    base = room.version
    pw = room.call("workspace.propose", a, region="workspace", base_version=base, summary="w",
                   content="# New\n")
    pg = room.call("workspace.propose", b, region="Appendix", base_version=base, summary="x",
                   content="# Appendix\n\nLonger end.\n")
    approve(room, pw)
    approve(room, pg)
    room.call("workspace.commit", b, proposal_id=pg["proposal_id"])
    err = room.error("workspace.commit", a, proposal_id=pw["proposal_id"])
    assert err.code == "stale_version" and err.to_wire()["region"] == "workspace"


def test_pending_proposals_on_changed_regions_are_superseded(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    base = room.version
    p_goals = room.call("workspace.propose", a, region="Goals", base_version=base, summary="g",
                        content=GOALS)
    p_goals2 = room.call("workspace.propose", b, region="Goals", base_version=base, summary="g2",
                         content="## Goals\n\nother\n")
    p_risks = room.call("workspace.propose", b, region="Risks", base_version=base, summary="r",
                        content=RISKS)
    approve(room, p_goals)
    room.call("workspace.commit", a, proposal_id=p_goals["proposal_id"])
    by_id = {p["proposal_id"]: p["status"]
             for p in room.call("workspace.proposals", room.host)["proposals"]}
    assert by_id[p_goals2["proposal_id"]] == "superseded"
    assert by_id[p_risks["proposal_id"]] == "pending"


def test_withdraw_only_by_author(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    prop = room.call("workspace.propose", a, region="Goals", base_version=room.version,
                     summary="g", content=GOALS)
    assert room.error("workspace.withdraw", b, proposal_id=prop["proposal_id"]).code == (
        "permission_denied"
    )
    assert room.call("workspace.withdraw", a, proposal_id=prop["proposal_id"])["status"] == (
        "withdrawn"
    )
    assert room.error("workspace.withdraw", a, proposal_id=prop["proposal_id"]).code == (
        "proposal_conflict"
    )


def test_writes_to_a_region_leased_by_another_conflict(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    lease = room.call("workspace.checkout", a, region="Goals")
    err = room.error("workspace.propose", b, region="Plan", base_version=room.version,
                     summary="p", content="# Plan\n")
    assert err.code == "lease_conflict" and err.to_wire()["lease_id"] == lease["lease_id"]
    prop = room.call("workspace.propose", b, region="Risks", base_version=room.version,
                     summary="r", content=RISKS)
    approve(room, prop)
    room.call("workspace.checkout", a, region="Risks")
    assert room.error("workspace.commit", b, proposal_id=prop["proposal_id"]).code == (
        "lease_conflict"
    )


def test_raw_commit_needs_admin_and_current_base(room: Driver) -> None:
    agent = room.join()["session_id"]
    err = room.error("workspace.commit", agent, base_version=room.version, summary="x",
                     content="# X\n")
    assert err.code == "permission_denied"
    base = room.version
    done = room.call("workspace.commit", room.host, base_version=base, summary="x",
                     content="# X\n")
    assert done["version"] == base + 1
    err = room.error("workspace.commit", room.host, base_version=base, summary="y",
                     content="# Y\n")
    assert err.code == "stale_version" and err.to_wire()["current_version"] == base + 1
    assert room.engine.path.read_text() == "# X\n"


def test_proposal_size_limit(room: Driver) -> None:
    agent = room.join()["session_id"]
    err = room.error("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="big", content="## Goals\n" + "x" * (256 * 1024))
    assert err.code == "limit_exceeded" and err.http_status == 413


def test_pending_limit_per_participant(room: Driver) -> None:
    agent = room.join()["session_id"]
    for i in range(20):
        room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                  summary=f"g{i}", content=GOALS)
    assert room.error("workspace.propose", agent, region="Goals", base_version=room.version,
                      summary="one more", content=GOALS).code == "limit_exceeded"


def test_base_version_must_exist(room: Driver) -> None:
    agent = room.join()["session_id"]
    err = room.error("workspace.propose", agent, region="Goals", base_version=99, summary="s",
                     content=GOALS)
    assert err.code == "version_not_found" and err.http_status == 404


# -- edit before approve (PROTOCOL §7 "Review": content amends, proposal.amended) --------------


def _events(room: Driver, type_: str) -> list[dict[str, Any]]:
    history = room.call("workspace.history", room.host, limit=200)["events"]
    return [event for event in history if event["type"] == type_]


def test_approve_with_content_lands_the_reviewers_text(room: Driver) -> None:
    agent = room.join()["session_id"]
    prop = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="sharpen goals", content=GOALS)
    edited = "## Goals\n\n- ship it, carefully\n\n"
    answer = room.call("workspace.review", room.host, proposal_id=prop["proposal_id"], revision=prop["revision"],
                       decision="approve", content=edited, comment="tightened")
    assert answer["status"] == "approved"
    detail = room.call("workspace.proposal", agent, proposal_id=prop["proposal_id"])
    assert detail["content"] == edited and detail["original_content"] == GOALS
    assert detail["reviewer_id"] == answer["reviewer_id"] and detail["review_comment"] == "tightened"
    assert "+- ship it, carefully" in detail["diff"]
    [approved] = _events(room, "proposal.approved")
    assert approved["payload"]["comment"] == "tightened"  # the comment reaches the author
    [amended] = _events(room, "proposal.amended")
    assert amended["payload"] == {"proposal_id": prop["proposal_id"], "reviewer_id": answer["reviewer_id"]}
    room.call("workspace.commit", agent, proposal_id=prop["proposal_id"])
    on_disk = room.engine.path.read_text()
    assert "- ship it, carefully" in on_disk and "ship it well" not in on_disk


def test_content_is_refused_with_reject_and_on_a_decided_proposal(room: Driver) -> None:
    agent = room.join()["session_id"]
    prop = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="s", content=GOALS)
    err = room.error("workspace.review", room.host, proposal_id=prop["proposal_id"],
                     decision="reject", content="## Goals\n\nx\n")
    assert err.code == "invalid_request" and err.details.get("field") == "content"
    approve(room, prop)
    err = room.error("workspace.review", room.host, proposal_id=prop["proposal_id"], revision=prop["revision"],
                     decision="approve", content="## Goals\n\nx\n")
    assert err.code == "proposal_conflict"
    detail = room.call("workspace.proposal", agent, proposal_id=prop["proposal_id"])
    assert detail["content"] == GOALS and detail["original_content"] is None
    assert _events(room, "proposal.amended") == []


def test_proposal_detail_says_stale_before_review(room: Driver) -> None:
    agent = room.join()["session_id"]
    first = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                      summary="one", content=GOALS)
    second = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                       summary="two", content="## Goals\n\n- other\n\n")
    approve(room, first)
    approve(room, second)
    assert room.call("workspace.proposal", agent, proposal_id=second["proposal_id"])["stale"] is False
    room.call("workspace.commit", agent, proposal_id=first["proposal_id"])
    assert room.call("workspace.proposal", agent, proposal_id=second["proposal_id"])["stale"] is True


def test_listed_proposals_say_whether_they_went_stale(room: Driver) -> None:
    """`stale` is the engine's (ce proposals and the page show it, never recompute it)."""
    agent = room.join("a", ["read", "propose", "commit"])["session_id"]
    first = room.call("workspace.propose", agent, region="Goals", base_version=1, summary="g",
                      content="## Goals\n\n- ship it well\n\n")
    room.call("workspace.review", room.host, proposal_id=first["proposal_id"],
            revision=first["revision"], decision="approve")
    listed = {p["proposal_id"]: p for p in room.call("workspace.proposals", agent)["proposals"]}
    assert listed[first["proposal_id"]]["stale"] is False
    # Goals moves on under the approved proposal (a raw host commit).
    text = room.engine.current().text.replace("- ship it", "- ship it now")
    room.call("workspace.commit", room.host, base_version=1, summary="edit", content=text)
    listed = {p["proposal_id"]: p for p in room.call("workspace.proposals", agent)["proposals"]}
    assert listed[first["proposal_id"]]["stale"] is True
    snapshot = room.call("workspace.room", agent)
    assert [p["stale"] for p in snapshot["proposals"]] == [True]
    detail = room.call("workspace.proposal", agent, proposal_id=first["proposal_id"])
    assert detail["stale"] is True


# -- issue 21: no-op proposals, amended proposals, a committed one is never stale ---------


def test_a_proposal_that_changes_nothing_is_refused_and_not_queued(room: Driver) -> None:
    agent = room.join()["session_id"]
    current = room.call("workspace.read", agent, region="Goals")["content"]
    err = room.error("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="same", content=current)
    assert err.code == "invalid_request"
    assert err.details["reason"] == "no_change" and err.details["region"] == "Plan/Goals"
    assert room.call("workspace.proposals", agent)["proposals"] == []


def test_an_amended_proposal_says_so_and_keeps_the_authors_text(room: Driver) -> None:
    agent = room.join()["session_id"]
    prop = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="g", content=GOALS)
    plain = room.call("workspace.proposal", agent, proposal_id=prop["proposal_id"])
    assert plain["amended"] is False and plain["proposed_content"] is None
    edited = "## Goals\n\n- ship it, but well\n\n"
    room.call("workspace.review", room.host, proposal_id=prop["proposal_id"], revision=prop["revision"],
              decision="approve", content=edited)
    detail = room.call("workspace.proposal", agent, proposal_id=prop["proposal_id"])
    assert detail["amended"] is True
    assert detail["proposed_content"] == GOALS and detail["content"] == edited
    listed = room.call("workspace.proposals", agent)["proposals"][0]
    assert listed["amended"] is True
    room.call("workspace.commit", agent, proposal_id=prop["proposal_id"])
    committed = room.call("workspace.proposal", agent, proposal_id=prop["proposal_id"])
    # Its region's text is now its own: a committed proposal is never reported stale.
    assert committed["status"] == "committed" and committed["stale"] is False
    assert committed["amended"] is True
