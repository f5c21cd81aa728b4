"""What `commonroom.http._compat` relies on in hypercorn, quart and quart-trio is still there.

One test per override: each fails when an upgrade removes or renames the
private hook, changes the signature we call, or stops reading the attribute or
module name we replace. The behaviour each override exists for is tested
against real hypercorn elsewhere (tests/service/test_serving.py: the pitfalls;
test_hostile_clients.py; tests/reliability/test_hostile.py: the WebSocket bomb);
these are the tripwires that say *which* assumption an upgrade broke.
"""

from __future__ import annotations

import contextvars
import inspect
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Closed, RawData
from hypercorn.protocol import h2, h11, ws_stream
from hypercorn.trio import serve as stock_serve
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.task_group import TaskGroup
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer
from hypercorn.trio.worker_context import TrioSingleTask, WorkerContext
from hypercorn.utils import wrap_app
from quart import Quart, websocket
from quart.asgi import ASGIHTTPConnection
from quart.wrappers import Request
from quart_trio import QuartTrio
from quart_trio.asgi import TrioASGIHTTPConnection
from quart_trio.wrappers.request import TrioBody
from werkzeug.exceptions import RequestEntityTooLarge
from wsproto.events import BytesMessage

from commonroom.http import _compat
from commonroom.http.connection import HardenedTCPServer
from commonroom.http.hardened_app import HardenedHTTPConnection, HardenedRequest
from commonroom.http.serving import ServeConfig, serve

ROOT = Path(__file__).resolve().parents[2]


def parameters(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def source(function: Callable[..., Any]) -> str:
    return textwrap.dedent(inspect.getsource(function))


# ------------------------------------------------------------------------ the versions


def test_the_installed_stack_is_the_tested_one_and_pyproject_pins_the_same() -> None:
    _compat.check_versions()  # the import already did; an explicit call says so
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for package, series in _compat.TESTED.items():
        assert f"{package}=={series}.*" in pins, f"pyproject pins {package} to another series than TESTED"


def test_an_untested_version_is_refused_naming_the_tested_set_and_the_file() -> None:
    found = {"hypercorn": "0.19.1", "quart": "0.22.3", "quart-trio": "0.12.0"}
    with pytest.raises(_compat.UntestedWebStack) as refused:
        _compat.check_versions(found.__getitem__)
    message = str(refused.value)
    assert "hypercorn 0.18, quart 0.22, quart-trio 0.12" in message
    assert "found hypercorn 0.19.1" in message and "quart 0.22.3" not in message
    assert "src/commonroom/http/_compat.py" in message and "pyproject.toml" in message


def test_a_missing_package_is_refused_too() -> None:
    def version_of(package: str) -> str:
        if package == "quart-trio":
            from importlib.metadata import PackageNotFoundError

            raise PackageNotFoundError(package)
        return {"hypercorn": "0.18.0", "quart": "0.22.0"}[package]

    with pytest.raises(_compat.UntestedWebStack, match="found quart-trio not installed"):
        _compat.check_versions(version_of)


def test_serving_an_untested_stack_fails_at_import_not_later() -> None:
    script = textwrap.dedent("""
        import importlib.metadata as metadata
        real = metadata.version
        metadata.version = lambda name: "0.19.0" if name == "hypercorn" else real(name)
        import commonroom.http.serving
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "UntestedWebStack" in run.stderr and "found hypercorn 0.19.0" in run.stderr, run.stderr


# ------------------------------------------------------------------------ hypercorn: the worker


def test_the_worker_relies_on_lifespan_worker_context_and_wrap_app() -> None:
    assert parameters(wrap_app) == ["app", "wsgi_max_body_size", "mode"]
    assert parameters(Lifespan.__init__) == ["self", "app", "config", "state"]
    assert "task_status" in parameters(Lifespan.handle_lifespan)
    for name in ("handle_lifespan", "wait_for_startup", "wait_for_shutdown"):
        assert inspect.iscoroutinefunction(getattr(Lifespan, name)), name
    assert parameters(WorkerContext.__init__) == ["self", "max_requests"]
    terminated = WorkerContext(None).terminated
    assert inspect.iscoroutinefunction(terminated.set) and inspect.iscoroutinefunction(terminated.wait)
    assert not terminated.is_set()
    assert hasattr(HypercornConfig(), "wsgi_max_body_size")


async def test_the_worker_runs_the_apps_startup_and_shutdown() -> None:
    app = QuartTrio("compat", static_folder=None)
    seen: list[str] = []

    @app.before_serving
    async def up() -> None:
        seen.append("startup")

    @app.after_serving
    async def down() -> None:
        seen.append("shutdown")

    worker = _compat.HypercornWorker(app, HypercornConfig())
    async with trio.open_nursery() as nursery:
        await worker.start_app(nursery)
        assert seen == ["startup"]
        await worker.close_idle_connections()
        assert worker.context.terminated.is_set()
        await worker.stop_app()
    assert seen == ["startup", "shutdown"]


# ------------------------------------------------------------------------ hypercorn: the connection


def test_tcp_server_has_the_hooks_hypercorn_connection_overrides() -> None:
    assert parameters(TCPServer.__init__) == ["self", "app", "config", "context", "state", "stream"]
    for hook, arguments in {
        "run": ["self"],
        "protocol_send": ["self", "event"],
        "_read_data": ["self"],
        "_close": ["self"],
        "_initiate_server_close": ["self"],
    }.items():
        method = getattr(TCPServer, hook)
        assert inspect.iscoroutinefunction(method) and parameters(method) == arguments, hook
    run = source(TCPServer.run)
    # Reading happens in _read_data, the close in _close, and nothing else reads or closes.
    assert "await self._read_data()" in run and "await self._close()" in run
    assert "self.protocol_send" in run  # every outgoing event passes through our protocol_send
    assert isinstance(MAX_RECV, int) and MAX_RECV > 0
    assert RawData(data=b"x").data == b"x" and isinstance(Closed(), Closed)


def test_tcp_server_keeps_the_attributes_the_connection_reads() -> None:
    stream = object()
    context = WorkerContext(None)
    server = TCPServer(None, HypercornConfig(), context, {}, stream)  # type: ignore[arg-type]
    assert server.stream is stream and server.context is context
    assert isinstance(server.send_lock, trio.Lock)
    assert isinstance(server.idle_task, TrioSingleTask)
    assert hasattr(server.config, "read_timeout") and hasattr(server.config, "keep_alive_timeout")


def test_the_idle_timer_keeps_the_single_task_contract() -> None:
    # hypercorn calls idle_task.restart(task_group, action) when the connection
    # idles and idle_task.stop() when a request arrives; the timer spawns its
    # watcher with task_group.spawn and closes through _initiate_server_close.
    assert parameters(TrioSingleTask.restart) == ["self", "task_group", "action"]
    assert parameters(TrioSingleTask.stop) == ["self"]
    assert parameters(TaskGroup.spawn)[:2] == ["self", "func"]
    sent = source(TCPServer.protocol_send)
    assert "self.idle_task.restart(self._task_group" in sent and "self.idle_task.stop()" in sent
    assert "self.idle_task.restart(self._task_group" in source(TCPServer.run)
    assert "self._initiate_server_close()" in source(TCPServer._idle_timeout)


async def test_our_connection_wires_its_hooks_into_tcp_server() -> None:
    worker = _compat.HypercornWorker(QuartTrio("compat", static_folder=None), HypercornConfig())
    left, right = trio.testing.memory_stream_pair()
    server = HardenedTCPServer(worker, left, write_timeout=1.0)  # type: ignore[arg-type]
    assert server.socket_stream is server.stream is left
    assert server.write_lock is server.send_lock
    assert isinstance(server.idle_task, _compat._IdleTimer)
    assert not server.lingering
    server.linger(1.0)
    assert server.lingering
    await right.aclose()


# ------------------------------------------------------------------------ hypercorn: the WebSocket

DEFLATE_OFFER = [
    (b"host", b"commonroom"),
    (b"connection", b"upgrade"),
    (b"upgrade", b"websocket"),
    (b"sec-websocket-version", b"13"),
    (b"sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ=="),
    (b"sec-websocket-extensions", b"permessage-deflate"),
]


def _inside_our_connection(call: Callable[[], Any]) -> Any:
    context = contextvars.copy_context()
    context.run(_compat._SERVING.set, object.__new__(HardenedTCPServer))
    return context.run(call)


def test_hypercorn_builds_the_handshake_and_buffer_from_the_names_we_replace() -> None:
    # WSStream looks both up as module globals, and both protocols build WSStream.
    assert "WebsocketBuffer(config.websocket_max_message_size)" in source(ws_stream.WSStream.__init__)
    assert "Handshake(event.headers, event.http_version)" in source(ws_stream.WSStream.handle)
    assert h11.WSStream is ws_stream.WSStream and h2.WSStream is ws_stream.WSStream
    assert parameters(ws_stream.Handshake.__init__) == ["self", "headers", "http_version"]
    assert "self.extensions" in source(ws_stream.Handshake.accept)
    assert parameters(ws_stream.WebsocketBuffer.__init__) == ["self", "max_length"]
    assert parameters(ws_stream.WebsocketBuffer.extend) == ["self", "event"]
    assert issubclass(ws_stream.FrameTooLargeError, Exception)


def _negotiated_extensions() -> bytes | None:
    handshake = ws_stream.Handshake(DEFLATE_OFFER, "1.1")
    _, headers, _ = handshake.accept(None, [])
    return dict(headers).get(b"sec-websocket-extensions")


def test_compression_is_refused_on_our_connections_only() -> None:
    _compat.refuse_websocket_compression()
    _compat.refuse_websocket_compression()  # idempotent
    assert _inside_our_connection(_negotiated_extensions) is None
    assert _negotiated_extensions() == b"permessage-deflate"  # anybody else's hypercorn: unchanged


def test_a_message_past_the_limit_is_refused_on_our_connections_only() -> None:
    _compat.refuse_websocket_compression()

    def fill() -> int:
        buffer = ws_stream.WebsocketBuffer(10)
        assert buffer.length == 0 and buffer.max_length == 10
        buffer.extend(BytesMessage(data=b"x" * 8, message_finished=False))
        try:
            buffer.extend(BytesMessage(data=b"x" * 8, message_finished=False))
        except ws_stream.FrameTooLargeError:
            return -1
        return int(buffer.length)

    assert _inside_our_connection(fill) == -1
    assert fill() == -1  # hypercorn refuses too, after keeping the bytes (what pitfall 7 is about)


async def _upgrade_offering_deflate(port: int) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        lines = [b"GET /ws HTTP/1.1"] + [name + b": " + value for name, value in DEFLATE_OFFER]
        await stream.send_all(b"\r\n".join(lines) + b"\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await stream.receive_some(4096)
            if not chunk:
                break
            head += chunk
        return head.lower()


async def test_stock_hypercorn_in_the_same_process_still_negotiates_compression() -> None:
    """The WebSocket fix is scoped: our `serve` refuses deflate, plain hypercorn beside it does not."""

    def make_app(name: str) -> QuartTrio:
        app = QuartTrio(name, static_folder=None)

        @app.websocket("/ws")
        async def ws() -> None:
            await websocket.accept()
            await websocket.receive()

        return app

    stock_config = HypercornConfig()
    stock_config.bind = ["127.0.0.1:0"]
    stock_config.accesslog = None
    async with trio.open_nursery() as nursery:
        stop = trio.Event()
        ours = await nursery.start(partial(serve, make_app("ours"), ServeConfig(), shutdown_trigger=stop.wait))
        bound = await nursery.start(partial(stock_serve, make_app("stock"), stock_config, shutdown_trigger=stop.wait))
        stock = int(bound[0].rsplit(":", 1)[1])
        ours_head = await _upgrade_offering_deflate(ours)
        stock_head = await _upgrade_offering_deflate(stock)
        stop.set()
    assert ours_head.startswith(b"http/1.1 101") and b"sec-websocket-extensions" not in ours_head, ours_head
    assert stock_head.startswith(b"http/1.1 101"), stock_head
    assert b"sec-websocket-extensions: permessage-deflate" in stock_head, stock_head


# ------------------------------------------------------------------------ quart-trio: the handler


def test_quart_builds_the_handler_with_app_and_scope() -> None:
    assert parameters(ASGIHTTPConnection.__init__) == ["self", "app", "scope"]
    assert "self.asgi_http_class(self, scope)" in source(Quart.asgi_app)
    handler = ASGIHTTPConnection(QuartTrio("compat", static_folder=None), {"type": "http"})  # type: ignore[typeddict-item]
    assert handler.scope == {"type": "http"} and isinstance(handler.app, QuartTrio)


def test_quart_trio_runs_the_hooks_quart_trio_http_connection_overrides() -> None:
    assert parameters(TrioASGIHTTPConnection._create_request_from_scope) == ["self", "send"]
    assert parameters(TrioASGIHTTPConnection._send_response) == ["self", "send", "response"]
    assert inspect.iscoroutinefunction(TrioASGIHTTPConnection._send_response)
    assert parameters(TrioASGIHTTPConnection.handle_request) == ["self", "nursery", "request", "send"]
    call = source(TrioASGIHTTPConnection.__call__)
    assert "request = self._create_request_from_scope(send)" in call
    # handle_request runs beside the message reader in one nursery, whose cancellation ends both.
    assert "nursery.start_soon(self.handle_request, nursery, request, send)" in call
    assert "nursery.start_soon(self.handle_messages, nursery, request, receive)" in call
    assert issubclass(HardenedHTTPConnection, TrioASGIHTTPConnection)
    assert _compat.STOCK_HTTP_CONNECTION is TrioASGIHTTPConnection is QuartTrio.asgi_http_class


def test_quart_builds_the_body_from_body_class_with_the_limits_bounded_body_reads() -> None:
    assert "self.body = self.body_class(self.content_length, max_content_length)" in source(Request.__init__)
    assert parameters(TrioBody.__init__) == ["self", "expected_content_length", "max_content_length"]
    body = TrioBody(None, 10)
    assert body._max_content_length == 10 and body._must_raise is None
    for name in ("append", "clear", "set_complete", "__anext__"):
        assert callable(getattr(body, name)), name
    assert HardenedRequest.body_class is _compat.BoundedBody


async def test_a_bounded_body_refuses_what_quart_would_keep() -> None:
    body = _compat.BoundedBody(None, 10)
    body.append(b"x" * 6)
    body.append(b"x" * 6)  # 12 > 10: nothing more is kept, reading raises
    with pytest.raises(RequestEntityTooLarge):
        await body
    # Quart checks the limit only before waiting: an iteration already waiting must fail too.
    chunks = _compat.BoundedBody(None, 10)
    outcome: list[str] = []

    async def iterate() -> None:
        try:
            async for _ in chunks:
                outcome.append("chunk")
        except RequestEntityTooLarge:
            outcome.append("refused")
        else:
            outcome.append("complete")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(iterate)
        await trio.testing.wait_all_tasks_blocked()
        chunks.append(b"x" * 11)
    assert outcome == ["refused"]
