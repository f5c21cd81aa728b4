"""Helpers of the "abuse" reliability tests (fencing, races, hostile clients).

Real rooms only (`tests.service.conftest.start_room`); these helpers just
save each test the same few HTTP calls.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import SAMPLE
from tests.service.conftest import LiveRoom


@pytest.fixture(name="abuse_doc")
def abuse_doc_fixture(tmp_path: Path) -> Path:
    """The shared sample document in a fresh folder (tests/reliability has no conftest)."""
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE)
    return path


async def ok(live: LiveRoom, method: str, path: str, bearer: str, body: Any = None) -> Any:
    """Call and insist on a 2xx; the decoded answer."""
    answer = await live.call(method, path, bearer, body)
    assert 200 <= answer.status < 300, (method, path, answer.status, answer.body)
    return answer.json()


async def version_of(live: LiveRoom) -> int:
    version: int = (await ok(live, "GET", "/workspace/status", live.host_session))["version"]
    return version


async def approved_proposal(live: LiveRoom, bearer: str, region: str, content: str) -> str:
    """`bearer` proposes `content` for `region` at the current version; the host approves it."""
    proposal = await ok(live, "POST", "/workspace/propose", bearer, {
        "region": region, "base_version": await version_of(live), "summary": "s",
        "content": content})
    await ok(live, "POST", "/workspace/proposal/review", live.host_session,
             {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
    proposal_id: str = proposal["proposal_id"]
    return proposal_id


async def events(live: LiveRoom) -> list[dict[str, Any]]:
    """Every retained event, oldest first."""
    found: list[dict[str, Any]] = []
    before: int | None = None
    while True:
        query = "/workspace/history?limit=200" + (f"&before_event_id={before}" if before else "")
        page = (await ok(live, "GET", query, live.host_session))["events"]
        if not page:
            return sorted(found, key=lambda event: int(event["event_id"]))
        found.extend(page)
        before = min(int(event["event_id"]) for event in page)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def live_tasks() -> int:
    """Every task in this trio run (the room runs in the test's run)."""
    count = 0
    pending = [trio.lowlevel.current_root_task()]
    while pending:
        task = pending.pop()
        if task is None:
            continue
        count += 1
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return count


async def settle(measure: Any, target: int, *, seconds: float = 5.0) -> int:
    """Wait (bounded) until `measure()` is back to at most `target`; its last value.

    The room notices a dropped client when its read sees EOF, a moment after
    the client closed: this polls the condition, it does not sleep a fixed time.
    """
    value: int = measure()
    with trio.move_on_after(seconds):
        while value > target:
            await trio.sleep(0.02)
            value = measure()
    return value


def rss_kib(pid: int) -> int:
    """Resident memory of process `pid` (KiB), from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise LookupError(f"no VmRSS for {pid}")


async def peak_rss_kib(pid: int, until: trio.Event) -> int:
    """Sample `pid`'s RSS every 5 ms until `until`; the highest."""
    peak = rss_kib(pid)
    while not until.is_set():
        peak = max(peak, rss_kib(pid))
        with trio.move_on_after(0.005):
            await until.wait()
    return max(peak, rss_kib(pid))
