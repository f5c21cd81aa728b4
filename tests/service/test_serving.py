"""Regression tests for DESIGN.md "Known pitfalls of this stack", against real hypercorn.

Every server here is `commonroom.http.serving.serve` on an ephemeral 127.0.0.1
port inside the test's trio nursery (one test runs it in a subprocess, for
SIGINT). The client speaks HTTP/1.1 bytes over a raw trio socket, so a test
sees exactly when the server closes the connection.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncGenerator, AsyncIterator
from functools import partial
from typing import Any

import attrs
import pytest
import trio
from quart import Response, request
from quart_trio import QuartTrio
from quart_trio.wrappers.request import TrioRequest

from commonroom.http.hardened_app import harden, streaming_response
from commonroom.http.serving import ServeConfig, serve
from commonroom.protocol.errors import CommonroomError, body_too_large, invalid_request

LIMIT = 64 * 1024
CONFIG = ServeConfig(keep_alive_timeout=0.3, max_body_bytes=LIMIT, write_timeout=1.0, graceful_timeout=1.0)


# ------------------------------------------------------------------------------ the app


def make_app() -> QuartTrio:
    app = QuartTrio("test_serving", static_folder=None)
    # Small, so that "a stream outlives RESPONSE_TIMEOUT" takes 2 s, not 60.
    app.config["RESPONSE_TIMEOUT"] = 1

    @app.get("/hello")
    async def hello() -> dict[str, Any]:
        return {"ok": True}

    @app.post("/echo")
    async def echo() -> dict[str, Any]:
        data = await request.get_json()
        if data is None:
            raise invalid_request("body must be JSON")
        return {"echo": data}

    @app.post("/count")
    async def count() -> dict[str, Any]:
        # Consumes the body chunk by chunk, which Quart's own limit misses.
        total = 0
        async for chunk in request.body:
            total += len(chunk)
        return {"bytes": total}

    async def lines(prefix: str) -> AsyncGenerator[bytes, None]:
        n = 0
        while True:
            yield f"{prefix}: {n}\n\n".encode()
            n += 1
            await trio.sleep(0.05)

    @app.get("/stream")
    async def stream() -> Response:
        return streaming_response(lines("data"), headers={"Cache-Control": "no-cache"})

    @app.get("/events-plain")
    async def events_plain() -> Response:
        # An event stream built without the helper: still not cut.
        return Response(lines("data"), mimetype="text/event-stream")

    @app.get("/text-plain")
    async def text_plain() -> Response:
        # The control: an ordinary streamed response IS cut at RESPONSE_TIMEOUT.
        return Response(lines("line"), mimetype="text/plain")

    @app.get("/flood")
    async def flood() -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            block = b"x" * 65536
            while True:
                yield block
                await trio.sleep(0)

        return streaming_response(chunks(), headers={}, content_type="application/octet-stream")

    @app.get("/boom")
    async def boom() -> dict[str, Any]:
        raise RuntimeError("secret internal detail")

    @app.get("/conflict")
    async def conflict() -> dict[str, Any]:
        raise CommonroomError("stale_version", "the file moved on", current_version=7)

    return app


@attrs.define
class Server:
    port: int
    stop: trio.Event
    app: QuartTrio


@pytest.fixture
async def server(nursery: trio.Nursery) -> AsyncIterator[Server]:
    stop = trio.Event()
    app = make_app()
    port = await nursery.start(partial(serve, app, CONFIG, shutdown_trigger=stop.wait))
    yield Server(port, stop, app)
    stop.set()


# ------------------------------------------------------------------------------ a byte client


@attrs.define
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers.get("content-type") == "application/json", self.headers
        return json.loads(self.body)


class RawClient:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = bytearray()

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def _fill(self) -> None:
        data = await self.stream.receive_some(65536)
        if not data:
            raise EOFError("connection closed")
        self.buf += data

    async def read_head(self) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self.buf:
            await self._fill()
        head, _, rest = bytes(self.buf).partition(b"\r\n\r\n")
        self.buf = bytearray(rest)
        first, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(first.split()[1]), headers

    async def read_exactly(self, size: int) -> bytes:
        while len(self.buf) < size:
            await self._fill()
        data = bytes(self.buf[:size])
        del self.buf[:size]
        return data

    async def read_some(self) -> bytes:
        if not self.buf:
            await self._fill()
        data = bytes(self.buf)
        self.buf.clear()
        return data

    async def read_response(self) -> Reply:
        with trio.fail_after(5):
            status, headers = await self.read_head()
            body = await self.read_exactly(int(headers.get("content-length", "0")))
        return Reply(status, headers, body)

    async def seconds_to_eof(self, limit: float = 5.0) -> float:
        """Read (and drop) until the server closes; return how long that took."""
        start = trio.current_time()
        with trio.fail_after(limit):
            while True:
                try:
                    data = await self.stream.receive_some(65536)
                except trio.BrokenResourceError:  # reset also counts as closed
                    break
                if not data:
                    break
        return trio.current_time() - start

    async def aclose(self) -> None:
        await self.stream.aclose()


def get(path: str, *extra: str, version: str = "1.1") -> bytes:
    lines = [f"GET {path} HTTP/{version}", "Host: test", *extra, "", ""]
    return "\r\n".join(lines).encode()


def post(path: str, body: bytes, *extra: str) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {len(body)}\r\n"
    return (head + "".join(f"{line}\r\n" for line in extra) + "\r\n").encode() + body


# ------------------------------------------------------------------------------ pitfall 1


async def test_connection_close_closes_the_socket_within_100ms(server: Server) -> None:
    client = await RawClient.connect(server.port)
    await client.send(get("/hello", "Connection: close"))
    reply = await client.read_response()
    assert reply.status == 200
    assert reply.json() == {"ok": True}
    assert await client.seconds_to_eof() < 0.1


async def test_http_1_0_request_closes_the_socket_within_100ms(server: Server) -> None:
    client = await RawClient.connect(server.port)
    await client.send(get("/hello", version="1.0"))
    reply = await client.read_response()
    assert reply.status == 200
    assert await client.seconds_to_eof() < 0.1


async def test_keep_alive_serves_several_requests_then_times_out_when_idle(
    server: Server,
) -> None:
    client = await RawClient.connect(server.port)
    for _ in range(3):
        await client.send(get("/hello"))
        reply = await client.read_response()
        assert reply.status == 200
        assert reply.json() == {"ok": True}
    idle = await client.seconds_to_eof()
    assert CONFIG.keep_alive_timeout * 0.8 <= idle < CONFIG.keep_alive_timeout + 1.0


async def test_a_connection_that_never_sends_a_request_times_out(server: Server) -> None:
    client = await RawClient.connect(server.port)
    assert await client.seconds_to_eof() < CONFIG.keep_alive_timeout + 1.0


# ------------------------------------------------------------------------------ pitfall 6


async def test_declared_oversized_upload_is_refused_before_the_body_is_sent(
    server: Server,
) -> None:
    client = await RawClient.connect(server.port)
    # Headers only: the 50 MB never follows. A server that waited for it would hang.
    await client.send(
        b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n"
    )
    reply = await client.read_response()
    assert reply.status == 413
    assert reply.json() == body_too_large(LIMIT).to_wire()
    assert reply.headers["connection"].lower() == "close"
    assert await client.seconds_to_eof() < 0.5


def chunked(body: bytes, piece: int = 16 * 1024) -> bytes:
    out = bytearray()
    for start in range(0, len(body), piece):
        part = body[start : start + piece]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


@pytest.mark.parametrize("path", ["/echo", "/count"])
async def test_chunked_body_over_the_limit_is_refused(server: Server, path: str) -> None:
    body = json.dumps({"blob": "x" * (LIMIT + 32 * 1024)}).encode()
    client = await RawClient.connect(server.port)
    await client.send(
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n".encode()
        + chunked(body)
    )
    reply = await client.read_response()
    assert reply.status == 413
    assert reply.json() == body_too_large(LIMIT).to_wire()
    assert reply.headers["connection"].lower() == "close"
    assert await client.seconds_to_eof() < 2.0


async def test_a_client_that_uploads_before_reading_still_gets_its_413(server: Server) -> None:
    # A naive client sends the whole (too large) body, then reads. The server
    # answers after the first 64 KiB; had it closed with input unread, the
    # kernel would reset the connection and the client's send would fail. The
    # server drains for a moment instead (lingering close).
    client = await RawClient.connect(server.port)
    piece = f"{65536:x}\r\n".encode() + b"z" * 65536 + b"\r\n"
    with trio.fail_after(5):
        await client.send(b"POST /count HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(64):  # 4 MiB
            await client.send(piece)
        await client.send(b"0\r\n\r\n")
    reply = await client.read_response()
    assert reply.status == 413
    assert reply.json() == body_too_large(LIMIT).to_wire()


async def test_bodies_within_the_limit_are_served(server: Server) -> None:
    payload = {"blob": "y" * (LIMIT // 2)}
    body = json.dumps(payload).encode()
    client = await RawClient.connect(server.port)
    await client.send(post("/echo", body, "Content-Type: application/json"))
    assert (await client.read_response()).json() == {"echo": payload}
    await client.send(b"POST /count HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body))
    assert (await client.read_response()).json() == {"bytes": len(body)}


# ------------------------------------------------------------------------------ pitfall 2


async def test_streams_outlive_response_timeout_but_ordinary_responses_do_not(
    server: Server,
) -> None:
    assert server.app.config["RESPONSE_TIMEOUT"] == 1
    last_data_at: dict[str, float] = {}
    start = trio.current_time()

    async def watch(path: str) -> None:
        client = await RawClient.connect(server.port)
        await client.send(get(path))
        status, _ = await client.read_head()
        assert status == 200
        with trio.move_on_after(2.3):
            while True:
                try:
                    data = await client.read_some()
                except (EOFError, trio.BrokenResourceError):
                    break
                if data:
                    last_data_at[path] = trio.current_time() - start
        await client.aclose()

    async with trio.open_nursery() as nursery:
        for path in ("/stream", "/events-plain", "/text-plain"):
            nursery.start_soon(watch, path)

    assert last_data_at["/stream"] > 2.0
    assert last_data_at["/events-plain"] > 2.0
    assert last_data_at["/text-plain"] < 1.5  # the control: RESPONSE_TIMEOUT is really 1 s


# ------------------------------------------------------------------------------ pitfall 3


@pytest.mark.parametrize("path", ["/flood", "/stream"])
async def test_a_client_that_stops_reading_does_not_block_shutdown(path: str) -> None:
    stop = trio.Event()
    async with trio.open_nursery() as outer:
        # A shielded write cannot be cancelled; if one hangs, end it by closing
        # the client after a while, so a regression fails instead of hanging.
        unstick = trio.Event()

        async def watchdog() -> None:
            await unstick.wait()
            await trio.sleep(6)
            await client.aclose()

        outer.start_soon(watchdog)
        async with trio.open_nursery() as nursery:
            app = make_app()
            # A serving write timeout far beyond the test: only the shutdown's own
            # (short) write deadline can make the stop prompt.
            config = attrs.evolve(CONFIG, write_timeout=60.0)
            port = await nursery.start(partial(serve, app, config, shutdown_trigger=stop.wait))
            client = await RawClient.connect(port)
            await client.send(get(path))
            status, _ = await client.read_head()
            assert status == 200
            await trio.sleep(0.3)  # /flood has filled the socket buffers by now; never read again
            stop.set()
            unstick.set()
            triggered = trio.current_time()
        assert trio.current_time() - triggered < 3.0
        outer.cancel_scope.cancel()
    await client.aclose()


async def test_idle_connections_close_at_once_on_shutdown() -> None:
    stop = trio.Event()
    config = attrs.evolve(CONFIG, keep_alive_timeout=30.0)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve, make_app(), config, shutdown_trigger=stop.wait))
        client = await RawClient.connect(port)
        await client.send(get("/hello"))
        assert (await client.read_response()).status == 200
        stop.set()
        assert await client.seconds_to_eof() < 0.5


# ------------------------------------------------------------------------------ JSON errors


async def ask(port: int, raw: bytes) -> Reply:
    client = await RawClient.connect(port)
    try:
        await client.send(raw)
        return await client.read_response()
    finally:
        await client.aclose()


def assert_not_html(reply: Reply) -> None:
    assert b"<" not in reply.body[:1]
    assert "html" not in reply.headers.get("content-type", "")


async def test_unknown_route_wrong_method_and_bad_json_answer_json(server: Server) -> None:
    reply = await ask(server.port, get("/no/such/thing"))
    assert reply.status == 404
    assert reply.json() == {"error": "invalid_request", "message": "no such resource", "details": {}}

    reply = await ask(server.port, b"DELETE /hello HTTP/1.1\r\nHost: test\r\n\r\n")
    assert reply.status == 405
    assert reply.json()["error"] == "invalid_request"
    assert reply.json()["details"] == {}
    assert "GET" in reply.headers["allow"]

    reply = await ask(server.port, post("/echo", b"{not json", "Content-Type: application/json"))
    assert reply.status == 400
    assert reply.json()["error"] == "invalid_request"

    reply = await ask(server.port, post("/echo", b"plain", "Content-Type: text/plain"))
    assert reply.status == 400
    assert reply.json() == invalid_request("body must be JSON").to_wire()


async def test_commonroom_errors_keep_their_status_and_recovery_fields(server: Server) -> None:
    reply = await ask(server.port, get("/conflict"))
    assert reply.status == 409
    assert reply.json() == {
        "error": "stale_version",
        "message": "the file moved on",
        "details": {},
        "current_version": 7,
    }


async def test_a_bug_is_a_bare_500_and_the_traceback_stays_in_the_log(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        reply = await ask(server.port, get("/boom"))
    assert reply.status == 500
    # A server fault has its own code (issue 8 item 3), never invalid_request.
    assert reply.json() == {
        "error": "internal_error", "message": "internal error; the room logged it", "details": {}}
    assert b"secret" not in reply.body
    logged = [r for r in caplog.records if r.exc_info and "secret internal detail" in str(r.exc_info[1])]
    assert len(logged) == 1  # once, with its traceback


async def test_malformed_http_gets_an_empty_400_not_html(server: Server) -> None:
    reply = await ask(server.port, b"NOT HTTP AT ALL\r\n\r\n")
    assert reply.status == 400
    assert reply.body == b""
    assert_not_html(reply)


# ------------------------------------------------------------------------------ serve() itself


async def test_two_servers_run_side_by_side_in_one_nursery() -> None:
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        first = await nursery.start(partial(serve, make_app(), CONFIG, shutdown_trigger=stop.wait))
        other = QuartTrio("other", static_folder=None)

        @other.get("/hello")
        async def hello() -> dict[str, Any]:
            return {"other": True}

        second = await nursery.start(partial(serve, other, CONFIG, shutdown_trigger=stop.wait))
        assert first != second
        assert (await ask(first, get("/hello"))).json() == {"ok": True}
        assert (await ask(second, get("/hello"))).json() == {"other": True}
        stop.set()


def test_only_loopback_addresses_are_accepted() -> None:
    assert ServeConfig(host="::1").host == "::1"
    for host in ("0.0.0.0", "192.168.1.2", "localhost", "::"):
        with pytest.raises(ValueError):
            ServeConfig(host=host)


def test_harden_is_idempotent_and_refuses_foreign_classes() -> None:
    app = make_app()
    harden(app, max_body_bytes=10)
    harden(app, max_body_bytes=20)
    assert app.config["MAX_CONTENT_LENGTH"] == 20

    class CustomRequest(TrioRequest):
        pass

    class Custom(QuartTrio):
        request_class = CustomRequest

    with pytest.raises(TypeError):
        harden(Custom("custom", static_folder=None), max_body_bytes=10)


# ------------------------------------------------------------------------------ pitfall 5

SIGINT_SCRIPT = textwrap.dedent(
    """
    from functools import partial

    import trio
    from quart_trio import QuartTrio

    from commonroom.http.hardened_app import streaming_response
    from commonroom.http.serving import ServeConfig, serve
    from commonroom.http.serving import wait_for_stop_signal

    app = QuartTrio("sigint", static_folder=None)

    @app.get("/flood")
    async def flood():
        async def chunks():
            while True:
                yield b"x" * 65536
                await trio.sleep(0)
        return streaming_response(chunks(), headers={})

    async def main():
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            await nursery.start(wait_for_stop_signal, stop)
            port = await nursery.start(partial(serve, app, ServeConfig(), shutdown_trigger=stop.wait))
            print(port, flush=True)
        print("stopped", flush=True)

    trio.run(main)
    """
)


async def test_sigint_shuts_down_gracefully_despite_a_stalled_client() -> None:
    process = await trio.lowlevel.open_process([sys.executable, "-c", SIGINT_SCRIPT], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        output = bytearray()
        with trio.fail_after(15):
            while b"\n" not in output:
                data = await process.stdout.receive_some()
                assert data, "the server exited before printing its port"
                output += data
        port = int(output.split(b"\n")[0])
        client = await RawClient.connect(port)
        await client.send(get("/flood"))
        status, _ = await client.read_head()
        assert status == 200
        await trio.sleep(0.3)  # never read again: the server's writes stall
        process.send_signal(signal.SIGINT)
        with trio.fail_after(3):
            assert await process.wait() == 0
        rest = await process.stdout.receive_some()
        assert b"stopped" in output + rest
        await client.aclose()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
