"""Issue 24 item 1: one click on an agent's link handed the agent the host's page login.

The attack as it ran on main: an agent with a default invitation put
`http://127.0.0.1:<its port>/...` in a proposal; the owner page rendered it as
a link; the click sent the HttpOnly SameSite=Strict cookie along (cookies
are scoped by host, not port, and the click is same-site); the agent's
listener replayed it without a browser: `GET /` gave the CSRF token, then it
approved its own proposal and minted an unlimited admin invitation.

Here, for real: a `ce serve` process, a real Chromium logged in through the
printed link, and a separate listener process (tools/hostile/owner_listener.py)
on its own 127.0.0.1 port that replays whatever reaches it against every
owner route. The page must show the agent's loopback links as text, and when
the browser is made to visit the listener anyway (from the owner tab, as a
click would), everything the listener got must be worth nothing: 401 on
every owner route, and nothing in any answer a replay could use.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from queue import Empty, Queue
from typing import Any
from urllib.parse import urlsplit

from tools.hostile import owner_listener

from tests.browser.conftest import ARTIFACTS, browser, page  # noqa: F401 - the fixtures
from tests.e2e.conftest import Room

REPO = Path(__file__).resolve().parents[2]


class Listener:
    """The agent's listener process: its port, and the report of each request it received."""

    def __init__(self, owner_port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tools" / "hostile" / "owner_listener.py"),
             "--owner-port", str(owner_port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert self.proc.stdout is not None
        self.port = int(json.loads(self.proc.stdout.readline())["port"])
        self.reports: Queue[dict[str, Any]] = Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.reports.put(json.loads(line))

    def report_of(self, target: str, timeout: float = 30.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The report of the request for `target` (path and query), and the reports before it.

        The browser also asks the listener's page for `/favicon.ico` (its Referer is that
        page), and the listener answers before it replays, one thread a request: under load
        that report may come first.
        """
        before: list[dict[str, Any]] = []
        while True:
            try:
                report = self.reports.get(timeout=timeout)
            except Empty:
                raise AssertionError(f"the listener never received {target}; got {len(before)}"
                                     " other requests") from None
            if report["received"]["path"] == target:
                return report, before
            before.append(report)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_a_click_on_an_agents_loopback_link_gives_its_listener_nothing(
        served: Room, page: Any) -> None:  # noqa: F811 - the fixture
    room, owner_port = served, served.owner_port
    listener = Listener(owner_port)
    try:
        bait = f"http://127.0.0.1:{listener.port}/report?token=steal"
        agent = room.join("bot")
        status = room.ok("GET", "/workspace/status", agent["session_id"])
        content = (
            "## Problem\n\nSee [the full report](" + bait + ") before approving.\n"
            f"Also <http://localhost:{listener.port}/a>, [v6](http://[::1]:{listener.port}/b),"
            f" [any](http://0.0.0.0:{listener.port}/c), [sub](http://admin.localhost:{listener.port}/d),"
            f" [decimal](http://2130706433:{listener.port}/e) and [docs](https://example.org/guide).\n"
        )
        proposal = room.ok("POST", "/workspace/propose", agent["session_id"], {
            "region": "Problem", "base_version": status["version"], "summary": "tighter problem",
            "content": content})

        page.goto(room.url)
        page.wait_for_selector("body[data-ready='true']")
        page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
        body = page.locator("#review-body")
        body.locator(".link-refused", has_text="the full report").wait_for()
        # Every loopback link is text with its address beside it; the outside link stays a link.
        hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
        assert not [h for h in hrefs if f":{listener.port}" in h], hrefs
        assert "https://example.org/guide" in hrefs
        refused = body.locator(".link-refused")
        assert refused.count() == 6
        assert bait in body.inner_text() and f"http://localhost:{listener.port}/a" in body.inner_text()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "page-refused-links.png"), full_page=False)
        refused.first.click()  # clicking the text goes nowhere
        assert listener.reports.empty()

        # The browser visits the listener anyway, from the owner tab, as a click on a link
        # would (same site; it would carry a 127.0.0.1 cookie and the page as Referer).
        page.evaluate("url => location.assign(url)", bait)
        page.wait_for_url(bait)
        report, others = listener.report_of(urlsplit(bait).path + "?" + urlsplit(bait).query)
        got = {k.lower(): v for k, v in report["received"]["headers"].items()}
        rode_along = sorted(k for k in ("cookie", "referer") if k in got)
        assert not rode_along, rode_along  # nothing rode along (names only: a value may be secret)
        owner_page = f"http://127.0.0.1:{owner_port}"
        for other in others:  # what the listener's own page asked for (its icon): no more
            headers = {k.lower(): v for k, v in other["received"]["headers"].items()}
            assert "cookie" not in headers, other["received"]["path"]
            assert not headers.get("referer", "").startswith(owner_page), other["received"]["path"]
        for replayed in (report["replayed"], *(other["replayed"] for other in others)):
            owner_routes = [r for r in replayed if r["path"] != "/"]
            tried = {(r["method"], r["path"]) for r in owner_routes}
            assert set(owner_listener.owner_routes()) | {("POST", "/owner/login")} <= tried  # all
            assert {r["status"] for r in owner_routes} == {401}, \
                [r for r in owner_routes if r["status"] != 401]
            assert not [r for r in replayed if r["leak"]], replayed  # and nothing worth taking

        # Back on the owner page (same tab): still logged in; the proposal is untouched.
        page.go_back()
        page.wait_for_selector("body[data-ready='true']")
        page.wait_for_selector("#live-state.ok")
        detail = room.ok("GET", f"/workspace/proposal?proposal_id={proposal['proposal_id']}",
                         room.host_session)
        assert detail["status"] == "pending"
    finally:
        listener.close()
