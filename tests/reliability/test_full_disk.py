"""Issue 14, crash harness: a full disk under a running `ce serve`.

The document and its sidecar live on a small tmpfs of their own (we run as
root; where `mount` is refused the test skips and says so). The disk is
filled mid-run by a filler file; the room must answer `storage_unavailable`
(503, the protocol's error shape), commit nothing, keep serving reads, stay
up (its sweeper and watcher too), and commit again once space returns.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tools.fault import crash
from tools.fault.crash import Agent, Room

pytestmark = pytest.mark.e2e

DISK_BYTES = 4 * 1024 * 1024
FILLER = "filler.bin"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("mount") is None or subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)],
        capture_output=True,
    ).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): the full-disk check did not run")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk: Path, leave: int = 0) -> None:
    """Fill `disk` until at most `leave` bytes are free."""
    with open(disk / FILLER, "ab") as handle:
        chunk = b"\0" * 65536
        while True:
            free = shutil.disk_usage(disk).free
            if free <= leave:
                return
            try:
                handle.write(chunk[: max(4096, min(len(chunk), free - leave))])
                handle.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                return


def is_storage_error(status: int, body: Any) -> bool:
    return (status == 503 and body.get("error") == "storage_unavailable"
            and isinstance(body.get("message"), str) and isinstance(body.get("details"), dict))


def propose_approved(agent: Agent, room: Room, text: str) -> str:
    read = crash.ok(room.port, "GET", "/workspace/read", agent.session, params={"region": agent.region})
    proposal = crash.ok(room.port, "POST", "/workspace/propose", agent.session, {
        "region": agent.region, "base_version": read["version"], "summary": text[:20], "content": text})
    crash.ok(room.port, "POST", "/workspace/proposal/review", room.host,
             {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
    return str(proposal["proposal_id"])


def test_a_full_disk_commits_nothing_and_the_room_recovers_when_space_returns(
    small_disk: Path, tmp_path: Path,
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    doc = small_disk / "full.md"
    # A large document: its temp file needs far more room than the sidecar's change does.
    doc.write_text(crash.initial_document(2) + "".join(f"line {i} of the tail\n" for i in range(40_000)))
    room = Room(doc, runtime, None)
    try:
        assert room.wait_ready()
        agent = Agent(0)
        agent.session = crash.ok(room.port, "POST", "/session/join",
                                 body={"invite": room.invitation, "name": "a"})["session_id"]
        pid = propose_approved(agent, room, "## Agent 0\n\nbefore the disk filled\n\n")
        crash.ok(room.port, "POST", "/workspace/commit", agent.session, {"proposal_id": pid})
        status = crash.ok(room.port, "GET", "/workspace/status", room.host)
        pid = propose_approved(agent, room, "## Agent 0\n\nwhile the disk is full\n\n")
        on_disk = doc.read_bytes()

        # 1. Space for the sidecar's change, not for the new file: the temp file fails.
        fill(small_disk, leave=doc.stat().st_size // 2)
        code, error = crash.call(room.port, "POST", "/workspace/commit", agent.session,
                                 {"proposal_id": pid})
        assert is_storage_error(code, error), (code, error)
        assert error["details"]["file"] == doc.name and str(small_disk) not in error["message"]
        assert_nothing_committed(room, status, on_disk)
        # The host sees it where they look: one line on the room's stderr.
        wait_for(lambda: f"commonroom: storage fault: {error['message']}\n" in room.stderr(), room)

        # 2. No space at all. A small write may still land whole in the WAL's own pages,
        # which SQLite reuses after a checkpoint (the room checkpoints once the file passes
        # 1 MiB); once they are used up, every write is refused in the same shape, and
        # reads keep serving.
        fill(small_disk)
        for _ in range(400):
            code, error = crash.call(room.port, "POST", "/workspace/checkout", agent.session,
                                     {"region": agent.region, "minutes": 5})
            if code != 200:
                break
        assert is_storage_error(code, error), (code, error)
        for method, path, body in [
            ("POST", "/workspace/commit", {"proposal_id": pid}),
            ("POST", "/workspace/checkout", {"region": agent.region, "minutes": 5}),
            ("POST", "/workspace/propose", {"region": agent.region, "base_version": status["version"],
                                            "summary": "s", "content": "## Agent 0\n\nno\n\n"}),
        ]:
            code, error = crash.call(room.port, method, path, agent.session, body)
            assert is_storage_error(code, error), (path, code, error)
            assert "Traceback" not in error["message"]
        read = crash.ok(room.port, "GET", "/workspace/read", agent.session, params={"region": agent.region})
        assert read["content"] == "## Agent 0\n\nbefore the disk filled\n\n"
        assert_nothing_committed(room, status, on_disk)
        # An edit made in place (no new space needed) while the sidecar cannot record
        # it: the sweeper or the watcher is refused and lives on, and the edit is
        # not forgotten (it becomes a version once the sidecar takes writes again).
        edited = on_disk[: on_disk.rindex(b"line 39999")] + b"edited by hand\n"
        with open(doc, "r+b") as handle:
            handle.write(edited)
            handle.truncate()
        # Once it settled, the look that reads it is refused: every request then
        # answers storage_unavailable (serving the old version would hide the edit).
        wait_for(lambda: crash.call(room.port, "GET", "/workspace/status", room.host)[0] == 503, room)
        assert "could not write the sidecar full.md.commonroom.db" in room.stderr()
        assert room.proc.poll() is None, room.stderr()

        # 3. Space returns: the edit becomes a version, the approved proposal commits on
        # top of it (another section), and the file follows.
        (small_disk / FILLER).unlink()
        now = crash.ok(room.port, "GET", "/workspace/status", room.host)
        assert now["version"] == status["version"] + 1
        assert now["content_hash"] == hashlib.sha256(edited).hexdigest()
        change = crash.ok(room.port, "GET", "/workspace/changes_since", room.host,
                          params={"version": status["version"]})["changes"]
        assert [(c["summary"], c["participant_id"]) for c in change] == [("external edit", None)], (status, now, change)
        status = now
        done = crash.ok(room.port, "POST", "/workspace/commit", agent.session, {"proposal_id": pid})
        assert done["version"] == status["version"] + 1
        assert hashlib.sha256(doc.read_bytes()).hexdigest() == done["content_hash"]
        assert b"while the disk is full" in doc.read_bytes() and b"edited by hand" in doc.read_bytes()
        assert room.stop() == 0, room.stderr()
        assert "Traceback" not in room.stderr() and "internal" not in room.stderr(), room.stderr()
    finally:
        room.close()


def wait_for(condition: Callable[[], bool], room: Room, timeout: float = 10.0) -> None:
    """Until the room shows `condition` (its watcher looks every 0.1 s on its own)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert room.proc.poll() is None, f"the room died: {room.stderr()}"
        assert time.monotonic() < deadline, f"not within {timeout} s: {room.stderr()}"
        time.sleep(0.05)


def assert_nothing_committed(room: Room, status: dict[str, Any], on_disk: bytes) -> None:
    now = crash.ok(room.port, "GET", "/workspace/status", room.host)
    assert (now["version"], now["content_hash"]) == (status["version"], status["content_hash"])
    assert room.doc.read_bytes() == on_disk
    assert sorted(room.doc.parent.glob(f".{room.doc.name}.*.tmp")) == []
    history = crash.ok(room.port, "GET", "/workspace/history", room.host, params={"limit": 5})
    assert all(e["type"] != "change.committed" or e["payload"]["version"] <= status["version"]
               for e in history["events"])


def test_the_fault_hook_is_inert_without_its_variable() -> None:
    """The suite itself runs without COMMONROOM_FAULT: the hook must be disarmed here."""
    from commonroom.store import faults

    assert faults.ENV not in os.environ
    for point in faults.POINTS:
        faults.reached(point)  # returns: no SIGKILL
