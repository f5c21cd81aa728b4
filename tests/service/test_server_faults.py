"""A bug in the store path is `internal_error` 500, logged once, and leaves nothing half done.

Issue 8, item 3. The fault is injected inside a commit's transaction, after
the version row and its event were written, through a real room.
"""

from __future__ import annotations

import logging

import pytest

from commonroom.engine.versions import Versions
from tests.service.conftest import LiveRoom


async def test_a_fault_inside_a_commit_is_internal_error_and_rolls_back(
    live: LiveRoom, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    agent = (await live.join(capabilities=["read", "propose", "commit"]))["session_id"]
    proposal = (await live.call("POST", "/workspace/propose", agent, {
        "region": "Goals", "base_version": 1, "summary": "s",
        "content": "## Goals\n\n- faulty\n\n"})).json()
    pid = proposal["proposal_id"]
    approved = await live.call("POST", "/workspace/proposal/review", live.host_session,
                               {"proposal_id": pid, "revision": 1, "decision": "approve"})
    assert approved.status == 200
    history_before = (await live.call("GET", "/workspace/history?limit=200",
                                      live.host_session)).json()["events"]
    text_before = live.path.read_text()

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected store fault, with a detail the client must not see")

    monkeypatch.setattr(Versions, "_after_change", broken)
    with caplog.at_level(logging.ERROR):
        answer = await live.call("POST", "/workspace/commit", agent, {"proposal_id": pid})
    assert answer.status == 500
    assert answer.json() == {"error": "internal_error",
                             "message": "internal error; the room logged it", "details": {}}
    logged = [r for r in caplog.records if r.exc_info and "injected" in str(r.exc_info[1])]
    assert len(logged) == 1
    # Nothing half done: no version, no event, the proposal still approved, the file as it was.
    status = (await live.call("GET", "/workspace/status", agent)).json()
    assert status["version"] == 1 and live.path.read_text() == text_before
    history = (await live.call("GET", "/workspace/history?limit=200",
                               live.host_session)).json()["events"]
    assert history == history_before
    detail = (await live.call("GET", f"/workspace/proposal?proposal_id={pid}", agent)).json()
    assert detail["status"] == "approved"
    assert not [p for p in live.path.parent.iterdir() if p.name.endswith(".tmp")]
    # Fixed: the same commit goes through, and event ids stay gapless.
    monkeypatch.undo()
    done = await live.call("POST", "/workspace/commit", agent, {"proposal_id": pid})
    assert done.status == 200 and done.json()["version"] == 2
    ids = [e["event_id"] for e in (await live.call(
        "GET", "/workspace/history?limit=200", live.host_session)).json()["events"]]
    assert ids == list(range(ids[0], ids[0] - len(ids), -1))
