"""A save seen half-way does no lasting harm (docs/spec/PROTOCOL.md 16 and 17, wave 4).

A save that pauses longer than the settle period is recorded in two steps: the
cut-off file, then the whole one. Its side effects must not outlive the whole
save: threads are re-anchored on every version (an outdated one whose region
and quote are back is open again, `thread.reanchored`), a lease whose region
vanished and comes back within `TORN_SAVE_SECONDS` is kept, and holds fall only
on the sections the whole save changed.
"""

from __future__ import annotations

from typing import Any

from commonroom.protocol import limits
from tests.conftest import Driver
from tests.editing import let_settle, save_like_an_editor

SECTIONS = [f"## S{n}\n\nThe text of section {n}, as it was.\n\n" for n in range(6)]
TEXT = "# Plan\n\nIntro.\n\n" + "".join(SECTIONS)


def host_saves(room: Driver, text: str) -> list[Any]:
    save_like_an_editor(room.engine.path, text)
    return let_settle(room.engine, room.clock)


def started(room: Driver) -> None:
    room.engine.path.write_text(TEXT)
    host_saves(room, TEXT)
    room.clock.advance(minutes=limits.HUMAN_HOLD_MINUTES + 1)


def holds(room: Driver) -> set[str]:
    leases = room.call("workspace.leases", room.host)["leases"]
    return {lease["region"] for lease in leases if lease["reason"] == "human_editing"}


def test_a_save_recorded_in_two_steps_leaves_threads_leases_and_holds_as_one_save(
        room: Driver) -> None:
    started(room)
    agent = room.join("agent")["session_id"]
    thread = room.call("thread.open", agent, region="S4", body="why?",
                       quote="section 4")["thread_id"]
    lease = room.call("workspace.checkout", agent, region="S5", minutes=30)["lease_id"]
    whole = TEXT.replace("section 1, as it was", "section 1, as the host has it now")
    cut = whole[:whole.index("## S3") + 12]  # the first write of the save: S3 cut, S4, S5 gone
    first = [e.type for e in host_saves(room, cut)]
    assert "thread.outdated" in first and "lease.released" not in first
    assert holds(room) == {"Plan/S1", "Plan/S3"}
    room.clock.advance(seconds=1)
    second = host_saves(room, whole)
    reanchored = [e for e in second if e.type == "thread.reanchored"]
    assert [(e.payload.thread_id, e.payload.version) for e in reanchored] == [(thread, room.version)]
    assert room.call("workspace.thread", agent, thread_id=thread)["status"] == "open"
    assert lease in {lease["lease_id"] for lease in room.call("workspace.leases", agent)["leases"]}
    assert holds(room) == {"Plan/S1"}  # the whole save changed S1 only
    # Long after, the lease still stands (its region is back), the thread still open.
    room.clock.advance(seconds=limits.TORN_SAVE_SECONDS + 5)
    assert lease in {lease["lease_id"] for lease in room.call("workspace.leases", agent)["leases"]}


def test_a_lease_whose_region_stays_gone_ends_after_the_grace(room: Driver) -> None:
    started(room)
    agent = room.join("agent")["session_id"]
    lease = room.call("workspace.checkout", agent, region="S5", minutes=30)["lease_id"]
    host_saves(room, TEXT.replace(SECTIONS[5], ""))
    assert lease in {lease["lease_id"] for lease in room.call("workspace.leases", agent)["leases"]}
    room.clock.advance(seconds=limits.TORN_SAVE_SECONDS + 1)
    assert room.engine.next_expiry() is not None
    ended = [e for e in room.engine.refresh(room.clock()) if e.type == "lease.released"]
    assert [(e.payload.lease_id, e.payload.reason) for e in ended] == [(lease, "region_removed")]
    assert lease not in {lease["lease_id"] for lease in room.call("workspace.leases", agent)["leases"]}


def test_two_quick_saves_of_different_sections_hold_both(room: Driver) -> None:
    started(room)
    one = TEXT.replace("section 1, as it was", "section 1, changed")
    host_saves(room, one)
    room.clock.advance(seconds=2)
    host_saves(room, one.replace("section 2, as it was", "section 2, changed"))
    assert holds(room) == {"Plan/S1", "Plan/S2"}


def test_an_outdated_thread_stays_outdated_while_its_quote_is_gone(room: Driver) -> None:
    started(room)
    agent = room.join("agent")["session_id"]
    thread = room.call("thread.open", agent, region="S2", body="why?",
                       quote="as it was")["thread_id"]
    gone = TEXT.replace("section 2, as it was", "section 2, rewritten")
    host_saves(room, gone)
    assert room.call("workspace.thread", agent, thread_id=thread)["status"] == "outdated"
    types = [e.type for e in host_saves(room, gone.replace("Intro.", "Intro, longer."))]
    assert "thread.reanchored" not in types
    assert room.call("workspace.thread", agent, thread_id=thread)["status"] == "outdated"
    host_saves(room, TEXT)
    assert room.call("workspace.thread", agent, thread_id=thread)["status"] == "open"


def test_a_proposal_the_cut_off_piece_superseded_is_pending_again_once_the_save_is_whole(
        room: Driver) -> None:
    started(room)
    agent = room.join("agent")["session_id"]
    mine = SECTIONS[5].replace("as it was", "as the agent has it")
    pid = room.call("workspace.propose", agent, region="S5", base_version=room.version,
                    summary="mine", content=mine)["proposal_id"]
    whole = TEXT.replace("section 1, as it was", "section 1, as the host has it now")
    host_saves(room, whole[:whole.index("## S3") + 12])
    assert room.call("workspace.proposal", agent, proposal_id=pid)["status"] == "superseded"
    room.clock.advance(seconds=1)
    events = host_saves(room, whole)
    detail = room.call("workspace.proposal", agent, proposal_id=pid)
    assert (detail["status"], detail["base_version"], detail["content"]) == (
        "pending", room.version, mine)
    assert detail["revisions"][-1]["by"] == "host_editor"
    assert "proposal.revised" in [e.type for e in events]


def test_a_proposal_superseded_long_before_stays_superseded(room: Driver) -> None:
    started(room)
    agent = room.join("agent")["session_id"]
    mine = SECTIONS[5].replace("as it was", "as the agent has it")
    pid = room.call("workspace.propose", agent, region="S5", base_version=room.version,
                    summary="mine", content=mine)["proposal_id"]
    host_saves(room, TEXT.replace(SECTIONS[5], ""))
    room.clock.advance(seconds=limits.TORN_SAVE_SECONDS + 1)
    host_saves(room, TEXT)
    assert room.call("workspace.proposal", agent, proposal_id=pid)["status"] == "superseded"
