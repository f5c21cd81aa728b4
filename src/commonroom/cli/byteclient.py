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

from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import h11
import trio

from commonroom.cli.http11 import (
    HOST,
    MAX_HEAD_BYTES,
    RECEIVE_SIZE,
    Headers,
    Response,
    SSEMessage,
    SSEParser,
    encode_request,
    head_of,
    header,
    protocol_failure,
)
from commonroom.protocol.errors import CommonroomError
from commonroom.transport.base import os_reason, transport_unavailable

__all__ = [
    "HOST", "MAX_HEAD_BYTES", "RECEIVE_SIZE", "BodyChunks", "Headers", "Response", "SSEMessage",
    "SSEParser", "encode_request", "header", "iter_sse", "open_stream", "request",
]

# What a broken connection or a broken response looks like on the way up.
_FAILURES: Final = (
    CommonroomError,
    h11.ProtocolError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    OSError,
)


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
        payload = encode_request(conn, method, path, headers, body, "application/json")
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
        payload = encode_request(conn, "GET", path, headers, None, "text/event-stream")
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
        head = head_of(await _next_event(stream, conn))
        if head is not None:
            return head


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
    if isinstance(exc, h11.ProtocolError):
        return protocol_failure(exc)
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


# -- server-sent events ----------------------------------------------------------

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
