"""The stack's connection pitfalls, checked against the real room's ingress.

test_serving.py proves the fixes on a small app; these prove the room is
served through them: its sockets close, its body limit bites before reading.
"""

from __future__ import annotations

from pathlib import Path

import trio

from tests.service.conftest import LiveRoom, start_room


async def _read_to_eof(stream: trio.SocketStream) -> bytes:
    data = bytearray()
    while chunk := await stream.receive_some(65536):
        data += chunk
    return bytes(data)


async def test_connection_close_response_closes_within_100ms(live: LiveRoom) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    request = (b"GET /workspace/status HTTP/1.1\r\nHost: commonroom\r\n"
               b"Authorization: Bearer " + live.host_session.encode() + b"\r\n"
               b"Connection: close\r\n\r\n")
    await stream.send_all(request)
    with trio.fail_after(5):
        first = await stream.receive_some(65536)
    answered = trio.current_time()
    assert first.startswith(b"HTTP/1.1 200")
    with trio.fail_after(2):
        await _read_to_eof(stream)
    assert trio.current_time() - answered < 0.1
    await stream.aclose()


async def test_http10_request_is_closed(live: LiveRoom) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    await stream.send_all(b"GET /protocol HTTP/1.0\r\nHost: commonroom\r\n\r\n")
    with trio.fail_after(2):
        data = await _read_to_eof(stream)
    assert data.startswith(b"HTTP/1.") and b" 200 " in data.split(b"\r\n")[0]
    await stream.aclose()


async def test_oversized_upload_refused_before_it_is_sent(live: LiveRoom) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    head = (b"POST /workspace/propose HTTP/1.1\r\nHost: commonroom\r\n"
            b"Authorization: Bearer " + live.host_session.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 52428800\r\n\r\n")
    await stream.send_all(head)  # 50 MB announced, not one byte of it sent
    with trio.fail_after(2):
        data = await _read_to_eof(stream)
    status_line, _, rest = data.partition(b"\r\n")
    assert b" 413 " in status_line
    assert b'"error": "limit_exceeded"' in rest
    await stream.aclose()


async def test_stalled_observer_does_not_hold_up_the_stop(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        for i in range(120):  # ~500 KB of replay: fills the socket buffers of a reader that never reads
            sent = await live.call("POST", "/workspace/message", live.host_session,
                                   {"text": f"{i} " + "x" * 4000})
            assert sent.status == 200, sent.body
        sock = trio.socket.socket()
        sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 2048)  # a tiny window
        await sock.connect(("127.0.0.1", live.ready.ingress_port))
        stream = trio.SocketStream(sock)
        await stream.send_all(b"GET /workspace/observe?since_event_id=0 HTTP/1.1\r\nHost: commonroom\r\n"
                              b"Authorization: Bearer " + live.host_session.encode() + b"\r\n\r\n")
        await trio.sleep(0.3)
        started = trio.current_time()
        live.stop.set()
    assert trio.current_time() - started < 3.0
    await stream.aclose()
