"""Issue 31, finding 1 in the host's page, in real Chromium: the agent revises its proposal
inside the page's 8 s Undo window, after the host clicked Approve on the diff it saw.

The page sends the revision it displayed, and a `proposal.revised` arriving while the
decision waits cancels it: nothing is sent, the new diff is shown with a notice. The room
refuses the stale revision anyway (tests/security/test_review_binding.py), so even a
decision already on its way decides nothing.
"""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import browser, open_page, page, pass_undo_window  # noqa: F401
from tests.e2e.conftest import Room
from tests.security.test_review_binding import _propose, _revise


def _decisions(room: Room) -> list[str]:
    events = room.host.ok("GET", "/workspace/history?limit=200")["events"]
    return [e["type"] for e in events
            if e["type"] in ("proposal.approved", "proposal.rejected", "proposal.amended")]


def test_a_revision_inside_the_undo_window_cancels_the_approval(page: Any,  # noqa: F811
                                                                 served: Room) -> None:
    room = served
    open_page(page, room)
    agent = room.join("sly")["session_id"]
    pid = _propose(room, agent)["proposal_id"]
    page.locator(f"[data-proposal='{pid}']").click()
    page.locator("#review-body ins", has_text="60 EUR").first.wait_for()
    page.locator("#btn-approve").click()
    page.locator(".toast", has_text="sent in").wait_for()  # the approval waits out its window
    _revise(room, agent, pid)
    notice = page.locator("#review-revised")
    notice.wait_for(state="visible")
    assert "nothing was sent" in notice.inner_text()
    assert page.locator(".toast", has_text="sent in").count() == 0
    page.locator("#review-body ins", has_text="500000").first.wait_for()  # the new diff
    pass_undo_window(page)
    page.wait_for_timeout(300)
    assert _decisions(room) == []
    detail = room.host.ok("GET", f"/workspace/proposal?proposal_id={pid}")
    assert detail["status"] == "pending" and detail["revision"] == 2
    # Approved now, on the diff it shows, it is the revision the host saw that lands.
    page.locator("#btn-approve").click()
    pass_undo_window(page)
    page.locator(f"[data-proposal='{pid}']", has_text="approved").wait_for()
    assert _decisions(room) == ["proposal.approved"]
