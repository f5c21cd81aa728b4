"""Issue 23: SIGKILL a real `ce serve` inside a revert, a restore and the commit of a
policy-approved proposal, at the write points (`COMMONROOM_FAULT`), and right after a
policy approval was acknowledged; the restart loses nothing acknowledged, and the new
write landed whole or not at all (its version, its file, its line history).

Built on the crash harness's room and HTTP helpers (tools/fault/crash.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from tools.fault import crash
from tools.fault.crash import CheckFailed, Room
from tools.fault.forkserver import ForkServer

from commonroom.store.faults import POINTS

pytestmark = pytest.mark.e2e

TOP = "Crash provenance"
DOC = f"# {TOP}\n\n## Alpha\n\nalpha one\n\n## Beta\n\nbeta one\n"
# A revert is killed at every write point: before COMMIT it is rolled back, after it (the old
# file) rolled forward on open, after the rename marked written. Each kill is two starts of
# `ce serve`, forked (tools/fault/forkserver.py), so they cost ~0.3 s, not ~2 s.
REVERT_POINTS = POINTS
OTHER_POINTS = ("after_commit",)


class Crew:
    """The room under test across restarts: the host, one agent, what was acknowledged."""

    def __init__(self, folder: Path, launcher: ForkServer) -> None:
        self.launcher = launcher
        self.doc = folder / "doc.md"
        self.doc.write_text(DOC)
        self.runtime = folder / "runtime"
        self.runtime.mkdir(mode=0o700)
        self.room: Room | None = None
        self.agent = ""
        self.agent_id = ""
        self.acked: dict[int, str] = {}  # version -> content_hash

    def start(self, fault: str | None = None) -> Room:
        room = Room(self.doc, self.runtime, fault, launcher=self.launcher)
        if not room.wait_ready():
            room.close()
            raise CheckFailed(f"the room died while starting ({fault})")
        self.room = room
        if not self.agent:
            joined = crash.ok(room.port, "POST", "/session/join",
                              body={"invite": room.invitation, "name": "ada"})
            self.agent, self.agent_id = joined["session_id"], joined["participant_id"]
        return room

    def host(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        assert self.room is not None
        return crash.ok(self.room.port, method, path, self.room.host, body, params or None)

    def commit(self, region: str, content: str, summary: str) -> dict[str, Any]:
        assert self.room is not None
        port = self.room.port
        base = self.host("GET", "/workspace/status")["version"]
        proposal = crash.ok(port, "POST", "/workspace/propose", self.agent, {
            "region": region, "base_version": base, "summary": summary, "content": content})
        if proposal["status"] == "pending":
            self.host("POST", "/workspace/proposal/review",
                      {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
        done: dict[str, Any] = crash.ok(port, "POST", "/workspace/commit", self.agent,
                                        {"proposal_id": proposal["proposal_id"]})
        self.acked[done["version"]] = done["content_hash"]
        return done

    def crash_during(self, point: str, method: str, path: str, body: dict[str, Any],
                     bearer: str | None = None) -> None:
        """Restart with the fault armed, make the call, expect the room to kill itself."""
        self.stop()
        room = self.start(f"{point}:1")
        try:
            status, answer = crash.call(room.port, method, path, bearer or room.host, body)
        except crash.RoomDown:
            status, answer = 0, None
        room.proc.wait(crash.DEATH_TIMEOUT)
        assert status == 0, (point, status, answer)  # never acknowledged: it died first
        assert f"SIGKILL at {point}" in room.stderr()
        room.close()
        self.room = None

    def stop(self) -> None:
        if self.room is not None:
            self.room.stop()
            self.room.close()
            self.room = None

    def check(self) -> dict[str, Any]:
        """After a restart: everything acknowledged, the file, no temp files, blame fits."""
        status: dict[str, Any] = self.host("GET", "/workspace/status")
        assert hashlib.sha256(self.doc.read_bytes()).hexdigest() == status["content_hash"]
        assert not list(self.doc.parent.glob(f".{self.doc.name}.*.tmp"))
        for version, digest in self.acked.items():
            whole = self.host("GET", "/workspace/read", region="workspace", version=version)
            assert hashlib.sha256(whole["content"].encode()).hexdigest() == digest, version
        blamed = self.host("GET", "/workspace/blame", region="workspace")
        assert [line["text"] for line in blamed["lines"]] == self.doc.read_text().split("\n")[:-1]
        changes = self.host("GET", "/workspace/changes_since", version=1, limit=200)["changes"]
        assert [c["version"] for c in changes] == list(range(2, status["version"] + 1))
        assert all(c["source"] != "external" for c in changes)
        return status


@pytest.fixture
def crew(tmp_path: Path, fork_server: ForkServer) -> Any:
    team = Crew(tmp_path, fork_server)
    team.start()
    try:
        yield team
    finally:
        team.stop()


LANDS: dict[str, bool] = {"after_version_row": False, "after_temp_write": False, "after_fsync": False,
                          "after_commit": True, "after_rename": True, "after_mark_written": True}
"""Whether a write killed at the point is there after the restart (rolled back or forward)."""


def _landed_whole_or_not(crew: Crew, before: dict[str, Any], field: str, value: int,
                         expected_text: str, point: str) -> None:
    status = crew.check()
    assert (status["version"] == before["version"] + 1) is LANDS[point], (point, status)
    if status["version"] == before["version"]:
        assert crew.doc.read_text() == before["text"]
        return
    assert status["version"] == before["version"] + 1
    change = crew.host("GET", "/workspace/changes_since", version=before["version"])["changes"][0]
    assert change["source"] in ("revert", "restore")
    events = crew.host("GET", "/workspace/history", limit=50)["events"]
    payload = next(e["payload"] for e in events if e["type"] == "change.committed"
                   and e["payload"]["version"] == status["version"])
    assert payload[field] == value
    assert crew.doc.read_text() == expected_text
    crew.acked[status["version"]] = status["content_hash"]


def test_kills_inside_revert_and_restore_lose_nothing(crew: Crew) -> None:
    alpha = f"{TOP}/Alpha"
    first = crew.commit(alpha, "## Alpha\n\nalpha two\n\n", "alpha two")
    crew.commit(f"{TOP}/Beta", "## Beta\n\nbeta two\n", "beta two")
    for point in REVERT_POINTS:
        text = crew.doc.read_text()
        before = {"version": crew.host("GET", "/workspace/status")["version"], "text": text}
        crew.crash_during(point, "POST", "/workspace/revert", {"version": first["version"]})
        crew.start()
        reverted = text.replace("alpha two", "alpha one")
        _landed_whole_or_not(crew, before, "reverts", first["version"], reverted, point)
        if crew.doc.read_text() != text:  # it landed: back to the state to revert again
            crew.commit(alpha, "## Alpha\n\nalpha two\n\n", "alpha two again")
            first = {"version": max(crew.acked)}
    for point in OTHER_POINTS:
        text = crew.doc.read_text()
        before = {"version": crew.host("GET", "/workspace/status")["version"], "text": text}
        crew.crash_during(point, "POST", "/workspace/restore", {"region": "Beta", "version": 1})
        crew.start()
        _landed_whole_or_not(crew, before, "restores", 1, text.replace("beta two", "beta one"),
                             point)
        if crew.doc.read_text() != text:
            crew.commit(f"{TOP}/Beta", "## Beta\n\nbeta two\n", "beta two again")


def test_kills_after_a_policy_approval_and_inside_its_commit_lose_nothing(crew: Crew) -> None:
    crew.host("POST", "/workspace/policy", {"participant_id": crew.agent_id,
                                            "region_pattern": f"{TOP}/*", "max_changed_lines": 1})
    for n, point in enumerate(OTHER_POINTS):
        assert crew.room is not None
        base = crew.host("GET", "/workspace/status")["version"]
        proposal = crash.ok(crew.room.port, "POST", "/workspace/propose", crew.agent, {
            "region": f"{TOP}/Alpha", "base_version": base, "summary": f"fix {n}",
            "content": f"## Alpha\n\nalpha fix {n}\n\n"})
        assert proposal["status"] == "approved"  # acknowledged: the room's approval
        crew.room.kill()  # right after the acknowledgment
        crew.room.close()
        crew.room = None
        crew.start()
        detail = crew.host("GET", "/workspace/proposal", proposal_id=proposal["proposal_id"])
        assert detail["status"] == "approved" and detail["reviewer_id"].startswith("policy:po_")
        text = crew.doc.read_text()
        crew.crash_during(point, "POST", "/workspace/commit",
                          {"proposal_id": proposal["proposal_id"]}, bearer=crew.agent)
        crew.start()
        crew.check()
        detail = crew.host("GET", "/workspace/proposal", proposal_id=proposal["proposal_id"])
        assert (detail["status"] == "committed") is LANDS[point], (point, detail["status"])
        if detail["status"] == "committed":  # it landed whole (rolled forward)
            assert f"alpha fix {n}" in crew.doc.read_text()
            status = crew.host("GET", "/workspace/status")
            crew.acked[status["version"]] = status["content_hash"]
        else:
            assert detail["status"] == "approved" and crew.doc.read_text() == text
            assert crew.room is not None
            done = crash.ok(crew.room.port, "POST", "/workspace/commit", crew.agent,
                            {"proposal_id": proposal["proposal_id"]})
            crew.acked[done["version"]] = done["content_hash"]
    listed = crew.host("GET", "/workspace/policies")["policies"][0]
    assert listed["approved_count"] == len(OTHER_POINTS)
