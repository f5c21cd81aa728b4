"""The sans-I/O core of the wire: HTTP/1.1 framing (h11), server-sent events, the failures.

No I/O, no trio, no attrs: both drivers (`wire.aio`, and `wire.sync` generated from it)
and every caller share one request encoder, one head reader, one SSE parser and one
vocabulary of failures. Every failure is a `commonroom.TransportUnavailable` (the
library's error classes, `wire/errors.py`), and a message never carries an address.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import h11

from commonroom.wire import errors

HOST: Final = "commonroom"
JSON: Final = "application/json"
EVENT_STREAM: Final = "text/event-stream"
RECEIVE_SIZE: Final = 65536
MAX_HEAD_BYTES: Final = 64 * 1024
# Headers the client owns: the framing and the connection's lifetime.
_OWNED: Final = frozenset({"content-length", "transfer-encoding", "connection"})
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})

Headers = tuple[tuple[str, str], ...]


def transport_unavailable(message: str) -> errors.TransportUnavailable:
    return errors.TransportUnavailable("transport_unavailable", message)


class WireFailure(errors.TransportUnavailable):
    """A failure of the wire itself (code `transport_unavailable`); the subclasses say which."""

    def __init__(self, message: str) -> None:
        super().__init__("transport_unavailable", message)


class ConnectionLost(WireFailure):
    """The connection failed or was closed by the other side."""


class NoResponse(ConnectionLost):
    """The connection ended before any byte of an answer: the room did not take the request.

    Sending it again on a fresh connection is safe; a kept-alive connection the room
    closed while idle fails this way.
    """


class TimedOut(WireFailure):
    """Nothing arrived within a bound of `wire.Timeouts` (a silent room or a half-open link)."""


class Malformed(WireFailure):
    """The other side does not speak HTTP/1.1 (or broke it)."""


def explain(sent: WireFailure | None, read: errors.CommonroomError) -> errors.CommonroomError:
    """The failure to report when sending a request failed (`sent`) and reading its answer too.

    The send's failure says why, unless the room answered something that is not
    HTTP; it stays a `NoResponse` when no byte of an answer came (safe to resend).
    """
    if sent is None or isinstance(read, Malformed):
        return read
    if isinstance(read, NoResponse) and not isinstance(sent, NoResponse):
        return NoResponse(sent.message)
    return sent


@dataclasses.dataclass(frozen=True)
class Response:
    """A complete response. Header names are lower-case, values decoded as Latin-1."""

    status: int
    headers: Headers
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        return header(self.headers, name)

    def json(self) -> Any:
        """The body parsed as JSON; a body that is not JSON is `transport_unavailable`."""
        try:
            return json.loads(self.body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise transport_unavailable(
                f"the response (status {self.status}) is not JSON"
            ) from None


@dataclasses.dataclass(frozen=True)
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


def new_connection() -> h11.Connection:
    return h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)


def encode_request(
    conn: h11.Connection,
    method: str,
    path: str,
    headers: Mapping[str, str] | None,
    body: bytes | None,
    accept: str,
    *,
    keep_alive: bool = False,
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
    if not keep_alive:
        chosen["connection"] = ("Connection", "close")
    try:
        out = conn.send(h11.Request(method=method, target=path, headers=list(chosen.values())))
        if body:
            out += conn.send(h11.Data(data=body))
        out += conn.send(h11.EndOfMessage())
    except h11.LocalProtocolError as exc:
        raise errors.InvalidRequest("invalid_request", f"cannot send this request: {exc}") from None
    assert out is not None
    return out


def head_of(event: Any) -> tuple[int, Headers] | None:
    """(status, headers) when `event` is the final response head; None for 1xx.

    Anything else before the head is `transport_unavailable`.
    """
    if isinstance(event, h11.InformationalResponse):
        return None
    if isinstance(event, h11.Response):
        decoded = tuple(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers
        )
        return event.status_code, decoded
    if isinstance(event, h11.ConnectionClosed):
        raise NoResponse("the connection closed before a response arrived")
    raise transport_unavailable("the room sent an unexpected HTTP event")


def next_event(conn: h11.Connection) -> Any:
    """`conn.next_event()` with h11's protocol errors as the wire's failures."""
    try:
        return conn.next_event()
    except h11.RemoteProtocolError as exc:
        # h11's words for an EOF before the answer was whole ("peer unexpectedly closed
        # connection", "... without sending complete message body", "can't handle event type
        # ConnectionClosed when ... SEND_RESPONSE").
        if "closed connection" in str(exc) or "ConnectionClosed" in str(exc):
            raise ConnectionLost("the connection closed before the response was complete") from None
        raise Malformed("the room sent a malformed HTTP response") from None
    except h11.ProtocolError:
        raise Malformed("the HTTP exchange went wrong on the client side") from None


def header(headers: Headers, name: str) -> str | None:
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


