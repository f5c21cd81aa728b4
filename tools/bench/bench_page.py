"""The host's page: how fast an agent's proposal shows up, and what the page weighs.

    python tools/bench/bench_page.py [--proposals 20] [--decided 100]

Starts a real `ce serve` on a copy of samples/idea.md with D proposals already
decided (proposed, then rejected by the host), opens the printed URL in
Debian's headless Chromium (Playwright), then N times: an agent proposes over
HTTP on the ingress and the script times from just before the propose request
until the proposal's row is in the page's queue (`page_proposal_visible_ms`,
TARGETS.md: the page stamps the row's arrival with a MutationObserver, on the
same wall clock), and how many owner-API requests the page made for it. Also
prints the bytes the page loads (HTML, CSS, JS, vendored libraries) and the
time from opening the URL to the page being live.
Bounded: N proposals on 127.0.0.1, then it stops the room.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.e2e.conftest import Room, start_room  # noqa: E402

# Stamps (wall clock, ms) the moment a queue row with this summary is in the page.
_WATCH = """summary => {
  window.__seenAt = null;
  const has = () => [...document.querySelectorAll('#queue-list .summary')].some(n => n.textContent === summary);
  const observer = new MutationObserver(() => {
    if (has()) { window.__seenAt = Date.now(); observer.disconnect(); }
  });
  observer.observe(document.getElementById('queue-list'), { childList: true, subtree: true });
}"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proposals", type=int, default=20)
    parser.add_argument("--decided", type=int, default=100)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="bench-page-"))
    doc = folder / "idea.md"
    shutil.copyfile(REPO / "samples" / "idea.md", doc)
    process = start_room(doc, "--port-ingress", "0")
    try:
        room = Room(process, doc)
        agent = room.agent("bench")
        for i in range(args.decided):  # the history the page lists as decided
            old = room.propose(agent, "Risks", f"## Risks\n\nOld draft {i}.\n\n", f"old draft {i}")
            room.host.ok("POST", "/workspace/proposal/review",
                         {"proposal_id": old["proposal_id"], "decision": "reject", "comment": "no"})
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            loaded: list[int] = []
            api_calls: list[str] = []
            page.on("response", lambda r: loaded.append(len(r.body()))
                    if "/static/" in r.url or r.url.endswith("/") else None)
            page.on("request", lambda r: api_calls.append(r.url) if "/owner/api/" in r.url else None)
            start = time.perf_counter()
            page.goto(room.url)
            page.wait_for_selector("#live-state.ok")
            open_ms = (time.perf_counter() - start) * 1000
            listed = page.locator("#queue-list [data-group='decided'] [data-proposal]").count()
            latencies, calls = [], []
            sections = ["Problem", "Who it is for", "The idea", "Risks", "First milestone", "Open questions"]
            for i in range(args.proposals):
                region = sections[i % len(sections)]
                before = len(api_calls)
                page.evaluate(_WATCH, f"draft {i}")
                t0 = time.time() * 1000
                proposal = room.propose(agent, region, f"## {region}\n\nDraft {i}.\n\n", f"draft {i}")
                page.locator(f"[data-proposal='{proposal['proposal_id']}']").wait_for()
                latencies.append(page.evaluate("window.__seenAt") - t0)
                page.wait_for_timeout(150)  # let the burst's re-reads finish before counting
                calls.append(len(api_calls) - before)
                agent.ok("POST", "/workspace/proposal/withdraw", {"proposal_id": proposal["proposal_id"]})
                page.wait_for_timeout(150)
            browser.close()
        latencies.sort()
        p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
        p99 = latencies[max(0, -(-len(latencies) * 99 // 100) - 1)]
        of = f"of {len(latencies)}" + (": the maximum" if len(latencies) < 100 else "")
        print(f"page_proposal_visible_ms: p99 {p99:.0f} ms ({of}), median {statistics.median(latencies):.0f} ms,"
              f" with {listed} decided proposals listed")
        print(f"page weight: {sum(loaded)} bytes in {len(loaded)} responses (HTML + CSS + JS + vendor)")
        print(f"open URL -> live: {open_ms:.0f} ms")
        print(f"propose sent -> row in the queue: median {statistics.median(latencies):.0f} ms,"
              f" p95 {p95:.0f} ms, max {latencies[-1]:.0f} ms over {len(latencies)} proposals")
        print(f"owner-API requests per proposal (re-reads after its events): median {statistics.median(calls):.0f},"
              f" max {max(calls)}")
    finally:
        process.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
