"""Task surfaces in the host's page, real Chromium against a real `ce serve` (PROTOCOL.md 20).

An agent accepts a handoff, publishes a live view (a checklist with a counter) and then an
app (a two-option chooser); the page draws the view with its own DOM and runs the app in a
sandboxed srcdoc frame; the agent's app request is answered by the host's click in the app;
with the tab closed the request fails at once with `no_app_host`. The security half: an app
that reaches for the network, the page, its login or navigation gets nothing, and neither
does a forged bridge message; a script-like string in a live view stays text.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, open_page, run_axe
from tests.e2e.conftest import Http, Room

SCRIPT = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def checklist(revision: int, done: int, text: str = "Steps of the Goals rewrite") -> dict[str, Any]:
    return {
        "surface_id": "progress", "revision": revision,
        "root": {"type": "Card", "title": "Rewrite Goals", "children": [
            {"type": "Text", "text": text},
            {"type": "Value", "path": "done", "label": "Done"},
            {"type": "Row", "children": [
                {"type": "Button", "label": "One more", "action": {"type": "increment", "path": "done"}},
                {"type": "Button", "label": "Reset", "action": {"type": "set", "path": "done", "value": 0}},
            ]},
            {"type": "Input", "path": "note", "label": "Note"},
        ]},
        "data": {"done": done, "note": ""},
    }


# Two drafts to choose from: an app request asks, the host's click answers it.
CHOOSER = {
    "version": 1,
    "manifest": {"title": "Which draft?", "networkOrigins": []},
    "html": '<p id="question">No question yet.</p>'
            '<button id="pick-a" disabled>Draft A</button> <button id="pick-b" disabled>Draft B</button>',
    "css": "button { font-size: 1.2rem; }",
    "js": """
commonroom.onRequest((payload) => new Promise((resolve) => {
  document.getElementById("question").textContent = payload.question;
  for (const [id, choice] of [["pick-a", "A"], ["pick-b", "B"]]) {
    const button = document.getElementById(id);
    button.disabled = false;
    button.onclick = async () => {
      const { revision } = await commonroom.getState();
      await commonroom.setState(revision, { choice });
      resolve({ choice });
    };
  }
}));
""",
    "initialState": {"choice": None},
}


def join(room: Room, name: str) -> tuple[Http, str]:
    invite = room.host.ok("POST", "/workspace/invite", {})
    joined = Http(room.host.port).ok(
        "POST", "/session/join", {"invite": invite["invitation"], "name": name, "kind": "agent"})
    return Http(room.host.port, joined["session_id"]), str(joined["participant_id"])


def accepted_task(room: Room, name: str = "drafter") -> tuple[Http, str]:
    """An agent that accepted the host's handoff: (its client, the task id)."""
    agent, agent_id = join(room, name)
    handoff = room.host.ok("POST", "/workspace/handoff",
                           {"to_participant_id": agent_id, "summary": "Rewrite Goals"})
    task = agent.ok("POST", "/workspace/handoff/respond",
                    {"handoff_id": handoff["handoff_id"], "decision": "accept"})
    return agent, str(task["task_id"])


def card(page: Any, task_id: str) -> Any:
    return page.locator(f".task-card[data-task='{task_id}']")


def hosting_declared(page: Any) -> Any:
    """Waits for the page to tell the room which apps it runs now (`/owner/app-host/apps`)."""
    return page.expect_response(lambda response: response.url.endswith("/owner/app-host/apps"))


def test_live_view_then_app_and_an_app_request_answered_by_the_host(page: Any, room: Room) -> None:
    agent, task_id = accepted_task(room)
    open_page(page, room)

    # A checklist with a counter: drawn by the page.
    agent.ok("POST", "/workspace/task/live_view", {"task_id": task_id, "surface": checklist(1, 0)})
    view = card(page, task_id).locator(".live-view[data-revision='1']")
    view.wait_for()
    assert card(page, task_id).locator(".task-title").inner_text() == "Rewrite Goals"
    assert "drafter" in card(page, task_id).locator(".task-by").inner_text()
    assert view.locator(".lv-title").inner_text() == "Rewrite Goals"
    assert view.locator(".lv-number").inner_text() == "0"
    # A local action changes the page's copy only.
    view.get_by_role("button", name="One more").click()
    view.get_by_role("button", name="One more").click()
    assert view.locator(".lv-number").inner_text() == "2"
    surfaces = agent.ok("GET", f"/workspace/task/surfaces?task_id={task_id}")["surfaces"]
    assert surfaces[0]["live_view"]["data"]["done"] == 0
    view.get_by_role("button", name="Reset").click()
    assert view.locator(".lv-number").inner_text() == "0"

    # A higher revision updates the same card in place; a lower one is refused.
    card(page, task_id).evaluate("node => { node.dataset.kept = 'yes'; }")
    agent.ok("POST", "/workspace/task/live_view", {"task_id": task_id, "surface": checklist(2, 3)})
    updated = card(page, task_id).locator(".live-view[data-revision='2']")
    updated.wait_for()
    assert updated.locator(".lv-number").inner_text() == "3"
    assert card(page, task_id).get_attribute("data-kept") == "yes"
    assert page.locator(".task-card").count() == 1
    status, refused, _ = agent.call("POST", "/workspace/task/live_view",
                                    {"task_id": task_id, "surface": checklist(1, 9)})
    assert status == 400 and refused["error"] == "invalid_request"
    assert refused["details"]["path"] == "revision"

    # The app: a two-option chooser, run in the sandbox.
    with hosting_declared(page):
        published = agent.ok("POST", "/workspace/task/app", {"task_id": task_id, "bundle": CHOOSER})
    assert published["revision"] == 1
    frame_node = card(page, task_id).locator("iframe.task-app")
    frame_node.wait_for()
    assert frame_node.get_attribute("sandbox") == "allow-scripts"
    assert frame_node.get_attribute("src") is None
    app = card(page, task_id).frame_locator("iframe.task-app")
    app.locator("#question").wait_for()
    assert page.evaluate("() => document.querySelector('iframe.task-app').contentDocument") is None

    # The agent asks; the host clicks an option; the agent receives it.
    with ThreadPoolExecutor(1) as pool:
        asked = pool.submit(agent.call, "POST", "/workspace/task/app/request",
                            {"task_id": task_id, "payload": {"question": "Which draft reads better?"}})
        app.locator("#question", has_text="Which draft reads better?").wait_for()
        app.locator("#pick-b").click()
        status, answer, _ = asked.result(timeout=30)
    assert status == 200, answer
    assert answer == {"task_id": task_id, "app_revision": 1, "reply": {"choice": "B"}}
    # The app's setState went through the bridge: the shared state moved once.
    state = agent.ok("GET", f"/workspace/task/surfaces?task_id={task_id}")["surfaces"][0]["app_state"]
    assert (state["revision"], state["state"]) == (1, {"choice": "B"})
    assert run_axe(page) == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "task-surfaces.png"), full_page=True)

    # The tab closes: nobody hosts the app, and the request fails at once.
    page.close()
    status, refused, _ = agent.call("POST", "/workspace/task/app/request",
                                    {"task_id": task_id, "payload": {"question": "still there?"}})
    assert status == 503 and refused["error"] == "transport_unavailable"
    assert refused["details"]["reason"] == "no_app_host"


def test_a_closed_card_stops_hosting_and_opens_again_for_a_newer_revision(page: Any, room: Room) -> None:
    agent, task_id = accepted_task(room)
    agent.ok("POST", "/workspace/task/app", {"task_id": task_id, "bundle": CHOOSER})
    agent.ok("POST", "/workspace/task/live_view", {"task_id": task_id, "surface": checklist(1, 0)})
    with hosting_declared(page):
        open_page(page, room)
    card(page, task_id).locator("iframe.task-app").wait_for()
    with hosting_declared(page):
        card(page, task_id).get_by_role("button", name="Close the surfaces of Rewrite Goals").click()
    assert card(page, task_id).locator("iframe.task-app").count() == 0
    status, refused, _ = agent.call("POST", "/workspace/task/app/request",
                                    {"task_id": task_id, "payload": {}})
    assert status == 503 and refused["details"]["reason"] == "no_app_host"
    agent.ok("POST", "/workspace/task/live_view", {"task_id": task_id, "surface": checklist(2, 1)})
    card(page, task_id).locator(".live-view[data-revision='2']").wait_for()


# -- security ------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A server on another port of 127.0.0.1 that records every request it gets."""
    hits: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port, hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def hostile_app(leak: str, owner: str) -> dict[str, Any]:
    """An app that reaches for everything it must not have, then reports through setState."""
    js = f"""
(async () => {{
  const r = {{}};
  const attempt = async (name, fn) => {{
    try {{ const got = await fn(); r[name] = got === undefined ? "no error" : String(got).slice(0, 80); }}
    catch (e) {{ r[name] = "refused"; }}
  }};
  await attempt("fetch_listener", () => fetch("{leak}/fetch").then((x) => "reached " + x.status));
  await attempt("fetch_owner_api", () => fetch("{owner}/owner/api/workspace/status")
    .then((x) => "reached " + x.status));
  await attempt("xhr", () => new Promise((ok, no) => {{ const x = new XMLHttpRequest(); x.open("GET", "{leak}/xhr");
    x.onload = () => ok("reached"); x.onerror = () => no(new Error("x")); x.send(); }}));
  await attempt("parent_document", () => parent.document.title);
  await attempt("top_document", () => top.document.cookie);
  await attempt("session_storage", () => sessionStorage.getItem("commonroom.owner"));
  await attempt("local_storage", () => localStorage.length);
  await attempt("cookie", () => document.cookie);
  await attempt("open", () => {{ const w = window.open("{leak}/popup"); return w ? "opened" : null; }});
  const img = new Image(); img.src = "{leak}/img";
  try {{ top.location = "{leak}/top"; r.top_location = "no error"; }} catch (e) {{ r.top_location = "refused"; }}
  // Forged bridge messages: a reply to a request never sent, another task named, an unknown kind.
  parent.postMessage({{ channel: "commonroom-app", kind: "reply", request_id: "apr_forged", reply: "x" }}, "*");
  parent.postMessage({{ channel: "commonroom-app", kind: "setState", id: 7, revision: 0, state: "forged",
    task_id: "tk_other" }}, "*");
  parent.postMessage({{ channel: "commonroom-app", kind: "api", path: "/owner/logout-all" }}, "*");
  parent.postMessage({{ kind: "setState", id: 8, revision: 0, state: "no channel" }}, "*");
  await new Promise((done) => setTimeout(done, 300));
  const {{ revision }} = await commonroom.getState();
  await commonroom.setState(revision, r);
  document.getElementById("submit").click();  // a form post, which the sandbox refuses
  document.body.append(Object.assign(document.createElement("p"), {{ id: "reported", textContent: "reported" }}));
}})();
"""
    return {"version": 1, "manifest": {"title": "Hostile", "networkOrigins": []},
            "html": f'<p>hostile</p><img src="{leak}/html-img"><form action="{leak}/form" method="post">'
                    f'<button id="submit">post</button></form><a id="go" href="{leak}/self">away</a>',
            "css": f"body {{ background: url({leak}/css); }}", "js": js, "initialState": None}


def test_a_hostile_app_gets_nothing(page: Any, room: Room, listener: tuple[int, list[str]]) -> None:
    port, hits = listener
    agent, task_id = accepted_task(room)
    open_page(page, room)
    owner = f"http://127.0.0.1:{room.owner_port}"
    with hosting_declared(page):
        agent.ok("POST", "/workspace/task/app",
                 {"task_id": task_id, "bundle": hostile_app(f"http://127.0.0.1:{port}", owner)})
    card(page, task_id).locator("iframe.task-app").wait_for()
    app = card(page, task_id).frame_locator("iframe.task-app")
    app.locator("#reported").wait_for(state="attached")
    # It never called onRequest: a request to it is answered at once, app_error.
    status, refused, _ = agent.call("POST", "/workspace/task/app/request",
                                    {"task_id": task_id, "payload": {"q": 1}})
    assert status == 503 and refused["details"]["reason"] == "app_error", refused
    assert "no onRequest handler" in refused["message"]
    # The frame navigating itself away: this page's CSP (frame-src, through default-src) refuses it,
    # and the page stops the app (its frame holds an error page now): it hosts it no more.
    with page.expect_console_message(lambda message: "Framing" in message.text), hosting_declared(page):
        app.locator("#go").click(no_wait_after=True)
    card(page, task_id).locator(".task-app-stopped").wait_for()
    assert card(page, task_id).locator("iframe.task-app").count() == 0
    status, refused, _ = agent.call("POST", "/workspace/task/app/request",
                                    {"task_id": task_id, "payload": {"q": 2}})
    assert status == 503 and refused["details"]["reason"] == "no_app_host", refused
    state = agent.ok("GET", f"/workspace/task/surfaces?task_id={task_id}")["surfaces"][0]["app_state"]
    # Only the app's own setState landed: none of the forged ones.
    assert state["revision"] == 1, state
    report = state["state"]
    for name in ("fetch_listener", "fetch_owner_api", "xhr", "parent_document", "top_document",
                 "session_storage", "local_storage", "cookie"):
        assert report[name] == "refused", (name, report)
    assert report["open"] in ("refused", "null")
    assert hits == []  # no request of any kind reached the listener
    # The page is where it was, still logged in and live.
    assert page.url.startswith(f"http://127.0.0.1:{room.owner_port}/")
    assert page.evaluate("() => sessionStorage.getItem('commonroom.owner')")
    assert page.locator("#live-state.ok").count() == 1
    status, answer, _ = Http(room.owner_port).call(
        "GET", "/owner/api/workspace/status",
        headers={"X-Commonroom-Owner": page.evaluate("() => sessionStorage.getItem('commonroom.owner')")})
    assert status == 200, answer


def test_a_script_like_string_in_a_live_view_is_text(page: Any, room: Room) -> None:
    agent, task_id = accepted_task(room)
    open_page(page, room)
    surface = checklist(1, 0, text=SCRIPT)
    surface["root"]["title"] = SCRIPT
    surface["data"]["note"] = SCRIPT
    agent.ok("POST", "/workspace/task/live_view", {"task_id": task_id, "surface": surface})
    view = card(page, task_id).locator(".live-view")
    view.wait_for()
    assert view.locator(".lv-text").inner_text() == SCRIPT
    assert view.locator(".lv-title").inner_text() == SCRIPT
    assert view.locator(".lv-input").input_value() == SCRIPT
    assert view.locator("img, script").count() == 0
    assert page.evaluate("() => window.__pwned") is None


def test_oversized_and_deep_views_and_bundles_are_refused_with_the_path(room: Room) -> None:
    agent, task_id = accepted_task(room)
    deep: dict[str, Any] = {"type": "Text", "text": "deepest"}
    for _ in range(8):
        deep = {"type": "Column", "children": [deep]}
    status, refused, _ = agent.call("POST", "/workspace/task/live_view", {
        "task_id": task_id, "surface": {**checklist(1, 0), "root": deep}})
    assert status == 400 and refused["details"]["path"] == "root" + ".children[0]" * 8
    big = {"type": "Column", "children": [{"type": "Text", "text": "x" * 1500}] * 12}
    status, refused, _ = agent.call("POST", "/workspace/task/live_view", {
        "task_id": task_id, "surface": {**checklist(1, 0), "root": big}})
    assert status == 400 and refused["details"] == {
        "field": "surface", "path": "", "limit_bytes": 16384, "size_bytes": refused["details"]["size_bytes"]}
    status, refused, _ = agent.call("POST", "/workspace/task/app", {
        "task_id": task_id, "bundle": {**CHOOSER, "js": "//" + "x" * 49_000}})
    assert status == 400 and refused["details"]["field"] == "bundle" and refused["details"]["path"] == ""
    status, refused, _ = agent.call("POST", "/workspace/task/app", {
        "task_id": task_id, "bundle": {**CHOOSER, "manifest": {"title": "x", "networkOrigins": ["https://a.example"]}}})
    assert status == 400 and refused["details"]["path"] == "manifest.networkOrigins[0]"
    bad_binding = checklist(1, 0)
    bad_binding["root"]["children"][2]["children"][0]["action"]["path"] = "nowhere"
    status, refused, _ = agent.call("POST", "/workspace/task/live_view", {"task_id": task_id, "surface": bad_binding})
    assert status == 400 and refused["details"]["path"] == "root.children[2].children[0].action.path"


def test_room_text_does_not_read_the_surfaces_again_but_a_task_end_does(page: Any, room: Room) -> None:
    agent, task_id = accepted_task(room)
    agent.ok("POST", "/workspace/task/live_view", {"task_id": task_id, "surface": checklist(1, 0)})
    open_page(page, room)
    card(page, task_id).locator(".live-view").wait_for()
    reads: list[str] = []
    page.on("request", lambda request: reads.append(request.url) if "/task/surfaces" in request.url else None)
    agent.ok("POST", "/workspace/message", {"text": "still on it"})
    page.locator("#messages li", has_text="still on it").wait_for()
    assert reads == []  # a message is no news for the task cards
    handoff = agent.ok("GET", "/workspace/handoffs")["handoffs"][0]
    agent.ok("POST", "/workspace/handoff/result",
             {"handoff_id": handoff["handoff_id"], "status": "completed", "summary": "done"})
    card(page, task_id).locator(".task-by", has_text="the task ended").wait_for()
    assert "ended" in (card(page, task_id).get_attribute("class") or "")
