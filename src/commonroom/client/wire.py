"""One request to a room, blocking or under trio, over the byte client's HTTP/1.1.

Theory of operation. The byte client (PROTOCOL.md section 13) sends one
request per connection with `Host: commonroom` and `Connection: close` and
reads until the response's framing says it is complete. Its framing half is
sans-I/O (`commonroom.cli.http11`); this module drives it two ways:

- blocking (`call`, `open_events`): for a hint whose plugin dials plain
  loopback TCP (`loopback`, and `local` with an address) the connection is a
  blocking socket to the hint's loopback address. That keeps trio, the
  transport registry and entry-point scanning out of a one-shot `ce read`
  (a script pays a process start per step) and out of the synchronous
  `Client`'s hot path. Any other plugin (say `tailcat`) is dialled with
  `commonroom.transport.registry.dial` inside `trio.run`, so every transport
  works from blocking code too.
- async (`acall`): `byteclient.request` over `registry.dial(hint)`, for
  `AsyncClient`.

Either way a non-2xx answer becomes the exception `client.errors` maps its
code to, and an unreachable room is `TransportUnavailable`. Nothing here
imports the engine, quart or hypercorn.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import h11

from commonroom.cli import http11
from commonroom.client import errors
from commonroom.protocol.errors import CommonroomError

if TYPE_CHECKING:
    from commonroom.protocol.invitation import TransportHint

# The longest the room holds a request is a 25 s long-poll; beyond this a call is lost.
DEFAULT_TIMEOUT: Final = 60.0
_BLOCKING_TYPES: Final = frozenset({"loopback", "local"})


def hint_of(invitation: str) -> dict[str, Any]:
    """The transport hint of a `commonroom://join/...` invitation, as JSON."""
    from commonroom.protocol.invitation import decode

    try:
        return decode(invitation).transport.to_json()
    except CommonroomError as exc:
        raise errors.from_protocol(exc) from None


def target(path: str, params: Mapping[str, Any] | None) -> str:
    """`path` with the non-None `params` as its query string."""
    query = {key: _query_value(value) for key, value in (params or {}).items() if value is not None}
    return path + ("?" + urllib.parse.urlencode(query) if query else "")


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def prepare(
    method: str, path: str, params: Mapping[str, Any] | None, bearer: str | None
) -> tuple[str, dict[str, str], bytes | None]:
    """(request target, headers, body) of one operation call."""
    headers: dict[str, str] = {}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    if method == "GET":
        return target(path, params), headers, None
    headers["Content-Type"] = "application/json"
    body = {key: value for key, value in (params or {}).items() if value is not None}
    return path, headers, json.dumps(body).encode()


def answer_of(response: http11.Response) -> Any:
    """The parsed JSON of a 2xx answer; the mapped exception otherwise."""
    try:
        body = response.json()
    except CommonroomError as exc:
        raise errors.from_protocol(exc) from None
    if not 200 <= response.status < 300:
        raise errors.from_answer(response.status, body)
    return body


# -- blocking ---------------------------------------------------------------------------


def call(
    hint: Mapping[str, Any], method: str, path: str, params: Mapping[str, Any] | None = None, *,
    bearer: str | None = None, timeout: float = DEFAULT_TIMEOUT, kept: KeptAlive | None = None,
) -> Any:
    """One operation call from blocking code; its parsed 2xx answer.

    With `kept`, over that kept-alive connection; else on a fresh one.
    """
    request_target, headers, body = prepare(method, path, params, bearer)
    if kept is not None:
        return answer_of(kept.exchange(hint, method, request_target, headers, body, timeout))
    return answer_of(exchange(hint, method, request_target, headers, body, timeout))


def exchange(
    hint: Mapping[str, Any], method: str, request_target: str, headers: Mapping[str, str],
    body: bytes | None, timeout: float = DEFAULT_TIMEOUT,
) -> http11.Response:
    """One request/response on a fresh connection with `Connection: close` (blocking)."""
    if not _dials_loopback(hint):
        return _exchange_with_plugin(hint, method, request_target, headers, body, timeout)
    conn = http11.new_connection()
    payload = _encode(conn, method, request_target, headers, body, keep_alive=False)
    sock = _connect(hint, timeout)
    try:
        # The room may answer early (a 413) and close: then read what it said.
        with contextlib.suppress(OSError):
            sock.sendall(payload)
        return _read_response(sock, conn)
    finally:
        sock.close()


class KeptAlive:
    """One kept-alive loopback connection for a blocking client's sequential calls.

    The one-shot `ce` commands use `exchange` (a connection per request,
    `Connection: close`, PROTOCOL.md section 13). A long-lived `Client` makes
    many calls in a row, and a new TCP connection per call costs the room
    more than the call itself on small requests, so it keeps one connection
    and reads each response to its `Content-Length` (it never waits for the
    server to close). A connection the room closed while idle is noticed
    when the next request gets no response at all; that request is sent once
    more on a fresh connection. Other transports fall back to `exchange`.
    """

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._conn: h11.Connection | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = self._conn = None

    def exchange(
        self, hint: Mapping[str, Any], method: str, request_target: str,
        headers: Mapping[str, str], body: bytes | None, timeout: float = DEFAULT_TIMEOUT,
    ) -> http11.Response:
        if not _dials_loopback(hint):
            return exchange(hint, method, request_target, headers, body, timeout)
        with self._lock:
            for attempt in (1, 2):
                reused = self._sock is not None
                if self._sock is None or self._conn is None:
                    self._sock, self._conn = _connect(hint, timeout), http11.new_connection()
                sock, conn = self._sock, self._conn
                sock.settimeout(timeout)
                payload = _encode(conn, method, request_target, headers, body, keep_alive=True)
                try:
                    try:
                        sock.sendall(payload)
                    except OSError as exc:
                        raise _os_failure(exc) from None
                    status, head = _read_head(sock, conn)
                except errors.TransportUnavailable:
                    self.close()
                    if reused and attempt == 1:
                        continue  # no answer at all: the room had closed the idle connection
                    raise
                except BaseException:
                    self.close()
                    raise
                try:
                    response = _read_body(sock, conn, status, head)
                except BaseException:
                    self.close()
                    raise
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
                else:
                    self.close()  # the room said Connection: close
                return response
        raise AssertionError("unreachable")


def _encode(conn: h11.Connection, method: str, request_target: str,
            headers: Mapping[str, str], body: bytes | None, *, keep_alive: bool) -> bytes:
    try:
        return http11.encode_request(conn, method, request_target, headers, body,
                                     "application/json", keep_alive=keep_alive)
    except CommonroomError as exc:
        raise errors.from_protocol(exc) from None


def _read_response(sock: socket.socket, conn: h11.Connection) -> http11.Response:
    status, head = _read_head(sock, conn)
    return _read_body(sock, conn, status, head)


def _read_body(sock: socket.socket, conn: h11.Connection, status: int, head: http11.Headers
               ) -> http11.Response:
    chunks: list[bytes] = []
    while True:
        event = _next_event(sock, conn)
        if isinstance(event, h11.Data):
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return http11.Response(status=status, headers=head, body=b"".join(chunks))
        else:
            raise errors.TransportUnavailable(
                "transport_unavailable", "the room sent an unexpected HTTP event")


def open_events(
    hint: Mapping[str, Any], path: str, headers: Mapping[str, str], timeout: float | None
) -> Iterator[http11.SSEMessage]:
    """GET a text/event-stream (blocking) and yield its messages; the socket closes with it.

    `timeout` bounds each read (a silent stream longer than that is
    `TransportUnavailable`); None waits for ever.
    """
    if not _dials_loopback(hint):
        raise errors.TransportUnavailable(
            "transport_unavailable",
            f"the synchronous client streams over loopback only; use AsyncClient for the"
            f" {hint.get('type')!r} transport",
        )
    conn = http11.new_connection()
    payload = http11.encode_request(conn, "GET", path, headers, None, "text/event-stream")
    sock = _connect(hint, timeout if timeout is not None else DEFAULT_TIMEOUT)
    sock.settimeout(timeout)
    try:
        sock.sendall(payload)
        status, _ = _read_head(sock, conn)
        if not 200 <= status < 300:
            rest = []
            while True:
                event = _next_event(sock, conn)
                if not isinstance(event, h11.Data):
                    break
                rest.append(bytes(event.data))
            raise answer_error(status, b"".join(rest))
        parser = http11.SSEParser()
        while True:
            event = _next_event(sock, conn)
            if isinstance(event, h11.Data):
                yield from parser.feed(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return
            else:
                raise errors.TransportUnavailable(
                    "transport_unavailable", "the room sent an unexpected HTTP event")
    except OSError as exc:
        raise _os_failure(exc) from None
    finally:
        sock.close()


def answer_error(status: int, raw: bytes) -> errors.CommonroomError:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        body = None
    return errors.from_answer(status, body)


def _dials_loopback(hint: Mapping[str, Any]) -> bool:
    address, port = hint.get("address"), hint.get("port")
    if hint.get("type") not in _BLOCKING_TYPES or not isinstance(address, str) \
            or not isinstance(port, int):
        return False
    # The loopback plugins' own rule: never send a bearer in the clear to another machine.
    return address in ("localhost", "::1") or address.startswith("127.")


def _connect(hint: Mapping[str, Any], timeout: float) -> socket.socket:
    try:
        sock = socket.create_connection((str(hint["address"]), int(hint["port"])), timeout=timeout)
    except OSError as exc:
        raise _os_failure(exc) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _os_failure(exc: OSError) -> errors.TransportUnavailable:
    import os

    if isinstance(exc, TimeoutError):
        reason = "no answer in time"
    elif exc.errno is not None:
        reason = os.strerror(exc.errno)  # never the address
    else:
        reason = type(exc).__name__
    return errors.TransportUnavailable(
        "transport_unavailable", f"cannot reach the room: {reason}")


def _next_event(sock: socket.socket, conn: h11.Connection) -> Any:
    while True:
        try:
            event = conn.next_event()
        except h11.ProtocolError as exc:
            raise errors.from_protocol(http11.protocol_failure(exc)) from None
        if event is not h11.NEED_DATA:
            return event
        try:
            data = sock.recv(http11.RECEIVE_SIZE)
        except OSError as exc:
            raise _os_failure(exc) from None
        conn.receive_data(data)


def _read_head(sock: socket.socket, conn: h11.Connection) -> tuple[int, http11.Headers]:
    while True:
        try:
            head = http11.head_of(_next_event(sock, conn))
        except errors.CommonroomError:
            raise
        except CommonroomError as exc:
            raise errors.from_protocol(exc) from None
        if head is not None:
            return head


def _exchange_with_plugin(
    hint: Mapping[str, Any], method: str, request_target: str, headers: Mapping[str, str],
    body: bytes | None, timeout: float,
) -> http11.Response:
    import trio

    async def run() -> http11.Response:
        return await aexchange(hint, method, request_target, headers, body, timeout)

    return trio.run(run)


# -- async ------------------------------------------------------------------------------


def transport_hint(hint: Mapping[str, Any]) -> TransportHint:
    from commonroom.protocol.invitation import TransportHint

    return TransportHint(
        type=str(hint.get("type")), encrypted=bool(hint.get("encrypted")),
        mode=str(hint.get("mode", "")), address=hint.get("address"), port=hint.get("port"),
    )


async def aexchange(
    hint: Mapping[str, Any], method: str, request_target: str, headers: Mapping[str, str],
    body: bytes | None, timeout: float = DEFAULT_TIMEOUT,
) -> http11.Response:
    """One request/response on a fresh connection dialled by the hint's transport plugin."""
    import trio

    from commonroom.cli.byteclient import request
    from commonroom.transport.registry import dial

    try:
        with trio.move_on_after(timeout):
            stream = await dial(transport_hint(hint))
            return await request(stream, method, request_target, headers=headers, body=body)
    except errors.CommonroomError:
        raise
    except CommonroomError as exc:
        raise errors.from_protocol(exc) from None
    raise errors.TransportUnavailable(
        "transport_unavailable", f"the room did not answer within {timeout:g} seconds")


async def acall(
    hint: Mapping[str, Any], method: str, path: str, params: Mapping[str, Any] | None = None, *,
    bearer: str | None = None, timeout: float = DEFAULT_TIMEOUT,
) -> Any:
    request_target, headers, body = prepare(method, path, params, bearer)
    return answer_of(await aexchange(hint, method, request_target, headers, body, timeout))
