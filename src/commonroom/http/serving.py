"""The one way commonroom serves a quart-trio app: hypercorn's trio worker, hardened.

DESIGN.md "Known pitfalls of this stack" lists what the stock stack gets wrong
(quart 0.22 / quart-trio 0.12 / hypercorn 0.18 / trio 0.35). What this module
does about each, so that no other module has to think about it:

1. Connections are never closed. hypercorn sends ``http.disconnect`` to the app
   from inside the app's own final ``http.response.body`` send; quart-trio's
   message reader then cancels the request nursery, and the cancellation lands
   in hypercorn's code that was about to recycle the connection (start the
   keep-alive timer) or close it. `HardenedHTTPConnection` shields that one
   final send (the socket write under it has a deadline, see 3); an earlier
   disconnect (a client leaving an SSE stream) still cancels at once. Making
   hypercorn's recycling actually run costs its keep-alive timer a new task per
   response (measured: 20-25 % of a small request); `_IdleTimer` replaces it
   with one task per connection whose deadline moves, which makes the fixed
   server as cheap as the broken one.
2. Streams are cut by ``RESPONSE_TIMEOUT`` (60 s). `streaming_response` sets the
   response's timeout to none; the connection class also treats any
   ``text/event-stream`` response without an explicit timeout as unbounded.
   ``RESPONSE_TIMEOUT`` then only bounds ordinary responses, and
   ``BODY_TIMEOUT`` (Quart's default, 60 s) bounds reading a request body.
3. A client that stops reading blocks shutdown (hypercorn shields the socket
   write). `_HardenedTCPServer` keeps the shield (a cancelled write would tear
   an HTTP message) but puts a deadline on it: a write that makes no progress
   for ``write_timeout`` seconds aborts the connection, and once shutdown
   starts every write, pending or new, gets ``shutdown_write_timeout``. The
   serving timeout can then be long (a stream reader that stalls a while is
   told `resync` when it comes back rather than cut off), and stopping is
   still prompt.
4. ``app.add_background_task`` / ``app.nursery`` work is cancelled at shutdown.
   Nothing here uses them; the room runs its work in its own nursery.
5. Ctrl-C skips graceful shutdown when `serve` runs in your own nursery:
   `wait_for_stop_signal` turns SIGINT/SIGTERM into a `trio.Event` and `serve`
   takes that event's ``wait`` as its ``shutdown_trigger``. The receiver is
   dropped after the first signal, so a second Ctrl-C interrupts for real.
6. ``MAX_CONTENT_LENGTH`` only bites when the body is read. A declared
   ``Content-Length`` over the limit is answered 413 before the app runs and
   before a byte of the body is read; a chunked body is counted as it arrives
   and nothing past the limit is kept (`HardenedRequest`). The answer is the
   protocol's JSON error with ``Connection: close``; the server then drains
   what the client is still sending for at most a second (a lingering close)
   so the client can read the 413 instead of a reset.

`install_json_errors` turns every error quart would render as HTML into the
protocol's JSON error shape. hypercorn's own error answers (malformed HTTP)
have empty bodies, never HTML.

Everything here listens on a loopback address only.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import os
import signal
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from functools import partial
from inspect import isasyncgen
from typing import Any, Final, cast

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Closed, RawData
from hypercorn.events import Event as ServerEvent
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import (
    AppWrapper,
    ASGIReceiveCallable,
    ASGISendCallable,
    ASGISendEvent,
    ConnectionState,
    LifespanState,
)
from hypercorn.utils import wrap_app
from quart import Response, current_app, request
from quart.wrappers import Request
from quart_trio import QuartTrio
from quart_trio.asgi import TrioASGIHTTPConnection
from quart_trio.wrappers.request import TrioBody, TrioRequest
from werkzeug.exceptions import HTTPException, MethodNotAllowed, RequestEntityTooLarge
from werkzeug.wrappers import Response as WerkzeugResponse

from commonroom.protocol.errors import CommonroomError, body_too_large, internal_error

__all__ = [
    "HEADER_CHECK",
    "HardenedHTTPConnection",
    "HardenedRequest",
    "ServeConfig",
    "after_send",
    "harden",
    "install_json_errors",
    "serve",
    "streaming_response",
    "wait_for_stop_signal",
]

log = logging.getLogger(__name__)

_LINGER_SECONDS: Final = 1.0
"""After answering and half-closing, how long to drain what the client still sends."""

_WRITE_SLICE: Final = 256 * 1024
"""Large writes go out in slices, each with its own write deadline (progress, not total)."""

_BACKLOG: Final = 128

_HARDENED_MARK: Final = "commonroom.http.hardened"
_AFTER_SEND: Final = "commonroom_after_send"


def after_send(response: Response, callback: Callable[[], None]) -> Response:
    """Run `callback` once `response` has been written (or its sending ended otherwise).

    The room uses it to wake event subscribers only after the caller has its answer.
    """
    setattr(response, _AFTER_SEND, callback)
    return response

HEADER_CHECK: Final = "commonroom.http.header_check"
"""``app.extensions[HEADER_CHECK]``: ``f(asgi_headers) -> CommonroomError | None``, run
before a declared-too-large body is refused (that refusal skips the app)."""


def _check_loopback(_instance: object, _attribute: object, host: str) -> None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"host must be a literal loopback address, not {host!r}") from None
    if not address.is_loopback:
        raise ValueError(f"host must be a loopback address, not {host!r}")


def _check_positive(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, not {value!r}")


@attrs.frozen
class ServeConfig:
    """How `serve` listens and how long it waits. Times are in seconds."""

    host: str = attrs.field(default="127.0.0.1", validator=_check_loopback)
    port: int = attrs.field(
        default=0,
        validator=attrs.validators.and_(attrs.validators.ge(0), attrs.validators.le(65535)),
    )
    """0 asks the OS for a free port; `serve` reports the bound one."""
    keep_alive_timeout: float = attrs.field(default=5.0, validator=_check_positive)
    """An idle keep-alive connection is closed after this long."""
    max_body_bytes: int = attrs.field(default=1024 * 1024, validator=_check_positive)
    write_timeout: float = attrs.field(default=30.0, validator=_check_positive)
    """A socket write that makes no progress for this long aborts the connection."""
    shutdown_write_timeout: float = attrs.field(default=0.5, validator=_check_positive)
    """Once shutdown starts, writes get this long instead (a stalled reader cannot hold the stop)."""
    send_buffer_bytes: int | None = 128 * 1024
    """SO_SNDBUF of every accepted socket (None: the kernel's autotuning, up to 4 MiB each).
    Bounds the kernel memory a stalled reader can pin, and makes such a reader fall
    behind its stream's event buffer (and be told `resync`) after ~1,000 events."""
    graceful_timeout: float = attrs.field(default=2.0, validator=_check_positive)
    """After the shutdown trigger, open requests get this long before being cancelled."""


# --------------------------------------------------------------------------------------
# App level: connection class, bounded request body, JSON errors, stream timeouts


class _BoundedBody(TrioBody):
    """A request body that counts every byte received, not just the bytes held.

    Quart's `Body` compares the limit with what it currently holds, so a body
    consumed chunk by chunk (``async for``) is never bounded. Past the limit
    nothing more is kept and reading raises `RequestEntityTooLarge`.
    """

    def __init__(self, expected_content_length: int | None, max_content_length: int | None) -> None:
        super().__init__(expected_content_length, max_content_length)
        self._received = 0

    def append(self, data: bytes) -> None:
        self._received += len(data)
        limit = self._max_content_length
        if limit is not None and self._received > limit:
            if self._must_raise is None:
                self._must_raise = RequestEntityTooLarge()
                self.clear()
                self.set_complete()
            return
        super().append(data)

    async def __anext__(self) -> bytes:
        try:
            return await super().__anext__()
        except StopAsyncIteration:
            # Quart checks for the error only before waiting: an iteration that
            # was waiting when the limit was passed would end as if complete.
            if self._must_raise is not None:
                raise self._must_raise from None
            raise


class HardenedRequest(TrioRequest):
    """quart-trio's request with a body bounded while it is received."""

    body_class = _BoundedBody


class HardenedHTTPConnection(TrioASGIHTTPConnection):
    """quart-trio's per-request ASGI handler with pitfalls 1, 2 and 6 fixed."""

    def _body_limit(self) -> int | None:
        """The app's body limit, or the one its `BODY_LIMITS` (path -> bytes) grants this path."""
        limit = cast(int | None, self.app.config["MAX_CONTENT_LENGTH"])
        return cast(int | None, self.app.config.get("BODY_LIMITS", {}).get(self.scope["path"], limit))

    def _create_request_from_scope(self, send: ASGISendCallable) -> Request:
        request = super()._create_request_from_scope(send)
        limit = self._body_limit()
        if limit != self.app.config["MAX_CONTENT_LENGTH"]:
            request.max_content_length = limit
            request.body = request.body_class(request.content_length, limit)
        return request

    async def __call__(self, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        limit = self._body_limit()
        if limit is not None:
            declared = _declared_length(self.scope["headers"])
            if declared is not None and declared > limit:
                # The app's own header check (say Host/Origin) still comes
                # first: a refused origin is told 403, not 413.
                check = self.app.extensions.get(HEADER_CHECK)
                refusal = check(self.scope["headers"]) if check is not None else None
                await self._refuse_body(receive, send, refusal or body_too_large(limit))
                return
        await super().__call__(receive, send)

    async def _refuse_body(
        self, receive: ASGIReceiveCallable, send: ASGISendCallable, error: CommonroomError
    ) -> None:
        """Answer `error` without running the app and without reading the body."""
        response = _error_response(self.app.response_class, error, close=True)
        async with trio.open_nursery() as nursery:
            # hypercorn hands the app whatever body bytes already arrived, over
            # a bounded channel; keep taking (and dropping) them so it never blocks.
            nursery.start_soon(_discard_until_disconnect, receive)
            await self._send_response(send, response)
            nursery.cancel_scope.cancel()

    async def handle_request(  # type: ignore[override]
        self, nursery: trio.Nursery, request: Request, send: ASGISendCallable
    ) -> None:
        async def send_with_a_shielded_end(message: ASGISendEvent) -> None:
            event = cast(Mapping[str, Any], message)
            if event["type"] == "http.response.body" and not event.get("more_body", False):
                # hypercorn sends the app its http.disconnect from inside this
                # call, then recycles or closes the connection: nothing may
                # cancel it half way. The socket write has its own deadline.
                with trio.CancelScope(shield=True):
                    await send(message)
            else:
                await send(message)

        response = await self.app.handle_request(request)
        timeout = _response_timeout(response, self.app.config["RESPONSE_TIMEOUT"])
        try:
            with trio.move_on_after(math.inf if timeout is None else timeout):
                await self._send_response(send_with_a_shielded_end, response)
        finally:
            callback = getattr(response, _AFTER_SEND, None)
            if callback is not None:
                callback()
        nursery.cancel_scope.cancel()


async def _discard_until_disconnect(receive: ASGIReceiveCallable) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _declared_length(headers: Any) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # h11 refuses a malformed Content-Length before we get here
    return None


def _response_timeout(response: Response | WerkzeugResponse, default: Any) -> float | None:
    if isinstance(response, Response):
        if response.timeout is not Ellipsis:
            return cast(float | None, response.timeout)
        if response.mimetype == "text/event-stream":
            return None
    return cast(float | None, default)


def _error_response(
    response_class: type[Response],
    error: CommonroomError,
    *,
    close: bool = False,
    headers: Mapping[str, str] | None = None,
) -> Response:
    response = response_class(
        json.dumps(error.to_wire()),
        status=error.http_status,
        headers=dict(headers or {}),
        content_type="application/json",
    )
    if close:
        response.headers["Connection"] = "close"
    return response


_HTTP_MESSAGES: Final[dict[int, str]] = {
    400: "malformed request",
    404: "no such resource",
    405: "method not allowed",
    408: "request body not received in time",
    415: "unsupported content type",
}


async def _on_http_exception(error: HTTPException) -> Response:
    response_class: type[Response] = current_app.response_class
    status = error.code or 500
    if status == 413:
        limit = request.max_content_length  # the route's own limit when it has one
        too_large = (
            body_too_large(limit)
            if limit is not None
            else CommonroomError("limit_exceeded", "request body too large", http_status=413)
        )
        return _error_response(response_class, too_large, close=True)
    if status >= 500:
        log.error("HTTP %s raised in %s %s", status, request.method, request.path, exc_info=error)
        return _error_response(response_class, internal_error())
    headers: dict[str, str] = {}
    if isinstance(error, MethodNotAllowed) and error.valid_methods:
        headers["Allow"] = ", ".join(sorted(error.valid_methods))
    message = _HTTP_MESSAGES.get(status, error.name.lower())
    return _error_response(
        response_class,
        CommonroomError("invalid_request", message, http_status=status),
        headers=headers,
    )


async def _on_commonroom_error(error: CommonroomError) -> Response:
    return _error_response(current_app.response_class, error)


async def _on_unexpected(error: Exception) -> Response:
    # A bug: logged once here with its traceback (quart does not log an
    # exception it hands to a registered handler); the client sees only the code.
    log.error("unhandled error in %s %s", request.method, request.path, exc_info=error)
    return _error_response(current_app.response_class, internal_error())


def install_json_errors(app: QuartTrio) -> None:
    """Answer every error in the protocol's JSON shape, never quart's HTML.

    HTTP errors (404, 405, 400, ...) become ``invalid_request`` with their own
    status; 413 becomes ``limit_exceeded``; a `CommonroomError` that escapes a
    view is sent as is; any other exception is a bug: it is logged with its
    traceback and answered ``internal_error`` with status 500.
    """
    app.register_error_handler(HTTPException, _on_http_exception)
    app.register_error_handler(CommonroomError, _on_commonroom_error)
    app.register_error_handler(Exception, _on_unexpected)


def harden(app: QuartTrio, *, max_body_bytes: int) -> None:
    """Install the app-level fixes on ``app``: connection class, body limit, JSON errors.

    `serve` calls it; calling it again (say with another limit) is harmless.
    An app that brings its own ASGI HTTP class or request class must derive
    them from `HardenedHTTPConnection` and `HardenedRequest`.
    """
    if max_body_bytes <= 0:
        raise ValueError("max_body_bytes must be positive")
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes
    if not issubclass(app.asgi_http_class, HardenedHTTPConnection):
        if app.asgi_http_class is not TrioASGIHTTPConnection:
            raise TypeError("the app's asgi_http_class must derive from HardenedHTTPConnection")
        app.asgi_http_class = HardenedHTTPConnection
    if not issubclass(app.request_class, HardenedRequest):
        if app.request_class is not TrioRequest:
            raise TypeError("the app's request_class must derive from HardenedRequest")
        app.request_class = HardenedRequest
    if not app.extensions.get(_HARDENED_MARK):
        install_json_errors(app)
        app.extensions[_HARDENED_MARK] = True


def streaming_response(
    body: AsyncIterator[bytes],
    *,
    headers: Mapping[str, str],
    status: int = 200,
    content_type: str = "text/event-stream",
) -> Response:
    """A response streaming ``body`` for as long as it yields: no `RESPONSE_TIMEOUT`.

    ``headers`` may override ``content_type``. The body is closed (``aclose``)
    when the client goes away or the server shuts down. The server cancels
    open streams ``graceful_timeout`` seconds after the shutdown trigger; end
    your streams yourself when your own shutdown starts to not wait for that.
    """
    response = Response(_as_async_generator(body), status=status, content_type=content_type)
    response.headers.update(dict(headers))
    response.timeout = None
    return response


def _as_async_generator(body: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    # quart-trio iterates anything that is not an async generator synchronously.
    if isasyncgen(body):
        return cast(AsyncGenerator[bytes, None], body)
    return _relay(body)


async def _relay(body: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in body:
            yield chunk
    finally:
        aclose = getattr(body, "aclose", None)
        if aclose is not None:
            await aclose()


# --------------------------------------------------------------------------------------
# Server level: bounded writes, lingering close, the serve loop


class _IdleTimer:
    """hypercorn's keep-alive timer, without a new task each time the connection idles.

    hypercorn's `TrioSingleTask` starts a fresh task (``nursery.start``) after
    every response; that costs 20-25 % of a small request's server time. Here one
    task per connection waits in a cancel scope whose deadline moves: infinite
    while a request is in flight, ``keep_alive_timeout`` from now when idle.
    Same contract as `TrioSingleTask` (``restart``/``stop``), as TCPServer uses it.
    """

    def __init__(self, server: _HardenedTCPServer, keep_alive_timeout: float) -> None:
        self._server = server
        self._keep_alive_timeout = keep_alive_timeout
        self._scope: trio.CancelScope | None = None
        self._idle = False
        self._finished = False

    async def restart(self, task_group: Any, action: Any) -> None:
        self._idle = True
        deadline = trio.current_time() + self._keep_alive_timeout
        if self._scope is None:
            self._scope = trio.CancelScope(deadline=deadline)
            task_group.spawn(self._watch)
        else:
            self._scope.deadline = deadline

    async def stop(self) -> None:
        self._idle = False
        if self._scope is not None:
            self._scope.deadline = math.inf

    def finish(self) -> None:
        """The connection is over: end the watching task."""
        self._finished = True
        self._idle = False
        if self._scope is not None:
            self._scope.cancel()

    async def _watch(self) -> None:
        terminated = self._server.context.terminated
        while True:
            assert self._scope is not None
            with self._scope:
                await terminated.wait()
            if self._finished:
                return
            if self._idle:  # idle past the deadline, or the server is shutting down
                with trio.CancelScope(shield=True):
                    await self._server._initiate_server_close()
                return
            if terminated.is_set():
                return  # a request is in flight; hypercorn closes after it (no recycle)
            # The deadline fired just as a request arrived: keep watching.
            self._scope = trio.CancelScope()


class _HardenedTCPServer(TCPServer):
    """hypercorn's per-connection trio server: bounded writes, lingering close, cheap idle timer."""

    def __init__(
        self,
        app: AppWrapper,
        config: HypercornConfig,
        context: WorkerContext,
        state: ConnectionState,
        stream: trio.SocketStream,
        *,
        write_timeout: float,
    ) -> None:
        # hypercorn annotates the stream as SSL; it handles plain streams too.
        super().__init__(app, config, context, state, cast(Any, stream))
        self._write_timeout = write_timeout
        self._write_scope: trio.CancelScope | None = None
        self._half_closed = False
        self._read_scope = trio.CancelScope()
        self._idle_timer = _IdleTimer(self, config.keep_alive_timeout)
        self.idle_task = self._idle_timer  # type: ignore[assignment]  # same protocol

    async def protocol_send(self, event: ServerEvent) -> None:
        if isinstance(event, RawData):
            if not await self._write(event.data):
                await self.protocol.handle(Closed())
        elif isinstance(event, Closed):
            await self._half_close()
            await self.protocol.handle(Closed())
        else:
            await super().protocol_send(event)

    async def _write(self, data: bytes) -> bool:
        """Send ``data``; False when the peer is gone or took nothing for write_timeout."""
        if not data:
            return True
        if not self.send_lock.locked():
            # Fast path: nobody else is writing, so try the kernel at once. trio's
            # lock and socket send each yield to the scheduler even when nothing
            # blocks; with 1,000 streams woken by one commit, each yield waits a
            # round of every runnable task. What the kernel does not take now
            # goes the bounded, shielded way below.
            sent = self._send_now(data)
            if sent is None:
                return False
            if sent == len(data):
                return True
            data = data[sent:]
        async with self.send_lock:
            broken = False
            # Shielded like hypercorn's (a cancelled write tears the HTTP message),
            # but the shield has a deadline of its own.
            with trio.CancelScope(shield=True) as scope:
                self._write_scope = scope
                try:
                    if len(data) <= _WRITE_SLICE:
                        scope.deadline = trio.current_time() + self._write_timeout
                        await self.stream.send_all(data)
                    else:
                        view = memoryview(data)
                        for start in range(0, len(view), _WRITE_SLICE):
                            scope.deadline = trio.current_time() + self._write_timeout
                            await self.stream.send_all(view[start : start + _WRITE_SLICE])
                except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
                    # Busy cannot happen while every sender holds send_lock; if it
                    # ever does, this connection ends, never the server.
                    broken = True
                finally:
                    self._write_scope = None
            if scope.cancelled_caught:
                broken = True
                with trio.CancelScope(shield=True):
                    await self.stream.aclose()  # also wakes the reader
        return not broken

    def _send_now(self, data: bytes) -> int | None:
        """Write what the socket takes without waiting; None when the peer is gone."""
        try:
            return os.write(self.stream.socket.fileno(), data)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError:
            return None  # reset, broken pipe, or already closed (fd -1)

    def shorten_writes(self, timeout: float) -> None:
        """Shutdown started: this and every later write get at most `timeout`."""
        self._write_timeout = min(self._write_timeout, timeout)
        scope = self._write_scope
        if scope is not None:
            scope.deadline = min(scope.deadline, trio.current_time() + timeout)

    async def _half_close(self) -> None:
        """Send FIN, then let the reader drain for a moment before the socket is closed.

        Closing a socket with unread input makes the kernel answer with a reset,
        which can destroy the response (say a 413) before the client reads it.
        """
        if self._half_closed:
            return
        self._half_closed = True
        self._read_scope.deadline = trio.current_time() + _LINGER_SECONDS
        # Under the send lock: the app may still be writing the response (say a
        # client sent more than its Content-Length and the reader saw the
        # protocol error first); a FIN next to that write is BusyResourceError.
        async with self.send_lock:
            try:
                await self.stream.send_eof()
            except (trio.BrokenResourceError, trio.BusyResourceError, trio.ClosedResourceError):
                with trio.CancelScope(shield=True):
                    await self.stream.aclose()

    async def _read_data(self) -> None:
        with self._read_scope:
            while True:
                try:
                    with trio.fail_after(self.config.read_timeout or math.inf):
                        data = await self.stream.receive_some(MAX_RECV)
                except (trio.ClosedResourceError, trio.BrokenResourceError, trio.TooSlowError):
                    break
                if self._half_closed:
                    if not data:
                        break
                    continue  # lingering close: drop what the client still sends
                await self.protocol.handle(RawData(bytes(data)))
                if not data:
                    break
        await self.protocol.handle(Closed())
        # Do not keep a closed connection around until its keep-alive timer fires.
        self._idle_timer.finish()

    async def _close(self) -> None:
        try:
            await self.stream.send_eof()
        except (trio.BrokenResourceError, trio.BusyResourceError, trio.ClosedResourceError):
            pass
        finally:
            await self.stream.aclose()


def _hypercorn_config(config: ServeConfig) -> HypercornConfig:
    hyper = HypercornConfig()
    hyper.bind = [f"{config.host}:{config.port}"]  # informational: serve() binds itself
    hyper.keep_alive_timeout = config.keep_alive_timeout
    hyper.graceful_timeout = config.graceful_timeout
    hyper.accesslog = None
    hyper.errorlog = logging.getLogger("hypercorn.error")
    hyper.include_server_header = False
    return hyper


async def serve(
    app: QuartTrio,
    config: ServeConfig,
    *,
    shutdown_trigger: Callable[[], Awaitable[None]],
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` over HTTP/1.1 until ``shutdown_trigger`` returns.

    Reports the bound port with ``task_status.started(port)`` once the app has
    started up and the socket is listening (so ``port=0`` works; use
    ``port = await nursery.start(partial(serve, app, config, shutdown_trigger=...))``).
    On the trigger it stops accepting, closes idle connections, gives open
    requests ``graceful_timeout`` seconds, then runs the app's shutdown.
    Several servers may run in one nursery.
    """
    harden(app, max_body_bytes=config.max_body_bytes)
    hyper = _hypercorn_config(config)
    asgi = wrap_app(app, hyper.wsgi_max_body_size, "asgi")
    listeners = await trio.open_tcp_listeners(config.port, host=config.host, backlog=_BACKLOG)
    try:
        (listener,) = listeners
        port = int(listener.socket.getsockname()[1])
        lifespan_state: LifespanState = {}
        lifespan = Lifespan(asgi, hyper, lifespan_state)
        context = WorkerContext(None)
        async with trio.open_nursery() as lifespan_nursery:
            await lifespan_nursery.start(lifespan.handle_lifespan)
            await lifespan.wait_for_startup()
            state = ConnectionState(lifespan_state.copy())

            live: set[_HardenedTCPServer] = set()

            async def handle_connection(stream: trio.SocketStream) -> None:
                if config.send_buffer_bytes is not None:
                    stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.send_buffer_bytes)
                server = _HardenedTCPServer(asgi, hyper, context, state, stream, write_timeout=config.write_timeout)
                live.add(server)
                try:
                    await server.run()
                except Exception:
                    # A bug in one connection must not end the listener (and with
                    # it the room): log it once, drop that connection.
                    log.exception("connection handler failed")
                finally:
                    live.discard(server)

            async with trio.open_nursery() as server_nursery:
                try:
                    async with trio.open_nursery() as accept_nursery:
                        accept_nursery.start_soon(
                            partial(
                                trio.serve_listeners,
                                handle_connection,
                                listeners,
                                handler_nursery=server_nursery,
                            )
                        )
                        task_status.started(port)
                        await shutdown_trigger()
                        accept_nursery.cancel_scope.cancel()
                except BaseException:
                    # Ending abnormally (cancelled from outside, or a crash): a
                    # stalled reader's shielded write must not hold the exit.
                    for server in tuple(live):
                        server.shorten_writes(config.shutdown_write_timeout)
                    raise
                for server in tuple(live):
                    server.shorten_writes(config.shutdown_write_timeout)
                await listener.aclose()
                await context.terminated.set()  # idle connections close now
                server_nursery.cancel_scope.deadline = trio.current_time() + config.graceful_timeout
            await lifespan.wait_for_shutdown()
            lifespan_nursery.cancel_scope.cancel()
    finally:
        for each in listeners:
            with trio.CancelScope(shield=True):
                await each.aclose()


async def wait_for_stop_signal(
    stop: trio.Event, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Set ``stop`` on the first SIGINT or SIGTERM; return once ``stop`` is set.

    Start it with ``await nursery.start(wait_for_stop_signal, stop)`` so the
    signals are caught from then on, and pass ``stop.wait`` to `serve` as its
    shutdown trigger. After the first signal the handler is removed: a second
    Ctrl-C raises KeyboardInterrupt as usual. Main thread only.
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async with trio.open_nursery() as nursery:

            async def set_on_signal() -> None:
                async for _ in signals:
                    stop.set()
                    return

            nursery.start_soon(set_on_signal)
            await stop.wait()
            nursery.cancel_scope.cancel()
