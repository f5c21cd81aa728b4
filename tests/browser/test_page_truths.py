"""The page tells the truth (wave 4), in real Chromium against a real `ce serve`.

- a save from a stale editor buffer: "Your save (vN) undid ada's change (vM)" with Re-apply
  and Keep mine; Re-apply brings the agent's line back as a new version;
- relative times tick ("x s ago" is rewritten every second), lease badges say "14:57 left";
- a committed proposal shows what it changed, not "No change".
"""

from __future__ import annotations

import time
from typing import Any

from tests.browser.conftest import ARTIFACTS, open_page
from tests.browser.test_provenance_page import PROBLEM, join, land, region_text
from tests.e2e.conftest import Room

RISKS_TITLE = "Risks"


def wait_for_version(room: Room, version: int) -> None:
    deadline = time.monotonic() + 15
    while room.version() < version:
        assert time.monotonic() < deadline, "the save was never recorded"
        time.sleep(0.1)


def test_a_stale_buffer_save_offers_reapply_which_restores_the_agents_line(page: Any, room: Room) -> None:
    ada, _ = join(room, "ada")
    stale = room.doc.read_text()  # the host's editor buffer, from before ada's commit
    problem = region_text(room, PROBLEM)
    committed = land(room, ada, PROBLEM, problem.rstrip("\n") + "\nAnd nobody lends them.\n\n",
                     "one more line")["version"]
    room.doc.write_text(stale.replace("## Open questions", "## Open questions (host)"))
    wait_for_version(room, committed + 1)
    saved = committed + 1

    open_page(page, room)
    banner = page.locator(".undoes-item")
    banner.wait_for()
    assert f"Your save (v{saved}) undid ada's change (v{committed})." in banner.inner_text()
    assert room.version() == saved  # nothing happened by itself
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "undoes-1280.png"))
    page.click(".undoes-reapply")
    page.locator(".undoes-result", has_text=f"Re-applied as version {saved + 1}.").wait_for()
    text = room.doc.read_text()
    assert "And nobody lends them." in text and "## Open questions (host)" in text
    page.locator("#document", has_text="And nobody lends them.").wait_for()
    assert page.locator(".undoes-reapply").count() == 0


def test_keep_mine_leaves_the_save_and_the_notice_goes(page: Any, room: Room) -> None:
    ada, _ = join(room, "ada")
    stale = room.doc.read_text()
    problem = region_text(room, PROBLEM)
    committed = land(room, ada, PROBLEM, problem.rstrip("\n") + "\nAnd nobody lends them.\n\n",
                     "one more line")["version"]
    room.doc.write_text(stale)
    wait_for_version(room, committed + 1)
    open_page(page, room)
    page.locator(".undoes-keep").click()
    page.locator(".undoes-result", has_text="Kept as you saved it.").wait_for()
    assert room.version() == committed + 1
    page.reload()
    page.wait_for_selector("body[data-ready='true']")
    assert page.locator("#undoes").is_hidden()


def test_times_tick_leases_count_down_and_a_committed_proposal_shows_its_change(
        page: Any, room: Room) -> None:
    ada, _ = join(room, "ada")
    ada.ok("POST", "/workspace/checkout", {"region": RISKS_TITLE, "minutes": 15})
    problem = region_text(room, PROBLEM)
    landed = land(room, ada, PROBLEM, problem.replace("Readers buy books", "Readers keep books"),
                  "keep, not buy")
    open_page(page, room)
    badge = page.locator(".lease", has_text="leased by ada")
    badge.wait_for()
    assert badge.inner_text().endswith(" left"), badge.inner_text()
    stamp = page.locator("#history time[data-ago]").first
    first = stamp.inner_text()
    assert first.endswith("s ago"), first
    page.clock.run_for(65_000)
    later = page.locator("#history time[data-ago]").first.inner_text()
    assert later != first and later.endswith("min ago"), (first, later)

    proposal_id = landed["proposal_id"]
    shown = page.locator(f"#queue-list button[data-proposal='{proposal_id}']")
    shown.first.click()
    body = page.locator("#review-body")
    body.locator(".blk-changed").first.wait_for()
    assert "No change" not in body.inner_text()
    assert "keep" in body.locator(".blk-changed").first.inner_text()


def test_at_800_px_the_queue_is_beside_the_document_and_the_margins_stay_small(
        page: Any, room: Room) -> None:
    ada, _ = join(room, "ada")
    problem = region_text(room, PROBLEM)
    room.propose(ada, PROBLEM, problem.replace("Readers buy", "Readers borrow"), "borrow")
    asked = ada.ok("POST", "/workspace/thread", {"region": PROBLEM, "body": "Settled already?"})
    ada.ok("POST", "/workspace/thread/resolve", {"thread_id": asked["thread_id"], "resolved": True})
    risks = region_text(room, f"{PROBLEM.split('/')[0]}/Risks")
    one = land(room, ada, "Risks", risks.rstrip("\n") + "\nOne.\n\n", "one line")
    assert one["version"] >= 2
    page.set_viewport_size({"width": 800, "height": 900})
    open_page(page, room)
    queue = page.locator("#queue").bounding_box()
    document = page.locator("#document").bounding_box()
    assert queue is not None and document is not None
    assert queue["x"] > document["x"] + document["width"] - 1  # beside, not below
    assert queue["y"] < 900  # on the first screen
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-800.png"))
    # A resolved thread is one line in its margin; it opens to be read or reopened.
    collapsed = page.locator(f".thread-collapsed[data-thread='{asked['thread_id']}']")
    collapsed.wait_for()
    summary = collapsed.locator("summary")
    assert "Resolved · ada: Settled already?" in summary.inner_text()
    assert collapsed.locator("textarea").is_hidden()
    height = summary.bounding_box()
    assert height is not None and height["height"] < 30
    summary.click()
    assert collapsed.get_by_role("button", name="Reopen").is_visible()
    # The blame gutter is a thin coloured rule; the legend counts "1 line", not "1 lines".
    page.click("#blame-toggle")
    page.locator("#blame-lines li").first.wait_for()
    rule = page.locator(".blame-line .who").first.bounding_box()
    assert rule is not None and rule["width"] <= 6
    legend = page.locator("#blame-legend").inner_text()
    assert "ada (agent) · 1 line" in legend.splitlines()
    assert "v" in (page.locator(".blame-line").first.get_attribute("title") or "")
