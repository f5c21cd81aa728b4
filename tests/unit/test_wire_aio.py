"""The trio wire (`commonroom.wire.aio`) against a real hypercorn + quart-trio server and hand-made raw servers."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import attrs
import pytest
import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.trio import serve
from quart import make_response
from quart import request as quart_request
from quart.typing import ResponseReturnValue
from quart_trio import QuartTrio

from commonroom.protocol.errors import CommonroomError
from commonroom.wire import aio
from commonroom.wire.aio import iter_sse, open_stream, request
from commonroom.wire.http11 import SSEMessage, SSEParser

PROMPT = 3.0  # seconds; every exchange here takes milliseconds


# -- a real server -----------------------------------------------------------------


def make_app() -> QuartTrio:
    app = QuartTrio(__name__, static_folder=None)

    @app.get("/hello")
    async def hello() -> dict[str, str]:
        return {"hello": "world"}

    @app.post("/echo")
    async def echo() -> dict[str, str | None]:
        body = await quart_request.get_data(True, False, False)
        return {
            "body": body.decode(),
            "host": quart_request.headers.get("Host"),
            "accept": quart_request.headers.get("Accept"),
            "connection": quart_request.headers.get("Connection"),
            "content_length": quart_request.headers.get("Content-Length"),
            "x_extra": quart_request.headers.get("X-Extra"),
        }

    @app.get("/events")
    async def events() -> ResponseReturnValue:
        async def body() -> AsyncIterator[bytes]:
            yield b": hello\n\n"
            yield b"id: 1\nevent: greet\ndata: first\ndata: second\n\n"
            yield b"retry: 1500\r\ndata: third\r\n\r\n"

        response = await make_response(body(), 200, {"Content-Type": "text/event-stream"})
        response.timeout = None  # type: ignore[union-attr]
        return response

    return app


@pytest.fixture
async def hyper_port() -> AsyncIterator[int]:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.errorlog = None
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            functools.partial(serve, make_app(), config, shutdown_trigger=shutdown.wait)
        )
        yield int(binds[0].rsplit(":", 1)[1])
        shutdown.set()
        nursery.cancel_scope.deadline = trio.current_time() + 5


async def dial(port: int) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", port)


async def test_get_json_from_hypercorn_returns_promptly(hyper_port: int) -> None:
    # Stock quart-trio never closes the connection (DESIGN pitfall 1); the client
    # must not wait for it.
    with trio.fail_after(PROMPT):
        response = await request(await dial(hyper_port), "GET", "/hello")
    assert response.status == 200
    assert response.json() == {"hello": "world"}
    assert response.header("Content-Type") == "application/json"


async def test_post_sends_host_accept_close_and_content_length(hyper_port: int) -> None:
    with trio.fail_after(PROMPT):
        response = await request(
            await dial(hyper_port),
            "POST",
            "/echo",
            headers={"X-Extra": "yes", "Content-Type": "text/plain", "Connection": "keep-alive"},
            body="héllo".encode(),
        )
    assert response.status == 200
    assert response.json() == {
        "body": "héllo",
        "host": "commonroom",
        "accept": "application/json",
        "connection": "close",
        "content_length": str(len("héllo".encode())),
        "x_extra": "yes",
    }


async def test_bodyless_post_sends_content_length_zero(hyper_port: int) -> None:
    with trio.fail_after(PROMPT):
        response = await request(await dial(hyper_port), "POST", "/echo")
    assert response.json()["content_length"] == "0"


async def test_sse_from_hypercorn(hyper_port: int) -> None:
    with trio.fail_after(PROMPT):
        status, headers, chunks = await open_stream(await dial(hyper_port), "/events")
        assert status == 200
        assert dict(headers)["content-type"].startswith("text/event-stream")
        async with contextlib.aclosing(iter_sse(chunks)) as messages:
            got = [message async for message in messages]
    assert got == [
        SSEMessage(event="", comment="hello"),
        SSEMessage(event="greet", data="first\nsecond", id="1"),
        SSEMessage(data="third", id="1", retry=1500),
    ]


# -- raw servers ----------------------------------------------------------------


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@attrs.define
class RawServer:
    port: int = 0
    requests: list[bytes] = attrs.Factory(list)
    client_closed: trio.Event = attrs.Factory(trio.Event)


async def read_request(stream: trio.abc.Stream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
            while len(body) < length:
                body += await stream.receive_some(65536)
    return data


Script = Callable[[trio.SocketStream, RawServer], Awaitable[None]]


async def start_raw(nursery: trio.Nursery, script: Script) -> RawServer:
    server = RawServer()

    async def handler(stream: trio.SocketStream) -> None:
        async with stream:
            server.requests.append(await read_request(stream))
            await script(stream, server)

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    server.port = listeners[0].socket.getsockname()[1]
    return server


def replies(*parts: bytes, close: bool = False) -> Script:
    """Send `parts` (with small pauses); then close, or wait for the client to close."""

    async def script(stream: trio.SocketStream, server: RawServer) -> None:
        for part in parts:
            await stream.send_all(part)
            await trio.sleep(0.01)
        if close:
            return
        with contextlib.suppress(trio.BrokenResourceError):
            while await stream.receive_some(65536):
                pass
        server.client_closed.set()

    return script


async def test_reads_until_content_length_when_server_keeps_socket_open(
    nursery: trio.Nursery,
) -> None:
    server = await start_raw(
        nursery,
        replies(
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n",
            b"Content-Type: text/plain\r\n\r\nhello",
            b" world",
        ),
    )
    with trio.fail_after(PROMPT):
        response = await request(await dial(server.port), "GET", "/x")
        assert response == aio.Response(
            status=200,
            headers=(("content-length", "11"), ("content-type", "text/plain")),
            body=b"hello world",
        )
        # The client closed the socket itself.
        await server.client_closed.wait()
    head = server.requests[0].split(b"\r\n\r\n")[0].lower().split(b"\r\n")
    assert head[0] == b"get /x http/1.1"
    assert set(head[1:]) == {b"host: commonroom", b"accept: application/json", b"connection: close"}


async def test_chunked_response(nursery: trio.Nursery) -> None:
    server = await start_raw(
        nursery,
        replies(
            b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n",
            chunk(b"hello"),
            chunk(b" world"),
            b"0\r\n\r\n",
        ),
    )
    with trio.fail_after(PROMPT):
        response = await request(await dial(server.port), "PUT", "/x", body=b"{}")
    assert (response.status, response.body) == (201, b"hello world")


async def test_response_framed_by_eof(nursery: trio.Nursery) -> None:
    server = await start_raw(
        nursery, replies(b"HTTP/1.1 200 OK\r\n\r\nuntil ", b"the end", close=True)
    )
    with trio.fail_after(PROMPT):
        response = await request(await dial(server.port), "GET", "/x")
    assert response.body == b"until the end"


async def test_error_statuses_are_responses_not_exceptions(nursery: trio.Nursery) -> None:
    body = json.dumps({"error": "unauthorized", "message": "no", "details": {}}).encode()
    server = await start_raw(
        nursery,
        replies(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)),
    )
    with trio.fail_after(PROMPT):
        response = await request(await dial(server.port), "GET", "/x")
    assert response.status == 401
    assert response.json()["error"] == "unauthorized"


def assert_unavailable(exc: CommonroomError, port: int) -> None:
    assert exc.code == "transport_unavailable"
    assert "127.0.0.1" not in exc.message
    assert str(port) not in exc.message


async def test_server_closing_mid_body_is_transport_unavailable(nursery: trio.Nursery) -> None:
    server = await start_raw(
        nursery, replies(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..", close=True)
    )
    with trio.fail_after(PROMPT), pytest.raises(CommonroomError) as caught:
        await request(await dial(server.port), "GET", "/x")
    assert_unavailable(caught.value, server.port)
    assert "before the response was complete" in caught.value.message


async def test_server_closing_before_responding(nursery: trio.Nursery) -> None:
    server = await start_raw(nursery, replies(close=True))
    with trio.fail_after(PROMPT), pytest.raises(CommonroomError) as caught:
        await request(await dial(server.port), "GET", "/x")
    assert_unavailable(caught.value, server.port)


async def test_malformed_response_is_transport_unavailable(nursery: trio.Nursery) -> None:
    server = await start_raw(nursery, replies(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"))
    with trio.fail_after(PROMPT), pytest.raises(CommonroomError) as caught:
        await request(await dial(server.port), "GET", "/x")
    assert_unavailable(caught.value, server.port)
    assert "malformed" in caught.value.message


async def test_non_json_body_is_transport_unavailable() -> None:
    response = aio.Response(status=200, headers=(), body=b"<html>")
    with pytest.raises(CommonroomError) as caught:
        response.json()
    assert caught.value.code == "transport_unavailable"


async def test_early_answer_to_a_large_body_does_not_stall(nursery: trio.Nursery) -> None:
    # The server answers 413 from the head alone, never reads the body and never
    # closes: the client must still return (it reads while it sends).
    async def script(stream: trio.SocketStream, server: RawServer) -> None:
        await stream.send_all(b"HTTP/1.1 413 Too Large\r\nContent-Length: 2\r\n\r\n{}")
        await trio.sleep_forever()

    server = RawServer()

    async def handler(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive_some(65536)
            await script(stream, server)

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    with trio.fail_after(PROMPT):
        response = await request(await dial(port), "POST", "/x", body=b"x" * 32_000_000)
    assert response.status == 413


async def test_broken_stream_is_transport_unavailable() -> None:
    client, server = trio.testing.memory_stream_pair()
    await server.aclose()
    with trio.fail_after(PROMPT), pytest.raises(CommonroomError) as caught:
        await request(client, "GET", "/x")
    assert caught.value.code == "transport_unavailable"


async def test_request_closes_the_stream_when_cancelled(nursery: trio.Nursery) -> None:
    server = await start_raw(nursery, replies())  # never answers
    stream = await dial(server.port)
    with trio.move_on_after(0.2) as scope:
        await request(stream, "GET", "/x")
    assert scope.cancelled_caught
    with pytest.raises(trio.ClosedResourceError):
        await stream.send_all(b"x")
    with trio.fail_after(PROMPT):
        await server.client_closed.wait()


async def test_open_stream_iterates_and_aclose_closes(nursery: trio.Nursery) -> None:
    server = await start_raw(
        nursery,
        replies(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n",
            b"Transfer-Encoding: chunked\r\n\r\n",
            chunk(b": ping\n"),
            chunk(b"id: 7\r\ndata: one\r\n\r\ndata:\r\n"),
            chunk(b"\r\n"),
        ),
    )
    with trio.fail_after(PROMPT):
        status, headers, chunks = await open_stream(
            await dial(server.port), "/events", headers={"Last-Event-ID": "6"}
        )
        assert status == 200
        assert ("content-type", "text/event-stream") in headers
        got = []
        async with contextlib.aclosing(iter_sse(chunks)) as messages:
            async for message in messages:
                got.append(message)
                if len(got) == 3:
                    break
        await server.client_closed.wait()
    assert got == [
        SSEMessage(event="", comment="ping"),
        SSEMessage(data="one", id="7"),
        SSEMessage(data="", id="7"),
    ]
    head = server.requests[0].lower()
    assert b"accept: text/event-stream" in head
    assert b"last-event-id: 6" in head


async def test_open_stream_cut_mid_body_is_transport_unavailable(nursery: trio.Nursery) -> None:
    server = await start_raw(
        nursery,
        replies(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            chunk(b"hello"),
            close=True,
        ),
    )
    with trio.fail_after(PROMPT):
        _, _, chunks = await open_stream(await dial(server.port), "/events")
        async with chunks:
            assert await chunks.__anext__() == b"hello"
            with pytest.raises(CommonroomError) as caught:
                await chunks.__anext__()
    assert_unavailable(caught.value, server.port)


async def test_open_stream_heartbeat_timeout_loses_nothing(nursery: trio.Nursery) -> None:
    gate = trio.Event()

    async def script(stream: trio.SocketStream, server: RawServer) -> None:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await gate.wait()
        await stream.send_all(chunk(b"abc") + b"0\r\n\r\n")

    server = await start_raw(nursery, script)
    with trio.fail_after(PROMPT):
        _, _, chunks = await open_stream(await dial(server.port), "/events")
        async with chunks:
            with trio.move_on_after(0.05) as scope:
                await chunks.__anext__()
            assert scope.cancelled_caught
            gate.set()
            assert await chunks.read_all() == b"abc"


async def test_open_stream_error_status_body_is_readable(nursery: trio.Nursery) -> None:
    server = await start_raw(
        nursery, replies(b'HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\n{"a": 1}\n')
    )
    with trio.fail_after(PROMPT):
        status, _, chunks = await open_stream(await dial(server.port), "/events")
        assert status == 403
        assert json.loads(await chunks.read_all()) == {"a": 1}
        await server.client_closed.wait()


# -- the SSE parser ---------------------------------------------------------------

STREAM = (
    b"\xef\xbb\xbf: heartbeat\n"
    b"\n"
    b"event: note\r\n"
    b"id: 41\r\n"
    b"data: line one\r\n"
    b"data:line two\r\n"
    b"data\r\n"
    b"\r\n"
    b"retry: 2500\r"
    b"data:  spaced\r"
    b"\r"
    b"id\n"
    b"unknown: field\n"
    b"data: no id\n"
    b"\n"
    b"retry: soon\n"
    b"retry: \xc2\xb2\n"
    b"event: empty\n"
    b"\n"
    b"data: caf\xc3\xa9 \xff\n"
    b"\n"
    b"id: a\x00b\n"
    b"data: incomplete, never dispatched\n"
)

EXPECTED = [
    SSEMessage(event="", comment="heartbeat"),
    SSEMessage(event="note", data="line one\nline two\n", id="41"),
    SSEMessage(data=" spaced", id="41", retry=2500),
    SSEMessage(data="no id", id=""),
    SSEMessage(data="café \ufffd", id=""),
]


def parse_all(chunks: list[bytes]) -> list[SSEMessage]:
    parser = SSEParser()
    return [message for chunk in chunks for message in parser.feed(chunk)]


def test_sse_parser_whole() -> None:
    assert parse_all([STREAM]) == EXPECTED


def test_sse_parser_byte_by_byte() -> None:
    # Splits every CRLF, every UTF-8 sequence and the BOM across feeds.
    assert parse_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


@pytest.mark.parametrize("size", [2, 3, 5, 7, 13])
def test_sse_parser_any_split(size: int) -> None:
    assert parse_all([STREAM[i : i + size] for i in range(0, len(STREAM), size)]) == EXPECTED


def test_sse_parser_keeps_state() -> None:
    parser = SSEParser()
    parser.feed(b"retry: 10\nid: 9\n\n")
    assert (parser.retry, parser.last_event_id) == (10, "9")
    assert parser.feed(b"data: x\n\n") == [SSEMessage(data="x", id="9", retry=10)]
    assert parser.feed(b"data: y\n\n") == [SSEMessage(data="y", id="9")]


def test_sse_parser_cr_then_lf_in_next_feed_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"\r") == [SSEMessage(data="a")]
    assert parser.feed(b"\ndata: b\n\n") == [SSEMessage(data="b")]


async def test_iter_sse_closes_its_source() -> None:
    closed = trio.Event()

    class Source:
        def __init__(self) -> None:
            self.parts = [b"data: 1\n\n", b"data: 2\n\n"]

        def __aiter__(self) -> Source:
            return self

        async def __anext__(self) -> bytes:
            if not self.parts:
                raise StopAsyncIteration
            return self.parts.pop(0)

        async def aclose(self) -> None:
            closed.set()

    async with contextlib.aclosing(iter_sse(Source())) as messages:
        async for message in messages:
            assert message.data == "1"
            break
    assert closed.is_set()
