"""The byte client: HTTP/1.1 over whatever `trio.abc.Stream` a transport gives.

Theory of operation (PROTOCOL.md section 13): one connection carries one
request. Every request says `Host: commonroom` (the room does not care which
name reached it) and `Connection: close`. The client never depends on the
server closing the connection (the stack's pitfall 1: it does not): it reads
the response until its framing says it is complete (`Content-Length`, the
last chunk, or EOF for a response framed by EOF), then closes the stream
itself. The request bytes are sent while the response is read, so a server
that answers early (a 413 before reading a large body) and never reads the
rest cannot stall the client.

Failures of the connection and responses that are not HTTP are
`CommonroomError("transport_unavailable", ...)`; messages never contain an
address. There are no timeouts here: callers put calls in a
`trio.move_on_after` / `trio.fail_after` scope.

`open_stream` is for long-lived responses (SSE): it returns the status and
headers and a `BodyChunks` iterator; `iter_sse` parses text/event-stream
(WHATWG HTML, "server-sent events") and also reports comment lines, so a
caller can see heartbeats.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import attrs
import h11
import trio

from commonroom.protocol.errors import CommonroomError
from commonroom.transport.base import os_reason, transport_unavailable

HOST: Final = "commonroom"
RECEIVE_SIZE: Final = 65536
MAX_HEAD_BYTES: Final = 64 * 1024
# Headers the client owns: the framing and the connection's lifetime.
_OWNED: Final = frozenset({"content-length", "transfer-encoding", "connection"})
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})

Headers = tuple[tuple[str, str], ...]

# What a broken connection or a broken response looks like on the way up.
_FAILURES: Final = (
    CommonroomError,
    h11.ProtocolError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    OSError,
)


@attrs.frozen
class Response:
    """A complete response. Header names are lower-case, values decoded as Latin-1."""

    status: int
    headers: Headers
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        return _header(self.headers, name)

    def json(self) -> Any:
        """The body parsed as JSON; a body that is not JSON is `transport_unavailable`."""
        try:
            return json.loads(self.body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise transport_unavailable(
                f"the response (status {self.status}) is not JSON"
            ) from None


@attrs.frozen
class SSEMessage:
    """One server-sent event, or one comment line (`comment` is not None).

    `id` is the stream's last event id when the message was dispatched (it
    persists across events, as in the WHATWG rules; "" when none). `retry`
    is the reconnection time in ms if a valid `retry:` field arrived since
    the previous event, else None. A comment has `event == ""` and the text
    after the colon, one leading space removed.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None
    comment: str | None = None

    @property
    def is_comment(self) -> bool:
        return self.comment is not None


# -- requests ------------------------------------------------------------------


async def request(
    stream: trio.abc.Stream,
    method: str,
    path: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
) -> Response:
    """Send one request with `Connection: close`, read the whole response, close `stream`.

    Sends `Accept: application/json` unless `headers` say otherwise, and
    `Content-Length` for every body (0 for a body-less POST/PUT/PATCH).
    `headers` cannot set `Content-Length`, `Transfer-Encoding` or `Connection`.
    The stream is closed on return, on error and on cancellation.
    """
    try:
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        payload = _encode_request(conn, method, path, headers, body, "application/json")
        send_failure: list[BaseException] = []
        outcome: Response | BaseException
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_send_quietly, stream, payload, send_failure)
            try:
                outcome = await _read_response(stream, conn)
            except _FAILURES as exc:
                outcome = exc
            nursery.cancel_scope.cancel()
        if isinstance(outcome, Response):
            return outcome
        if send_failure and not isinstance(outcome, h11.RemoteProtocolError):
            raise _connection_error(send_failure[0]) from None
        raise _as_error(outcome) from None
    finally:
        await stream.aclose()


async def open_stream(
    stream: trio.abc.Stream,
    path: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, Headers, BodyChunks]:
    """GET a long-lived response: its status, headers and an iterator of body chunks.

    Sends `Accept: text/event-stream` unless `headers` say otherwise. The
    returned `BodyChunks` owns `stream`: it closes it at the end of the body,
    on error, and on `aclose()` (use `async with`). On error before the head
    arrives, the stream is closed here.
    """
    try:
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        payload = _encode_request(conn, "GET", path, headers, None, "text/event-stream")
        await stream.send_all(payload)
        status, response_headers = await _read_head(stream, conn)
    except BaseException as exc:
        await trio.aclose_forcefully(stream)
        if isinstance(exc, _FAILURES):
            raise _as_error(exc) from None
        raise
    return status, response_headers, BodyChunks(stream, conn)


class BodyChunks(AsyncIterator[bytes], trio.abc.AsyncResource):
    """The body of a long-lived response, chunk by chunk (h11 `Data` events).

    Iteration ends at the end of the body; a connection that breaks first is
    `transport_unavailable`. `aclose()` (or leaving `async with`) closes the
    stream at any point. Cancelling a pending `__anext__` (say, a heartbeat
    timeout) loses nothing; iteration can go on afterwards.
    """

    def __init__(self, stream: trio.abc.Stream, conn: h11.Connection) -> None:
        self._stream = stream
        self._conn = conn
        self._done = False
        self._closed = False

    def __aiter__(self) -> BodyChunks:
        return self

    async def __anext__(self) -> bytes:
        while not self._done:
            try:
                event = await _next_event(self._stream, self._conn)
            except _FAILURES as exc:
                # A cancelled read loses nothing (trio streams keep unread bytes and
                # h11 never saw them), so only a failure ends the body.
                await trio.aclose_forcefully(self)
                raise _as_error(exc) from None
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._done = True
                await self.aclose()
            else:
                await self.aclose()
                raise transport_unavailable("the room sent an unexpected HTTP event")
        raise StopAsyncIteration

    async def read_all(self) -> bytes:
        """The rest of the body (for a non-2xx answer to `open_stream`)."""
        return b"".join([chunk async for chunk in self])

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._done = True
            await self._stream.aclose()


def _encode_request(
    conn: h11.Connection,
    method: str,
    path: str,
    headers: Mapping[str, str] | None,
    body: bytes | None,
    accept: str,
) -> bytes:
    chosen: dict[str, tuple[str, str]] = {
        "host": ("Host", HOST),
        "accept": ("Accept", accept),
    }
    for name, value in (headers or {}).items():
        if name.lower() not in _OWNED:
            chosen[name.lower()] = (name, value)
    if body is not None or method.upper() in _BODY_METHODS:
        chosen["content-length"] = ("Content-Length", str(len(body or b"")))
    chosen["connection"] = ("Connection", "close")
    try:
        out = conn.send(h11.Request(method=method, target=path, headers=list(chosen.values())))
        if body:
            out += conn.send(h11.Data(data=body))
        out += conn.send(h11.EndOfMessage())
    except h11.LocalProtocolError as exc:
        raise CommonroomError("invalid_request", f"cannot send this request: {exc}") from None
    assert out is not None
    return out


async def _send_quietly(
    stream: trio.abc.Stream, payload: bytes, failures: list[BaseException]
) -> None:
    try:
        await stream.send_all(payload)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        failures.append(exc)


async def _next_event(stream: trio.abc.Stream, conn: h11.Connection) -> Any:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(bytes(await stream.receive_some(RECEIVE_SIZE)))


async def _read_head(stream: trio.abc.Stream, conn: h11.Connection) -> tuple[int, Headers]:
    while True:
        event = await _next_event(stream, conn)
        if isinstance(event, h11.InformationalResponse):
            continue
        if isinstance(event, h11.Response):
            decoded = tuple(
                (name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers
            )
            return event.status_code, decoded
        if isinstance(event, h11.ConnectionClosed):
            raise transport_unavailable("the connection closed before a response arrived")
        raise transport_unavailable("the room sent an unexpected HTTP event")


async def _read_response(stream: trio.abc.Stream, conn: h11.Connection) -> Response:
    status, headers = await _read_head(stream, conn)
    body: list[bytes] = []
    while True:
        event = await _next_event(stream, conn)
        if isinstance(event, h11.Data):
            body.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return Response(status=status, headers=headers, body=b"".join(body))
        else:
            raise transport_unavailable("the room sent an unexpected HTTP event")


def _as_error(exc: BaseException) -> CommonroomError:
    if isinstance(exc, CommonroomError):
        return exc
    if isinstance(exc, h11.RemoteProtocolError):
        if "closed connection" in str(exc):  # h11's words for an EOF mid-message
            return transport_unavailable("the connection closed before the response was complete")
        return transport_unavailable("the room sent a malformed HTTP response")
    if isinstance(exc, h11.LocalProtocolError):
        return transport_unavailable("the HTTP exchange went wrong on the client side")
    return _connection_error(exc)


def _connection_error(exc: BaseException) -> CommonroomError:
    if isinstance(exc, trio.ClosedResourceError):
        return transport_unavailable("the connection to the room was already closed")
    if isinstance(exc, OSError):
        reason = os_reason(exc)
    elif exc.__cause__ is not None:
        reason = os_reason(exc.__cause__)
    else:
        reason = str(exc) or "connection broken"
    return transport_unavailable(f"the connection to the room failed: {reason}")


def _header(headers: Headers, name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers:
        if key == wanted:
            return value
    return None


# -- server-sent events ----------------------------------------------------------

_EOL: Final = re.compile(r"\r\n|\r|\n")


class SSEParser:
    """An incremental, sans-I/O text/event-stream parser (WHATWG HTML 9.2.6).

    `feed(bytes)` returns the messages completed by those bytes. Lines end in
    CRLF, LF or CR (a CRLF split across two feeds is one line end); UTF-8 is
    decoded incrementally (invalid bytes become U+FFFD); a leading BOM is
    dropped. An event is dispatched at a blank line if it has data; an event
    left incomplete at the end of the stream is never dispatched.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._retry_pending: int | None = None
        #: The last event id seen ("" when none), as the WHATWG rules keep it.
        self.last_event_id = ""
        #: The reconnection time in ms from the last valid `retry:` field, or None.
        self.retry: int | None = None

    def feed(self, data: bytes) -> list[SSEMessage]:
        text = self._decoder.decode(data)
        if not text:
            return []
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        out: list[SSEMessage] = []
        start = 0
        for match in _EOL.finditer(text):
            line = text[start : match.start()]
            if self._pending:
                self._pending.append(line)
                line = "".join(self._pending)
                self._pending.clear()
            self._line(line, out)
            start = match.end()
        if start < len(text):
            self._pending.append(text[start:])
        self._skip_lf = text.endswith("\r")
        return out

    def _line(self, line: str, out: list[SSEMessage]) -> None:
        if not line:
            self._dispatch(out)
            return
        if line.startswith(":"):
            out.append(SSEMessage(event="", id=self.last_event_id, comment=_strip_space(line[1:])))
            return
        field, colon, value = line.partition(":")
        if colon:
            value = _strip_space(value)
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self.retry = self._retry_pending = int(value)
        # Any other field is ignored.

    def _dispatch(self, out: list[SSEMessage]) -> None:
        if self._data:
            out.append(
                SSEMessage(
                    event=self._event or "message",
                    data="\n".join(self._data),
                    id=self.last_event_id,
                    retry=self._retry_pending,
                )
            )
            self._retry_pending = None
        self._data = []
        self._event = ""


def _strip_space(value: str) -> str:
    return value[1:] if value.startswith(" ") else value


async def iter_sse(chunks: AsyncIterable[bytes]) -> AsyncGenerator[SSEMessage, None]:
    """The messages (events and comments) of a text/event-stream body.

    Closing this generator (e.g. `async with contextlib.aclosing(...)`)
    also closes `chunks` when it has an `aclose()`, so the stream under a
    `BodyChunks` is released.
    """
    parser = SSEParser()
    try:
        async for chunk in chunks:
            for message in parser.feed(chunk):
                yield message
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
