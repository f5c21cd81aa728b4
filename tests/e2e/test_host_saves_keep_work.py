"""The host's saves and the agents' work never destroy each other (docs/spec/PROTOCOL.md 16, wave 4).

On a real `ce serve` (default settle, 250 ms; default 2-minute human-editing hold),
the file saved as editors do:

- the host changes one word of a section's first sentence while an agent's
  pending proposal changes its last one: the proposal is rebased onto the save
  (`by: host_editor`), stays pending, and commits after approval with both edits;
- a save that pauses 0.8 s (truncate, write 700 bytes, pause, write the rest)
  is recorded in two steps, and once the whole save is recorded no thread is
  outdated, no lease is lost, no proposal is superseded, and holds stand only on
  the section it changed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Room, start_room

pytestmark = pytest.mark.e2e

SECTIONS = 14


def section(n: int, first: str = "It starts here") -> str:
    return (f"## S{n}\n\n{first} in section {n}.\nThe middle of section {n} goes on a while.\n"
            f"Section {n} ends with this sentence.\n\n")


TEXT = "# Plan\n\nThe host's plan.\n\n" + "".join(section(n) for n in range(SECTIONS))


def save_in_pieces(path: Path, text: str, first: int | None = None, pause: float = 0.0) -> None:
    """Truncate, write (the first `first` bytes, pause, the rest), as editors save in place."""
    data = text.encode()
    with open(path, "r+b", buffering=0) as handle:
        handle.truncate(0)
        if first is not None:
            handle.write(data[:first])
            time.sleep(pause)  # the editor's pause itself: what this test is about
            data = data[first:]
        handle.write(data)


def wait_for(predicate: Any, what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def approve(room: Room, proposal_id: str) -> None:
    """The host approves the revision it read (the one place this module writes a review)."""
    shown = room.ok("GET", f"/workspace/proposal?proposal_id={proposal_id}", room.host_session)
    room.ok("POST", "/workspace/proposal/review", room.host_session,
            {"proposal_id": proposal_id, "decision": "approve", "revision": shown["revision"]})


def current_text(room: Room) -> str:
    return str(room.read(room.host_session, "workspace")["content"])


def test_a_host_edit_in_the_same_section_rebases_the_agents_proposal(tmp_path: Path) -> None:
    doc = tmp_path / "plan.md"
    doc.write_text(TEXT)
    process = start_room(doc, "--port-ingress", "0")
    try:
        room = Room(process, doc)
        agent = room.agent("ada")
        agents_s3 = section(3).replace("ends with this sentence", "ends with a better sentence")
        pid = room.propose(agent, "S3", agents_s3, "a better ending")["proposal_id"]

        saved = TEXT.replace("It starts here in section 3", "It really starts here in section 3")
        save_in_pieces(doc, saved)
        wait_for(lambda: current_text(room) == saved, "the host's save recorded")
        detail = agent.ok("GET", f"/workspace/proposal?proposal_id={pid}")
        assert detail["status"] == "pending" and detail["stale"] is False
        assert detail["revision"] == 2 and detail["rebased"] is True
        assert detail["revisions"][-1]["by"] == "host_editor"
        assert detail["base_version"] == room.version()
        # The diff is taken against the saved text: the agent's sentence only, not the
        # host's word taken back.
        changed = [line for line in detail["diff"].splitlines()
                   if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        assert changed == ["-Section 3 ends with this sentence.",
                           "+Section 3 ends with a better sentence."]

        # The host's save holds S3; the host approves, lets go of the hold, the agent commits.
        leases = room.host.ok("GET", "/workspace/leases")["leases"]
        hold = next(lease for lease in leases if lease["reason"] == "human_editing")
        assert hold["region"] == "Plan/S3"
        approve(room, pid)
        refused = agent.call("POST", "/workspace/commit", {"proposal_id": pid})
        assert refused[0] == 409 and refused[1]["details"]["reason"] == "human_editing"
        room.host.ok("POST", "/workspace/release", {"lease_id": hold["lease_id"]})
        agent.ok("POST", "/workspace/commit", {"proposal_id": pid})
        final = doc.read_text()
        assert "It really starts here in section 3." in final
        assert "Section 3 ends with a better sentence." in final
        assert final == saved.replace(section(3, "It really starts here"),
                                      agents_s3.replace("It starts", "It really starts"))
        assert "Traceback" not in process.stderr_path.read_text()
    finally:
        process.close()


def test_a_save_paused_past_the_settle_period_does_no_lasting_harm(tmp_path: Path) -> None:
    doc = tmp_path / "plan.md"
    doc.write_text(TEXT)
    process = start_room(doc, "--port-ingress", "0")
    try:
        room = Room(process, doc)
        agent = room.agent("ada")
        # A thread quoting S8, a lease on S9: both sections lie past the save's first write.
        thread = agent.ok("POST", "/workspace/thread", {
            "region": "S8", "body": "is this right?", "quote": "The middle of section 8"})["thread_id"]
        lease = agent.ok("POST", "/workspace/checkout", {"region": "S9", "minutes": 30})["lease_id"]
        pid = room.propose(agent, "S10", section(10, "It starts late"), "later")["proposal_id"]
        assert len(TEXT.encode()) > 1400

        saved = TEXT.replace("It starts here in section 1.", "It starts right here in section 1.")
        save_in_pieces(doc, saved, first=700, pause=0.8)
        wait_for(lambda: current_text(room) == saved, "the whole save recorded")

        threads = {t["thread_id"]: t for t in agent.ok("GET", "/workspace/threads")["threads"]}
        assert threads[thread]["status"] == "open"
        assert all(t["status"] != "outdated" for t in threads.values())
        leases = room.host.ok("GET", "/workspace/leases")["leases"]
        assert lease in {item["lease_id"] for item in leases}
        holds = {item["region"] for item in leases if item["reason"] == "human_editing"}
        assert holds == {"Plan/S1"}
        assert agent.ok("GET", f"/workspace/proposal?proposal_id={pid}")["status"] == "pending"
        events = room.host.ok("GET", "/workspace/history?limit=200")["events"]
        types = [event["type"] for event in events]
        saves = [event for event in events if event["type"] == "change.committed"
                 and event["payload"]["source"] == "external"]
        if len(saves) == 2:  # seen half-way (the usual case): the cut-off part came back
            assert "thread.outdated" in types and "thread.reanchored" in types
        assert not [event for event in events if event["type"] in ("lease.released", "lease.expired")
                    and event["payload"]["lease_id"] == lease]
        assert "Traceback" not in process.stderr_path.read_text()
    finally:
        process.close()
