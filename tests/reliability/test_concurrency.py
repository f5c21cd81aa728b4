"""Concurrency (issue 14): many clients at once on one real room, over real HTTP.

- 50 joins racing for one single-use invitation: exactly one session.
- 20 agents racing to commit approved proposals on one region: exactly one
  wins each base; every other gets `stale_version` with the recovery fields of
  docs/spec/PROTOCOL.md section 7, and its proposal becomes `conflicted`.
- 100 clients opening and dropping streams (SSE, WebSocket, long-poll) round
  after round leak nothing: the process's open file descriptors and trio tasks
  come back to what they were before, without any event to wake a
  forgotten stream (a gracefully closed WebSocket used to leave its pump
  waiting for the next event or heartbeat).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from trio_websocket import open_websocket_url

from tests.reliability.abuse_support import (
    abuse_doc_fixture,  # noqa: F401  (the abuse_doc fixture)
    events,
    live_tasks,
    ok,
    open_fds,
    settle,
    version_of,
)
from tests.service.conftest import LiveRoom, start_room

GENEROUS = {"requests_per_minute": 100_000, "anonymous_per_minute": 100_000}
STALE_FIELDS = {"base_version", "expected_version", "current_version", "diff", "changes",
                "region", "proposal_id"}


async def test_fifty_joins_on_a_single_use_invitation_make_one_session(abuse_doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, abuse_doc, **GENEROUS)
        invite = await ok(live, "POST", "/workspace/invite", live.host_session, {"max_uses": 1})
        answers: list[Any] = []

        async def join(n: int) -> None:
            answers.append(await live.call("POST", "/session/join", None,
                                           {"invite": invite["invitation"], "name": f"racer{n}"}))

        async with trio.open_nursery() as racers:
            for n in range(50):
                racers.start_soon(join, n)

        won = [a for a in answers if a.status == 200]
        lost = [a for a in answers if a.status != 200]
        assert len(won) == 1 and len(lost) == 49
        for answer in lost:
            assert answer.status == 403 and answer.json()["error"] == "invitation_redeemed", answer.body
        session = won[0].json()["session_id"]
        assert (await live.call("GET", "/workspace/status", session)).status == 200
        people = (await ok(live, "GET", "/workspace/participants", live.host_session))["participants"]
        assert len([p for p in people if p["name"].startswith("racer")]) == 1
        redeemed = [e for e in await events(live) if e["type"] == "invitation.redeemed"
                    and e["payload"]["invite_id"] == invite["invite_id"]]
        assert len(redeemed) == 1
        live.stop.set()


async def test_twenty_agents_racing_on_one_region_one_wins_each_base(abuse_doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, abuse_doc, **GENEROUS)
        agents = [(await live.join(f"agent{n}"))["session_id"] for n in range(20)]
        for round_number in range(3):
            base = await version_of(live)
            proposal_ids = []
            for n, bearer in enumerate(agents):
                proposal = await ok(live, "POST", "/workspace/propose", bearer, {
                    "region": "Goals", "base_version": base, "summary": f"agent {n}",
                    "content": f"## Goals\n\n- agent {n}, round {round_number}\n\n"})
                proposal_ids.append(proposal["proposal_id"])
                await ok(live, "POST", "/workspace/proposal/review", live.host_session,
                         {"proposal_id": proposal["proposal_id"],
                                 "revision": proposal["revision"], "decision": "approve"})
            answers: dict[str, Any] = {}

            async def commit(bearer: str, proposal_id: str, answers: dict[str, Any]) -> None:
                answers[proposal_id] = await live.call(
                    "POST", "/workspace/commit", bearer, {"proposal_id": proposal_id})

            async with trio.open_nursery() as racers:
                for bearer, proposal_id in zip(agents, proposal_ids, strict=True):
                    racers.start_soon(commit, bearer, proposal_id, answers)

            winners = [pid for pid, a in answers.items() if a.status == 200]
            assert len(winners) == 1, {pid: a.status for pid, a in answers.items()}
            version = answers[winners[0]].json()["version"]
            assert version == base + 1 == await version_of(live)
            winner_text = f"- agent {proposal_ids.index(winners[0])}, round {round_number}"
            assert winner_text in abuse_doc.read_text()
            for proposal_id, answer in answers.items():
                if proposal_id == winners[0]:
                    continue
                assert answer.status == 409, answer.body
                wire = answer.json()
                assert wire["error"] == "stale_version" and set(wire) >= STALE_FIELDS, wire
                assert (wire["base_version"], wire["expected_version"], wire["current_version"]) == (
                    base, base, version)
                assert wire["proposal_id"] == proposal_id and wire["region"] == "Plan/Goals"
                assert winner_text in wire["diff"]
                assert [c["version"] for c in wire["changes"]] == [version]
                detail = await ok(live, "GET", f"/workspace/proposal?proposal_id={proposal_id}",
                                  live.host_session)
                assert detail["status"] == "conflicted"
        versions = [e["payload"]["version"] for e in await events(live)
                    if e["type"] == "change.committed"]
        assert versions == [2, 3, 4]
        live.stop.set()


def observe_request(path: str, bearer: str, extra: bytes = b"") -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: commonroom\r\nAuthorization: Bearer {bearer}\r\n"
            .encode() + extra + b"\r\n")


async def open_and_drop(live: LiveRoom, bearer: str, kind: str, cursor: int) -> None:
    """Open one stream, see it answer, then drop the connection without a goodbye."""
    port = live.ready.ingress_port
    if kind == "ws-graceful":
        url = f"ws://127.0.0.1:{port}/workspace/observe/ws?since_event_id=0"
        async with open_websocket_url(url, extra_headers=[(b"Authorization", f"Bearer {bearer}".encode())]) as ws:
            await ws.get_message()
        return
    request = {
        "sse": observe_request("/workspace/observe?since_event_id=0", bearer),
        "long-poll": observe_request(f"/workspace/wait?cursor={cursor}&timeout_seconds=25", bearer),
        "ws": observe_request("/workspace/observe/ws?since_event_id=0", bearer,
                              b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"),
    }[kind]
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        await stream.send_all(request)
        if kind != "long-poll":  # the long-poll answers only when the wait ends
            head = await stream.receive_some(4096)
            assert head.startswith((b"HTTP/1.1 200", b"HTTP/1.1 101")), head[:80]
    finally:
        await stream.aclose()


async def test_a_hundred_clients_dropping_streams_leak_nothing(abuse_doc: Path) -> None:
    kinds = ("sse", "ws", "ws-graceful", "long-poll")
    async with trio.open_nursery() as nursery:
        # A hundred streams on one session: past the cap of 8 (tests/security/test_streams_cap.py).
        live = await start_room(nursery, abuse_doc, **GENEROUS, streams_per_session=1000,
                                streams_per_participant=1000)
        bearer = (await live.join("watcher"))["session_id"]

        async def one_round() -> None:
            cursor = (await ok(live, "GET", "/workspace/room", bearer))["latest_event_id"]
            async with trio.open_nursery() as clients:
                for n in range(100):
                    clients.start_soon(open_and_drop, live, bearer, kinds[n % len(kinds)], cursor)

        await ok(live, "GET", "/workspace/status", bearer)  # the store thread exists
        fds_before, tasks_before = open_fds(), live_tasks()
        for _ in range(4):
            await one_round()
        # No event after the rounds (and the heartbeat is 15 s away): a stream
        # whose pump outlived its client would still be counted here.
        fds_after = await settle(open_fds, fds_before, seconds=3.0)
        tasks_after = await settle(live_tasks, tasks_before, seconds=3.0)
        assert fds_after <= fds_before and tasks_after <= tasks_before, (
            f"fds {fds_before} -> {fds_after}, tasks {tasks_before} -> {tasks_after}")
        # And the room still streams: a fresh observer gets the replay.
        await open_and_drop(live, bearer, "ws-graceful", 0)
        live.stop.set()
