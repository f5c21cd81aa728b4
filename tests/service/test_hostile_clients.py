"""No client input may end or wedge the room (issue 8, item 4), byte for byte.

A POST whose body is longer than its `Content-Length`, with `Connection:
close`: the reader sees the extra bytes as a protocol error and half-closes
while the app is still writing its answer. The FIN used to be sent outside the
send lock, so the write raised `BusyResourceError` and took the server down.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import attrs
import trio

from commonroom.http.serving import serve
from tests.service.conftest import LiveRoom, start_room
from tests.service.test_serving import CONFIG, RawClient, get, make_app


def short_length_post(path: bytes) -> bytes:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    return (b"POST " + path + b" HTTP/1.1\r\nHost: commonroom\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5\r\nConnection: close\r\n\r\n" + body)


async def send_and_drop(port: int, data: bytes) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        await stream.send_all(data)
        await trio.sleep(0.01)
    finally:
        await stream.aclose()


async def test_short_content_length_with_close_never_kills_the_room(live: LiveRoom) -> None:
    port = live.ready.ingress_port
    for path in (b"/mcp", b"/session/join", b"/workspace/propose", b"/workspace/status"):
        for _ in range(8):
            await send_and_drop(port, short_length_post(path))
            await trio.sleep(0.02)
    answer = await live.call("GET", "/workspace/status", live.host_session)
    assert answer.status == 200


async def test_with_a_stalled_reader_the_server_still_serves_and_stops() -> None:
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        # Far beyond the 3 s the stop may take, short enough that a regression
        # (the server wedged on the stalled write) fails in seconds, not a minute.
        config = attrs.evolve(CONFIG, write_timeout=10.0)
        port = await nursery.start(partial(serve, make_app(), config, shutdown_trigger=stop.wait))
        stalled = await RawClient.connect(port)
        await stalled.send(get("/flood"))
        status, _ = await stalled.read_head()
        assert status == 200
        await trio.sleep(0.3)  # the socket buffers are full now; never read again
        for _ in range(20):
            await send_and_drop(port, short_length_post(b"/mcp"))
        client = await RawClient.connect(port)
        await client.send(get("/hello"))
        status, _ = await client.read_head()
        assert status == 200
        await client.aclose()
        stop.set()
        stopped_at = trio.current_time()
    assert trio.current_time() - stopped_at < 3.0
    await stalled.aclose()


async def test_with_an_observer_connected_the_room_survives_and_stops(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        port = live.ready.ingress_port
        observer = await RawClient.connect(port)
        await observer.send(
            b"GET /workspace/observe HTTP/1.1\r\nHost: commonroom\r\n"
            b"Authorization: Bearer " + live.host_session.encode() + b"\r\n\r\n")
        status, _ = await observer.read_head()
        assert status == 200  # and never read again
        for _ in range(10):
            await send_and_drop(port, short_length_post(b"/mcp"))
            await trio.sleep(0.05)
        answer = await live.call("GET", "/workspace/status", live.host_session)
        assert answer.status == 200
        live.stop.set()
        stopped_at = trio.current_time()
    assert trio.current_time() - stopped_at < 3.0
    await observer.aclose()
