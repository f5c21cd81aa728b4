"""Issue 31, findings 5 and 6 (medium): the review hid link changes.

F5, the attack: the page's rendered diff compared text only. A changed link destination
showed no mark, and a proposal changing only a link reference definition showed "No
change: the two texts are the same" next to an enabled Approve. Now the rendered view
marks changed destinations and images, lists every definition added, removed or
changed, and a proposal whose only change is outside the rendered text says so.

F6, the attack: a one-line change of `[pilot]: …` in Risks re-pointed the links of
First milestone, a section leased by someone else. Now the proposal's `warnings` name
the other sections whose links it moves ("also changes where links in First milestone
point"); `ce show` and the page show them.

A real `ce serve` and `ce`; the page in real Chromium.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import browser, open_page, page  # noqa: F401
from tests.e2e.conftest import Room, ce, serving

TOP = "Shelf Swap: a neighbourhood book exchange app"
GOOD = "https://good.example/report"
EVIL = "https://evil.example/pay"


@pytest.fixture
def linked(doc: Path) -> Iterator[Room]:
    text = doc.read_text()
    text = text.replace("loss rate under 5 %.", "loss rate under 5 % (see [the pilot report][pilot]).")
    text = text.replace("  never addresses, until a request is accepted.\n",
                        f"  never addresses, until a request is accepted.\n\n[pilot]: {GOOD}\n")
    doc.write_text(text)
    with serving(doc) as room:
        yield room


def _propose(room: Room, bearer: str, old: str, new: str, region: str = "Risks") -> dict[str, Any]:
    read = room.read(bearer, region)
    assert old in read["content"]
    proposal: dict[str, Any] = room.ok("POST", "/workspace/propose", bearer, {
        "region": region, "base_version": read["version"], "summary": "tidy",
        "content": read["content"].replace(old, new)})
    return proposal


def test_a_definition_that_moves_other_sections_links_is_named(linked: Room) -> None:
    room = linked
    agent = room.join("sly")["session_id"]
    proposal = _propose(room, agent, f"[pilot]: {GOOD}", f"[pilot]: {EVIL}")
    detail = room.ok("GET", f"/workspace/proposal?proposal_id={proposal['proposal_id']}",
                     room.host_session)
    assert detail["warnings"] == ["[pilot]: also changes where links in First milestone point"]
    shown = ce("show", str(room.doc), proposal["proposal_id"])
    assert "warning: [pilot]: also changes where links in First milestone point" in shown.stdout
    # A change that moves nothing elsewhere carries no warning.
    plain = _propose(room, agent, "must stay quick", "must stay fast")
    detail = room.ok("GET", f"/workspace/proposal?proposal_id={plain['proposal_id']}",
                     room.host_session)
    assert detail["warnings"] == []
    assert json.loads(ce("show", str(room.doc), plain["proposal_id"], "--json").stdout)[
        "warnings"] == []


def _open_review(page: Any, room: Room, proposal_id: str) -> Any:  # noqa: F811
    page.locator(f"[data-proposal='{proposal_id}']").click()
    body = page.locator("#review-body")
    body.locator(".blk-same, .blk-changed, .link-change, .outside-change").first.wait_for()
    return body


def test_the_rendered_review_marks_what_the_text_does_not_show(page: Any,  # noqa: F811
                                                                linked: Room) -> None:
    room = linked
    open_page(page, room)
    agent = room.join("sly")["session_id"]
    # Only the definition changes: never "No change".
    definition = _propose(room, agent, f"[pilot]: {GOOD}", f"[pilot]: {EVIL}")
    body = _open_review(page, room, definition["proposal_id"])
    note = body.locator(".link-change").first
    assert EVIL in note.inner_text() and GOOD in note.inner_text()
    assert body.locator(".no-change").count() == 0
    assert "First milestone" in page.locator("#review-amended").inner_text()
    # An inline destination changed under the same words.
    inline = _propose(room, agent, "loss rate under 5 %",
                      f"loss rate under [5 %]({EVIL})", region="First milestone")
    body = _open_review(page, room, inline["proposal_id"])
    marked = body.locator(".blk-changed .link-change")
    marked.wait_for()
    assert EVIL in marked.locator("ins").inner_text()
    # A change the rendering hides entirely (an escape): said, not "No change".
    hidden = _propose(room, agent, "must stay quick.", "must stay quick\\.")
    body = _open_review(page, room, hidden["proposal_id"])
    # (the previous review's blocks may still be on screen: wait for this one's note)
    body.locator(".outside-change").wait_for()
    assert body.locator(".outside-change").count() == 1
    assert body.locator(".no-change").count() == 0
