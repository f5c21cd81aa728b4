"""The server-level half of the hardened server: our per-connection trio server.

`serving.py` lists the pitfalls; this module fixes the ones in the connection
(hypercorn's hooks they ride on, and the WebSocket fix of pitfall 7, are in
`_compat.py`, the one module that touches the web stack's internals):

1. (second half) Making hypercorn's keep-alive recycling actually run costs its
   timer a new task per response (20-25 % of a small request); `_compat`'s
   idle timer replaces it with one task per connection whose deadline moves.
3. A client that stops reading blocks shutdown (hypercorn shields the socket
   write). `HardenedTCPServer` keeps the shield (a cancelled write would tear an
   HTTP message) but puts a deadline on it: a write that makes no progress for
   ``write_timeout`` aborts the connection, and once shutdown starts every
   write, pending or new, gets the shorter shutdown timeout (`shorten_writes`).

It also writes to the kernel directly when nobody else is writing (see
`HardenedTCPServer.write`), and closes with a lingering half-close so a client
still sending can read its answer (say a 413) instead of a reset.

A stream may write its own body bytes (`current_connection`, `send_nowait`,
`send_stream_bytes`): after its response head went out the usual way, an SSE
stream writes pre-framed chunks straight to the socket, skipping quart's send,
hypercorn's stream and h11 for every event (http/stream_views.py says how the
framing stays valid).
"""

from __future__ import annotations

import os
from typing import Final

import trio

from commonroom.http._compat import HypercornConnection, HypercornWorker, serving_connection

__all__ = ["HardenedTCPServer", "current_connection"]


def current_connection() -> HardenedTCPServer | None:
    """The connection serving this request (the app's tasks inherit it), if it is ours."""
    connection = serving_connection()
    return connection if isinstance(connection, HardenedTCPServer) else None


_LINGER_SECONDS: Final = 1.0
"""After answering and half-closing, how long to drain what the client still sends."""

_WRITE_SLICE: Final = 256 * 1024
"""Large writes go out in slices, each with its own write deadline (progress, not total)."""


class HardenedTCPServer(HypercornConnection):
    """hypercorn's per-connection trio server: bounded writes, lingering close, cheap idle timer."""

    def __init__(self, worker: HypercornWorker, stream: trio.SocketStream, *, write_timeout: float) -> None:
        super().__init__(worker, stream)
        self._write_timeout = write_timeout
        self._write_scope: trio.CancelScope | None = None

    def send_nowait(self, data: bytes) -> int | None:
        """Write what the socket takes now: bytes written (0 while another write is
        in progress), None when the peer is gone."""
        if self.write_lock.locked():
            return 0
        return self._send_now(data)

    async def send_stream_bytes(self, data: bytes) -> bool:
        """Write a stream's own body bytes; False when the peer is gone or stalled.

        Unlike `write` not shielded: a stream's writer is cancelled when its
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
            async with self.write_lock:
                with trio.move_on_after(self._write_timeout) as scope:
                    await self.socket_stream.send_all(view)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
            return False
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self.socket_stream.aclose()
            raise
        if scope.cancelled_caught:
            with trio.CancelScope(shield=True):
                await self.socket_stream.aclose()
            return False
        return True

    async def write(self, data: bytes) -> bool:
        """Send ``data``; False when the peer is gone or took nothing for write_timeout."""
        if not data:
            return True
        if not self.write_lock.locked():
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
        async with self.write_lock:
            broken = False
            # Shielded like hypercorn's (a cancelled write tears the HTTP message),
            # but the shield has a deadline of its own.
            with trio.CancelScope(shield=True) as scope:
                self._write_scope = scope
                try:
                    if len(data) <= _WRITE_SLICE:
                        scope.deadline = trio.current_time() + self._write_timeout
                        await self.socket_stream.send_all(data)
                    else:
                        view = memoryview(data)
                        for start in range(0, len(view), _WRITE_SLICE):
                            scope.deadline = trio.current_time() + self._write_timeout
                            await self.socket_stream.send_all(view[start : start + _WRITE_SLICE])
                except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
                    # Busy cannot happen while every sender holds send_lock; if it
                    # ever does, this connection ends, never the server.
                    broken = True
                finally:
                    self._write_scope = None
            if scope.cancelled_caught:
                broken = True
                with trio.CancelScope(shield=True):
                    await self.socket_stream.aclose()  # also wakes the reader
        return not broken

    def _send_now(self, data: bytes) -> int | None:
        """Write what the socket takes without waiting; None when the peer is gone."""
        try:
            return os.write(self.socket_stream.socket.fileno(), data)
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

    async def half_close(self) -> None:
        """Send FIN, then let the reader drain for a moment before the socket is closed.

        Closing a socket with unread input makes the kernel answer with a reset,
        which can destroy the response (say a 413) before the client reads it.
        """
        if self.lingering:
            return
        self.linger(_LINGER_SECONDS)
        # Under the send lock: the app may still be writing the response (say a
        # client sent more than its Content-Length and the reader saw the
        # protocol error first); a FIN next to that write is BusyResourceError.
        async with self.write_lock:
            try:
                await self.socket_stream.send_eof()
            except (trio.BrokenResourceError, trio.BusyResourceError, trio.ClosedResourceError):
                with trio.CancelScope(shield=True):
                    await self.socket_stream.aclose()
