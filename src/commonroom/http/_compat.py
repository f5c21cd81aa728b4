"""Every touch of hypercorn's, quart's and quart-trio's private internals, in one module.

The hardened server (`serving.py` lists the stack's pitfalls and which module
fixes each) needs hooks the web stack offers no API for. They all live here, each
saying which upstream behaviour it works around and what it relies on, so that
upgrading the stack means reviewing this one file:

- the versions are asserted at import (`TESTED`): an untested hypercorn, quart or
  quart-trio fails to import with `UntestedWebStack`, naming the tested set and
  this file, never a silent misbehaviour;
- tests/unit/test_http_compat.py checks, for each override, that what it relies
  on is still there (the hook with the signature we call, the attribute we read,
  the module name hypercorn looks up);
- the import-linter contract ``web-stack-internals-in-compat`` keeps every other
  module to the public API (``hypercorn.config``, ``hypercorn.typing``,
  ``hypercorn.trio.serve``, ``quart``, ``quart.wrappers``, ``quart_trio``,
  ``quart_trio.wrappers``).

What it exports, in our own terms (the policies stay in `serving.py`,
`connection.py` and `hardened_app.py`):

- `HypercornWorker`: what hypercorn's ``worker_serve`` sets up around its
  connections (the app wrapper, the lifespan, the worker context). ``serve`` runs
  its own accept loop around it because ``hypercorn.trio.serve`` has no hook for
  a connection class, a connection cap or ``SO_SNDBUF`` (pitfalls 3 and 8).
- `HypercornConnection`: hypercorn's per-connection ``TCPServer`` with its hooks
  routed to `write` and `half_close` (implemented by `connection.HardenedTCPServer`),
  a lingering read loop, and `_IdleTimer` in place of its keep-alive task.
- `refuse_websocket_compression`: the WebSocket handshake and message buffer,
  for our connections only.
- `QuartTrioHTTPConnection`, `BoundedBody`, `STOCK_HTTP_CONNECTION`: quart-trio's
  per-request handler and body with the hooks `hardened_app.py` needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from typing import Any, Final, cast

import trio

__all__ = [
    "STOCK_HTTP_CONNECTION",
    "TESTED",
    "BoundedBody",
    "HypercornConnection",
    "HypercornWorker",
    "QuartTrioHTTPConnection",
    "UntestedWebStack",
    "check_versions",
    "refuse_websocket_compression",
    "serving_connection",
]

TESTED: Final[Mapping[str, str]] = {"hypercorn": "0.18", "quart": "0.22", "quart-trio": "0.12"}
"""The release series every override here was read against and tested with (pyproject pins the same)."""


class UntestedWebStack(ImportError):
    """An installed hypercorn, quart or quart-trio that this module was not checked against."""


def check_versions(version_of: Callable[[str], str] = installed_version) -> None:
    """Raise `UntestedWebStack` unless every package of `TESTED` is of its tested series."""
    found: dict[str, str] = {}
    for package in TESTED:
        try:
            found[package] = version_of(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    wrong = {p: v for p, v in found.items() if v.split(".")[:2] != TESTED[p].split(".")}
    if wrong:
        tested = ", ".join(f"{p} {v}" for p, v in TESTED.items())
        seen = ", ".join(f"{p} {v}" for p, v in wrong.items())
        raise UntestedWebStack(
            f"commonroom's web-stack overrides were tested with {tested}; found {seen}. "
            "Revisit src/commonroom/http/_compat.py (each override names what it relies on; "
            "tests/unit/test_http_compat.py checks it), then update TESTED there and the pins in pyproject.toml."
        )


# Before the private imports: an upgrade that moved them fails with the reason, not an ImportError.
check_versions()

from hypercorn.config import Config as HypercornConfig  # noqa: E402
from hypercorn.events import Closed, RawData  # noqa: E402
from hypercorn.events import Event as ServerEvent  # noqa: E402
from hypercorn.protocol import ws_stream  # noqa: E402
from hypercorn.trio.lifespan import Lifespan  # noqa: E402
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer  # noqa: E402
from hypercorn.trio.worker_context import WorkerContext  # noqa: E402
from hypercorn.typing import ASGISendCallable, ConnectionState, LifespanState  # noqa: E402
from hypercorn.utils import wrap_app  # noqa: E402
from quart.typing import ResponseTypes  # noqa: E402
from quart.wrappers import Request  # noqa: E402
from quart_trio import QuartTrio  # noqa: E402
from quart_trio.asgi import TrioASGIHTTPConnection  # noqa: E402
from quart_trio.wrappers.request import TrioBody  # noqa: E402
from werkzeug.exceptions import RequestEntityTooLarge  # noqa: E402

_SERVING: ContextVar[HypercornConnection | None] = ContextVar("commonroom_connection", default=None)


def serving_connection() -> HypercornConnection | None:
    """The connection serving this task (the request tasks inherit it), if it is ours."""
    return _SERVING.get()


# --- hypercorn: the worker ------------------------------------------------------------------------


class HypercornWorker:
    """What hypercorn's trio ``worker_serve`` builds around its connections, without its accept loop.

    Relies on: ``hypercorn.utils.wrap_app(app, wsgi_max_body_size, mode)``;
    ``hypercorn.trio.lifespan.Lifespan(app, config, state)`` with ``handle_lifespan``
    (a ``nursery.start`` target), ``wait_for_startup`` and ``wait_for_shutdown``;
    ``WorkerContext(max_requests)`` whose ``terminated`` event tells idle
    keep-alive connections to close (hypercorn.trio.run.worker_serve does the same).
    """

    def __init__(self, app: QuartTrio, config: HypercornConfig) -> None:
        self.config = config
        self.app = wrap_app(app, config.wsgi_max_body_size, "asgi")
        self.context = WorkerContext(None)
        self._lifespan_state: LifespanState = {}
        self._lifespan = Lifespan(self.app, config, self._lifespan_state)
        self.state: ConnectionState = ConnectionState({})

    async def start_app(self, nursery: trio.Nursery) -> None:
        """Run the app's startup, its lifespan task in `nursery`; connections may be served after."""
        await nursery.start(self._lifespan.handle_lifespan)
        await self._lifespan.wait_for_startup()
        self.state = ConnectionState(self._lifespan_state.copy())

    async def close_idle_connections(self) -> None:
        """Shutdown started: idle keep-alive connections close now, busy ones after their response."""
        await self.context.terminated.set()

    async def stop_app(self) -> None:
        """Run the app's shutdown (after the connections ended)."""
        await self._lifespan.wait_for_shutdown()


# --- hypercorn: the connection --------------------------------------------------------------------


class _IdleTimer:
    """hypercorn's keep-alive timer, without a new task each time the connection idles (pitfall 1).

    Works around: hypercorn's `TrioSingleTask` starts a fresh task
    (``nursery.start``) after every response; once the final send is shielded
    (hypercorn #106, #210) so that recycling actually runs, that costs 20-25 %
    of a small request. Here one task per connection waits in a cancel scope
    whose deadline moves: infinite while a request is in flight,
    ``keep_alive_timeout`` from now when idle.

    Relies on: ``TCPServer.idle_task`` being called as ``restart(task_group,
    action)`` / ``stop()`` (the `TrioSingleTask` contract; ``task_group.spawn``
    starts a task), ``context.terminated`` and ``TCPServer._initiate_server_close``.
    """

    def __init__(self, server: HypercornConnection, keep_alive_timeout: float) -> None:
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


class HypercornConnection(TCPServer):
    """hypercorn's per-connection trio server, its private hooks routed to `write` and `half_close`.

    Works around: hypercorn shields every socket write with no deadline, so a
    client that stops reading holds graceful shutdown forever (pitfall 3; the
    upstream ``write_timeout`` proposal, hypercorn PR #262, was closed unmerged),
    and closes a socket with unread input (the kernel then answers with a reset
    that can destroy a 413 before the client reads it).

    Relies on: ``TCPServer.__init__(app, config, context, state, stream)`` setting
    ``send_lock``, ``stream``, ``config``, ``context`` and ``idle_task``; ``run``
    calling ``self._read_data()`` and closing with ``self._close()``; every
    outgoing byte and the close passing through ``protocol_send(event)`` as
    ``RawData`` / ``Closed`` events; ``self.protocol.handle(RawData | Closed)``
    taking what was read; ``MAX_RECV``.
    """

    def __init__(self, worker: HypercornWorker, stream: trio.SocketStream) -> None:
        # hypercorn annotates the stream as SSL; it handles plain streams too.
        super().__init__(worker.app, worker.config, worker.context, worker.state, cast(Any, stream))
        self._read_scope = trio.CancelScope()
        self._lingering = False
        self._idle_timer = _IdleTimer(self, worker.config.keep_alive_timeout)
        self.idle_task = self._idle_timer  # type: ignore[assignment]  # the TrioSingleTask contract

    # What subclasses read, under our own names.

    @property
    def socket_stream(self) -> trio.SocketStream:
        """The connection's socket (hypercorn's ``stream``; never SSL here)."""
        return cast(trio.SocketStream, self.stream)

    @property
    def write_lock(self) -> trio.Lock:
        """Held by every write to the socket (hypercorn's ``send_lock``)."""
        return self.send_lock

    @property
    def lingering(self) -> bool:
        return self._lingering

    def linger(self, seconds: float) -> None:
        """From now on drop what the client still sends, and stop reading after `seconds`."""
        self._lingering = True
        self._read_scope.deadline = trio.current_time() + seconds

    # What subclasses implement.

    async def write(self, data: bytes) -> bool:
        """Send `data`; False when the peer is gone (the connection is then closed)."""
        raise NotImplementedError

    async def half_close(self) -> None:
        """hypercorn closes the connection: send FIN (and maybe `linger`)."""
        raise NotImplementedError

    # hypercorn's hooks.

    async def run(self) -> None:
        # The request tasks hypercorn spawns from here inherit this context.
        _SERVING.set(self)
        await super().run()

    async def protocol_send(self, event: ServerEvent) -> None:
        if isinstance(event, RawData):
            if not await self.write(event.data):
                await self.protocol.handle(Closed())
        elif isinstance(event, Closed):
            await self.half_close()
            await self.protocol.handle(Closed())
        else:
            await super().protocol_send(event)

    async def _read_data(self) -> None:
        with self._read_scope:
            while True:
                try:
                    with trio.fail_after(self.config.read_timeout or math.inf):
                        data = await self.stream.receive_some(MAX_RECV)
                except (trio.ClosedResourceError, trio.BrokenResourceError, trio.TooSlowError):
                    break
                if self._lingering:
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


# --- hypercorn: the WebSocket handshake and message buffer ----------------------------------------


class _UncompressedHandshake(ws_stream.Handshake):
    """hypercorn's WebSocket handshake, deaf to ``Sec-WebSocket-Extensions`` on our connections.

    Works around: hypercorn accepts ``permessage-deflate`` whenever a client
    offers it, with no setting (hypercorn #307), and wsproto inflates each frame
    whole before hypercorn's message size check (pitfall 7: a 0.5 MB message took
    ``ce serve`` from 53 MB to 767 MB RSS).
    Relies on: ``Handshake(headers, http_version)`` parsing the offer into
    ``extensions``, which ``accept`` then negotiates.
    """

    def __init__(self, headers: list[tuple[bytes, bytes]], http_version: str) -> None:
        super().__init__(headers, http_version)
        if _SERVING.get() is not None:
            self.extensions = None  # no permessage-deflate: nothing to inflate


class _CappedMessageBuffer(ws_stream.WebsocketBuffer):
    """hypercorn's incoming-message buffer, which keeps nothing past its limit on our connections.

    Works around: past ``websocket_max_message_size`` hypercorn sends a close but
    keeps appending what the client still sends (pitfall 7: a 500 MB message,
    566 MB RSS). Relies on: ``WebsocketBuffer(max_length)`` with ``length``,
    ``max_length`` and ``extend(event)``, and hypercorn answering
    ``FrameTooLargeError`` with a 1009 close.
    """

    def __init__(self, max_length: int) -> None:
        super().__init__(max_length)
        self._capped = _SERVING.get() is not None

    def extend(self, event: Any) -> None:
        if self._capped and self.length + len(event.data) > self.max_length:
            raise ws_stream.FrameTooLargeError()  # hypercorn answers 1009 and closes
        super().extend(event)


def refuse_websocket_compression() -> None:
    """Make our connections' WebSockets refuse compression and cap messages. Idempotent.

    hypercorn builds the handshake and the message buffer from the module
    globals ``ws_stream.Handshake`` and ``ws_stream.WebsocketBuffer`` (in
    ``WSStream``, itself built from module globals of ``protocol.h11`` and
    ``protocol.h2``), and takes neither as a setting, so the names are replaced;
    scoping by class would mean copying both protocols' ``_create_stream``. The
    replacements act only inside a connection served by `HypercornConnection`
    (a context variable its ``run`` sets): any other hypercorn server in the
    process keeps hypercorn's behaviour.
    """
    if not issubclass(ws_stream.Handshake, _UncompressedHandshake):
        ws_stream.Handshake = _UncompressedHandshake  # type: ignore[misc]
    if not issubclass(ws_stream.WebsocketBuffer, _CappedMessageBuffer):
        ws_stream.WebsocketBuffer = _CappedMessageBuffer  # type: ignore[misc]


# --- quart-trio: the per-request handler and the body ---------------------------------------------

STOCK_HTTP_CONNECTION: Final = TrioASGIHTTPConnection
"""quart-trio's own ``asgi_http_class`` (`harden` replaces it, and refuses any other)."""


class QuartTrioHTTPConnection(TrioASGIHTTPConnection):
    """quart-trio's per-request ASGI handler, with the hooks `hardened_app.py` needs by our names.

    Works around: quart-trio's ``handle_request`` sends the response where the
    ``http.disconnect`` hypercorn sends during the final body send cancels it
    half way, so the connection is never recycled or closed (pitfall 1; related
    upstream: hypercorn #106 and #210, the symptom as reported: #330); it bounds
    every response, streams included, by ``RESPONSE_TIMEOUT`` (pitfall 2); and
    quart builds the request body with the app-wide ``MAX_CONTENT_LENGTH`` before
    any route can set its own (quart #425).

    Relies on: quart's ``ASGIHTTPConnection(app, scope)`` keeping ``app`` and
    ``scope``; ``_create_request_from_scope(send)`` building the request;
    ``_send_response(send, response)`` sending it; quart-trio's ``__call__``
    running ``handle_request(nursery, request, send)`` beside the message reader
    in one nursery, whose cancellation ends the reader.
    """

    def prepare_request(self, request: Request) -> None:
        """Adjust the request just built from the ASGI scope (before any body byte is taken)."""

    async def respond(self, request: Request, send: ASGISendCallable) -> None:
        """Answer `request` (quart-trio's ``handle_request`` without its nursery)."""
        raise NotImplementedError

    async def send_response(self, send: ASGISendCallable, response: ResponseTypes) -> None:
        """Send `response` through `send`, as quart does."""
        await self._send_response(send, response)

    def _create_request_from_scope(self, send: ASGISendCallable) -> Request:
        request = super()._create_request_from_scope(send)
        self.prepare_request(request)
        return request

    async def handle_request(  # type: ignore[override]
        self, nursery: trio.Nursery, request: Request, send: ASGISendCallable
    ) -> None:
        await self.respond(request, send)
        nursery.cancel_scope.cancel()  # ends quart-trio's message reader


class BoundedBody(TrioBody):
    """A request body that counts every byte received, not just the bytes held (pitfall 6).

    Works around: quart's `Body` compares the limit with what it currently holds,
    so a body consumed chunk by chunk (``async for``) is never bounded. Past the
    limit nothing more is kept and reading raises `RequestEntityTooLarge`.
    Relies on: ``Body(expected_content_length, max_content_length)`` keeping the
    limit in ``_max_content_length`` and raising ``_must_raise`` when read;
    ``append``, ``clear``, ``set_complete`` and ``__anext__``.
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
