"""The server-level half of the hardened server: hypercorn's per-connection trio server.

`serving.py` lists the pitfalls; this module fixes the ones in the connection:

1. (second half) Making hypercorn's keep-alive recycling actually run costs its
   timer a new task per response (20-25 % of a small request); `_IdleTimer`
   replaces it with one task per connection whose deadline moves.
3. A client that stops reading blocks shutdown (hypercorn shields the socket
   write). `HardenedTCPServer` keeps the shield (a cancelled write would tear an
   HTTP message) but puts a deadline on it: a write that makes no progress for
   ``write_timeout`` aborts the connection, and once shutdown starts every
   write, pending or new, gets the shorter shutdown timeout (`shorten_writes`).

7. A WebSocket client can make the server inflate a message without bound:
   hypercorn accepts ``permessage-deflate`` whenever a client offers it, and
   wsproto inflates each frame whole before hypercorn's message size check
   (measured: a 0.5 MB message took `ce serve` from 53 MB to 767 MB RSS).
   And past ``websocket_max_message_size`` hypercorn sends a close but keeps
   appending what the client still sends to the message (measured: a 500 MB
   message, 566 MB RSS). `refuse_websocket_compression` makes the handshake
   ignore the compression offer (nothing the room serves needs it) and caps
   the message buffer: a message past the limit is refused and not kept.

It also writes to the kernel directly when nobody else is writing (see
`HardenedTCPServer._write`), and closes with a lingering half-close so a client
still sending can read its answer (say a 413) instead of a reset.

A stream may write its own body bytes (`current_connection`, `send_nowait`,
`send_stream_bytes`): after its response head went out the usual way, an SSE
stream writes pre-framed chunks straight to the socket, skipping quart's send,
hypercorn's stream and h11 for every event (http/stream_views.py says how the
framing stays valid).
"""

from __future__ import annotations

import math
import os
from contextvars import ContextVar
from typing import Any, Final, cast

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Closed, RawData
from hypercorn.events import Event as ServerEvent
from hypercorn.protocol import ws_stream
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import AppWrapper, ConnectionState

__all__ = ["HardenedTCPServer", "current_connection", "refuse_websocket_compression"]

_CURRENT: ContextVar[HardenedTCPServer | None] = ContextVar("commonroom_connection", default=None)


def current_connection() -> HardenedTCPServer | None:
    """The connection serving this request (the app's tasks inherit it), if it is ours."""
    return _CURRENT.get()

_LINGER_SECONDS: Final = 1.0
"""After answering and half-closing, how long to drain what the client still sends."""

_WRITE_SLICE: Final = 256 * 1024
"""Large writes go out in slices, each with its own write deadline (progress, not total)."""


class _UncompressedHandshake(ws_stream.Handshake):
    """hypercorn's WebSocket handshake, deaf to ``Sec-WebSocket-Extensions`` (pitfall 7)."""

    def __init__(self, headers: list[tuple[bytes, bytes]], http_version: str) -> None:
        super().__init__(headers, http_version)
        self.extensions = None  # no permessage-deflate: nothing to inflate


class _CappedMessageBuffer(ws_stream.WebsocketBuffer):
    """hypercorn's incoming-message buffer, which keeps nothing past its limit (pitfall 7)."""

    def extend(self, event: Any) -> None:
        if self.length + len(event.data) > self.max_length:
            raise ws_stream.FrameTooLargeError()  # hypercorn answers 1009 and closes
        super().extend(event)


def refuse_websocket_compression() -> None:
    """Make every hypercorn WebSocket in this process refuse compression and cap messages.

    hypercorn builds the handshake and the message buffer from the module's
    ``Handshake`` and ``WebsocketBuffer`` names (one place each, `WSStream`);
    there is no setting for either. Idempotent.
    """
    if not issubclass(ws_stream.Handshake, _UncompressedHandshake):
        ws_stream.Handshake = _UncompressedHandshake  # type: ignore[misc]
    if not issubclass(ws_stream.WebsocketBuffer, _CappedMessageBuffer):
        ws_stream.WebsocketBuffer = _CappedMessageBuffer  # type: ignore[misc]


class _IdleTimer:
    """hypercorn's keep-alive timer, without a new task each time the connection idles.

    hypercorn's `TrioSingleTask` starts a fresh task (``nursery.start``) after
    every response; that costs 20-25 % of a small request's server time. Here one
    task per connection waits in a cancel scope whose deadline moves: infinite
    while a request is in flight, ``keep_alive_timeout`` from now when idle.
    Same contract as `TrioSingleTask` (``restart``/``stop``), as TCPServer uses it.
    """

    def __init__(self, server: HardenedTCPServer, keep_alive_timeout: float) -> None:
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


class HardenedTCPServer(TCPServer):
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

    async def run(self) -> None:
        # The request tasks hypercorn spawns from here inherit this context.
        _CURRENT.set(self)
        await super().run()

    def send_nowait(self, data: bytes) -> int | None:
        """Write what the socket takes now: bytes written (0 while another write is
        in progress), None when the peer is gone."""
        if self.send_lock.locked():
            return 0
        return self._send_now(data)

    async def send_stream_bytes(self, data: bytes) -> bool:
        """Write a stream's own body bytes; False when the peer is gone or stalled.

        Unlike `_write` not shielded: a stream's writer is cancelled when its
        stream ends (say the room stops), and a cancelled write tears the
        message, so the connection is then closed; the client resumes with
        Last-Event-ID.
        """
        sent = self.send_nowait(data)
        if sent is None:
            return False
        if sent == len(data):
            return True
        view = memoryview(data)[sent:]
        try:
            async with self.send_lock:
                with trio.move_on_after(self._write_timeout) as scope:
                    await self.stream.send_all(view)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
            return False
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            raise
        if scope.cancelled_caught:
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            return False
        return True

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
