"""Refresh docs/page.png: the host's page in Debian's Chromium, on a room with some life in it.

    python tools/page_screenshot.py [--out docs/page.png] [--blame PATH]

A real `ce serve` on a copy of samples/idea.md; two agents over HTTP. One change has landed
already (version 2); one agent holds a lease and has a proposal pending (open in the review);
another proposal is approved and awaiting its commit, one is rejected with a comment (which
opens a thread on its section); an agent asks about a quoted line (a thread in the margin);
a handoff is asked of the host and a turn of room text was said. The shot is the page at
1280 wide from the top down to the participants panel. With pngquant on PATH the file is
reduced to 256 colours (about a third of the size). `--blame PATH` also shoots
the document as "Who wrote this" shows it. Bounded: it stops the room and the browser.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.e2e.conftest import Room, start_room  # noqa: E402

# Where the shot ends: the bottom of the participants panel (the row of panels below the columns).
_SHOT_BOTTOM = ("Math.ceil(document.getElementById('people').closest('section')"
                ".getBoundingClientRect().bottom + scrollY + 16)")


def _fill_the_room(room: Room) -> dict[str, str]:
    """Agents at work; returns the pending proposal the shot has open."""
    drafter, editor = room.agent("drafter"), room.agent("editor")
    questions = room.host.ok("GET", "/workspace/read?region=Open%20questions")["content"]
    asked = questions + "- Who keeps the catalogue when a member moves away?\n\n"
    landed = room.propose(editor, "Open questions", asked, "Ask what happens when a member moves")
    room.host.ok("POST", "/workspace/proposal/review", {"proposal_id": landed["proposal_id"],
            "revision": landed["revision"], "decision": "approve"})
    editor.ok("POST", "/workspace/commit", {"proposal_id": landed["proposal_id"]})
    drafter.ok("POST", "/workspace/checkout", {"region": "Problem", "minutes": 15})
    problem = room.host.ok("GET", "/workspace/read?region=Problem")["content"]
    rewritten = problem.replace("are far away for many people,", "are a long bus ride for most readers,")
    pending = room.propose(drafter, "Problem", rewritten, "Say why libraries do not help")
    idea = room.host.ok("GET", "/workspace/read?region=The%20idea")["content"]
    approved = room.propose(editor, "The idea", idea.replace("a gentle reminder", "a friendly reminder"),
                            "Friendlier reminder")
    room.host.ok("POST", "/workspace/proposal/review", {"proposal_id": approved["proposal_id"],
            "revision": approved["revision"], "decision": "approve"})
    risks = room.host.ok("GET", "/workspace/read?region=Risks")["content"]
    rejected = room.propose(editor, "Risks", risks + "- Nobody joins.\n\n", "Add a risk")
    room.host.ok("POST", "/workspace/proposal/review", {
        "proposal_id": rejected["proposal_id"], "decision": "reject",
        "comment": "Too vague: which part of joining do you expect to fail?"})
    editor.ok("POST", "/workspace/thread", {
        "region": "Who it is for", "quote": "Parents whose children outgrow picture books",
        "body": "Is this a second audience, or the same readers with children?"})
    host = next(p for p in room.host.ok("GET", "/workspace/room")["participants"] if "*" in p["capabilities"])
    editor.ok("POST", "/workspace/handoff", {"to_participant_id": host["participant_id"],
                                             "summary": "Choose a name for the app"})
    drafter.ok("POST", "/workspace/message", {"text": "Problem is ready for review."})
    return pending


def _fewer_colours(path: Path) -> None:
    """256 colours through pngquant (apt-get install pngquant), when it is there: a third of
    the size, and no visible difference on flat UI colours."""
    if shutil.which("pngquant") is None:
        print("pngquant is not installed: the file keeps every colour", file=sys.stderr)
        return
    subprocess.run(["pngquant", "--force", "--skip-if-larger", "--speed", "1", "--output", str(path),
                    "256", "--", str(path)], check=False, timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "page.png")
    parser.add_argument("--blame", type=Path, help="Also the top of the page with 'Who wrote this' on, here.")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="page-shot-"))
    doc = folder / "idea.md"
    shutil.copyfile(REPO / "samples" / "idea.md", doc)
    process = start_room(doc, "--port-ingress", "0")
    try:
        room = Room(process, doc)
        pending = _fill_the_room(room)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(room.url)
                page.wait_for_selector("body[data-ready='true']")
                page.locator("mark.thread-quote").first.wait_for()
                page.locator(f"[data-proposal='{pending['proposal_id']}']").click()
                page.locator("#review-body ins").first.wait_for()
                page.mouse.move(5, 5)
                page.wait_for_timeout(300)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                bottom = int(page.evaluate(_SHOT_BOTTOM))
                page.screenshot(path=str(args.out), full_page=True,
                                clip={"x": 0, "y": 0, "width": 1280, "height": bottom})
                _fewer_colours(args.out)
                print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB)")
                if args.blame:
                    page.click("#blame-toggle")
                    page.locator("#blame-lines li").first.wait_for()
                    page.screenshot(path=str(args.blame))
                    _fewer_colours(args.blame)
                    print(f"wrote {args.blame}")
            finally:
                browser.close()
    finally:
        process.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
