"""The page's handoffs and room-text panels against a real room: live, addressed, escaped."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import ARTIFACTS, open_page, run_axe
from tests.e2e.conftest import Http, Room

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'


def join(room: Room, name: str) -> tuple[Http, str]:
    """An agent with every agent capability, and its participant id."""
    invite = room.host.ok("POST", "/workspace/invite", {})
    joined = Http(room.host.port).ok(
        "POST", "/session/join", {"invite": invite["invitation"], "name": name, "kind": "agent"})
    return Http(room.host.port, joined["session_id"]), str(joined["participant_id"])


def host_id(room: Room) -> str:
    participants = room.host.ok("GET", "/workspace/room")["participants"]
    return next(str(p["participant_id"]) for p in participants if "*" in p["capabilities"])


def test_agent_text_appears_live_and_the_addressed_turn_is_marked(page: Any, room: Room) -> None:
    open_page(page, room)
    page.locator("#messages-panel").wait_for()  # the room has room text: the panel is shown
    page.locator("#messages li", has_text="No room text yet.").wait_for()
    agent, _ = join(room, "drafter")
    page.locator("#message-to label", has_text="drafter").wait_for()  # a recipient to tick
    first = page.locator("#messages li").first
    first.evaluate("node => { node.dataset.kept = 'yes'; }")  # to see rows are appended, not rebuilt
    addressed = agent.ok("POST", "/workspace/message", {"text": "host, the plan is ready", "to": [host_id(room)]})
    plain = agent.ok("POST", "/workspace/message", {"text": "starting on Goals"})

    row = page.locator(f"[data-message='{addressed['message_id']}']")
    row.wait_for()
    page.locator(f"[data-message='{plain['message_id']}']").wait_for()
    assert "addressed" in (row.get_attribute("class") or "") and "to-you" in (row.get_attribute("class") or "")
    assert row.locator(".author").inner_text() == "drafter"
    assert row.locator(".addressee").inner_text() == "→ you"
    other = page.locator(f"[data-message='{plain['message_id']}']")
    assert "addressed" not in (other.get_attribute("class") or "") and other.locator(".addressee").count() == 0
    texts = page.locator("#messages li .message-text").all_inner_texts()
    assert texts == ["host, the plan is ready", "starting on Goals"]  # in seq order, the placeholder gone

    # One more turn appends: the earlier rows are the same nodes (nothing re-rendered under the cursor).
    page.locator(f"[data-message='{addressed['message_id']}']").evaluate("node => { node.dataset.kept = 'yes'; }")
    agent.ok("POST", "/workspace/message", {"text": "third"})
    page.locator("#messages li", has_text="third").wait_for()
    assert page.locator(f"[data-message='{addressed['message_id']}']").get_attribute("data-kept") == "yes"
    assert page.locator("#messages li").count() == 3


def test_host_sends_addressed_room_text_and_the_agent_reads_it(page: Any, room: Room) -> None:
    agent, agent_id = join(room, "drafter")
    join(room, "reviewer")
    open_page(page, room)
    page.locator("#message-to label", has_text="drafter").wait_for()
    page.locator("#message-text").fill("drafter, please take Goals")
    page.locator("#message-to label", has_text="drafter").locator("input").check()
    page.get_by_role("button", name="Send").click()
    row = page.locator("#messages li", has_text="drafter, please take Goals")
    row.wait_for()
    assert "(you)" in row.locator(".message-head").inner_text()
    assert row.locator(".addressee").inner_text() == "→ drafter"
    assert page.locator("#message-text").input_value() == ""

    answer = agent.ok("GET", "/workspace/messages")
    assert answer["latest_seq"] == 1
    [message] = answer["messages"]
    assert message["text"] == "drafter, please take Goals"
    assert message["to"] == [agent_id] and message["participant_id"] == host_id(room)

    # Not addressed: nothing ticked sends to the whole room.
    page.locator("#message-to label", has_text="drafter").locator("input").uncheck()
    page.locator("#message-text").fill("everyone: lunch")
    page.get_by_role("button", name="Send").click()
    page.locator("#messages li", has_text="everyone: lunch").wait_for()
    assert agent.ok("GET", "/workspace/messages", None)["messages"][-1]["to"] == []


def test_a_handoff_between_agents_shows_its_status_and_task_live(page: Any, room: Room) -> None:
    drafter, _ = join(room, "drafter")
    reviewer, reviewer_id = join(room, "reviewer")
    open_page(page, room)
    page.locator("#handoffs-panel").wait_for()
    page.locator("#handoffs li", has_text="No handoffs yet.").wait_for()

    handoff = drafter.ok("POST", "/workspace/handoff", {
        "to_participant_id": reviewer_id, "summary": "review the Problem section", "region": "Problem"})
    row = page.locator(f"#handoffs [data-handoff='{handoff['handoff_id']}']")
    row.locator("[data-status='requested']").wait_for()
    assert "review the Problem section" in row.inner_text()
    assert "drafter → reviewer · Problem" in row.inner_text()  # names, not ids
    assert page.locator("#handoffs li", has_text="No handoffs yet.").count() == 0

    accepted = reviewer.ok("POST", "/workspace/handoff/respond", {
        "handoff_id": handoff["handoff_id"], "decision": "accept"})
    row.locator("[data-status='accepted']").wait_for()
    row.locator("[data-task-status='working']").wait_for()
    reviewer.ok("POST", "/workspace/task/update", {
        "task_id": accepted["task_id"], "status": "input_required", "status_message": "which tone?"})
    row.locator("[data-task-status='input_required']", has_text="which tone?").wait_for()
    # Thread text is labelled with its handoff.
    said = reviewer.ok("POST", "/workspace/message", {"text": "formal or casual?", "handoff_id": handoff["handoff_id"]})
    thread = page.locator(f"[data-message='{said['message_id']}']")
    thread.wait_for()
    assert thread.locator(".thread").inner_text() == "in handoff: review the Problem section"

    reviewer.ok("POST", "/workspace/handoff/result", {
        "handoff_id": handoff["handoff_id"], "status": "completed", "summary": "Goals reviewed, two fixes"})
    row.locator("[data-status='completed']").wait_for()
    row.locator("[data-task-status='completed']").wait_for()
    assert "result: Goals reviewed, two fixes" in row.inner_text()
    assert drafter.ok("GET", f"/workspace/handoff?handoff_id={handoff['handoff_id']}")["status"] == "completed"


def test_markup_in_text_summaries_and_names_stays_text(page: Any, room: Room) -> None:
    open_page(page, room)
    page.locator("#messages-panel").wait_for()
    status, answer, _ = Http(room.host.port).call("POST", "/session/join", {
        "invite": room.host.ok("POST", "/workspace/invite", {})["invitation"], "name": IMG, "kind": "agent"})
    assert status == 200, answer  # the room takes any name: escaping it is the page's job
    evil = Http(room.host.port, answer["session_id"])
    _, other_id = join(room, "other")
    evil.ok("POST", "/workspace/message", {"text": f"{SCRIPT} and {IMG}"})
    evil.ok("POST", "/workspace/handoff", {
        "to_participant_id": other_id, "summary": f"sum {IMG}", "details": f"details {SCRIPT}"})
    page.locator("#messages li .message-text", has_text="and <img").wait_for()
    page.locator("#handoffs li", has_text="sum <img").wait_for()
    page.wait_for_timeout(200)  # an onerror would have fired by now

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.dialogs == []  # type: ignore[attr-defined]
    assert page.locator("#messages li .message-text").inner_text() == f"{SCRIPT} and {IMG}"
    assert page.locator("#handoffs .details").inner_text() == f"details {SCRIPT}"
    assert page.locator(".panels img, .panels script").count() == 0
    assert page.locator("#messages .author").inner_text() == IMG
    assert page.locator("#people li", has_text="<img").count() == 1
    assert "<img" in page.locator("#handoffs li").inner_text()  # the requester's name, as text


def test_populated_panels_have_no_serious_accessibility_violations(page: Any, room: Room) -> None:
    drafter, _ = join(room, "drafter")
    reviewer, reviewer_id = join(room, "reviewer")
    handoff = drafter.ok("POST", "/workspace/handoff", {
        "to_participant_id": reviewer_id, "summary": "review Goals", "details": "two lines\nof details"})
    reviewer.ok("POST", "/workspace/handoff/respond", {"handoff_id": handoff["handoff_id"], "decision": "accept"})
    drafter.ok("POST", "/workspace/message", {"text": "for the host", "to": [host_id(room)]})
    drafter.ok("POST", "/workspace/message", {"text": "for reviewer", "to": [reviewer_id]})
    reviewer.ok("POST", "/workspace/message", {"text": "in the thread", "handoff_id": handoff["handoff_id"]})
    drafter.ok("POST", "/workspace/handoff", {"to_participant_id": reviewer_id, "summary": "second ask"})
    open_page(page, room)
    page.locator("#messages li", has_text="in the thread").wait_for()
    page.locator("#handoffs [data-task-status='working']").wait_for()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator(".panels").screenshot(path=str(ARTIFACTS / "room-panels.png"))
    assert run_axe(page) == []
