"""Issue 14, crash harness, CI-sized: SIGKILL a real `ce serve` at every write point x 5
and at 100 random moments; nothing acknowledged is lost (tools/fault/crash.py).

One test per write point and four of 25 random kills, so xdist spreads them over the
workers. Their restarts are forked from one process per worker that imported `ce serve`
once (tools/fault/forkserver.py; the `fork_server` fixture, tests/reliability/conftest.py):
a restart then costs ~0.3 s of CPU instead of ~1.3 s, nearly all of which was imports.
The other tests here start exec'd `ce serve` processes.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tools.fault import crash
from tools.fault.crash import POINTS, Agent, CheckFailed, Ledger, Room
from tools.fault.forkserver import ForkServer

from commonroom.store import faults

pytestmark = pytest.mark.e2e

KILLS_PER_POINT = 5
# A seed per point whose five visit counts (1..3) hold a first, a second and a third visit.
POINT_SEEDS = dict(zip(POINTS, range(20, 20 + len(POINTS)), strict=True))
RANDOM_SEEDS = (15, 16, 17, 18)
RANDOM_KILLS = 25  # per seed: 100 in all


@pytest.mark.parametrize("point", POINTS)
def test_kills_at_a_write_point_lose_no_acknowledged_version(
        point: str, tmp_path: Path, fork_server: ForkServer) -> None:
    figures = crash.run("points", KILLS_PER_POINT, seed=POINT_SEEDS[point], points=(point,),
                        folder=tmp_path, launcher=fork_server)
    assert figures.failures == [], figures.as_json()
    assert figures.lost == 0
    # The point was reached 5 times, in a commit or while a restart rolled one forward.
    reached = figures.per_point.get(point, 0) + figures.per_point.get(f"{point} (in recovery)", 0)
    assert reached >= KILLS_PER_POINT and figures.kills >= KILLS_PER_POINT, figures.per_point
    # The agents got commits through between the kills (the run is not vacuous).
    assert figures.acknowledged >= 2, figures.as_json()
    # ...and a reader read beside them all along (each version it saw survived).
    assert figures.reads > 0 and figures.versions_read >= 1, figures.as_json()


@pytest.mark.slow
@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_kills_at_random_moments_lose_no_acknowledged_version(
        seed: int, tmp_path: Path, fork_server: ForkServer) -> None:
    figures = crash.run("random", RANDOM_KILLS, seed=seed, folder=tmp_path, launcher=fork_server)
    assert figures.failures == [], figures.as_json()
    assert figures.lost == 0
    assert figures.per_point == {"random": RANDOM_KILLS} and figures.kills == RANDOM_KILLS
    # Each kill came after an acknowledged commit of its round (the harness waits for one).
    assert figures.acknowledged >= RANDOM_KILLS, figures.as_json()


def test_a_forked_room_is_the_room_the_checks_expect(tmp_path: Path,
                                                     fork_server: ForkServer) -> None:
    """The fork server's `ce serve`: its own pid in the credential file, the fault hook armed
    from its own environment (a typo fails it), exit 0 on SIGINT, -SIGKILL when killed."""
    doc = tmp_path / "crash.md"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    doc.write_text(crash.initial_document(1))
    room = Room(doc, runtime, None, launcher=fork_server)
    try:
        assert room.wait_ready() and room.host  # found by the child's own pid
        assert crash.ok(room.port, "GET", "/workspace/status", room.host)["version"] == 1
        assert room.stop() == 0
    finally:
        room.close()
    room = Room(doc, runtime, "after_fsyncc:1", launcher=fork_server)
    try:
        assert not room.wait_ready() and room.proc.returncode != 0
        assert "unknown point 'after_fsyncc'" in room.stderr()
    finally:
        room.close()
    room = Room(doc, runtime, None, launcher=fork_server)
    try:
        assert room.wait_ready()
        room.kill()
        assert room.proc.returncode == -9
    finally:
        room.close()


def test_the_checks_catch_a_silent_revert(tmp_path: Path) -> None:
    """The harness's checks can fail: put an old file back while the room is down and
    the restart records it as an edit, which is the revert the checks exist for."""
    doc = tmp_path / "crash.md"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    doc.write_text(crash.initial_document(1))
    before = doc.read_bytes()
    agent = Agent(0, baseline=crash.initial_section(0, 1))
    room = Room(doc, runtime, None)
    try:
        assert room.wait_ready()
        agent.session = crash.ok(room.port, "POST", "/session/join",
                                 body={"invite": room.invitation, "name": "a"})["session_id"]
        ledger = Ledger()
        crash.check_room(room, [agent], ledger)
        _commit_once(agent, room)  # one acknowledged commit, then a kill
        assert len(agent.acked) == 1
        crash.check_room(room, [agent], ledger)
        room.kill()
        room.close()
        doc.write_bytes(before)  # the acknowledged commit is gone from the file
        room = Room(doc, runtime, None)
        assert room.wait_ready()
        _wait_settled(room, hashlib.sha256(before).hexdigest())  # recorded once it settled
        with pytest.raises(CheckFailed, match="reverted"):
            crash.check_room(room, [agent], ledger)
    finally:
        room.close()


def _commit_once(agent: Agent, room: Room) -> None:
    text = "## Agent 0\n\ncommitted once\n"
    read = crash.ok(room.port, "GET", "/workspace/read", agent.session, params={"region": agent.region})
    proposal = crash.ok(room.port, "POST", "/workspace/propose", agent.session, {
        "region": agent.region, "base_version": read["version"], "summary": "s", "content": text})
    crash.ok(room.port, "POST", "/workspace/proposal/review", room.host,
             {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
    answer = crash.ok(room.port, "POST", "/workspace/commit", agent.session,
                      {"proposal_id": proposal["proposal_id"]})
    agent.acked.append(crash.Ack(answer["version"], answer["content_hash"], 0, text))
    agent.baseline = text
    assert hashlib.sha256(room.doc.read_bytes()).hexdigest() == answer["content_hash"]


def test_a_malformed_fault_variable_is_refused_not_ignored() -> None:
    for bad in ("after_fsync", "after_fsync:0", "after_fsync:x", "nowhere:1"):
        with pytest.raises(ValueError, match=faults.ENV):
            faults.parse(bad)
    assert faults.parse("after_rename:3") == ("after_rename", 3)
    # A room process given a typo fails at once instead of running without its crash.
    result = subprocess.run(
        [sys.executable, "-c", "import commonroom.store.faults"],
        env={faults.ENV: "after_fsyncc:1", "PATH": ""}, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0 and "unknown point 'after_fsyncc'" in result.stderr


def _save_in_place(path: Path, data: bytes, pieces: int) -> None:
    """Truncate, then write the first `pieces` of four (all four: the whole save)."""
    step = len(data) // 4 + 1
    with open(path, "r+b", buffering=0) as handle:
        handle.truncate(0)
        for start in list(range(0, len(data), step))[:pieces]:
            handle.write(data[start:start + step])


def _versions(room: Room) -> list[str]:
    """The content hash of every version, oldest first (each read whole, byte-exact)."""
    status = crash.ok(room.port, "GET", "/workspace/status", room.host)
    return [hashlib.sha256(crash.ok(room.port, "GET", "/workspace/read", room.host, params={
        "region": "workspace", "version": v})["content"].encode()).hexdigest()
        for v in range(1, int(status["version"]) + 1)]


def _wait_settled(room: Room, digest: str) -> dict[str, object]:
    for _ in range(200):
        status = crash.ok(room.port, "GET", "/workspace/status", room.host)
        if status["file"] == "settled" and status["content_hash"] == digest:
            return status
        time.sleep(0.05)
    raise AssertionError(f"the file never settled as the whole save: {status}")


def test_a_kill_during_a_settle_loses_no_version_and_the_restart_records_the_save(
    tmp_path: Path,
) -> None:
    """SIGKILL while the host's save settles (and once with the save half-written);
    the restart keeps every recorded version and records the whole save, once."""
    doc = tmp_path / "crash.md"
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    notes = "".join(f"line {i} of the host's notes\n" for i in range(20_000))  # 600 KB
    text = f"# Notes\n\n{notes}\n" + crash.initial_document(1)
    doc.write_text(text)
    agent = Agent(0, baseline=crash.initial_section(0, 1))
    settle = ("--settle-ms", "2000")  # time enough to see the settle, then kill in it
    room = Room(doc, runtime, None, *settle)
    try:
        assert room.wait_ready()
        agent.session = crash.ok(room.port, "POST", "/session/join",
                                 body={"invite": room.invitation, "name": "a"})["session_id"]
        _commit_once(agent, room)
        recorded = _versions(room)
        # 1. The save is whole on disk, the room is killed before it settled.
        first = doc.read_bytes().replace(b"line 7 of", b"LINE 7 of")
        _save_in_place(doc, first, 4)
        status = crash.ok(room.port, "GET", "/workspace/status", room.host)
        assert status["file"] == "settling" and len(_versions(room)) == len(recorded)
        room.kill()
        room.close()
        room = Room(doc, runtime, None, *settle)
        assert room.wait_ready()
        _wait_settled(room, hashlib.sha256(first).hexdigest())
        after = _versions(room)
        assert after[: len(recorded)] == recorded  # nothing recorded was lost
        assert after[len(recorded):] == [hashlib.sha256(first).hexdigest()]  # the save, once
        # 2. Killed with the save half-written (the room saw it settling); the host's
        # editor finishes it while no room runs: the restart records the whole save.
        # (A room that opens in the middle of a save: tests/unit/test_saves_and_commits.py.)
        second = first.replace(b"line 8 of", b"LINE 8 of")
        _save_in_place(doc, second, 2)
        status = crash.ok(room.port, "GET", "/workspace/status", room.host)
        assert (status["version"], status["file"]) == (len(after), "settling")
        room.kill()
        room.close()
        _save_in_place(doc, second, 4)
        room = Room(doc, runtime, None, *settle)
        assert room.wait_ready()
        _wait_settled(room, hashlib.sha256(second).hexdigest())
        final = _versions(room)
        assert final == [*after, hashlib.sha256(second).hexdigest()]
        assert room.stop() == 0
    finally:
        room.close()
