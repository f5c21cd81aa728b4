"""The host's page end to end: a real room, real agents over HTTP, a real Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from commonroom.credentials import read_credentials
from tests.browser.conftest import ARTIFACTS, boxes, open_page, pass_undo_window, run_axe
from tests.e2e.conftest import Http, Room, RoomProcess, ce, serving, start_room
from tests.editing import save_like_an_editor

PROBLEM = (
    "## Problem\n\nReaders buy books they read once and then store them for years, and the"
    " street already holds hundreds of books nobody is reading, right next door.\n\n"
)


def test_live_review_approve_with_keys_and_commit_arrives(page: Any, room: Room) -> None:
    api_calls: list[str] = []
    page.on("request", lambda r: api_calls.append(r.url) if "/owner/api/" in r.url else None)
    open_page(page, room)
    assert page.locator("#document h1").first.inner_text().startswith("Shelf Swap")
    assert page.locator("#queue-empty").is_visible()  # the empty state says what to do next
    # Panels for routes this room does not have (handoffs, room text) are hidden, not broken.
    for route, panel in (("handoffs", "#handoffs-panel"), ("messages", "#messages-panel")):
        status = page.evaluate(f"fetch('/owner/api/workspace/{route}', {{headers: {{'X-Commonroom-Owner':"
                               " sessionStorage.getItem('commonroom.owner')}}).then(r => r.status)")
        assert page.locator(panel).is_visible() == (status == 200), (route, status)
    # No polling: an idle page sends nothing (the one EventSource is already open).
    page.wait_for_timeout(200)
    before = len(api_calls)
    page.wait_for_timeout(1500)
    assert api_calls[before:] == []

    agent = room.agent("drafter")
    agent.ok("POST", "/workspace/checkout", {"region": "Problem", "minutes": 15})
    proposal = room.propose(agent, "Problem", PROBLEM, "tighten the problem statement")
    # It appears without a reload, with the author's name and the lease on its section.
    item = page.locator(f"[data-proposal='{proposal['proposal_id']}']")
    item.wait_for()
    assert "drafter" in item.inner_text() and "tighten the problem statement" in item.inner_text()
    assert page.locator("#queue-count").inner_text() == "1"
    page.locator(".lease", has_text="leased by drafter").wait_for()
    page.locator("#document .doc-proposals", has_text="1 proposal").wait_for()  # the section says so too

    page.keyboard.press("j")  # next undecided opens its review
    page.locator("#review-title", has_text="tighten the problem statement").wait_for()
    body = page.locator("#review-body")
    # Word-level, inside the rendered markdown: the removed sentence struck, the new words marked.
    body.locator("del", has_text="Public libraries").first.wait_for()
    assert body.locator("ins", has_text="next door").count() == 1
    assert body.locator("h2", has_text="Problem").count() == 1
    assert page.locator("#btn-approve").is_enabled()
    provenance = page.locator("#review-provenance").inner_text()
    assert provenance.startswith("drafter (agent) · Problem · base v1 · ")
    assert "lease drafter, 1" in provenance  # its lease's remaining time (15:00 or 14:59)

    page.locator("[data-view='section']").click()  # the whole section, as it would read: approvable
    page.locator("#review-body .section-text[data-shows='proposed']", has_text="nobody is reading").wait_for()
    assert page.locator("#btn-approve").is_enabled()
    page.locator("#section-toggle").click()  # and as it reads now
    page.locator("#review-body .section-text[data-shows='current']", has_text="Public").wait_for()
    page.locator("[data-view='unified']").click()
    assert "+Readers buy books" in body.inner_text()
    page.locator("[data-view='rendered']").click()

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=False)
    assert run_axe(page) == []

    page.locator("#review-title").focus()
    page.keyboard.press("a")
    page.locator(".toast", has_text="tighten the problem statement").wait_for()  # held, undoable
    pass_undo_window(page)
    page.locator(f"[data-proposal='{proposal['proposal_id']}']", has_text="approved").wait_for()
    assert agent.ok("GET", f"/workspace/proposal?proposal_id={proposal['proposal_id']}")["status"] == "approved"

    agent.ok("POST", "/workspace/commit", {"proposal_id": proposal["proposal_id"]})
    page.locator("#doc-meta", has_text="version 2").wait_for()
    page.locator("#doc-meta", has_text="last change by drafter").wait_for()
    page.locator("#document", has_text="nobody is reading").wait_for()
    page.locator("#history li", has_text="v2").wait_for()
    page.locator("#history li", has_text="v2").get_by_role("button", name="Diff of version 2").click()
    page.locator("#history-diff", has_text="+Readers buy books").wait_for()

    # The room stops: the page says so instead of freezing.
    room.process.stop()
    page.locator("#live-state", has_text="reconnecting").wait_for()


def test_decision_at_the_terminal_shows_up_live(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    proposal = room.propose(agent, "Problem", PROBLEM, "terminal decides")
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").focus()
    # A live update does not take the keyboard focus away.
    other = room.propose(agent, "The idea", "## The idea\n\nSwap books.\n\n", "another")
    page.locator(f"[data-proposal='{other['proposal_id']}']").wait_for()
    assert page.evaluate("document.activeElement.dataset.proposal") == proposal["proposal_id"]
    result = ce("review", str(room.doc), proposal["proposal_id"], "--reject", "--comment", "not now")
    assert result.returncode == 0, result.stderr
    page.locator(f"[data-proposal='{proposal['proposal_id']}']", has_text="rejected").wait_for()
    assert page.locator("#queue-count").inner_text() == "1"
    assert page.locator("#queue-progress").inner_text() == "1 of 2 decided"


def test_edit_before_approve_lands_the_edited_text(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    proposal = room.propose(agent, "Problem", PROBLEM, "draft")
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
    page.locator("#review-body ins", has_text="next door").wait_for()
    page.keyboard.press("e")
    edited = "## Problem\n\nBooks sit unread on shelves; neighbours could swap them on foot.\n\n"
    page.locator("#edit-text").fill(edited)
    # The diff follows the edit (a rewrite this large shows as a whole new block).
    page.locator("#review-body :is(ins, .blk-ins)", has_text="on foot").first.wait_for()
    page.locator("#review-comment").fill("shorter, please keep it this way")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-edit.png"))
    page.locator("#btn-approve").click()
    pass_undo_window(page)
    page.locator(f"[data-proposal='{proposal['proposal_id']}']", has_text="approved").wait_for()

    detail = agent.ok("GET", f"/workspace/proposal?proposal_id={proposal['proposal_id']}")
    assert detail["content"] == edited and detail["original_content"] == PROBLEM
    assert detail["review_comment"] == "shorter, please keep it this way"
    history = room.host.ok("GET", "/workspace/history?limit=20")["events"]
    assert any(e["type"] == "proposal.amended" for e in history)
    agent.ok("POST", "/workspace/commit", {"proposal_id": proposal["proposal_id"]})
    text = room.doc.read_text()
    assert "neighbours could swap them on foot" in text and "nobody is reading" not in text


def test_stale_proposal_shows_its_badge_before_anyone_clicks(page: Any, room: Room) -> None:
    open_page(page, room)
    one, two = room.agent("one"), room.agent("two")
    first = room.propose(one, "Problem", PROBLEM, "first take")
    second = room.propose(two, "Problem", "## Problem\n\nAnother take.\n\n", "second take")
    pending = room.propose(two, "Problem", "## Problem\n\nA third take.\n\n", "third take")
    for p in (first, second):
        room.host.ok("POST", "/workspace/proposal/review", {"proposal_id": p["proposal_id"], "decision": "approve"})
    page.locator(f"[data-proposal='{second['proposal_id']}']", has_text="approved").wait_for()
    assert page.locator(".stale").count() == 0
    # A review open on the third one, with a comment being written, when the section moves on.
    page.locator(f"[data-proposal='{pending['proposal_id']}']").click()
    page.locator("#review-body :is(del, .blk-del)").first.wait_for()
    page.locator("#review-comment").fill("half-written thought")
    page.mouse.move(5, 5)  # off the queue: it may reorder
    one.ok("POST", "/workspace/commit", {"proposal_id": first["proposal_id"]})
    # Approved but its section moved on: flagged. Pending ones are superseded: flagged too.
    page.locator(f"[data-proposal='{second['proposal_id']}'] .stale").wait_for()
    page.locator(f"[data-proposal='{pending['proposal_id']}'] .stale").wait_for()
    page.locator("#review-moved", has_text="moved to v2").wait_for()  # the open review says so
    assert page.locator("#review-comment").input_value() == "half-written thought"
    assert page.locator("#btn-approve").is_disabled()
    page.locator(f"[data-proposal='{second['proposal_id']}']").click()
    page.locator("#review-stale", has_text="changed since v1").wait_for()
    assert page.locator("#btn-approve").is_disabled()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-stale.png"))


XSS = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "[click me](javascript:window.__pwned=3)",
    "<svg onload=\"window.__pwned=4\"></svg>",
]
PAYLOAD = " ".join(XSS)


def test_payloads_in_every_field_do_nothing(page: Any, room: Room, doc: Path) -> None:
    # Document text: an external edit puts the payloads into the document itself.
    save_like_an_editor(doc, doc.read_text() + "\n## Payloads\n\n" + "\n\n".join(XSS) + "\n\n" + "`" + XSS[0] + "`\n")
    agent = room.agent(name=XSS[1])  # participant name
    room.host.ok("POST", "/workspace/invite", {"label": XSS[0]})  # invitation label
    proposal = room.propose(agent, "Problem", "## Problem\n\n" + PAYLOAD + "\n\n", XSS[1] + " summary")
    rejected = room.propose(agent, "Who it is for", "## Who it is for\n\n- " + XSS[0] + "\n\n", "second")
    room.host.ok("POST", "/workspace/proposal/review", {
        "proposal_id": rejected["proposal_id"], "decision": "reject", "comment": PAYLOAD})
    room.agent(name="asker").ok("POST", "/workspace/thread", {  # a thread's body (threads.js)
        "region": "Problem", "body": PAYLOAD, "blocking": True})

    open_page(page, room)
    page.locator("#document", has_text="window.__pwned = 1").wait_for()
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
    page.locator("#review-body", has_text="<script>").wait_for()
    for view in ("unified", "section", "rendered"):
        page.locator(f"[data-view='{view}']").click()
    page.locator(f"[data-proposal='{rejected['proposal_id']}']").click()
    page.locator("#review-amended", has_text="<img src=x").wait_for()  # the comment, as text
    page.locator("#invitations", has_text="<script>").wait_for()
    page.locator("#people", has_text="<img src=x").wait_for()
    page.locator("#blocking-questions", has_text="<svg onload").wait_for()
    page.locator("#document .thread-margin", has_text="<script>").first.wait_for()
    page.wait_for_timeout(300)  # give an injected handler (onerror) its chance to run

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page-payloads.png"), full_page=True)
    assert page.evaluate("window.__pwned") is None
    assert page.dialogs == []
    assert page.locator("#document img, #review-body img, #people img, svg").count() == 0
    # markdown-it, jsdiff, diff-match-patch, blame.js, threads.js, undoes.js, app.js
    assert page.locator("script").count() == 7
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.locator("[onerror], [onload]").count() == 0


def test_the_api_needs_the_tabs_login_header_and_the_ingress_never_serves_the_page(room: Room) -> None:
    owner = Http(room.owner_port)
    token = room.url.split("#token=", 1)[1]
    # The ingress: no page, no login, not even for the login routes.
    for path in ("/static/..%2fhttp%2fowner.py", "/static/../http/owner.py", "/static/.hidden"):
        assert owner.call("GET", path)[0] == 404, path
    for path in ("/", "/static/app.js", "/owner/api/workspace/room"):
        status, _, headers = Http(room.host.port).call("GET", path)
        assert status == 404 and "set-cookie" not in headers, path
    for path in ("/owner/login-link", "/owner/login", "/owner/stream-ticket"):
        assert Http(room.host.port).call("POST", path, {"token": token})[0] == 404, path

    # The page itself is no secret: anyone gets it, and nothing in it logs anyone in.
    status, page_html, headers = owner.call("GET", "/")
    assert status == 200 and "set-cookie" not in headers and token not in page_html
    assert "script-src 'self'" in headers["content-security-policy"]
    status, answer, headers = owner.call("POST", "/owner/login", {"token": token})
    assert status == 200 and "set-cookie" not in headers
    login = {"X-Commonroom-Owner": answer["credential"]}
    body = {"capabilities": ["read"]}
    for refused in ({}, {"Cookie": f"commonroom_owner={answer['credential']}"},
                    {"X-Commonroom-Owner": "own_wrong"}):
        status, answer_, _ = owner.call("POST", "/owner/api/workspace/invite", body, headers=refused)
        assert status == 401 and answer_["error"] == "unauthorized", refused
    status, answer, _ = owner.call("POST", "/owner/api/workspace/invite", body, headers=login)
    assert status == 200 and answer["invitation"].startswith("commonroom://join/")
    status, answer, _ = owner.call("POST", "/owner/api/workspace/invite", body,
                                   headers={**login, "Origin": "http://localhost:9999"})
    assert status == 403 and answer["error"] == "permission_denied"


def test_a_spent_link_says_what_to_do(page: Any, room: Room) -> None:
    open_page(page, room)
    assert "#token=" not in page.url  # the spent token left the address bar
    other = page.context.browser.new_context()
    try:
        tab = other.new_page()
        tab.goto(room.url)
        tab.wait_for_selector("body[data-login='needed']")
        assert "already used" in tab.locator("#login-title").inner_text()
        assert "ce open idea.md" in tab.locator("#login").inner_text()
        assert tab.locator("#app").is_hidden()
        assert run_axe(tab) == []
        # `ce open` mints a fresh link that works once.
        result = ce("open", str(room.doc), "--no-browser", "--json")
        assert result.returncode == 0, result.stderr
        url = json.loads(result.stdout)["url"]
        assert url.startswith(f"http://127.0.0.1:{room.owner_port}/#token=") and url != room.url
        tab.goto(url)
        tab.reload()  # a reload keeps the tab's login (sessionStorage), the link stays spent
        tab.wait_for_selector("body[data-ready='true']")
        assert run_axe(tab) == []
    finally:
        other.close()


def test_invitations_and_participants_panels(page: Any, room: Room) -> None:
    agent = room.agent("helper")
    open_page(page, room)
    # Create an invitation: the default agent set is preselected.
    caps = page.locator("#invite-caps input:checked")
    assert sorted(caps.evaluate_all("boxes => boxes.map(b => b.value)")) == sorted(
        ["read", "observe", "checkout", "propose", "commit", "message", "handoff"])
    page.locator("#invite-label").fill("for the reviewer bot")
    page.locator("#invite-uses").fill("3")
    page.locator("#invite-create").click()
    page.locator("#invite-result").wait_for()
    uri = page.locator("#invite-uri").inner_text()
    assert uri.startswith("commonroom://join/")
    # The MCP URL, and each client's setup snippet for this invitation (from the room; the
    # URL arrives with the room's answer after the result shows, so wait for it to be there).
    mcp_url = f"http://127.0.0.1:{room.host.port}/mcp"
    # (Polled by Playwright's expect, not wait_for_function: that evals its predicate in the
    # page, and the page's CSP forbids eval.)
    expect(page.locator("#invite-mcp-url")).to_have_text(mcp_url)
    clients = page.locator("#invite-client option").evaluate_all("os => os.map(o => o.value)")
    assert "claude-desktop" in clients and "vscode" in clients
    page.locator("#invite-client").select_option("claude-desktop")
    snippet = page.locator("#invite-mcp").inner_text()
    assert uri in snippet and '"mcpServers"' in snippet
    assert "claude_desktop_config.json" in page.locator("#invite-client-where").inner_text()
    assert run_axe(page) == []
    row = page.locator("#invitations li", has_text="for the reviewer bot")
    row.wait_for()
    assert "uses 0/3" in row.inner_text()
    row.get_by_role("button", name="Revoke invitation").click()
    # A revoked invitation leaves the open list for the collapsed group.
    page.locator("#invitations-old li", has_text="for the reviewer bot").filter(has_text="revoked").wait_for(
        state="attached")
    assert page.locator("#invitations li", has_text="for the reviewer bot").count() == 0
    status, answer, _ = Http(room.host.port).call("POST", "/session/join", {"invite": uri, "name": "late"})
    assert status == 403 and answer["error"] == "invitation_revoked"

    # Participants: revoking asks first, then ends the agent's sessions.
    person = page.locator("#people li", has_text="helper")
    assert "agent" in person.inner_text()
    person.get_by_role("button", name="Revoke sessions of helper").click()
    person.get_by_role("button", name="Cancel").click()
    assert agent.call("GET", "/workspace/status")[0] == 200
    person.get_by_role("button", name="Revoke sessions of helper").click()
    person.get_by_role("button", name="Yes, revoke").click()
    deadline = page.evaluate("Date.now()") + 5000
    while agent.call("GET", "/workspace/status")[0] == 200:
        assert page.evaluate("Date.now()") < deadline, "the agent's session was not revoked"
        page.wait_for_timeout(50)
    assert agent.call("GET", "/workspace/status")[0] == 401


def test_phone_width_is_one_column(browser: Any, room: Room) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        tab = context.new_page()
        tab.goto(room.url)
        tab.wait_for_selector("body[data-ready='true']")
        doc_box, queue_box = boxes(tab, ".doc-col", ".queue-col")
        assert doc_box["y"] >= queue_box["y"] + queue_box["height"] - 1  # stacked, the queue first
        assert doc_box["width"] <= 390
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
    finally:
        context.close()


def test_after_a_restart_the_open_tab_reconnects_by_itself(page: Any, doc: Path) -> None:
    # No --port-owner: the room comes back on the same port, so the tab's origin (and with it
    # its sessionStorage login) stays the same; the login itself is kept hashed in the sidecar.
    first = start_room(doc, "--port-ingress", "0", owner_port=None)
    second: RoomProcess | None = None
    try:
        page.goto(first.ready["human_url"])
        page.wait_for_selector("#live-state.ok")
        first.stop()
        page.locator("#live-state", has_text="reconnecting").wait_for()
        second = start_room(doc, "--port-ingress", "0", owner_port=None)
        assert second.ready["owner_port"] == first.ready["owner_port"]
        page.wait_for_selector("#live-state.ok", timeout=15000)
        assert page.locator("#notice").is_hidden()
        # Live again: a proposal made now appears in the same tab without a reload.
        creds = read_credentials(doc)
        assert creds is not None
        host = Http(second.ready["ingress_port"], creds.host_session)
        invite = host.ok("POST", "/workspace/invite", {})
        agent = Http(host.port, Http(host.port).ok(
            "POST", "/session/join", {"invite": invite["invitation"], "name": "after"})["session_id"])
        version = int(host.ok("GET", "/workspace/status")["version"])
        proposal = agent.ok("POST", "/workspace/propose", {
            "region": "Problem", "base_version": version, "summary": "made after the restart",
            "content": "## Problem\n\nStill here.\n"})
        page.locator(f"[data-proposal='{proposal['proposal_id']}']").wait_for()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "page-after-restart.png"), full_page=False)
        # `ce open --logout-all` ends the login: the same tab says so and stops.
        result = ce("open", str(doc), "--logout-all", "--json")
        assert result.returncode == 0 and json.loads(result.stdout)["ended"] >= 1, result.stderr
        page.locator("#notice", has_text="ce open idea.md").wait_for(timeout=15000)
        page.locator("#live-state", has_text="logged out").wait_for()
    finally:
        first.close()
        if second is not None:
            second.close()


def test_keep_only_some_hunks_then_approve(page: Any, room: Room) -> None:
    open_page(page, room)
    agent = room.agent()
    original = room.doc.read_text()
    proposed = original.replace("Public\nlibraries are far away", "Public\nlibraries are FAR away").replace(
        "Do we need a web version", "Do we need a WEB version")
    assert proposed.count("FAR") == 1 and proposed.count("WEB") == 1
    proposal = room.propose(agent, "workspace", proposed, "two unrelated changes")
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
    page.locator("[data-view='unified']").click()
    # The hunks render once the proposal's detail arrived: wait for them (count() does not).
    page.get_by_label("Keep change 2 of 2").wait_for()
    keep = page.locator("#review-body .keep input")
    assert keep.count() == 2
    page.get_by_label("Keep change 2 of 2").uncheck()
    assert run_axe(page) == []  # the per-change view with its checkboxes
    assert page.locator("#btn-approve").inner_text().startswith("Approve kept changes")
    page.locator("[data-view='rendered']").click()  # what lands: only the first change
    assert page.locator("#review-body ins", has_text="FAR").count() == 1
    assert page.locator("#review-body ins", has_text="WEB").count() == 0
    page.locator("#review-title").focus()  # a key acts on the page, never on a focused button
    page.keyboard.press("a")
    pass_undo_window(page)
    page.locator(f"[data-proposal='{proposal['proposal_id']}']", has_text="approved").wait_for()
    agent.ok("POST", "/workspace/commit", {"proposal_id": proposal["proposal_id"]})
    text = room.doc.read_text()
    assert "libraries are FAR away" in text and "WEB version" not in text and "web version" in text
    detail = agent.ok("GET", f"/workspace/proposal?proposal_id={proposal['proposal_id']}")
    assert detail["original_content"] == proposed


def test_no_browser_test_waits_on_a_predicate_the_page_must_eval() -> None:
    # Playwright's wait_for_function polls its predicate with the page's own eval, which the
    # page's CSP (script-src 'self') refuses: such a wait passes when the predicate already
    # holds and fails when it has to poll (a CI run did). Wait with expect(...) instead.
    waits = "wait_for" + "_function("
    offenders = [path.name for path in Path(__file__).parent.glob("*.py") if waits in path.read_text()]
    assert offenders == []


def test_a_long_outline_scrolls_and_the_document_stays_in_view(page: Any, tmp_path: Path) -> None:
    # A 600-section file: its outline was a wall of links pushing the text a screen down.
    doc = tmp_path / "long.md"
    doc.write_text("# Long notes\n\nIntro.\n\n" + "".join(
        f"## Section {i}\n\nText of section {i}.\n\n" for i in range(600)))
    with serving(doc) as room:
        open_page(page, room)
        outline, text = boxes(page, "#outline", "#document")
        assert outline["height"] < 200 and text["y"] < 400, (outline, text)
        # Every link is still there, reachable by scrolling the outline.
        last = page.locator("#outline a", has_text="Section 599")
        last.scroll_into_view_if_needed()
        last.click()
        expect(page).to_have_url(re.compile(r"#sec-"))
        assert run_axe(page) == []
