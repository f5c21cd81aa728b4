"""The review conversation in the host's page, in real Chromium, on a real `ce serve` (issue 22).

- an agent asks a blocking question over MCP and holds `workspace.wait`; the host answers in
  the page; the wait wakes with the reply; another agent is never held meanwhile;
- threads sit in their section's margin, the quote highlighted; selecting text opens the
  composer, which anchors the thread to the exact source text;
- request changes in the page, the agent revises, the page shows the diff between the two
  revisions; the host approves, the agent commits;
- a stale proposal's "Rebase preview" shows the merged diff; applied as reviewer, it commits.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.browser.conftest import ARTIFACTS, boxes, open_page
from tests.e2e.conftest import Http, Room
from tests.e2e.review_support import mcp_tool
from tests.editing import save_like_an_editor

TOP = "Shelf Swap: a neighbourhood book exchange app"
PROBLEM = f"{TOP}/Problem"
RISKS = f"{TOP}/Risks"


def screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_a_blocking_question_over_mcp_is_answered_in_the_page(room: Room, page: Any) -> None:
    asker, bystander = room.agent("asker"), room.agent("bystander")
    quote = "Public\nlibraries are far away"
    thread = mcp_tool(asker, "thread_open", region=PROBLEM, body="Which libraries do you mean?",
                      quote=quote, blocking=True)
    cursor = asker.ok("GET", "/workspace/room")["latest_event_id"]
    woke: dict[str, Any] = {}

    def wait() -> None:
        # What an MCP agent does: long-poll from its cursor until its thread has a reply (other
        # participants' events end a hold early too; the agent just waits again).
        position = cursor
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            started = time.monotonic()
            answer = mcp_tool(asker, "workspace_wait", cursor=position, timeout_seconds=25)
            replies = [e for e in answer["events"] if e["type"] == "thread.replied"
                       and e["payload"]["thread_id"] == thread["thread_id"]]
            if replies:
                woke.update(reply=replies[0], held=time.monotonic() - started,
                            at=time.monotonic())
                return
            position = answer["cursor"]

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    open_page(page, room)
    panel = page.locator("#blocking-questions")
    panel.wait_for(state="visible")
    assert "Which libraries do you mean?" in panel.inner_text()
    # The quote is highlighted in its section, and the thread sits in that section's margin.
    mark = page.locator("#document mark.thread-quote")
    assert mark.count() >= 1 and "libraries are far away" in " ".join(mark.all_inner_texts())
    margin = page.locator("#document .thread-margin[aria-label='Threads on Problem']")
    assert "Which libraries do you mean?" in margin.inner_text()
    # The margin (taller than its short section) stays beside it: the next section starts below.
    beside, after = boxes(page, "#document .thread-margin[aria-label='Threads on Problem']",
                          ("#document h2", "Who it is for"))
    assert after["y"] >= beside["y"] + beside["height"]
    # Nobody else is held while the asker waits: the bystander works as usual.
    started = time.monotonic()
    bystander.ok("GET", f"/workspace/read?region={PROBLEM.replace(' ', '%20')}")
    mcp_tool(bystander, "thread_open", region=RISKS, body="Is theft a risk?")
    assert time.monotonic() - started < 5 and waiter.is_alive()
    screenshot(page, "threads-blocking.png")
    panel.locator("textarea").fill("The county library, twelve kilometres out.")
    panel.get_by_role("button", name="Answer").click()
    clicked = time.monotonic()
    waiter.join(30)
    assert not waiter.is_alive() and "reply" in woke
    assert woke["reply"]["payload"]["participant_id"] != thread["author_id"]
    assert woke["held"] < 25  # woken by the reply, not by the hold running out
    woke_after = woke["at"] - clicked
    print(f"the asker's wait woke {woke_after:.3f} s after the host clicked Answer")
    answered = mcp_tool(asker, "workspace_thread", thread_id=thread["thread_id"])
    assert answered["comments"][-1]["body"] == "The county library, twelve kilometres out."
    assert answered["comments"][-1]["participant_id"] != answered["author_id"]


def test_the_composer_anchors_a_selection_to_its_source_text(room: Room, page: Any) -> None:
    open_page(page, room)
    paragraph = page.locator("#document p", has_text="Readers buy books they read once").first
    # Select "Public libraries are far away" (a line break in the source) with the mouse's API.
    page.evaluate("""(node) => {
        const at = (word) => {
          const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
          for (let t = walker.nextNode(); t; t = walker.nextNode()) {
            const index = t.nodeValue.indexOf(word);
            if (index >= 0) return [t, index];
          }
          throw new Error(word);
        };
        const [start, from] = at("Public"), [end, to] = at("far away");
        const range = document.createRange();
        range.setStart(start, from);
        range.setEnd(end, to + "far away".length);
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
        node.dispatchEvent(new MouseEvent("mouseup", { bubbles: true }));
    }""", paragraph.element_handle())
    composer = page.locator("#thread-composer")
    composer.wait_for(state="visible")
    assert "Problem" in composer.inner_text()
    page.fill("#composer-body", "Far for whom?")
    page.click("#composer-send")
    composer.wait_for(state="hidden")
    [thread] = room.host.ok("GET", "/workspace/threads")["threads"]
    assert thread["region"] == PROBLEM and thread["quote"] == "Public\nlibraries are far away"
    page.locator("#document mark.thread-quote").first.wait_for()
    # The host's own save edits the quote away: the thread goes outdated, still shown.
    save_like_an_editor(room.doc, room.doc.read_text().replace("far away", "a bus ride away"))
    page.locator("#document .thread.status-outdated").wait_for(timeout=15000)
    assert page.locator("#document mark.thread-quote").count() == 0
    assert "Far for whom?" in page.locator("#document .thread.status-outdated").inner_text()


def _agent_propose(room: Room, agent: Http, region: str, old: str, new: str) -> dict[str, Any]:
    read = agent.ok("GET", f"/workspace/read?region={region.replace(' ', '%20')}")
    assert old in read["content"]
    return room.propose(agent, region, read["content"].replace(old, new), f"{old} -> {new}")


def test_request_changes_revise_and_the_revision_diff_in_the_page(room: Room, page: Any) -> None:
    author = room.agent("author")
    proposal = _agent_propose(room, author, RISKS, "- Privacy", "- Weather: outdoors.\n- Privacy")
    pid = proposal["proposal_id"]
    open_page(page, room)
    page.locator(f"#queue-list [data-proposal='{pid}']").click()
    page.click("#btn-request-changes")  # without a comment: refused in the page, nothing sent
    assert "Say what to change" in page.inner_text("#review-error")
    assert room.host.ok("GET", f"/workspace/proposal?proposal_id={pid}")["status"] == "pending"
    page.fill("#review-comment", "What do we do when it rains?")
    page.click("#btn-request-changes")
    deadline = time.monotonic() + 10
    while room.host.ok("GET", f"/workspace/proposal?proposal_id={pid}")["status"] != "changes_requested":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    detail = author.ok("GET", f"/workspace/proposal?proposal_id={pid}")
    revised = author.ok("POST", "/workspace/proposal/revise", {
        "proposal_id": pid, "summary": "weather, with a plan",
        "content": detail["content"].replace("outdoors.", "outdoors; a café when it rains.")})
    assert revised["revision"] == 2
    page.locator(f"#queue-list [data-proposal='{pid}']").click()
    diff = page.locator("#revision-diff")
    diff.wait_for(state="visible")
    assert "Revision 2 of 2" in diff.inner_text()
    assert "café" in " ".join(page.locator("#revision-diff ins").all_inner_texts())
    assert "What do we do when it rains?" in page.inner_text("#review-threads")
    screenshot(page, "threads-revision.png")
    room.host.ok("POST", "/workspace/proposal/review", {"proposal_id": pid, "revision": 2, "decision": "approve"})
    committed = author.ok("POST", "/workspace/commit", {"proposal_id": pid})
    assert committed["version"] == room.version()
    assert "a café when it rains" in room.doc.read_text()


def test_rebase_preview_then_apply_as_reviewer_then_commit(room: Room, page: Any) -> None:
    author = room.agent("author")
    proposal = _agent_propose(room, author, RISKS, "- Privacy", "- Weather.\n- Privacy")
    pid = proposal["proposal_id"]
    # The host's commit moves the section on (a save in the host's editor would rebase the
    # proposal by itself: tests/e2e/test_host_saves_keep_work.py).
    current = room.host.ok("GET", "/workspace/read?region=workspace")
    room.host.ok("POST", "/workspace/commit", {
        "base_version": current["version"], "summary": "host",
        "content": current["content"].replace("must stay quick.", "must be quick.")})
    open_page(page, room)
    page.locator(f"#queue-list [data-proposal='{pid}']").click()
    page.click("#btn-rebase-preview")
    preview = page.locator("#rebase-preview")
    preview.wait_for(state="visible")
    assert "merges cleanly" in preview.inner_text()
    assert "Weather." in " ".join(page.locator("#rebase-preview ins").all_inner_texts())
    assert room.host.ok("GET", f"/workspace/proposal?proposal_id={pid}")["revision"] == 1
    screenshot(page, "threads-rebase.png")
    page.click("#btn-rebase-apply")
    deadline = time.monotonic() + 10
    while room.host.ok("GET", f"/workspace/proposal?proposal_id={pid}")["revision"] != 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    detail = room.host.ok("GET", f"/workspace/proposal?proposal_id={pid}")
    assert detail["rebased"] is True and detail["stale"] is False and detail["status"] == "pending"
    room.host.ok("POST", "/workspace/proposal/review", {"proposal_id": pid, "revision": 2, "decision": "approve"})
    committed = room.host.ok("POST", "/workspace/commit", {"proposal_id": pid})
    assert committed["proposal_id"] == pid
    text = room.doc.read_text()
    assert "- Weather.\n" in text and "must be quick." in text
