"""The blocking side of the wire's I/O: the same names as `_trio_io`, over plain sockets.

A hint whose plugin dials loopback TCP (`loopback`, `local` with an address) is a
blocking socket to that address, so a one-shot `ce read` and the synchronous
`Client` never import trio, the transport registry or entry points (a script
pays a process start per step). Any other plugin (say `tailcat`) is dialled by
its own trio code on a small trio loop in a daemon thread (`PortalStream`), so
every transport works from blocking code too, streams included.

Failures leave as the wire's errors (`http11.ConnectionLost`, `http11.TimedOut`);
messages never carry an address.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from commonroom.wire import errors, http11
from commonroom.wire.calls import dials_loopback

if TYPE_CHECKING:
    from commonroom.wire import _trio_io

T = TypeVar("T")


class Stream:
    """A connected blocking socket as the drivers use it."""

    def __init__(self, sock: socket.socket) -> None:
        self.raw = sock

    def send_all(self, data: bytes, deadline: float) -> None:
        try:
            self.raw.settimeout(_remaining(deadline, "the room took nothing in time"))
            self.raw.sendall(data)
        except TimeoutError:
            raise http11.TimedOut("the room took nothing in time") from None
        except OSError as exc:
            raise http11.ConnectionLost(f"the connection to the room failed: {reason(exc)}") from None

    def receive(self, deadline: float, silent: str) -> bytes:
        """Some bytes (b"" at the end of the stream); `TimedOut(silent)` past `deadline`."""
        try:
            self.raw.settimeout(_remaining(deadline, silent))
            return self.raw.recv(http11.RECEIVE_SIZE)
        except TimeoutError:
            raise http11.TimedOut(silent) from None
        except OSError as exc:
            raise http11.ConnectionLost(f"the connection to the room failed: {reason(exc)}") from None

    def send_while(self, payload: bytes, deadline: float, read: Callable[[], T]) -> T:
        """Send `payload`, then `read()` the answer even if the send failed.

        A room may answer early (a 413 from the head alone) and close: what it
        said is still read. When both fail, the send's failure explains it
        (unless the room sent something that is not HTTP).
        """
        sent: http11.WireFailure | None = None
        try:
            self.send_all(payload, deadline)
        except http11.WireFailure as failure:
            sent = failure
        try:
            return read()
        except errors.CommonroomError as failure:
            explained = http11.explain(sent, failure)
            if explained is failure:
                raise
            raise explained from None

    def close(self) -> None:
        self.raw.close()


Streamlike = Stream | socket.socket


def wrap(stream: Streamlike) -> Stream:
    return stream if isinstance(stream, Stream) else Stream(stream)


def connect(hint: Mapping[str, Any], timeout: float) -> Stream:
    """A stream to the room the hint describes: a socket for loopback TCP, else the plugin's."""
    if not dials_loopback(hint):
        return PortalStream.open(hint, timeout)
    try:
        sock = socket.create_connection((str(hint["address"]), int(hint["port"])), timeout=timeout)
    except TimeoutError:
        raise http11.TimedOut(f"the room could not be reached within {timeout:g} seconds") from None
    except OSError as exc:
        # Refused on loopback: nothing listens on the room's port, so the room is closed.
        closed = (" (is the room still open? its host opens it with `ce serve FILE`)"
                  if isinstance(exc, ConnectionRefusedError) else "")
        raise http11.ConnectionLost(f"cannot reach the room: {reason(exc)}{closed}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Stream(sock)


class PortalStream(Stream):
    """A transport plugin's trio stream, driven from blocking code through a trio loop in a thread."""

    def __init__(self, portal: _Portal, inner: _trio_io.Stream) -> None:
        self._portal = portal
        self._inner = inner

    @classmethod
    def open(cls, hint: Mapping[str, Any], timeout: float) -> PortalStream:
        from commonroom.wire import _trio_io

        portal = _Portal()
        try:
            inner = portal.run(_trio_io.connect, hint, timeout)
        except BaseException:
            portal.stop()
            raise
        return cls(portal, inner)

    def send_all(self, data: bytes, deadline: float) -> None:
        seconds = _remaining(deadline, "the room took nothing in time")
        self._portal.run(self._send, data, seconds)

    def receive(self, deadline: float, silent: str) -> bytes:
        seconds = _remaining(deadline, silent)
        return bytes(self._portal.run(self._receive, seconds, silent))

    def close(self) -> None:
        try:
            self._portal.run(self._inner.aclose)
        finally:
            self._portal.stop()

    async def _send(self, data: bytes, seconds: float | None) -> None:
        from commonroom.wire import _trio_io

        await self._inner.send_all(data, _trio_io.after(seconds))

    async def _receive(self, seconds: float | None, silent: str) -> bytes:
        from commonroom.wire import _trio_io

        return await self._inner.receive(_trio_io.after(seconds), silent)


class _Portal:
    """One trio loop in a daemon thread, running what blocking code hands it."""

    def __init__(self) -> None:
        import trio

        self._started = threading.Event()
        self._stop: trio.Event | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True,
                                        name="commonroom-wire-portal")
        self._thread.start()
        self._started.wait()

    async def _main(self) -> None:
        import trio

        self._stop = trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        self._started.set()
        await self._stop.wait()

    def run(self, afn: Callable[..., Any], *args: Any) -> Any:
        import trio

        return trio.from_thread.run(afn, *args, trio_token=self._token)

    def stop(self) -> None:
        import trio

        if self._thread.is_alive() and self._stop is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join()


def _remaining(deadline: float, silent: str) -> float | None:
    if deadline == math.inf:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise http11.TimedOut(silent)
    return left


def reason(exc: OSError) -> str:
    """Why a connection failed, without its address."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if exc.errno is not None:
        return os.strerror(exc.errno)  # never the address
    return type(exc).__name__


def now() -> float:
    return time.monotonic()


def after(seconds: float | None) -> float:
    """The deadline `seconds` from now (never, for None)."""
    return math.inf if seconds is None else time.monotonic() + seconds


def sleep(seconds: float) -> None:
    time.sleep(seconds)


# The few statements that hand a kept connection over run under this lock (threads may share a Client).
Guard = threading.Lock
