"""The page's provenance parts in real Chromium (issue 23): the blame gutter and its legend,
revert and restore on history entries, the Policies panel and its kill switch."""

from __future__ import annotations

import time
from typing import Any

from tests.browser.conftest import ARTIFACTS, open_page, run_axe
from tests.e2e.conftest import Http, Room

TOP = "Shelf Swap: a neighbourhood book exchange app"
PROBLEM = f"{TOP}/Problem"
RISKS = f"{TOP}/Risks"


def join(room: Room, name: str) -> tuple[Http, str]:
    invite = room.host.ok("POST", "/workspace/invite", {})
    joined = Http(room.host.port).ok(
        "POST", "/session/join", {"invite": invite["invitation"], "name": name, "kind": "agent"})
    return Http(room.host.port, joined["session_id"]), str(joined["participant_id"])


def land(room: Room, agent: Http, region: str, content: str, summary: str,
         amend: str | None = None) -> dict[str, Any]:
    proposal = room.propose(agent, region, content, summary)
    review: dict[str, Any] = {"proposal_id": proposal["proposal_id"],
            "revision": proposal["revision"], "decision": "approve"}
    if amend is not None:
        review["content"] = amend
    room.host.ok("POST", "/workspace/proposal/review", review)
    committed: dict[str, Any] = agent.ok("POST", "/workspace/commit",
                                         {"proposal_id": proposal["proposal_id"]})
    return committed


def region_text(room: Room, region: str) -> str:
    return str(room.host.ok("GET", f"/workspace/read?region={region.replace(' ', '%20')}")["content"])


def test_blame_gutter_revert_restore_and_policies(page: Any, room: Room) -> None:
    ada, _ = join(room, "ada")
    bob, bob_id = join(room, "bob")
    first = land(room, ada, PROBLEM, "## Problem\n\nReaders keep books they read once.\n\n",
                 "sharpen the problem")
    risks = region_text(room, RISKS)
    land(room, bob, RISKS, risks + "A flood of paperbacks.\n\n", "add a risk",
         amend=risks + "A flood of hardbacks.\n\n")
    before = room.version()
    room.doc.write_text(room.doc.read_text().replace("## Open questions", "## Open questions (host)"))
    deadline = time.monotonic() + 15
    while room.version() == before:
        assert time.monotonic() < deadline, "the host save was never recorded"
        time.sleep(0.1)

    open_page(page, room)
    page.click("#blame-toggle")
    page.locator("#blame-lines li").first.wait_for()
    assert page.locator("#document").is_hidden()
    legend = page.locator("#blame-legend li").all_inner_texts()
    assert any(text.startswith("ada (agent)") for text in legend), legend
    assert any(text.startswith("bob (agent)") for text in legend), legend
    assert any("(own saves)" in text for text in legend), legend
    line = page.locator(".blame-line", has_text="Readers keep books they read once.")
    assert line.get_attribute("data-version") == str(first["version"])
    ada_colour = line.locator(".who").evaluate("node => getComputedStyle(node).backgroundColor")
    amended = page.locator(".blame-line.amended", has_text="A flood of hardbacks.")
    assert "amended by" in amended.inner_text()
    bob_colour = amended.locator(".who").evaluate("node => getComputedStyle(node).backgroundColor")
    saved = page.locator(".blame-line", has_text="## Open questions (host)")
    host_colour = saved.locator(".who").evaluate("node => getComputedStyle(node).backgroundColor")
    assert len({ada_colour, bob_colour, host_colour}) == 3
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "blame.png"), full_page=True)
    assert run_axe(page) == []

    # revert that merges, from the history entry of ada's version
    entry = page.locator("#history li", has_text=f"v{first['version']} ")
    entry.locator(".history-revert").click()
    entry.locator(".history-result", has_text="reverted").wait_for()
    assert "Readers keep books they read once." not in room.doc.read_text()
    assert "A flood of hardbacks." in room.doc.read_text()
    # the gutter follows: ada's line is gone, bob's stays
    page.locator(".blame-line", has_text="A flood of hardbacks.").wait_for()
    page.locator(".blame-line", has_text="Readers keep books they read once.").wait_for(state="detached")

    # revert that conflicts: bob's line changed again since
    land(room, bob, RISKS, region_text(room, RISKS).replace("hardbacks", "comics"), "comics")
    text = room.doc.read_text()
    risk_entry = page.locator("#history li", has_text="add a risk")
    risk_entry.locator(".history-revert").click()
    risk_entry.locator(".history-result", has_text="Later changes touched the same lines").wait_for()
    assert room.doc.read_text() == text

    # restore the section to what it was at the "add a risk" version
    risk_entry = page.locator("#history li", has_text="add a risk")
    risk_entry.locator(".history-restore").click()
    risk_entry.locator(".history-result", has_text="restored").wait_for()
    assert "A flood of hardbacks." in room.doc.read_text()

    # policies: one approves a one-line fix, shows it, and the kill switch stops it
    policy = room.host.ok("POST", "/workspace/policy", {
        "participant_id": bob_id, "region_pattern": f"{TOP}/*", "max_changed_lines": 1})
    fix = room.propose(bob, RISKS, region_text(room, RISKS).replace("hardbacks", "hardcovers"),
                       "one-word fix")
    assert fix["status"] == "approved"
    row = page.locator(f"[data-policy='{policy['policy_id']}']")
    row.locator(f"[data-proposal='{fix['proposal_id']}']").wait_for()
    assert "active" in row.inner_text() and "approved 1" in row.inner_text()
    bob.ok("POST", "/workspace/commit", {"proposal_id": fix["proposal_id"]})
    # the same policy leaves a 30-line change to the host: it waits in the queue
    thirty = "## Risks\n\n" + "".join(f"- risk {n}\n" for n in range(30)) + "\n"
    big = room.propose(bob, RISKS, thirty, "thirty risks")
    assert big["status"] == "pending"
    page.locator("#queue-list li", has_text="thirty risks").wait_for()
    # and a change under the host's editing hold is refused before any policy sees it
    room.doc.write_text(room.doc.read_text().replace("## First milestone\n",
                                                     "## First milestone\n\nHost typing.\n", 1))
    milestone = f"{TOP}/First milestone"
    deadline = time.monotonic() + 15
    while not any(lease.get("reason") == "human_editing" and lease["region"] == milestone
                  for lease in room.host.ok("GET", "/workspace/leases")["leases"]):
        assert time.monotonic() < deadline, "the save never held First milestone"
        time.sleep(0.1)
    status, held, _ = bob.call("POST", "/workspace/propose", {
        "region": milestone, "base_version": room.version(), "summary": "typo",
        "content": region_text(room, milestone).replace("Host typing.", "Host typed.")})
    assert status == 409 and held["details"]["reason"] == "human_editing"
    assert "approved 1" in row.inner_text()
    page.screenshot(path=str(ARTIFACTS / "policies.png"), full_page=True)
    page.click("#policies-kill")
    row.locator("strong", has_text="paused").wait_for()
    assert room.host.ok("GET", "/workspace/policies")["policies"][0]["paused"] is True
    bob.ok("POST", "/workspace/proposal/withdraw", {"proposal_id": big["proposal_id"]})
    again = room.propose(bob, RISKS, region_text(room, RISKS).replace("hardcovers", "hardbacks"),
                         "one-word fix again")
    assert again["status"] == "pending"
    page.locator("#queue-list li", has_text="one-word fix again").wait_for()
    assert run_axe(page) == []
