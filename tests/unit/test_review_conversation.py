"""The review conversation on the engine (docs/spec/PROTOCOL.md 17): threads, revisions, rebase."""

from __future__ import annotations

from typing import Any

from commonroom.engine.revisions import MERGE_TOO_LARGE, Merge, merge, merge_region
from commonroom.protocol import limits
from commonroom.protocol.records import RebaseConflict
from tests.conftest import SAMPLE, Driver
from tests.editing import let_settle, save_like_an_editor

GOALS_V2 = "## Goals\n\n- ship it\n- ship it well\n\n"
GOALS_V3 = "## Goals\n\n- ship it\n- ship it well\n- ship it soon\n\n"


def propose(room: Driver, bearer: str, content: str = GOALS_V2, region: str = "Goals"
            ) -> dict[str, Any]:
    result: dict[str, Any] = room.call("workspace.propose", bearer, region=region,
                                       base_version=room.version, summary="goals",
                                       content=content)
    return result


def host_save(room: Driver, text: str) -> list[str]:
    save_like_an_editor(room.engine.path, text)
    types = [event.type for event in let_settle(room.engine, room.clock)]
    room.clock.advance(minutes=limits.HUMAN_HOLD_MINUTES + 1)  # past the human-editing hold
    return types


# -- threads --------------------------------------------------------------------------------


def test_open_reply_resolve_reopen_and_list_by_region_and_status(room: Driver) -> None:
    agent = room.join("asker")
    bearer = agent["session_id"]
    opened = room.call("thread.open", bearer, region="Goals", body="Ship *what*?",
                       quote="ship it", blocking=True)
    assert opened["thread_id"].startswith("th_")
    assert opened["region"] == "Plan/Goals" and opened["status"] == "open"
    assert opened["blocking"] is True and opened["author_id"] == agent["participant_id"]
    assert [c["body"] for c in opened["comments"]] == ["Ship *what*?"]
    replied = room.call("thread.reply", room.host, thread_id=opened["thread_id"],
                        body="The release.")
    assert [c["body"] for c in replied["comments"]] == ["Ship *what*?", "The release."]
    other = room.call("thread.open", room.host, region="Risks", body="More risks?")
    by_region = room.call("workspace.threads", bearer, region="Goals")["threads"]
    assert [t["thread_id"] for t in by_region] == [opened["thread_id"]]
    resolved = room.call("thread.resolve", bearer, thread_id=opened["thread_id"])
    assert resolved["status"] == "resolved"
    open_ids = [t["thread_id"] for t in
                room.call("workspace.threads", bearer, status="open")["threads"]]
    assert open_ids == [other["thread_id"]]
    reopened = room.call("thread.resolve", room.host, thread_id=opened["thread_id"],
                         resolved=False)
    assert reopened["status"] == "open"
    one = room.call("workspace.thread", bearer, thread_id=opened["thread_id"])
    assert one == reopened


def test_only_the_author_or_the_host_resolves(room: Driver) -> None:
    asker = room.join("asker")["session_id"]
    bystander = room.join("bystander")["session_id"]
    thread = room.call("thread.open", asker, region="Goals", body="?")
    err = room.error("thread.resolve", bystander, thread_id=thread["thread_id"])
    assert err.code == "permission_denied"
    assert room.call("workspace.thread", asker, thread_id=thread["thread_id"])["status"] == "open"


def test_bad_thread_input_is_refused_and_nothing_is_stored(room: Driver) -> None:
    agent = room.join()["session_id"]
    empty = room.error("thread.open", agent, region="Goals", body="   ")
    assert empty.code == "invalid_request" and empty.details["field"] == "body"
    big = room.error("thread.open", agent, region="Goals",
                     body="x" * (limits.THREAD_BODY_MAX_BYTES + 1))
    assert big.code == "limit_exceeded" and big.http_status == 413
    assert big.details["limit_bytes"] == limits.THREAD_BODY_MAX_BYTES
    # Multi-byte characters count as bytes: 2,731 three-byte characters are over 8 KiB.
    assert room.error("thread.open", agent, region="Goals", body="€" * 2731).code == (
        "limit_exceeded")
    missing = room.error("thread.open", agent, region="Goals", body="?", quote="ship it well")
    assert missing.code == "invalid_request" and missing.details["reason"] == "quote_not_found"
    elsewhere = room.error("thread.open", agent, region="Goals", body="?", quote="Nothing yet.")
    assert elsewhere.details["reason"] == "quote_not_found"  # it is in Risks, not in Goals
    assert room.error("thread.open", agent, region="Nowhere", body="?").code == "invalid_region"
    assert room.call("workspace.threads", agent)["threads"] == []
    thread = room.call("thread.open", agent, region="Goals", body="?")
    assert room.error("thread.reply", agent, thread_id=thread["thread_id"], body="").code == (
        "invalid_request")
    assert room.error("thread.reply", agent, thread_id="th_nope", body="hi").code == (
        "thread_not_found")
    assert len(room.call("workspace.thread", agent, thread_id=thread["thread_id"])["comments"]) == 1


def test_the_hosts_save_that_edits_the_quote_away_makes_the_thread_outdated(room: Driver) -> None:
    agent = room.join()["session_id"]
    quoted = room.call("thread.open", agent, region="Goals", body="which?", quote="ship it")
    unquoted = room.call("thread.open", agent, region="Goals", body="fine")
    risks = room.call("thread.open", agent, region="Risks", body="?", quote="Nothing yet.")
    types = host_save(room, SAMPLE.replace("- ship it", "- launch"))
    assert types.count("thread.outdated") == 1
    after = {t["thread_id"]: t["status"] for t in room.call("workspace.threads", agent)["threads"]}
    assert after == {quoted["thread_id"]: "outdated", unquoted["thread_id"]: "open",
                     risks["thread_id"]: "open"}
    # Its heading gone: the region's threads go outdated too, and stay listed by path.
    host_save(room, SAMPLE.replace("- ship it", "- launch").replace("## Goals", "## Aims"))
    listed = room.call("workspace.threads", agent, region="Plan/Goals")["threads"]
    assert {t["thread_id"]: t["status"] for t in listed} == {
        quoted["thread_id"]: "outdated", unquoted["thread_id"]: "outdated"}
    assert len(room.call("workspace.thread", agent, thread_id=quoted["thread_id"])["comments"]) == 1


# -- request changes, revise ----------------------------------------------------------------


def test_request_changes_then_revise_then_approve_and_commit(room: Driver) -> None:
    author = room.join("author")["session_id"]
    prop = propose(room, author)
    pid = prop["proposal_id"]
    err = room.error("workspace.review", room.host, proposal_id=pid, revision=1, decision="request_changes")
    assert err.code == "invalid_request" and err.details["field"] == "comment"
    reviewed = room.call("workspace.review", room.host, proposal_id=pid,
                         revision=1, decision="request_changes", comment="add a date")
    assert reviewed["status"] == "changes_requested"
    linked = room.call("workspace.threads", author, proposal_id=pid)["threads"]
    assert [t["comments"][0]["body"] for t in linked] == ["add a date"]
    assert linked[0]["region"] == "Plan/Goals"
    revised = room.call("workspace.proposal.revise", author, proposal_id=pid, content=GOALS_V3,
                        summary="goals, with a date")
    assert revised["status"] == "pending" and revised["revision"] == 2
    detail = room.call("workspace.proposal", author, proposal_id=pid)
    assert [r["revision"] for r in detail["revisions"]] == [1, 2]
    assert detail["revisions"][0]["summary"] == "goals"
    assert detail["content"] == GOALS_V3 and "+- ship it soon" in detail["revision_diff"]
    first = room.call("workspace.proposal", author, proposal_id=pid, revision=1)
    assert first["content"] == GOALS_V2 and first["content_revision"] == 1
    assert room.error("workspace.proposal", author, proposal_id=pid, revision=3).code == (
        "invalid_request")
    room.call("workspace.review", room.host, proposal_id=pid, revision=2, decision="approve")
    room.call("workspace.commit", author, proposal_id=pid)
    assert "- ship it soon" in room.engine.path.read_text()


def test_revise_by_another_participant_is_refused(room: Driver) -> None:
    author = room.join("author")["session_id"]
    other = room.join("other")["session_id"]
    pid = propose(room, author)["proposal_id"]
    err = room.error("workspace.proposal.revise", other, proposal_id=pid, content=GOALS_V3)
    assert err.code == "permission_denied"
    err = room.error("workspace.proposal.revise", room.host, proposal_id=pid, content=GOALS_V3)
    assert err.code == "permission_denied"
    detail = room.call("workspace.proposal", author, proposal_id=pid)
    assert detail["revision"] == 1 and detail["content"] == GOALS_V2


def test_revise_is_refused_from_approved_and_terminal_statuses(room: Driver) -> None:
    author = room.join("author")["session_id"]
    pid = propose(room, author)["proposal_id"]
    room.call("workspace.review", room.host, proposal_id=pid, revision=1, decision="approve")
    err = room.error("workspace.proposal.revise", author, proposal_id=pid, content=GOALS_V3)
    assert err.code == "proposal_conflict" and err.details["status"] == "approved"
    room.call("workspace.commit", author, proposal_id=pid)
    err = room.error("workspace.proposal.revise", author, proposal_id=pid, content=GOALS_V3)
    assert err.code == "proposal_conflict" and err.details["status"] == "committed"


def test_a_superseded_proposal_revised_on_the_new_version_is_pending_again(room: Driver) -> None:
    author = room.join("author")["session_id"]
    pid = propose(room, author)["proposal_id"]
    base = room.version
    host_save(room, SAMPLE.replace("- ship it", "- ship it\n- test it"))
    assert room.call("workspace.proposal", author, proposal_id=pid)["status"] == "superseded"
    stale = room.error("workspace.proposal.revise", author, proposal_id=pid, content=GOALS_V3)
    assert stale.code == "stale_version" and stale.recovery["base_version"] == base
    revised = room.call("workspace.proposal.revise", author, proposal_id=pid,
                        content="## Goals\n\n- ship it\n- test it\n- ship it well\n\n",
                        base_version=room.version)
    assert revised["status"] == "pending" and revised["base_version"] == room.version


# -- rebase ---------------------------------------------------------------------------------


def test_merge_region_is_three_way() -> None:
    base = "a\nb\nc\nd\ne\n"
    assert merge_region(base, "a\nB\nc\nd\ne\n", "a\nb\nc\nD\ne\n") == (
        "a\nB\nc\nD\ne\n", [])
    # Adjacent changes conflict, as in diff3: nobody decides for the author.
    assert merge_region(base, "a\nB\nc\nd\ne\n", "a\nb\nC\nd\ne\n")[0] is None
    merged, conflicts = merge_region(base, "a\nX\nc\nd\ne\n", "a\nY\nc\nd\ne\n")
    assert merged is None
    assert [(c.base, c.ours, c.theirs) for c in conflicts] == [("b\n", "X\n", "Y\n")]


def test_rebase_clean_previews_then_applies_as_a_new_revision(room: Driver) -> None:
    author = room.join("author")["session_id"]
    pid = propose(room, author, "## Goals\n\n- ship it\n- ship it well\n")[
        "proposal_id"]
    other = room.join("other")["session_id"]
    why = propose(room, other, "## Goals\n\nWhy we do this.\n\n- ship it\n\n")["proposal_id"]
    room.call("workspace.review", room.host, proposal_id=why, revision=1, decision="approve")
    room.call("workspace.commit", other, proposal_id=why)
    detail = room.call("workspace.proposal", author, proposal_id=pid)
    # Another agent's commit changed its region: superseded (a decided proposal is never
    # `stale`, docs/protocol.md "The host's side"), and rebase carries it onto the new text.
    # (A host's save rebases it by itself: tests/unit/test_host_save_rebase.py.)
    assert (detail["status"], detail["stale"]) == ("superseded", False)
    preview = room.call("workspace.proposal.rebase", author, proposal_id=pid)
    assert preview["clean"] is True and preview["applied"] is False
    # (the text was sent without the blank line before "## Risks": fitted, it keeps it)
    assert preview["content"] == "## Goals\n\nWhy we do this.\n\n- ship it\n- ship it well\n\n"
    assert preview["base_version"] == room.version
    assert room.call("workspace.proposal", author, proposal_id=pid)["revision"] == 1
    applied = room.call("workspace.proposal.rebase", room.host, proposal_id=pid, apply=True)
    assert applied["applied"] is True and applied["revision"] == 2
    detail = room.call("workspace.proposal", author, proposal_id=pid)
    assert detail["rebased"] is True and detail["status"] == "pending"
    assert detail["base_version"] == room.version and detail["stale"] is False
    room.call("workspace.review", room.host, proposal_id=pid, revision=2, decision="approve")
    room.call("workspace.commit", author, proposal_id=pid)
    assert "Why we do this.\n\n- ship it\n- ship it well\n" in room.engine.path.read_text()


def test_rebase_conflict_answers_hunks_and_changes_nothing(room: Driver) -> None:
    author = room.join("author")["session_id"]
    pid = propose(room, author, "## Goals\n\n- ship it now\n\n")["proposal_id"]
    host_save(room, SAMPLE.replace("- ship it", "- ship it later"))
    answer = room.call("workspace.proposal.rebase", author, proposal_id=pid, apply=True)
    assert answer["clean"] is False and answer["applied"] is False and answer["content"] is None
    assert answer["conflicts"] == [{"base": "- ship it\n", "ours": "- ship it now\n",
                                    "theirs": "- ship it later\n"}]
    detail = room.call("workspace.proposal", author, proposal_id=pid)
    assert detail["revision"] == 1 and detail["content"] == "## Goals\n\n- ship it now\n\n"


def test_rebase_of_a_committed_proposal_or_by_a_bystander_is_refused(room: Driver) -> None:
    author = room.join("author")["session_id"]
    bystander = room.join("bystander", caps=["read", "propose"])["session_id"]
    pid = propose(room, author)["proposal_id"]
    assert room.error("workspace.proposal.rebase", bystander, proposal_id=pid).code == (
        "permission_denied")
    room.call("workspace.review", room.host, proposal_id=pid, revision=1, decision="approve")
    room.call("workspace.commit", author, proposal_id=pid)
    err = room.error("workspace.proposal.rebase", author, proposal_id=pid)
    assert err.code == "proposal_conflict" and err.details["status"] == "committed"


def _costly_texts(count: int) -> list[str]:
    """`count` texts of Goals whose pairwise diffs are as costly as difflib gets (issue 31 F3)."""
    from tools.hostile.heavy_reads import revisions

    texts: list[str] = []
    for seed in range(count):
        texts.extend(revisions("## Goals", size=60_000, seed=seed))
    return texts[:count]


def test_merge_past_its_cost_bound_answers_the_three_texts_as_one_conflict() -> None:
    base, ours, theirs = _costly_texts(3)
    merged = merge(base, ours, theirs)
    # Bounded by work, not time: the matcher stopped at the budget and said so.
    assert merged.too_large is True and merged.content is None
    assert [(c.base, c.ours, c.theirs) for c in merged.conflicts] == [(base, ours, theirs)]
    # The bound is work, charged across the merge's matchers: a small merge fits a small
    # budget, and the same merge past a budget of 1 stops the same way.
    small = ("a\nb\nc\nd\ne\n", "a\nB\nc\nd\ne\n", "a\nb\nc\nD\ne\n")
    assert merge(*small, work=1_000) == Merge("a\nB\nc\nD\ne\n", [])
    assert merge(*small, work=1) == Merge(None, [RebaseConflict(*small)], too_large=True)


def test_a_pathological_rebase_preview_stays_bounded_and_says_so(room: Driver) -> None:
    base, ours, theirs = _costly_texts(3)
    writer = room.join("writer")["session_id"]
    author = room.join("author")["session_id"]

    def land(text: str) -> None:
        pid = propose(room, writer, text)["proposal_id"]
        room.call("workspace.review", room.host, proposal_id=pid, revision=1, decision="approve")
        room.call("workspace.commit", writer, proposal_id=pid)

    land(base)
    pid = propose(room, author, ours)["proposal_id"]
    land(theirs)
    answer = room.call("workspace.proposal.rebase", author, proposal_id=pid, apply=True)
    assert answer["note"] == MERGE_TOO_LARGE
    assert answer["clean"] is False and answer["applied"] is False and answer["content"] is None
    [conflict] = answer["conflicts"]
    assert conflict["ours"] == ours and conflict["theirs"] == theirs
    assert conflict["base"].startswith("## Goals\n") and len(conflict["base"]) >= len(base) - 2
    assert room.call("workspace.proposal", author, proposal_id=pid)["revision"] == 1
