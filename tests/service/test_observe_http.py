"""Observe over the wire: SSE, WebSocket and long-poll against the real ingress."""

from __future__ import annotations

import json
from contextlib import aclosing
from pathlib import Path
from typing import Any

import trio
from trio_websocket import open_websocket_url

from commonroom.wire import aio
from tests.service.conftest import LiveRoom, start_room


async def _sse(live: LiveRoom, bearer: str, *, path: str = "/workspace/observe",
               headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    status, head, chunks = await aio.open_stream(
        stream, path, headers={"Authorization": f"Bearer {bearer}", **(headers or {})})
    return status, head, chunks


async def _make_events(live: LiveRoom, bearer: str, pairs: int) -> list[str]:
    lease_ids = []
    for _ in range(pairs):
        lease = (await live.call("POST", "/workspace/checkout", bearer, {"region": "Goals"})).json()
        await live.call("POST", "/workspace/release", bearer, {"lease_id": lease["lease_id"]})
        lease_ids.append(lease["lease_id"])
    return lease_ids


async def test_sse_replays_then_goes_live_and_resumes_with_last_event_id(live: LiveRoom) -> None:
    agent = await live.join()
    bearer = agent["session_id"]
    status, head, chunks = await _sse(live, bearer, path="/workspace/observe?since_event_id=0")
    assert status == 200 and dict(head)["content-type"].startswith("text/event-stream")
    seen: list[int] = []
    first_retry: list[int | None] = []
    released = 0
    async with aclosing(aio.iter_sse(chunks)) as messages:
        await _make_events(live, bearer, 3)
        with trio.fail_after(5):
            async for message in messages:
                if not first_retry:
                    first_retry.append(message.retry)
                if message.comment is not None or not message.id:
                    continue
                event = json.loads(message.data)
                assert message.event == event["type"] and int(message.id) == event["event_id"]
                seen.append(event["event_id"])
                if event["type"] == "lease.released":
                    released += 1
                    if released == 3:
                        break
    assert first_retry == [5000]
    assert seen == list(range(1, seen[-1] + 1))  # every event from the first, no gap, no dup
    # Resume: Last-Event-ID wins over since_event_id.
    await _make_events(live, bearer, 1)
    status, _, chunks = await _sse(live, bearer, path="/workspace/observe?since_event_id=0",
                                   headers={"Last-Event-ID": str(seen[-1])})
    async with aclosing(aio.iter_sse(chunks)) as messages:
        with trio.fail_after(5):
            async for message in messages:
                if message.id:
                    assert int(message.id) == seen[-1] + 1
                    break


async def test_sse_needs_observe_and_a_bearer(live: LiveRoom) -> None:
    reader = await live.join("reader", capabilities=["read"])
    assert (await live.call("GET", "/workspace/observe", reader["session_id"])).status == 403
    assert (await live.raw("GET", "/workspace/observe")).status == 401
    observer = await live.join("observer", capabilities=["read", "observe"])
    bad = await live.call("GET", "/workspace/observe?since_event_id=x", observer["session_id"])
    assert bad.status == 400 and bad.json()["details"]["field"] == "since_event_id"


async def test_sse_outlives_the_response_timeout_and_ends_on_revoke(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, response_timeout=1.0, heartbeat_seconds=0.2)
        agent = await live.join()
        _, _, chunks = await _sse(live, agent["session_id"])
        heartbeats = 0
        async with aclosing(aio.iter_sse(chunks)) as messages:
            with trio.move_on_after(2.0):  # twice Quart's (lowered) response timeout
                async for message in messages:
                    if message.comment == "hb":
                        heartbeats += 1
            assert heartbeats >= 5  # still alive and beating after the timeout passed
            await live.call("POST", "/workspace/session/revoke", live.host_session,
                            {"participant_id": agent["participant_id"]})
            with trio.fail_after(1.5):
                async for _ in messages:
                    pass  # the server ends the stream
        live.stop.set()


async def test_websocket_variant_carries_the_same_events(live: LiveRoom) -> None:
    agent = await live.join()
    bearer = agent["session_id"]
    url = f"ws://127.0.0.1:{live.ready.ingress_port}/workspace/observe/ws?since_event_id=0"
    async with open_websocket_url(url, extra_headers=[("Authorization", f"Bearer {bearer}")]) as ws:
        await _make_events(live, bearer, 1)
        ids: list[int] = []
        with trio.fail_after(5):
            while True:
                event = json.loads(await ws.get_message())
                ids.append(event["event_id"])
                if event["type"] == "lease.released":
                    break
    assert ids == list(range(1, ids[-1] + 1))


async def test_long_poll_wait(live: LiveRoom) -> None:
    agent = await live.join()
    bearer = agent["session_id"]
    first = (await live.call("GET", "/workspace/wait?cursor=0&timeout_seconds=0", bearer)).json()
    assert first["events"] and first["resync"] is False
    cursor = first["cursor"]
    empty = (await live.call("GET", f"/workspace/wait?cursor={cursor}&timeout_seconds=0", bearer)).json()
    assert empty["events"] == [] and empty["cursor"] == cursor
    result: dict[str, Any] = {}

    async def waiter() -> None:
        response = await live.call("GET", f"/workspace/wait?cursor={cursor}&timeout_seconds=25", bearer)
        result.update(response.json())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(0.3)
        assert result == {}  # still holding: nothing happened after the cursor
        await _make_events(live, bearer, 1)  # the caller's own checkout and release
        await trio.sleep(0.3)
        assert result == {}  # its own events do not end the hold
        # Someone else's event (another agent joining) ends it at once, well before the
        # 25 s timeout, with the caller's own events first.
        with trio.fail_after(15):
            await live.join("other")
            while not result:
                await trio.sleep(0.01)
    types = [event["type"] for event in result["events"]]
    assert result["events"][0]["event_id"] == cursor + 1
    assert types[:2] == ["lease.acquired", "lease.released"] and len(types) > 2, types
    bad = await live.call("GET", "/workspace/wait?cursor=0&timeout_seconds=26", bearer)
    assert bad.status == 400 and bad.json()["error"] == "invalid_request"
