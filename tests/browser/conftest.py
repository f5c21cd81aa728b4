"""The host's page in a real headless Chromium (Debian's), driven by Playwright.

One browser per module; each test gets a fresh `ce serve` room (a real process,
tests/e2e/conftest.py) and a fresh browser context. Agents act over HTTP on
the room's ingress, exactly as a remote agent would. Chromium must be there:
`tools/ci/install-browser.sh` installs it (tox runs it first); a missing
browser fails the run, it never skips.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commonroom.credentials import read_credentials
from tests.e2e.conftest import SAMPLE, RoomProcess, start_room

CHROMIUM = os.environ.get("COMMONROOM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("COMMONROOM_TEST_ARTIFACTS", REPO / ".test-artifacts"))
AXE = REPO / "tests" / "assets" / "axe.min.js"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run tools/ci/install-browser.sh (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(8000)
    tab = context.new_page()
    tab.dialogs = []  # type: ignore[attr-defined]
    tab.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    try:
        yield tab
    finally:
        context.close()


class Http:
    """Plain HTTP to one listener: JSON in, (status, JSON, headers) out."""

    def __init__(self, port: int, bearer: str | None = None) -> None:
        self.port = port
        self.bearer = bearer

    def call(self, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        if self.bearer:
            request.add_header("Authorization", f"Bearer {self.bearer}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with _opener.open(request, timeout=15) as response:
                raw, status, got = response.read(), response.status, {k.lower(): v for k, v in response.headers.items()}
        except urllib.error.HTTPError as error:
            raw, status, got = error.read(), error.code, {k.lower(): v for k, v in error.headers.items()}
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return status, parsed, got

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer, _ = self.call(method, path, body)
        assert status == 200, (method, path, status, answer)
        return answer


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect())


class Room:
    """A running `ce serve` with its host bearer and helpers to act as agents."""

    def __init__(self, process: RoomProcess, doc: Path) -> None:
        self.process = process
        self.doc = doc
        self.url: str = process.ready["human_url"]
        self.owner_port: int = process.ready["owner_port"]
        creds = read_credentials(doc)
        assert creds is not None
        self.host = Http(process.ready["ingress_port"], creds.host_session)

    def agent(self, name: str = "drafter") -> Http:
        invite = self.host.ok("POST", "/workspace/invite", {})
        joined = Http(self.host.port).ok(
            "POST", "/session/join", {"invite": invite["invitation"], "name": name, "kind": "agent"})
        return Http(self.host.port, joined["session_id"])

    def version(self) -> int:
        return int(self.host.ok("GET", "/workspace/status")["version"])

    def propose(self, agent: Http, region: str, content: str, summary: str) -> dict[str, Any]:
        answer: dict[str, Any] = agent.ok("POST", "/workspace/propose", {
            "region": region, "base_version": self.version(), "summary": summary, "content": content})
        return answer


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE.read_text())
    return path


@pytest.fixture
def room(doc: Path) -> Iterator[Room]:
    process = start_room(doc, "--port-ingress", "0")
    try:
        yield Room(process, doc)
    finally:
        process.close()


# The page holds every decision this long before sending it (app.js UNDO_MS).
UNDO_MS = 8000


def open_page(page: Any, room: Room) -> None:
    # Playwright's clock: time runs as usual, and `pass_undo_window` jumps it forward, so a
    # test never sleeps through the page's undo window.
    page.clock.install()
    page.goto(room.url)
    page.wait_for_selector("body[data-ready='true']")
    page.wait_for_selector("#live-state.ok")


def pass_undo_window(page: Any) -> None:
    """Let every decision the page holds go out (its undo window passes)."""
    page.clock.run_for(UNDO_MS + 100)


def run_axe(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    page.evaluate(AXE.read_text())
    result = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n.get("target") for n in v.get("nodes", [])][:5]}
        for v in result if v.get("impact") in ("serious", "critical")
    ]
