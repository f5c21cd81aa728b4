"""The host's page: how fast an agent's proposal shows up, and what the page weighs.

    python tools/bench/bench_page.py [--proposals 20]

Starts a real `ce serve` on a copy of samples/idea.md, opens the printed URL in
Debian's headless Chromium (Playwright), then N times: an agent proposes over
HTTP on the ingress and the script times until the proposal's row is in the
page (propose answered -> row visible), and how many owner-API requests the
page made for it. Also prints the bytes the page loads (HTML, CSS, JS, vendored
libraries) and the time from opening the URL to the page being live.
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

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, Room  # noqa: E402
from tests.e2e.conftest import start_room  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proposals", type=int, default=20)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="bench-page-"))
    doc = folder / "idea.md"
    shutil.copyfile(REPO / "samples" / "idea.md", doc)
    process = start_room(doc, "--port-ingress", "0")
    try:
        room = Room(process, doc)
        agent = room.agent("bench")
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
            latencies, calls = [], []
            sections = ["Problem", "Who it is for", "The idea", "Risks", "First milestone", "Open questions"]
            for i in range(args.proposals):
                region = sections[i % len(sections)]
                before = len(api_calls)
                proposal = room.propose(agent, region, f"## {region}\n\nDraft {i}.\n\n", f"draft {i}")
                t0 = time.perf_counter()
                page.locator(f"[data-proposal='{proposal['proposal_id']}']").wait_for()
                latencies.append((time.perf_counter() - t0) * 1000)
                page.wait_for_timeout(150)  # let the burst's re-reads finish before counting
                calls.append(len(api_calls) - before)
                agent.ok("POST", "/workspace/proposal/withdraw", {"proposal_id": proposal["proposal_id"]})
                page.wait_for_timeout(150)
            browser.close()
        latencies.sort()
        p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
        print(f"page weight: {sum(loaded)} bytes in {len(loaded)} responses (HTML + CSS + JS + vendor)")
        print(f"open URL -> live: {open_ms:.0f} ms")
        print(f"propose answered -> row visible: median {statistics.median(latencies):.0f} ms,"
              f" p95 {p95:.0f} ms, max {latencies[-1]:.0f} ms over {len(latencies)} proposals")
        print(f"owner-API requests per proposal (re-reads after its events): median {statistics.median(calls):.0f},"
              f" max {max(calls)}")
    finally:
        process.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
