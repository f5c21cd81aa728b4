"""Issue 31, finding 3 (high): one default agent stalled the whole room.

The attack: the agent proposes a 209 KB text on one region and revises it to another,
both drawn from a vocabulary just under difflib's "popular line" threshold; then it
asks for its own proposal (`GET /workspace/proposal`, which answers the diff between
its last two revisions) again and again. Each answer took seconds of the room's one
store thread (on the event loop itself, as reads ran there), and the host's status
calls went from 3 ms to 3.7-6.1 s while the agent kept asking.

Now a diff is bounded in cost (engine/linediff.py: past the bound, both texts in full
with a "too large to diff" label), computed after the read's transaction off the
store, at most one such read is queued on the store at a time, and each participant
may make 60 a minute (429 `scope: "heavy_reads"`). A real room on 127.0.0.1
(hypercorn, a real sidecar); the bystander is the hostile suite's: it polls
`GET /workspace/status` every 20 ms and each call must answer 200 within its 2 s bound.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from tools.hostile.heavy_reads import revisions

from commonroom.protocol import limits
from tests.reliability.test_hostile import while_served
from tests.service.conftest import LiveRoom, doc, start_room  # noqa: F401 - the doc fixture

ATTACKERS = 4  # concurrent connections of the one agent


async def _ok(live: LiveRoom, method: str, path: str, bearer: str, body: Any = None) -> Any:
    answer = await live.call(method, path, bearer, body)
    assert answer.status == 200, answer.body
    return answer.json()


async def test_an_agent_asking_for_its_costly_diff_does_not_stall_the_room(doc: Path) -> None:  # noqa: F811
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        try:
            agent = (await live.join("hammer"))["session_id"]
            bystander = (await live.join("bystander"))["session_id"]
            first, second = revisions("## Risks")
            status = await _ok(live, "GET", "/workspace/status", agent)
            made = await _ok(live, "POST", "/workspace/propose", agent, {
                "region": "Risks", "base_version": status["version"], "summary": "long",
                "content": first})
            pid = made["proposal_id"]
            await _ok(live, "POST", "/workspace/proposal/revise", agent,
                      {"proposal_id": pid, "content": second})
            answers: list[tuple[int, Any]] = []

            async def hammer() -> None:
                async def one_connection() -> None:
                    for _ in range(limits.HEAVY_READS_PER_MINUTE // ATTACKERS + 5):
                        answer = await live.call("GET", f"/workspace/proposal?proposal_id={pid}",
                                                 agent)
                        answers.append((answer.status, answer.json()))

                async with trio.open_nursery() as inner:
                    for _ in range(ATTACKERS):
                        inner.start_soon(one_connection)

            await while_served(live.ready.ingress_port, bystander, hammer)
            served = [body for code, body in answers if code == 200]
            refused = [body for code, body in answers if code == 429]
            assert len(served) == limits.HEAVY_READS_PER_MINUTE
            assert len(refused) == len(answers) - len(served)
            assert {body["details"]["scope"] for body in refused} == {"heavy_reads"}
            assert all(body["retry_after_seconds"] >= 1 for body in refused)
            # The plain answer past the bound: both revisions in full, and it says so.
            shown = served[0]
            assert shown["revision_diff"].splitlines()[0].endswith(
                "(too large to diff: both texts in full)")
            assert shown["revision_diff"].count("\n-") >= first.count("\n") - 1
            assert shown["content"] == second
            # The host is never charged: it reads the same proposal past the agent's window.
            host = await live.call("GET", f"/workspace/proposal?proposal_id={pid}",
                                   live.host_session)
            assert host.status == 200
        finally:
            live.stop.set()


async def test_a_rebase_applied_through_the_heavy_path_is_published(doc: Path) -> None:  # noqa: F811
    """The heavy path runs `workspace.proposal.rebase`; when it writes (apply), its
    `proposal.revised` reaches the room's live readers like any write's events."""
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        try:
            agent = (await live.join("author"))["session_id"]
            status = await _ok(live, "GET", "/workspace/status", agent)
            read = await _ok(live, "GET", "/workspace/read?region=Risks", agent)
            made = await _ok(live, "POST", "/workspace/propose", agent, {
                "region": "Risks", "base_version": status["version"], "summary": "one more",
                "content": read["content"].rstrip("\n") + "\n- one more risk\n\n"})
            await live.host_appends("a host's line")  # the region moved on: a rebase is due
            cursor = (await _ok(live, "GET", "/workspace/wait?cursor=0", agent))["latest_event_id"]
            got: list[Any] = []

            async def wait() -> None:
                got.append(await _ok(live, "GET", f"/workspace/wait?cursor={cursor}"
                                     "&timeout_seconds=20", agent))

            async with trio.open_nursery() as inner:
                inner.start_soon(wait)
                await trio.sleep(0.2)
                applied = await _ok(live, "POST", "/workspace/proposal/rebase", agent,
                                    {"proposal_id": made["proposal_id"], "apply": True})
                assert applied["applied"] is True
            types = [event["type"] for event in got[0]["events"]]
            assert "proposal.revised" in types, types
        finally:
            live.stop.set()
