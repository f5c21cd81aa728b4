"""The host's side of the page (issue 21), in real Chromium against a real `ce serve`.

No decision by accident (links, `r`, Undo), the whole section as it would read, handoff
buttons, amendments, who left, the queue's counts, the diff, wide leases, the favicon, and a
phone-width screenshot.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, boxes, open_page, pass_undo_window, run_axe
from tests.browser.test_page import PROBLEM
from tests.e2e.conftest import Http, Room

IDEA = "## The idea\n\nSwap books with neighbours, on foot.\n\n"


def status_of(room: Room, proposal: dict[str, Any]) -> str:
    answer = room.host.ok("GET", f"/workspace/proposal?proposal_id={proposal['proposal_id']}")
    return str(answer["status"])


def reviews_sent(room: Room) -> list[str]:
    events = room.host.ok("GET", "/workspace/history?limit=200")["events"]
    return [e["type"] for e in events if e["type"] in ("proposal.approved", "proposal.rejected")]


def join_as(room: Room, name: str, **invite: Any) -> tuple[Http, str]:
    made = room.host.ok("POST", "/workspace/invite", invite)
    joined = Http(room.host.port).ok("POST", "/session/join", {
        "invite": made["invitation"], "name": name, "kind": "agent"})
    return Http(room.host.port, joined["session_id"]), str(joined["participant_id"])


def test_enter_on_a_link_follows_it_and_decides_nothing(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    proposal = room.propose(agent, "Problem", PROBLEM, "tighten")
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
    page.locator("#review-body ins").first.wait_for()
    assert page.locator("#btn-approve").is_enabled()  # the diff is on screen: it could be approved
    link = page.locator("#outline a", has_text="Problem")
    link.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#sec-"))  # the link was followed
    for key in ("a", "r", "Enter"):  # and no key on a link decides anything
        link.focus()
        page.keyboard.press(key)
    pass_undo_window(page)
    page.wait_for_timeout(200)
    assert page.locator(".toast").count() == 0
    assert reviews_sent(room) == [] and status_of(room, proposal) == "pending"
    # A decision key on a queue item other than the open one opens it; it decides nothing.
    other = room.propose(agent, "The idea", IDEA, "the idea, shorter")
    page.locator(f"[data-proposal='{other['proposal_id']}']").focus()
    page.keyboard.press("a")
    page.locator("#review-title", has_text="the idea, shorter").wait_for()
    pass_undo_window(page)
    assert reviews_sent(room) == [] and status_of(room, other) == "pending"


def test_r_needs_a_comment_and_a_second_step(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    first = room.propose(agent, "Problem", PROBLEM, "first")
    second = room.propose(agent, "The idea", IDEA, "second")
    page.locator(f"[data-proposal='{first['proposal_id']}']").click()
    page.locator("#review-body ins").first.wait_for()
    page.locator("#review-title").focus()
    page.keyboard.press("r")  # opens and focuses the comment box; nothing is sent
    assert page.evaluate("document.activeElement.id") == "review-comment"
    page.locator("#reject-hint").wait_for()
    page.keyboard.press("a")  # typed into the box, not a shortcut
    assert page.locator("#review-comment").input_value() == "a"
    page.locator("#review-comment").fill("")
    page.keyboard.press("Control+Enter")  # no comment: nothing
    page.locator("#review-error", has_text="needs a comment").wait_for()
    page.locator("#btn-reject").click()  # nor with the button
    pass_undo_window(page)
    assert page.locator(".toast").count() == 0
    assert reviews_sent(room) == [] and status_of(room, first) == "pending"

    page.locator("#review-comment").fill("say who it is for first")
    page.locator("#review-comment").focus()
    page.keyboard.press("Control+Enter")
    page.locator(".toast", has_text="Rejecting “first”").wait_for()
    # Focus goes to the next undecided item in the queue, never into a field.
    expect(page.locator(":focus")).to_have_attribute("data-proposal", second["proposal_id"])
    page.locator("#review-title", has_text="second").wait_for()
    assert status_of(room, first) == "pending"  # held for the undo window
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-undo.png"))
    assert run_axe(page) == []  # with the toast showing
    pass_undo_window(page)
    page.locator(f"[data-proposal='{first['proposal_id']}']", has_text="rejected").wait_for()
    detail = room.host.ok("GET", f"/workspace/proposal?proposal_id={first['proposal_id']}")
    assert detail["status"] == "rejected" and detail["review_comment"] == "say who it is for first"


def test_undo_takes_a_decision_back_before_it_is_sent(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    proposal = room.propose(agent, "Problem", PROBLEM, "undo me")
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
    page.locator("#review-body ins").first.wait_for()
    page.locator("#review-comment").fill("kept after undo")
    page.locator("#review-title").focus()
    page.keyboard.press("a")
    page.locator(f"[data-proposal='{proposal['proposal_id']}']", has_text="approving").wait_for()
    assert page.locator("#queue-count").inner_text() == "0"
    page.locator(".toast button", has_text="Undo").click()
    pass_undo_window(page)
    page.wait_for_timeout(300)
    assert reviews_sent(room) == [] and status_of(room, proposal) == "pending"
    assert page.locator(".toast").count() == 0
    assert page.locator("#queue-count").inner_text() == "1"
    page.locator("#review-title", has_text="undo me").wait_for()  # open again, as it was
    assert page.locator("#review-comment").input_value() == "kept after undo"
    # Decided again, it goes out once the window passes.
    page.locator("#btn-approve").click()
    pass_undo_window(page)
    page.locator(f"[data-proposal='{proposal['proposal_id']}']", has_text="approved").wait_for()
    assert reviews_sent(room) == ["proposal.approved"]


def test_whole_section_shows_the_proposed_text_and_approves(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    proposal = room.propose(agent, "Problem", PROBLEM, "whole section")
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
    page.locator("[data-view='section']").click()
    shown = page.locator("#review-body .section-text")
    shown.locator("h2", has_text="Problem").wait_for()
    assert shown.get_attribute("data-shows") == "proposed"
    assert "nobody is reading" in shown.inner_text() and "Public" not in shown.inner_text()
    assert page.locator("#review-body del, #review-body ins").count() == 0  # the text, not a diff
    page.locator("#section-toggle", has_text="Show the current text").click()
    page.locator("#review-body .section-text[data-shows='current']", has_text="Public").wait_for()
    page.locator("#section-toggle", has_text="Show the proposed text").click()
    page.locator("#review-body .section-text[data-shows='proposed']").wait_for()
    assert page.locator("#btn-approve").is_enabled()
    page.locator("#btn-approve").click()
    pass_undo_window(page)
    page.locator(f"[data-proposal='{proposal['proposal_id']}']", has_text="approved").wait_for()


def test_handoff_buttons_for_the_host(page: Any, room: Room) -> None:
    open_page(page, room)
    agent, _ = join_as(room, "asker")
    host = next(p for p in room.host.ok("GET", "/workspace/room")["participants"]
                if "*" in p["capabilities"])
    ask = agent.ok("POST", "/workspace/handoff", {"to_participant_id": host["participant_id"],
                                                   "summary": "check the risks"})
    other = agent.ok("POST", "/workspace/handoff", {"to_participant_id": host["participant_id"],
                                                     "summary": "pick a name"})
    row = page.locator(f"#handoffs li[data-handoff='{ask['handoff_id']}']")
    row.get_by_role("button", name="Accept the handoff “check the risks”").wait_for()
    assert run_axe(page) == []
    row.locator("input.handoff-note").fill("on it")
    row.get_by_role("button", name="Accept the handoff “check the risks”").click()
    row.locator(".handoff-status", has_text="accepted").wait_for()
    row.locator("input.handoff-note").fill("two risks added")
    row.get_by_role("button", name="Done").click()
    row.locator(".handoff-status", has_text="completed").wait_for()
    assert row.get_by_role("button").count() == 0  # nothing left to answer
    done = agent.ok("GET", f"/workspace/handoff?handoff_id={ask['handoff_id']}")
    assert done["status"] == "completed" and done["result_summary"] == "two risks added"
    second = page.locator(f"#handoffs li[data-handoff='{other['handoff_id']}']")
    second.get_by_role("button", name="Decline the handoff “pick a name”").click()
    second.locator(".handoff-status", has_text="declined").wait_for()
    # Room text sits beside the handoffs: the next panel, on the same row.
    handoffs, text = boxes(page, "#handoffs-panel", "#messages-panel")
    assert abs(handoffs["y"] - text["y"]) < 2 and text["x"] > handoffs["x"]


def test_the_amendment_shows_as_a_diff_against_the_authors_text(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    proposal = room.propose(agent, "Problem", PROBLEM, "to be amended")
    edited = PROBLEM.replace("right next door", "two doors down")
    room.host.ok("POST", "/workspace/proposal/review", {
        "proposal_id": proposal["proposal_id"],
                "revision": proposal["revision"], "decision": "approve", "content": edited})
    agent.ok("POST", "/workspace/commit", {"proposal_id": proposal["proposal_id"]})
    item = page.locator(f"[data-proposal='{proposal['proposal_id']}']", has_text="committed")
    item.wait_for()
    assert "with edits" in item.inner_text()
    item.click()
    page.locator("#review-amended", has_text="Approved with edits by").wait_for()
    assert page.locator("#view-amended").get_attribute("aria-pressed") == "true"
    body = page.locator("#review-body")
    body.locator("del", has_text="right next door").wait_for()
    assert body.locator("ins", has_text="two doors down").count() == 1
    assert page.locator("#review-stale").is_hidden()  # committed: never stale
    # Committed: the rendered diff shows what it changed (the text before its commit -> it).
    page.locator("[data-view='rendered']").click()
    body.locator("ins", has_text="two doors down").wait_for()
    assert body.locator(".no-change").count() == 0


def test_who_left_is_grouped_apart_and_the_counts_agree(page: Any, room: Room) -> None:
    stayer, _ = join_as(room, "stayer")
    leaver, leaver_id = join_as(room, "leaver")
    open_page(page, room)
    page.locator("#message-to label", has_text="leaver").wait_for()
    leaver.ok("POST", "/workspace/leave", {})
    page.locator("#people-left li", has_text="leaver").wait_for(state="attached")
    assert page.locator("#people-left").get_attribute("open") is None  # collapsed
    assert page.locator("#people li", has_text="leaver").count() == 0
    assert page.locator(f"button[data-participant='{leaver_id}']").count() == 0  # no revoke
    page.locator("#people-left summary").click()
    left_row = page.locator("#people-left li", has_text="leaver")
    assert "left" in left_row.inner_text() and "away" not in left_row.inner_text()
    assert page.locator("#message-to label", has_text="leaver").count() == 0  # no recipient
    in_room = page.locator("#people > li").count()
    assert in_room == 2  # the host and stayer
    page.locator("#doc-meta", has_text=f"{in_room} participants").wait_for()
    assert page.locator("#people-count").inner_text() == f"· {in_room} in the room"
    assert room.host.ok("GET", "/workspace/status")["participants"] == in_room
    assert run_axe(page) == []
    stayer.ok("GET", "/workspace/status")


def test_the_queue_counts_pending_and_groups_approved(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    waiting = room.propose(agent, "Problem", PROBLEM, "still to review")
    approved = room.propose(agent, "The idea", IDEA, "approved, not committed")
    room.host.ok("POST", "/workspace/proposal/review", {
        "proposal_id": approved["proposal_id"], "revision": approved["revision"], "decision": "approve"})
    page.locator("[data-group='approved'] [data-proposal]", has_text="approved, not committed").wait_for()
    assert page.locator("#queue-count").inner_text() == "1"
    heads = page.locator("#queue-list .group-head").all_inner_texts()
    assert [h.lower() for h in heads] == ["to review · 1", "approved, awaiting commit · 1"]
    assert page.locator("[data-group='pending'] [data-proposal]").get_attribute(
        "data-proposal") == waiting["proposal_id"]
    assert page.locator("#queue-progress").inner_text() == "1 of 2 decided"
    chips = page.locator("#document .doc-proposals").all_inner_texts()
    assert sorted(chips) == ["1 approved, awaiting commit", "1 proposal — review"]


def test_a_rewritten_phrase_reads_as_one_deletion_then_one_insertion(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    before = room.host.ok("GET", "/workspace/read?region=Problem")["content"]
    assert "are far away for many people," in before
    rewritten = before.replace("are far away for many people,", "are a long bus ride for most readers,")
    proposal = room.propose(agent, "Problem", rewritten, "reword")
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
    changed = page.locator("#review-body .blk-changed")
    changed.locator("ins").first.wait_for()
    # One deletion of the old phrase, then one insertion of the new: not word by word.
    marks = changed.locator("ins, del").evaluate_all("ns => ns.map(n => [n.tagName, n.textContent])")
    assert [tag for tag, _ in marks] == ["DEL", "INS"], marks
    assert "far away for many people" in marks[0][1] and "a long bus ride for most readers" in marks[1][1]


def test_a_wide_lease_is_marked_and_the_host_releases_it(page: Any, room: Room) -> None:
    caps = ["read", "observe", "checkout", "propose", "commit", "wide_lease"]
    agent, _ = join_as(room, "wide", capabilities=caps)
    lease = agent.ok("POST", "/workspace/checkout", {"region": "workspace", "minutes": 10})
    open_page(page, room)
    row = page.locator(f"#leases li[data-lease='{lease['lease_id']}']")
    row.locator(".wide", has_text="WIDE").wait_for()
    assert "wide" in row.inner_text()
    row.get_by_role("button", name="Release the lease on whole document").click()
    row.get_by_role("button", name="Cancel").click()
    assert agent.ok("GET", "/workspace/leases")["leases"] != []
    row.get_by_role("button", name="Release the lease on whole document").click()
    row.get_by_role("button", name="Yes, release").click()
    page.locator("#leases li", has_text="No leases.").wait_for()
    assert agent.ok("GET", "/workspace/leases")["leases"] == []


def test_favicon_and_phone_width_queue_first(browser: Any, room: Room) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        tab = context.new_page()
        missing: list[str] = []
        tab.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        tab.goto(room.url)
        tab.wait_for_selector("body[data-ready='true']")
        agent = room.agent()
        room.propose(agent, "Problem", PROBLEM, "seen first on a phone")
        tab.locator("#queue-list [data-proposal]").wait_for()
        queue_box, doc_box = boxes(tab, ".queue-col", ".doc-col")
        assert queue_box["y"] + queue_box["height"] <= doc_box["y"] + 1  # the queue first
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / "page-phone.png"))
        icon = tab.evaluate("fetch('/favicon.ico').then(r => [r.status, r.headers.get('content-type')])")
        assert icon == [200, "image/svg+xml"]
        assert missing == []
    finally:
        context.close()
