"""The MCP notification streams on the hub's direct lane, and their keep-alives under load.

Every stream here is parsed by the byte client's h11, which refuses a broken chunked framing:
the bytes an MCP stream writes around hypercorn and h11 must be what h11 would have written.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from pathlib import Path

import pytest
import trio

from commonroom.http.connection import HardenedTCPServer
from commonroom.mcp import notify
from commonroom.wire import aio
from tests.service.conftest import LiveRoom, count_direct, start_room
from tests.service.mcp_helpers import LEGACY, VERSION, initialize, legacy_rpc, rpc

DOCUMENT = "commonroom://workspace/document"


@pytest.fixture
def live(legacy_live: LiveRoom) -> LiveRoom:
    """Every room here is started with `--mcp-legacy` (by default /mcp refuses initialize)."""
    return legacy_live


async def open_streams(live: LiveRoom, bearer: str) -> tuple[aio.BodyChunks, aio.BodyChunks]:
    """A 2026-07-28 GET /mcp and a legacy session's, both watching the document."""
    assert (await rpc(live, "resources/subscribe", {"uri": DOCUMENT}, bearer)).status == 200
    session_id, _ = await initialize(live, bearer)
    assert (await legacy_rpc(live, session_id, "resources/subscribe", {"uri": DOCUMENT}, bearer)).status == 200
    streams = []
    for headers in ({"MCP-Protocol-Version": VERSION},
                    {"MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": session_id}):
        stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
        status, _, chunks = await aio.open_stream(stream, "/mcp", headers={
            "Accept": "text/event-stream", "Authorization": f"Bearer {bearer}", **headers})
        assert status == 200
        streams.append(chunks)
    return streams[0], streams[1]


async def updates(chunks: aio.BodyChunks, count: int) -> list[str]:
    """The URIs of the next `count` notifications (comments and priming skipped)."""
    uris: list[str] = []
    async with aclosing(aio.iter_sse(chunks)) as messages:
        with trio.fail_after(10):
            async for message in messages:
                if message.comment is None and message.data:
                    uris.append(json.loads(message.data)["params"]["uri"])
                    if len(uris) == count:
                        break
    return uris


async def churn(live: LiveRoom, bearer: str, seconds: float) -> None:
    """Events that change no watched resource's text (a lease taken and given back), nonstop."""
    with trio.move_on_after(seconds):
        while True:
            lease = await live.call("POST", "/workspace/checkout", bearer, {"region": "Goals"})
            assert lease.status == 200, lease.body
            await live.call("POST", "/workspace/release", bearer, {"lease_id": lease.json()["lease_id"]})


@pytest.mark.parametrize("partial", [False, True])
async def test_both_eras_streams_take_the_direct_lane(
    live: LiveRoom, monkeypatch: pytest.MonkeyPatch, partial: bool
) -> None:
    taken = count_direct(monkeypatch, notify.NotificationWriter)
    if partial:  # every socket write takes half its bytes at first: the pump owes the rest
        real = HardenedTCPServer.send_nowait

        def half(self: HardenedTCPServer, data: bytes) -> int | None:
            return real(self, data[: max(1, len(data) // 2)])

        monkeypatch.setattr(HardenedTCPServer, "send_nowait", half)
    watcher = (await live.join("watcher"))["session_id"]
    modern, legacy = await open_streams(live, watcher)
    async with modern, legacy:
        for i in range(5):
            await live.host_appends(f"change {i}")
        assert await updates(modern, 5) == [DOCUMENT] * 5
        assert await updates(legacy, 5) == [DOCUMENT] * 5
    assert taken, "no notification took the direct lane"


async def test_keepalives_reach_the_client_while_the_room_is_busy_with_other_things(doc: Path) -> None:
    """Unrelated events keep a stream's room-side heartbeat from ever firing; the client must
    still hear a ping at least every heartbeat (here 0.4 s), on both eras' streams."""
    async with trio.open_nursery() as nursery:
        # The churn goes as fast as the room answers: more than the default 600 a minute.
        live = await start_room(nursery, doc, mcp_legacy=True, heartbeat_seconds=0.4,
                                requests_per_minute=100_000)
        busy = (await live.join("busy"))["session_id"]
        watcher = (await live.join("watcher"))["session_id"]
        modern, legacy = await open_streams(live, watcher)
        pings: dict[str, int] = {"modern": 0, "legacy": 0}

        async def count(name: str, chunks: aio.BodyChunks) -> None:
            async with aclosing(aio.iter_sse(chunks)) as messages:
                async for message in messages:
                    if message.comment == "ping":
                        pings[name] += 1

        async with modern, legacy, trio.open_nursery() as readers:
            readers.start_soon(count, "modern", modern)
            readers.start_soon(count, "legacy", legacy)
            await trio.sleep(0.1)  # their first frames are in
            before = dict(pings)
            await churn(live, busy, 2.0)  # 2 s of lease events, none of them the document's
            readers.cancel_scope.cancel()
        assert pings["modern"] - before["modern"] >= 2, pings
        assert pings["legacy"] - before["legacy"] >= 2, pings
        live.stop.set()
