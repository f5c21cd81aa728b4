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
   response (measured: 20-25 % of a small request); `_compat._IdleTimer` replaces it
   with one task per connection whose deadline moves, which makes the fixed
   server as cheap as the broken one.
2. Streams are cut by ``RESPONSE_TIMEOUT`` (60 s). `streaming_response` sets the
   response's timeout to none; the connection class also treats any
   ``text/event-stream`` response without an explicit timeout as unbounded.
   ``RESPONSE_TIMEOUT`` then only bounds ordinary responses, and
   ``BODY_TIMEOUT`` (Quart's default, 60 s) bounds reading a request body.
3. A client that stops reading blocks shutdown (hypercorn shields the socket
   write). `HardenedTCPServer` keeps the shield (a cancelled write would tear
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

7. A WebSocket client's compressed frames are inflated whole before any size
   check (a decompression bomb): the handshake refuses ``permessage-deflate``
   and a message from a client is at most ``websocket_max_message_bytes``
   (`_compat.refuse_websocket_compression`, on our connections only).
8. Nothing bounds the connections a listener holds, and running out of file
   descriptors takes everything down: under ``ulimit -n 1024`` one bearer
   holding ~1,000 streams made ``accept`` fail with EMFILE, the host's own
   requests time out, and trio log the failure with a traceback ten times a
   second per listener (15 KB/s). `raise_open_file_limit` lifts the soft
   ``RLIMIT_NOFILE`` to the hard one at start, `connection_caps` splits it
   into a cap per listener that keeps descriptors in reserve (the sidecar and
   its journal, temp files, the transport's child, and the owner listener,
   which has a cap of its own), `ServeConfig.max_connections` answers a
   connection past its listener's cap with one 503 and closes it, and the
   EMFILE log line is let through once every 10 s (`_AcceptErrorsOnceInAWhile`).

Where each fix lives: the app-level ones (1's shield, 2, 6, JSON errors) in
`hardened_app.py`, the connection-level ones (3, the lingering close) in
`connection.py`, 4, 5 and 8 here with `ServeConfig` and the serve loop. Every
hook they need into hypercorn's, quart's or quart-trio's internals, and the fixes
that are nothing but such a hook (1's idle timer, 7), are in `_compat.py`, which
asserts the tested versions at import and names the upstream bug each hook
works around; no other module imports their private modules (an import-linter
contract).
hypercorn's own error answers (malformed HTTP) have empty bodies, never HTML.

Everything here listens on a loopback address only.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import resource
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from quart_trio import QuartTrio

from commonroom.http._compat import HypercornWorker, refuse_websocket_compression
from commonroom.http.connection import HardenedTCPServer
from commonroom.http.hardened_app import harden

__all__ = [
    "ServeConfig", "connection_caps", "raise_open_file_limit", "serve", "wait_for_stop_signal",
]

log = logging.getLogger(__name__)

_BACKLOG: Final = 128

FD_RESERVE: Final = 64
"""Descriptors no listener may take: stdio, the sidecar with its -wal and -shm, the document
and its temp files, trio's own (epoll, wake-up pipe), the listening sockets, a transport's child."""
OWNER_CONNECTIONS: Final = 64
"""The owner listener's own cap (one person's browser tabs and `ce` host commands)."""
MAX_INGRESS_CONNECTIONS: Final = 2048
"""The ingress's cap even when descriptors are plenty (~64 KB of room memory each), unless
the room's session limit allows more streams than that (`connection_caps`)."""
REQUEST_CONNECTIONS: Final = 256
"""Connections kept for requests beyond every stream the session limit allows."""
GIL_SWITCH_SECONDS: Final = 0.0005
"""How long a thread holding the GIL keeps it once another asks (CPython's default is 5 ms).
A heavy read's diff runs on a worker thread (room/core.py); the event loop wakes for
every socket event of every request and would wait up to 5 ms for the GIL each time, so
one diff in progress added tens of ms to the host's status. Set for the process by `serve`."""
LOG_EVERY_SECONDS: Final = 10.0
"""A listener's overload line (EMFILE, connections refused) is logged at most this often."""


def raise_open_file_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit (the shell's 1024 is a default, not a
    choice); returns the soft limit now in effect."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # a limit the kernel refuses (nr_open): keep the one we have
    return soft


def connection_caps(open_files: int, streams: int = 0) -> tuple[int, int]:
    """(ingress cap, owner cap) for a process that may open `open_files` descriptors.

    `streams`: how many streams the room's sessions may hold at once (`ce serve
    --max-sessions` × the streams a session may open); past `MAX_INGRESS_CONNECTIONS`
    the ingress cap grows to hold them all and `REQUEST_CONNECTIONS` more, as far as
    the descriptors go (the caller tells the host when they do not).
    """
    wanted = max(MAX_INGRESS_CONNECTIONS, streams + REQUEST_CONNECTIONS)
    ingress = open_files - FD_RESERVE - OWNER_CONNECTIONS
    return max(16, min(wanted, ingress)), OWNER_CONNECTIONS


class _AcceptErrorsOnceInAWhile(logging.Filter):
    """trio logs a failed accept (EMFILE...) with its traceback every 0.1 s: one line per
    `LOG_EVERY_SECONDS`, without the traceback, saying how many it held back."""

    def __init__(self) -> None:
        super().__init__()
        self._last = -float("inf")
        self._held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("accept returned"):
            return True
        if record.created - self._last < LOG_EVERY_SECONDS:
            self._held += 1
            return False
        if self._held:
            record.msg = f"{record.msg} ({self._held} more like it in the last {LOG_EVERY_SECONDS:g} s)"
        self._last, self._held = record.created, 0
        record.exc_info, record.exc_text = None, None
        return True


_ACCEPT_LOG = logging.getLogger("trio.serve_listeners")
if not any(isinstance(f, _AcceptErrorsOnceInAWhile) for f in _ACCEPT_LOG.filters):
    _ACCEPT_LOG.addFilter(_AcceptErrorsOnceInAWhile())


def _refusal(limit: int) -> bytes:
    """The one answer to a connection past its listener's cap (the protocol's error shape)."""
    body = json.dumps({
        "error": "transport_unavailable",
        "message": "the room has too many open connections; try again shortly",
        "details": {"scope": "connections", "limit": limit},
        "retry_after_seconds": 1,
    }).encode()
    head = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
    return head + body


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
    websocket_max_message_bytes: int = attrs.field(default=64 * 1024, validator=_check_positive)
    """The largest message a WebSocket client may send (the room's WebSocket only talks;
    hypercorn queues ~20 messages per connection, so this bounds what a client can park)."""
    max_connections: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1)))
    """Connections served at once; one past it is answered 503 (`details.scope` "connections")
    and closed (pitfall 8). None: no cap (`connection_caps` gives the room's)."""



def _hypercorn_config(config: ServeConfig) -> HypercornConfig:
    hyper = HypercornConfig()
    hyper.bind = [f"{config.host}:{config.port}"]  # informational: serve() binds itself
    hyper.keep_alive_timeout = config.keep_alive_timeout
    hyper.graceful_timeout = config.graceful_timeout
    hyper.accesslog = None
    hyper.errorlog = logging.getLogger("hypercorn.error")
    hyper.include_server_header = False
    hyper.websocket_max_message_size = config.websocket_max_message_bytes
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
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    refuse_websocket_compression()
    worker = HypercornWorker(app, _hypercorn_config(config))
    listeners = await trio.open_tcp_listeners(config.port, host=config.host, backlog=_BACKLOG)
    try:
        (listener,) = listeners
        port = int(listener.socket.getsockname()[1])
        async with trio.open_nursery() as lifespan_nursery:
            await worker.start_app(lifespan_nursery)

            live: set[HardenedTCPServer] = set()
            refused = _RefusalLog(port)

            async def handle_connection(stream: trio.SocketStream) -> None:
                if config.max_connections is not None and len(live) >= config.max_connections:
                    refused.note(config.max_connections)
                    await _refuse(stream, config.max_connections)
                    return
                if config.send_buffer_bytes is not None:
                    stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.send_buffer_bytes)
                server = HardenedTCPServer(worker, stream, write_timeout=config.write_timeout)
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
                await worker.close_idle_connections()
                server_nursery.cancel_scope.deadline = trio.current_time() + config.graceful_timeout
            await worker.stop_app()
            lifespan_nursery.cancel_scope.cancel()
    finally:
        for each in listeners:
            with trio.CancelScope(shield=True):
                await each.aclose()


class _RefusalLog:
    """Connections refused past the cap: one log line per `LOG_EVERY_SECONDS`, with the count."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._last = -float("inf")
        self._count = 0

    def note(self, limit: int) -> None:
        self._count += 1
        now = trio.current_time()
        if now - self._last >= LOG_EVERY_SECONDS:
            log.warning("port %d holds its cap of %d connections; refused %d new ones",
                        self._port, limit, self._count)
            self._last, self._count = now, 0


async def _refuse(stream: trio.SocketStream, limit: int) -> None:
    """Answer 503 without reading the request, half-close, and drain briefly so the
    client reads the answer rather than a reset; never longer than half a second."""
    with trio.move_on_after(0.5):
        try:
            await stream.send_all(_refusal(limit))
            await stream.send_eof()
            while await stream.receive_some(4096):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


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
