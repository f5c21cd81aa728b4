"""Refresh docs/page.png: the host's page in Debian's Chromium, on a room with some life in it.

    python tools/page_screenshot.py [--out docs/page.png]

A real `ce serve` on a copy of samples/idea.md; two agents over HTTP: one holds a lease and
has a proposal pending (open in the review), one proposal approved and awaiting its commit,
one rejected with a comment, a handoff asked of the host and a turn of room text. Then a
1280x900 screenshot of the top of the page. Bounded: it stops the room and the browser.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.e2e.conftest import Room, start_room  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "page.png")
    parser.add_argument("--full", type=Path, help="Also a full-page screenshot here (panels included).")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="page-shot-"))
    doc = folder / "idea.md"
    shutil.copyfile(REPO / "samples" / "idea.md", doc)
    process = start_room(doc, "--port-ingress", "0")
    try:
        room = Room(process, doc)
        drafter, editor = room.agent("drafter"), room.agent("editor")
        drafter.ok("POST", "/workspace/checkout", {"region": "Problem", "minutes": 15})
        problem = room.host.ok("GET", "/workspace/read?region=Problem")["content"]
        rewritten = problem.replace("are far away for many people,", "are a long bus ride for most readers,")
        pending = room.propose(drafter, "Problem", rewritten, "Say why libraries do not help")
        idea = room.host.ok("GET", "/workspace/read?region=The%20idea")["content"]
        approved = room.propose(editor, "The idea", idea.replace("a gentle reminder", "a friendly reminder"),
                                "Friendlier reminder")
        room.host.ok("POST", "/workspace/proposal/review", {"proposal_id": approved["proposal_id"],
                                                            "decision": "approve"})
        risks = room.host.ok("GET", "/workspace/read?region=Risks")["content"]
        rejected = room.propose(editor, "Risks", risks + "- Nobody joins.\n\n", "Add a risk")
        room.host.ok("POST", "/workspace/proposal/review", {
            "proposal_id": rejected["proposal_id"], "decision": "reject", "comment": "too vague"})
        host = next(p for p in room.host.ok("GET", "/workspace/room")["participants"]
                    if "*" in p["capabilities"])
        editor.ok("POST", "/workspace/handoff", {"to_participant_id": host["participant_id"],
                                                 "summary": "Choose a name for the app"})
        drafter.ok("POST", "/workspace/message", {"text": "Problem is ready for review."})
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(room.url)
                page.wait_for_selector("body[data-ready='true']")
                page.locator(f"[data-proposal='{pending['proposal_id']}']").click()
                page.locator("#review-body ins").first.wait_for()
                page.mouse.move(5, 5)
                page.wait_for_timeout(300)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.out))
                if args.full:
                    page.screenshot(path=str(args.full), full_page=True)
            finally:
                browser.close()
        print(f"wrote {args.out}")
    finally:
        process.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
