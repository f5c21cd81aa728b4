"""Reads never wait behind writes (engine/readpath.py): a real room over HTTP answers
status, read, regions, proposals and a proposal wait while a 10 MB commit is held
inside its fsync (a test hook at the `after_fsync` fault point, store/faults.py),
and the commit lands once it is let go."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import trio

from commonroom.store import faults
from tests.service.conftest import LiveRoom, start_room

SECTIONS = 10_000
HELD_SECONDS = 30  # a deadlock guard only: nothing here is timed


def _big_document(path: Path) -> None:
    """About 10 MB in ~10,000 sections, like the `read_during_commits` benchmark's."""
    body = "lorem ipsum dolor sit amet " * 37 + "\n"
    path.write_text("# Big\n\n" + "".join(
        f"## Part {i}\n\n{body}\n" for i in range(SECTIONS)))


async def _ok(live: LiveRoom, method: str, path: str, bearer: str, body: Any = None) -> Any:
    answer = await live.call(method, path, bearer, body)
    assert answer.status == 200, (path, answer.body)
    return answer.json()


async def test_reads_are_answered_while_a_commit_is_held_inside_its_fsync(tmp_path: Path) -> None:
    doc = tmp_path / "big.md"
    _big_document(doc)
    assert doc.stat().st_size > 9_000_000
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:  # on the engine's writer thread, the temp file fsynced
        entered.set()
        release.wait(HELD_SECONDS)

    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        host = live.host_session
        writer = (await live.join("writer"))["session_id"]
        other = (await live.join("other"))["session_id"]
        await _ok(live, "POST", "/workspace/checkout", writer, {"region": "Big/Part 7"})
        await _ok(live, "POST", "/workspace/checkout", other, {"region": "Big/Part 9"})
        version = (await _ok(live, "GET", "/workspace/status", host))["version"]
        proposal = await _ok(live, "POST", "/workspace/propose", writer, {
            "region": "Big/Part 7", "base_version": version, "summary": "part 7",
            "content": "## Part 7\n\nrewritten while others read\n\n"})
        pending = await _ok(live, "POST", "/workspace/propose", other, {
            "region": "Big/Part 9", "base_version": version, "summary": "part 9",
            "content": "## Part 9\n\nstill pending\n\n"})
        await _ok(live, "POST", "/workspace/proposal/review", host, {
            "proposal_id": proposal["proposal_id"], "revision": proposal["revision"],
            "decision": "approve"})

        committed: dict[str, Any] = {}
        done = trio.Event()

        async def commit() -> None:
            answer = await live.call("POST", "/workspace/commit", writer,
                                     {"proposal_id": proposal["proposal_id"]})
            committed["status"], committed["body"] = answer.status, answer.json()
            done.set()

        with faults.holding("after_fsync", hold):
            try:
                nursery.start_soon(commit)
                assert await trio.to_thread.run_sync(entered.wait, HELD_SECONDS)
                with trio.move_on_after(HELD_SECONDS) as guard:
                    status = await _ok(live, "GET", "/workspace/status", host)
                    read = await _ok(live, "GET", "/workspace/read?region=Big/Part%209000", other)
                    regions = await _ok(live, "GET", "/workspace/regions", other)
                    proposals = await _ok(live, "GET", "/workspace/proposals", host)
                    waited = await _ok(
                        live, "GET", f"/workspace/proposal/wait?proposal_id={pending['proposal_id']}"
                        "&timeout_seconds=0", other)
                assert not guard.cancelled_caught, "a read waited behind the held commit"
                assert not done.is_set()  # the commit is still inside its fsync
            finally:
                release.set()
            with trio.fail_after(HELD_SECONDS):
                await done.wait()

        # What the reads answered: the version before the commit, whole.
        assert status["version"] == version
        assert read["version"] == version and read["content"].startswith("## Part 9000\n")
        assert len(regions["regions"]) == SECTIONS + 1 and regions["version"] == version
        listed = {p["proposal_id"]: p["status"] for p in proposals["proposals"]}
        assert listed[proposal["proposal_id"]] == "approved"
        assert listed[pending["proposal_id"]] == "pending"
        assert waited["proposal"]["status"] == "pending"
        # ...and the commit landed once let go.
        assert committed["status"] == 200, committed["body"]
        assert committed["body"]["version"] == version + 1
        after = await _ok(live, "GET", "/workspace/read?region=Big/Part%207", other)
        assert after["version"] == version + 1 and "rewritten while others read" in after["content"]
        assert "rewritten while others read" in doc.read_text()
        live.stop.set()
