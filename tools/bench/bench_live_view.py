"""Task surfaces: how fast an agent's live view shows up in the host's page (`live_view_visible_ms`).

    python tools/bench/bench_live_view.py [--views 20]

Starts a real `ce serve` on a copy of samples/idea.md, has the host hand a task to an agent
that accepts it, opens the printed URL in Debian's headless Chromium (Playwright), then N
times: the agent publishes the next revision of its live view (a checklist card with a
counter) over HTTP on the ingress, timed from just before the `task/live_view` request until
the view's new text is in the page (TARGETS.md: the page stamps it with a MutationObserver,
on the same wall clock), and how many owner-API requests the page made for it.
Bounded: N views on 127.0.0.1, then it stops the room.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.e2e.conftest import Room, start_room  # noqa: E402

# Stamps (wall clock, ms) the moment a live view holding this text is in the page.
_WATCH = """text => {
  window.__seenAt = null;
  const has = () => [...document.querySelectorAll('.live-view .lv-text')].some(n => n.textContent === text);
  const observer = new MutationObserver(() => {
    if (has()) { window.__seenAt = Date.now(); observer.disconnect(); }
  });
  observer.observe(document.body, { childList: true, subtree: true, characterData: true });
}"""


def view(revision: int) -> dict[str, Any]:
    return {
        "surface_id": "progress", "revision": revision,
        "root": {"type": "Card", "title": "Rewrite the Risks section", "children": [
            {"type": "Text", "text": f"step {revision}"},
            {"type": "Row", "children": [
                {"type": "Value", "path": "done", "label": "Done"},
                {"type": "Value", "path": "left", "label": "Left"},
                {"type": "Button", "label": "+1", "action": {"type": "increment", "path": "done"}},
            ]},
        ]},
        "data": {"done": revision, "left": 100 - revision},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--views", type=int, default=20)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="bench-live-view-"))
    doc = folder / "idea.md"
    shutil.copyfile(REPO / "samples" / "idea.md", doc)
    process = start_room(doc, "--port-ingress", "0")
    try:
        room = Room(process, doc)
        agent = room.agent("bench")
        agent_id = agent.ok("GET", "/workspace/ping")["participant_id"]
        handoff = room.host.ok("POST", "/workspace/handoff",
                               {"to_participant_id": agent_id, "summary": "Rewrite Risks"})
        task_id = agent.ok("POST", "/workspace/handoff/respond",
                           {"handoff_id": handoff["handoff_id"], "decision": "accept"})["task_id"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            api_calls: list[str] = []
            page.on("request", lambda r: api_calls.append(r.url) if "/owner/api/" in r.url else None)
            page.goto(room.url)
            page.wait_for_selector("#live-state.ok")
            latencies, calls = [], []
            for revision in range(1, args.views + 1):
                before = len(api_calls)
                page.evaluate(_WATCH, f"step {revision}")
                t0 = time.time() * 1000
                agent.ok("POST", "/workspace/task/live_view", {"task_id": task_id, "surface": view(revision)})
                page.locator(f".live-view[data-revision='{revision}']").wait_for()
                latencies.append(page.evaluate("window.__seenAt") - t0)
                page.wait_for_timeout(150)  # let the burst's re-reads finish before counting
                calls.append(len(api_calls) - before)
            browser.close()
        latencies.sort()
        p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
        p99 = latencies[max(0, -(-len(latencies) * 99 // 100) - 1)]
        of = f"of {len(latencies)}" + (": the maximum" if len(latencies) < 100 else "")
        print(f"live_view_visible_ms: p99 {p99:.0f} ms ({of}), median {statistics.median(latencies):.0f} ms,"
              f" p95 {p95:.0f} ms, max {latencies[-1]:.0f} ms over {len(latencies)} revisions")
        print(f"owner-API requests per revision: median {statistics.median(calls):.0f}, max {max(calls)}")
    finally:
        process.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
