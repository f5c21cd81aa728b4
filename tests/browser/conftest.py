"""The host's page in a real headless Chromium (Debian's), driven by Playwright.

One browser per module; each test gets a fresh `ce serve` room (a real process,
tests/e2e/conftest.py's `Room`) and a fresh browser context. Agents act over HTTP on
the room's ingress, exactly as a remote agent would. Chromium must be there:
`tools/ci/install-browser.sh` installs it (tox runs it first); a missing
browser fails the run, it never skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The e2e fixtures (profiles in a temp folder; `doc`), for this folder too.
from tests.e2e.conftest import Room, config_home, doc, serving  # noqa: F401

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


@pytest.fixture
def room(doc: Path) -> Iterator[Room]:  # noqa: F811 - the fixture
    with serving(doc) as room:
        yield room


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


_BOXES_JS = """targets => targets.map(([selector, text]) => {
  const found = [...document.querySelectorAll(selector)]
    .find(el => text === null || el.textContent.includes(text));
  if (!found) return null;
  const r = found.getBoundingClientRect();
  return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height};
})"""


def boxes(page: Any, *targets: str | tuple[str, str]) -> list[dict[str, float]]:
    """The boxes of the first element matching each target (a CSS selector, or a selector and
    a text it contains), in page coordinates and measured in one go: two separate
    `bounding_box()` calls are viewport-relative and a scroll or a live update between them
    moves one and not the other."""
    pairs = [(t, None) if isinstance(t, str) else t for t in targets]
    found: list[dict[str, float] | None] = page.evaluate(_BOXES_JS, pairs)
    assert all(box is not None for box in found), (targets, found)
    return [box for box in found if box is not None]
