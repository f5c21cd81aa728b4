"""Streams are the room's: cancelling the room's nursery ends every open one.

Against a real room (real hypercorn, real sockets): one SSE reader that reads,
one that stopped reading long enough for the server's writes to it to block.
Cancelling the nursery that owns the room (not the graceful stop) must end
both promptly: the blocked write may not hold the cancellation for the
serving write timeout.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio

from tests.service.conftest import start_room


async def _open_sse(port: int, bearer: str, *, receive_buffer: int | None = None) -> trio.SocketStream:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    await sock.connect(("127.0.0.1", port))
    stream = trio.SocketStream(sock)
    await stream.send_all(
        b"GET /workspace/observe HTTP/1.1\r\nHost: commonroom\r\n"
        b"Accept: text/event-stream\r\nAuthorization: Bearer " + bearer.encode() + b"\r\n\r\n"
    )
    return stream


async def _read_until(stream: trio.SocketStream, marker: bytes) -> bytes:
    seen = b""
    with trio.fail_after(5):
        while marker not in seen:
            chunk = await stream.receive_some(65536)
            assert chunk, seen
            seen += chunk
    return seen


async def _drain_to_eof(stream: trio.SocketStream) -> None:
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass  # a reset is an end too


@pytest.mark.slow
async def test_cancelling_the_room_ends_every_stream_even_a_stalled_one(doc: Path) -> None:
    async with trio.open_nursery() as outer:
        room_scope = trio.CancelScope()

        async def run_room(task_status: trio.TaskStatus[object] = trio.TASK_STATUS_IGNORED) -> None:
            with room_scope:
                async with trio.open_nursery() as room_nursery:
                    live = await start_room(room_nursery, doc, requests_per_minute=10**6)
                    task_status.started(live)
                    await trio.sleep_forever()

        live = await outer.start(run_room)
        agent = await live.join("reader", ["read", "observe", "checkout"])
        port = live.ready.ingress_port
        reader = await _open_sse(port, agent["session_id"])
        await _read_until(reader, b"retry: 5000")
        stalled = await _open_sse(port, agent["session_id"], receive_buffer=4096)
        await _read_until(stalled, b"retry: 5000")  # then it never reads again

        # Enough event bytes (~700 per commit) that the writes to the stalled
        # reader block: its socket buffers (128 KiB send, 4 KiB receive) are full.
        summary = "s" * 500
        status = (await live.call("GET", "/workspace/status", live.host_session)).json()
        version = status["version"]
        for i in range(600):
            answer = await live.call("POST", "/workspace/commit", live.host_session, {
                "base_version": version, "summary": summary, "content": f"# Plan\n\n{i}\n"})
            assert answer.status == 200, answer.body
            version = answer.json()["version"]
        await _read_until(reader, b"change.committed")

        t0 = trio.current_time()
        with trio.fail_after(5):
            room_scope.cancel()
            async with trio.open_nursery() as ends:
                ends.start_soon(_drain_to_eof, reader)
                ends.start_soon(_drain_to_eof, stalled)
        elapsed = trio.current_time() - t0
        assert elapsed < 2.0, f"the room took {elapsed:.2f} s to end its streams"
        await reader.aclose()
        await stalled.aclose()
