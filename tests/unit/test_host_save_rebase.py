"""A host's save rebases pending work instead of discarding it (docs/spec/PROTOCOL.md 16, wave 4).

The host changed one word of a section's first sentence while an agent's
pending proposal changed its last one: the proposal went `superseded` at once,
its diff showed the agent deleting the host's word, and `ce rebase --apply` was
refused by the host's own human-editing hold. Now a clean three-way merge makes
a new revision based on the saved version (`by: host_editor`), still pending;
only a conflict supersedes; and the hold never blocks a rebase.
"""

from __future__ import annotations

from typing import Any

from commonroom.protocol import limits
from tests.conftest import Driver
from tests.editing import let_settle, save_like_an_editor

TEXT = """# Plan

Intro text.

## Goals

We ship the first version in May.
It runs on a laptop.
Nobody waits for a server.

## Risks

Nothing yet.
"""
GOALS = TEXT[TEXT.index("## Goals"):TEXT.index("## Risks")]
AGENTS_GOALS = GOALS.replace("Nobody waits for a server.", "Nobody ever waits for a server.")
HOSTS_TEXT = TEXT.replace("first version", "first public version")


def approve(room: Driver, pid: str) -> None:
    """The host approves `pid` (the one place a review's parameters are written here)."""
    shown = room.call("workspace.proposal", room.host, proposal_id=pid)
    room.call("workspace.review", room.host, proposal_id=pid, revision=shown["revision"],
              decision="approve")


def host_saves(room: Driver, text: str) -> list[Any]:
    """The host saves `text` in their editor; the events of the version it became."""
    save_like_an_editor(room.engine.path, text)
    return let_settle(room.engine, room.clock)


def started(room: Driver, text: str = TEXT) -> tuple[str, str]:
    room.engine.path.write_text(text)
    host_saves(room, text)
    room.clock.advance(minutes=limits.HUMAN_HOLD_MINUTES + 1)
    author = room.join("author")["session_id"]
    pid = room.call("workspace.propose", author, region="Goals", base_version=room.version,
                    summary="no waiting", content=AGENTS_GOALS)["proposal_id"]
    return author, pid


def test_a_host_save_in_the_same_section_rebases_the_pending_proposal(room: Driver) -> None:
    author, pid = started(room)
    events = host_saves(room, HOSTS_TEXT)
    saved = room.version
    detail = room.call("workspace.proposal", author, proposal_id=pid)
    assert detail["status"] == "pending" and detail["stale"] is False
    assert detail["revision"] == 2 and detail["rebased"] is True
    assert detail["base_version"] == saved
    assert detail["revisions"][-1]["by"] == "host_editor"
    assert detail["revisions"][0]["by"] is None
    # Both edits in the new revision; its diff against the saved text is the agent's line only.
    assert "first public version" in detail["content"] and "ever waits" in detail["content"]
    removed = [line for line in detail["diff"].splitlines()
               if line.startswith("-") and not line.startswith("---")]
    assert removed == ["-Nobody waits for a server."]
    revised = [e for e in events if e.type == "proposal.revised"]
    assert len(revised) == 1
    assert revised[0].payload.by == "host_editor" and revised[0].payload.rebased is True
    assert revised[0].payload.participant_id == room.engine.host_participant_id
    assert "proposal.superseded" not in [e.type for e in events]
    # The save's human-editing hold is there; once it is over, the agent commits both edits.
    room.clock.advance(minutes=limits.HUMAN_HOLD_MINUTES + 1)
    approve(room, pid)
    room.call("workspace.commit", author, proposal_id=pid)
    final = room.engine.path.read_text()
    assert "first public version" in final and "Nobody ever waits" in final


def test_a_conflicting_host_save_supersedes_the_proposal(room: Driver) -> None:
    author, pid = started(room)
    events = host_saves(room, TEXT.replace("Nobody waits", "Nobody at all waits"))
    assert room.call("workspace.proposal", author, proposal_id=pid)["status"] == "superseded"
    types = [e.type for e in events]
    assert "proposal.superseded" in types and "proposal.revised" not in types


def test_a_host_save_that_already_holds_the_change_supersedes_it(room: Driver) -> None:
    author, pid = started(room)
    host_saves(room, TEXT.replace(GOALS, AGENTS_GOALS))
    assert room.call("workspace.proposal", author, proposal_id=pid)["status"] == "superseded"


def test_a_host_save_elsewhere_leaves_the_proposal_as_it_is(room: Driver) -> None:
    author, pid = started(room)
    host_saves(room, TEXT.replace("Nothing yet.", "Rain."))
    detail = room.call("workspace.proposal", author, proposal_id=pid)
    assert (detail["status"], detail["revision"]) == ("pending", 1)


def test_a_changes_requested_proposal_is_rebased_and_keeps_its_status(room: Driver) -> None:
    author, pid = started(room)
    room.call("workspace.review", room.host, proposal_id=pid, revision=1,
              decision="request_changes", comment="say why")
    host_saves(room, HOSTS_TEXT)
    detail = room.call("workspace.proposal", author, proposal_id=pid)
    assert (detail["status"], detail["revision"], detail["base_version"]) == (
        "changes_requested", 2, room.version)
    assert "first public version" in detail["content"]


def test_the_human_editing_hold_never_blocks_a_rebase(room: Driver) -> None:
    author, pid = started(room)
    # Another agent's commit supersedes the proposal (only a host's save rebases by itself) ...
    other = room.join("other")["session_id"]
    intro = room.call("workspace.propose", other, region="Goals", base_version=room.version,
                      summary="intro", content=GOALS.replace("## Goals\n\n", "## Goals\n\nWhy.\n\n"))
    approve(room, intro["proposal_id"])
    room.call("workspace.commit", other, proposal_id=intro["proposal_id"])
    assert room.call("workspace.proposal", author, proposal_id=pid)["status"] == "superseded"
    # ... then the host saves the section: it is held, and the author's rebase still applies.
    host_saves(room, room.engine.path.read_text().replace("first version", "first public version"))
    holds = [lease for lease in room.call("workspace.leases", author)["leases"]
             if lease["reason"] == "human_editing"]
    assert [lease["region"] for lease in holds] == ["Plan/Goals"]
    applied = room.call("workspace.proposal.rebase", author, proposal_id=pid, apply=True)
    assert applied["applied"] is True and applied["status"] == "pending"
    content = room.call("workspace.proposal", author, proposal_id=pid)["content"]
    assert "Why." in content and "first public version" in content and "ever waits" in content
    # A revise is still held: it is the author's new text, not a merge.
    held = room.error("workspace.proposal.revise", author, proposal_id=pid, content=content)
    assert held.code == "lease_conflict" and held.details["reason"] == "human_editing"
