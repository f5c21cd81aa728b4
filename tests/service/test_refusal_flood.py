"""A bearer that floods the room past its window, against real hypercorn.

Its refusals are answered from the headers alone, before quart builds the request
(`Gate.early`), and paced once it keeps asking without waiting as told; they are
still the protocol's 429 (`{"error", "message", "details"}`, `retry_after_seconds`,
a `Retry-After` header, the connection closed) over REST and over `/mcp`, and the
host's calls are all answered while it lasts (docs/protocol.md "Refusals are cheap
and paced"). The pacing itself, on a MockClock: tests/unit/test_refusal_pacing.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from commonroom.wire import aio
from tests.service.conftest import start_room
from tests.service.mcp_helpers import rpc
from tests.service.test_serving import RawClient

FLOOD = 24  # the agent's requests at once: past the free refusals and the held bound


def _assert_paced_429(response: aio.Response) -> None:
    assert response.status == 429, response.body
    body: dict[str, Any] = response.json()
    assert body["error"] == "limit_exceeded" and body["details"] == {"scope": "requests"}
    assert set(body) == {"error", "message", "details", "retry_after_seconds"}
    assert body["retry_after_seconds"] >= 1
    assert response.header("retry-after") == str(body["retry_after_seconds"])
    assert response.header("connection") == "close"


async def test_a_flood_past_the_window_is_refused_in_shape_and_the_host_is_answered(
    doc: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, requests_per_minute=20, rate_clock=lambda: 0.0)
        try:
            agent = (await live.join("flooder"))["session_id"]
            admitted = [(await live.call("GET", "/workspace/status", agent)).status
                        for _ in range(20)]
            assert admitted == [200] * 20
            refused: list[aio.Response] = []
            host_codes: list[int] = []

            async def flood_once(k: int) -> None:
                if k % 3 == 0:  # a body it never gets to send in full: refused unread
                    refused.append(await live.call("POST", "/workspace/propose", agent,
                                                   {"region": "Goals", "content": "x" * 50_000}))
                elif k % 3 == 1:
                    refused.append(await rpc(live, "tools/list", {}, agent, rid=k))
                else:
                    refused.append(await live.call("GET", "/workspace/status", agent))

            async def host_meanwhile() -> None:
                for _ in range(10):
                    host_codes.append((await live.call("GET", "/workspace/status",
                                                       live.host_session)).status)

            async with trio.open_nursery() as flood:
                for k in range(FLOOD):
                    flood.start_soon(flood_once, k)
                flood.start_soon(host_meanwhile)
            assert len(refused) == FLOOD
            for response in refused:  # REST and /mcp alike: the protocol's error object
                _assert_paced_429(response)
            assert host_codes == [200] * 10  # the host's own window, never the agent's
        finally:
            live.stop.set()


async def test_a_flooder_that_hangs_up_while_held_leaves_the_room_answering(
    doc: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Held refusals whose clients left (a flooder's timeouts) end quietly: the room keeps
    answering everyone, the flooder's next refusal included."""
    caplog.set_level(logging.WARNING)
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, requests_per_minute=2, rate_clock=lambda: 0.0)
        try:
            agent = (await live.join("leaver"))["session_id"]
            for _ in range(2):
                assert (await live.call("GET", "/workspace/status", agent)).status == 200
            for _ in range(4):  # the episode's free refusals
                assert (await live.call("GET", "/workspace/status", agent)).status == 429
            request = (f"GET /workspace/status HTTP/1.1\r\nHost: commonroom\r\n"
                       f"Authorization: Bearer {agent}\r\n\r\n").encode()
            for _ in range(6):  # held, and gone before the answer
                client = await RawClient.connect(live.ready.ingress_port)
                await client.send(request)
                await client.stream.aclose()
            assert (await live.call("GET", "/workspace/status", live.host_session)).status == 200
            # Held too, and last: the six before it were answered (to nobody) before it.
            _assert_paced_429(await live.call("GET", "/workspace/status", agent))
            assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
        finally:
            live.stop.set()
