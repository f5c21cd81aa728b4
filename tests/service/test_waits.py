"""Waiting for a person is one call: `workspace.proposal.wait` and `workspace.thread.wait`.

Over REST (`GET /workspace/proposal/wait`, `GET /workspace/thread/wait`) and as the MCP
tools `workspace_proposal_wait` / `workspace_thread_wait`, on a real room: the answer comes
once the proposal leaves `pending` (or someone else has the thread's last word), else at the
timeout with `waiting: true`; the caller keeps no cursor and filters no events.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import trio
import trio.testing

from tests.service.conftest import LiveRoom
from tests.service.mcp_helpers import host_reviews, tool

REGION = "Plan/Goals"


async def propose(live: LiveRoom, bearer: str, text: str = "- wait for people\n") -> str:
    read = (await live.call("GET", f"/workspace/read?region={REGION}", bearer)).json()
    answer = await live.call("POST", "/workspace/propose", bearer, {
        "region": REGION, "base_version": read["version"], "summary": "a goal",
        "content": read["content"].rstrip("\n") + "\n" + text + "\n"})
    assert answer.status == 200, answer.body
    return str(answer.json()["proposal_id"])


async def rest_wait(live: LiveRoom, bearer: str, what: str, **params: Any) -> tuple[int, Any]:
    answer = await live.call("GET", f"/workspace/{what}/wait?{urlencode(params)}", bearer)
    return answer.status, answer.json()


async def test_a_held_proposal_wait_answers_when_the_host_approves(live: LiveRoom) -> None:
    agent = await live.join("waiter")
    bearer = agent["session_id"]
    pid = await propose(live, bearer)
    answers: list[tuple[int, Any]] = []

    async def waiting() -> None:
        answers.append(await rest_wait(live, bearer, "proposal", proposal_id=pid, timeout_seconds=25))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting)
        await trio.testing.wait_all_tasks_blocked(0.05)  # the wait is being held
        assert not answers
        await host_reviews(live, pid, "approve", comment="good")
    status, body = answers[0]
    assert status == 200, body
    assert body["waiting"] is False
    assert body["proposal"]["proposal_id"] == pid and body["proposal"]["status"] == "approved"
    assert body["proposal"]["review_comment"] == "good"


async def test_a_proposal_wait_times_out_with_the_state_and_waiting(live: LiveRoom) -> None:
    agent = await live.join("patient")
    pid = await propose(live, agent["session_id"])
    status, body = await rest_wait(live, agent["session_id"], "proposal", proposal_id=pid,
                                   timeout_seconds=0.2)
    assert status == 200 and body["waiting"] is True and body["proposal"]["status"] == "pending"
    # The caller's own change to it (a revision) does not end the wait: still pending.
    status, body = await rest_wait(live, agent["session_id"], "proposal", proposal_id=pid,
                                   timeout_seconds=0)
    assert body["waiting"] is True
    # Decided already: the answer is at once, whatever the timeout.
    await host_reviews(live, pid, "reject", comment="not now")
    status, body = await rest_wait(live, agent["session_id"], "proposal", proposal_id=pid)
    assert body["waiting"] is False and body["proposal"]["status"] == "rejected"


async def test_a_proposal_wait_refuses_what_does_not_exist_or_is_out_of_bounds(live: LiveRoom) -> None:
    agent = await live.join("lost")
    status, body = await rest_wait(live, agent["session_id"], "proposal", proposal_id="pr_nope")
    assert status == 404 and body["error"] == "proposal_not_found"
    status, body = await rest_wait(live, agent["session_id"], "proposal", proposal_id="pr_nope",
                                   timeout_seconds=26)
    assert status == 400 and body["error"] == "invalid_request"
    status, body = await rest_wait(live, "nobody", "proposal", proposal_id="pr_nope")
    assert status == 401


async def test_a_thread_wait_ends_on_someone_elses_reply_not_on_the_callers(live: LiveRoom) -> None:
    agent = await live.join("asker")
    bearer = agent["session_id"]
    opened = await live.call("POST", "/workspace/thread", bearer,
                             {"region": REGION, "body": "which goal first?", "blocking": True})
    assert opened.status == 200, opened.body
    tid = opened.json()["thread_id"]
    status, body = await rest_wait(live, bearer, "thread", thread_id=tid, timeout_seconds=0)
    assert status == 200 and body["waiting"] is True
    await live.call("POST", "/workspace/thread/reply", bearer, {"thread_id": tid, "body": "any?"})
    answers: list[tuple[int, Any]] = []

    async def waiting() -> None:
        answers.append(await rest_wait(live, bearer, "thread", thread_id=tid, timeout_seconds=25))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting)
        await trio.testing.wait_all_tasks_blocked(0.05)
        assert not answers
        replied = await live.call("POST", "/workspace/thread/reply", live.host_session,
                                  {"thread_id": tid, "body": "the first"})
        assert replied.status == 200, replied.body
    status, body = answers[0]
    assert status == 200 and body["waiting"] is False
    assert body["thread"]["comments"][-1]["body"] == "the first"


async def test_the_mcp_tools_wait_for_the_review_and_the_reply(live: LiveRoom) -> None:
    agent = await live.join("mcp-waiter")
    bearer = agent["session_id"]
    pid = await propose(live, bearer)
    results: list[dict[str, Any]] = []

    async def waiting() -> None:
        results.append(await tool(live, "workspace_proposal_wait", bearer, proposal_id=pid))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting)
        await trio.testing.wait_all_tasks_blocked(0.05)
        await host_reviews(live, pid, "request_changes", comment="say why")
    result = results[0]
    assert result["isError"] is False
    assert result["structuredContent"]["waiting"] is False
    assert result["structuredContent"]["proposal"]["status"] == "changes_requested"
    missing = await tool(live, "workspace_thread_wait", bearer, thread_id="th_nope", timeout_seconds=0)
    assert missing["isError"] is True and '"thread_not_found"' in missing["content"][0]["text"]
