"""The trio driver of the wire: HTTP/1.1 exchanges, event streams and plans over a byte stream.

Theory of operation (docs/spec/PROTOCOL.md section 13). A request is encoded by the
sans-I/O core (`http11`: `Host: commonroom`, `Content-Length`, and
`Connection: close` unless the connection is kept) and the answer is read
until its framing says it is complete — `Content-Length`, the last chunk, or
EOF for a response framed by EOF — never by waiting for the room to close.
The request bytes go out while the answer is read, so a room that answers
early (a 413) and never reads the rest cannot stall the client.

Every wait is bounded by `Timeouts` (`wire/timeouts.py`): dialling by
`connect`, an exchange by `call` plus what the room was asked to hold it, and
each read of a stream by `silence` — a half-open connection ends as
`http11.TimedOut`, and the plan reading it (`wire.plans`) re-opens it.

- `request`, `open_stream`, `BodyChunks`, `iter_sse`: one exchange over a
  stream the caller dialled (tests, tools, `ce mcp`'s pre-dialled connection);
- `Connection`: exchanges with one room through its transport hint, dialling
  per request (`Connection: close`) or keeping one connection alive;
- `Runner`: performs a plan's steps (`wire.plans`) over a `Connection`.

This file is also the source of `wire/sync.py`, the blocking driver:
`tools/unasync_wire.py` writes that file from this one (`async`/`await`
removed, `_trio_io` → `_socket_io`) and `tests/unit/test_wire.py` fails when
it is stale. Edit this file, then run the tool. Everything that differs
between the two lives in `_trio_io` / `_socket_io`.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import h11

from commonroom.wire import _trio_io as io
from commonroom.wire import calls, errors, http11
from commonroom.wire._trio_io import Stream, Streamlike
from commonroom.wire.http11 import Headers, Response, SSEMessage
from commonroom.wire.timeouts import DEFAULT, Timeouts

if TYPE_CHECKING:
    from commonroom.wire import plans

T = TypeVar("T")

__all__ = [
    "BodyChunks", "Connection", "Events", "Headers", "Response", "Runner", "SSEMessage", "Stream",
    "Streamlike", "iter_sse", "open_stream", "read_response", "request",
]

_NO_ANSWER = "the room did not answer in time"


# -- one exchange over a given stream ------------------------------------------------------


async def request(
    stream: Streamlike, method: str, target: str, *, headers: Mapping[str, str] | None = None,
    body: bytes | None = None, timeout: float | None = None,
) -> Response:
    """Send one request with `Connection: close`, read the whole answer, close `stream`.

    Sends `Accept: application/json` unless `headers` say otherwise, and
    `Content-Length` for every body (0 for a body-less POST/PUT/PATCH).
    `headers` cannot set `Content-Length`, `Transfer-Encoding` or `Connection`.
    A non-2xx answer is a `Response` like any other. The stream is closed on
    return, on error and on cancellation.
    """
    wrapped = io.wrap(stream)
    try:
        conn = http11.new_connection()
        payload = http11.encode_request(conn, method, target, headers, body, http11.JSON)
        return await _exchange(wrapped, conn, payload, io.after(timeout))
    finally:
        await wrapped.aclose()


async def open_stream(
    stream: Streamlike, target: str, *, headers: Mapping[str, str] | None = None,
    method: str = "GET", body: bytes | None = None, timeout: float | None = None,
    silence: float | None = None,
) -> tuple[int, Headers, BodyChunks]:
    """Send one request whose answer may be long-lived: its status, headers and body chunks.

    Sends `Accept: text/event-stream` unless `headers` say otherwise. The head
    must arrive within `timeout`; each read of the body within `silence`
    (None: no bound). The returned `BodyChunks` owns the stream and closes it at
    the end of the body, on error and on `aclose()`; on error before the head,
    the stream is closed here.
    """
    wrapped = io.wrap(stream)
    try:
        conn = http11.new_connection()
        payload = http11.encode_request(conn, method, target, headers, body, http11.EVENT_STREAM)
        deadline = io.after(timeout)
        status, head = await wrapped.send_while(
            payload, deadline, lambda: _read_head(wrapped, conn, deadline))
    except BaseException:
        await wrapped.aclose()
        raise
    return status, head, BodyChunks(wrapped, conn, silence)


async def read_response(stream: Streamlike, conn: h11.Connection, *, timeout: float | None = None
                        ) -> Response:
    """The whole answer to a request the caller wrote to `stream` itself (through `conn`)."""
    return await _read_response(io.wrap(stream), conn, io.after(timeout))


class BodyChunks:
    """The body of a long-lived answer, chunk by chunk.

    Iteration ends at the end of the body; a connection that breaks first, or
    stays silent past the bound, raises the wire's error and closes the stream.
    `aclose()` (or leaving `async with`) closes it at any point. A read
    cancelled from outside loses nothing; iteration can go on afterwards.
    """

    def __init__(self, stream: Stream, conn: h11.Connection, silence: float | None) -> None:
        self._stream = stream
        self._conn = conn
        self._silence = silence
        self._done = False
        self._closed = False

    def __aiter__(self) -> BodyChunks:
        return self

    async def __anext__(self) -> bytes:
        while not self._done:
            silent = f"the room sent nothing for {self._silence:g} seconds" if self._silence else ""
            try:
                event = await _next_event(self._stream, self._conn, io.after(self._silence), silent)
            except errors.CommonroomError:
                await self.aclose()
                raise
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                await self.aclose()
            else:
                await self.aclose()
                raise http11.transport_unavailable("the room sent an unexpected HTTP event")
        raise StopAsyncIteration

    async def read_all(self) -> bytes:
        """The rest of the body (say, of a non-2xx answer to `open_stream`)."""
        return b"".join([chunk async for chunk in self])

    async def aclose(self) -> None:
        self._done = True
        if not self._closed:
            self._closed = True
            await self._stream.aclose()

    async def __aenter__(self) -> BodyChunks:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


async def iter_sse(chunks: AsyncIterable[bytes]) -> AsyncGenerator[SSEMessage, None]:
    """The messages (events and comments) of a text/event-stream body.

    Closing this generator (`contextlib.aclosing(...)`) also closes `chunks`
    when it has an `aclose()`, so the stream under a `BodyChunks` is released.
    """
    parser = http11.SSEParser()
    try:
        async for chunk in chunks:
            for message in parser.feed(chunk):
                yield message
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


class Events:
    """The events of an open text/event-stream answer, one at a time (heartbeats skipped)."""

    def __init__(self, chunks: BodyChunks) -> None:
        self._chunks = chunks
        self._parser = http11.SSEParser()
        self._ready: collections.deque[SSEMessage] = collections.deque()

    async def next(self) -> SSEMessage | None:
        """The next event; None once the room ended the stream."""
        while not self._ready:
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                return None
            self._ready.extend(m for m in self._parser.feed(chunk) if not m.is_comment)
        return self._ready.popleft()

    async def aclose(self) -> None:
        await self._chunks.aclose()


async def _exchange(stream: Stream, conn: h11.Connection, payload: bytes, deadline: float
                    ) -> Response:
    return await stream.send_while(payload, deadline, lambda: _read_response(stream, conn, deadline))


async def _next_event(stream: Stream, conn: h11.Connection, deadline: float, silent: str,
                      *, before_head: bool = False) -> Any:
    while True:
        event = http11.next_event(conn)
        if event is not h11.NEED_DATA:
            return event
        data = await stream.receive(deadline, silent)
        if not data and before_head and not conn.trailing_data[0]:
            # Closed before one byte of an answer (a kept connection the room closed while idle).
            raise http11.NoResponse("the connection closed before a response arrived")
        conn.receive_data(data)


async def _read_head(stream: Stream, conn: h11.Connection, deadline: float
                     ) -> tuple[int, Headers]:
    while True:
        try:
            event = await _next_event(stream, conn, deadline, _NO_ANSWER, before_head=True)
        except http11.ConnectionLost as lost:
            if not conn.trailing_data[0] and not isinstance(lost, http11.NoResponse):
                raise http11.NoResponse(lost.message) from None  # reset before any answer
            raise
        head = http11.head_of(event)
        if head is not None:
            return head


async def _read_response(stream: Stream, conn: h11.Connection, deadline: float) -> Response:
    status, headers = await _read_head(stream, conn, deadline)
    body: list[bytes] = []
    while True:
        event = await _next_event(stream, conn, deadline, _NO_ANSWER)
        if isinstance(event, h11.Data):
            body.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return Response(status=status, headers=headers, body=b"".join(body))
        else:
            raise http11.transport_unavailable("the room sent an unexpected HTTP event")


# -- a room, through its transport hint ---------------------------------------------------------


class Connection:
    """Exchanges with one room, dialled through its transport hint, within `timeouts`.

    Without `keep_alive` every request has a connection of its own and says
    `Connection: close` (docs/spec/PROTOCOL.md section 13; `ce`'s one-shot commands).
    With it, sequential calls share one connection, because a new TCP
    connection per call costs the room more than a small call: each answer is
    read to its `Content-Length`, and a kept connection the room closed while
    idle (`NoResponse`) is replaced and the request sent once more. A call made
    while another holds the kept connection dials its own.
    """

    def __init__(self, hint: Mapping[str, Any], *, timeouts: Timeouts = DEFAULT,
                 keep_alive: bool = False) -> None:
        self.hint = dict(hint)
        self.timeouts = timeouts
        self.keep_alive = keep_alive
        self._idle: tuple[Stream, h11.Connection] | None = None
        self._guard = io.Guard()
        self._closed = False

    async def dial(self) -> Stream:
        return await io.connect(self.hint, self.timeouts.connect)

    async def exchange(
        self, method: str, target: str, headers: Mapping[str, str] | None = None,
        body: bytes | None = None, *, hold: float = 0.0,
    ) -> Response:
        """One request and its whole answer (any status)."""
        if self._closed:
            raise http11.transport_unavailable("this client is closed")
        deadline = io.after(self.timeouts.call + hold)
        if not self.keep_alive:
            stream = await self.dial()
            try:
                conn = http11.new_connection()
                payload = http11.encode_request(conn, method, target, headers, body, http11.JSON)
                return await _exchange(stream, conn, payload, deadline)
            finally:
                await stream.aclose()
        for attempt in (1, 2):
            kept = self._take()
            stream, conn = kept if kept is not None else (await self.dial(), http11.new_connection())
            try:
                payload = http11.encode_request(conn, method, target, headers, body, http11.JSON,
                                                keep_alive=True)
                response = await _exchange(stream, conn, payload, deadline)
            except http11.NoResponse:
                await stream.aclose()
                if kept is not None and attempt == 1:
                    continue  # the room had closed the idle connection: it never saw the request
                raise
            except BaseException:
                await stream.aclose()
                raise
            if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                conn.start_next_cycle()
                await self._keep(stream, conn)
            else:
                await stream.aclose()  # the room said Connection: close
            return response
        raise AssertionError("unreachable")

    async def call(
        self, method: str, path: str, params: Mapping[str, Any] | None = None, *,
        bearer: str | None = None, hold: float = 0.0,
    ) -> Any:
        """One operation call: its parsed 2xx answer, or the exception its code maps to."""
        request_target, headers, body = calls.prepare(method, path, params, bearer)
        return calls.answer_of(await self.exchange(method, request_target, headers, body, hold=hold))

    async def open_events(self, path: str, headers: Mapping[str, str] | None = None) -> Events:
        """GET an event stream on a connection of its own; a non-2xx answer is raised."""
        stream = await self.dial()
        status, _, chunks = await open_stream(stream, path, headers=headers,
                                              timeout=self.timeouts.call,
                                              silence=self.timeouts.silence)
        if not 200 <= status < 300:
            async with chunks:
                raw = await chunks.read_all()
            raise calls.answer_error(status, raw)
        return Events(chunks)

    async def aclose(self) -> None:
        """Close the kept connection; later exchanges are refused."""
        self._closed = True
        kept = self._take()
        if kept is not None:
            await kept[0].aclose()

    def _take(self) -> tuple[Stream, h11.Connection] | None:
        with self._guard:
            kept, self._idle = self._idle, None
        return kept

    async def _keep(self, stream: Stream, conn: h11.Connection) -> None:
        with self._guard:
            kept = self._idle is None and not self._closed
            if kept:
                self._idle = (stream, conn)
        if not kept:
            await stream.aclose()


# -- plans -------------------------------------------------------------------------------------


class Runner:
    """Performs the steps of plans (`wire.plans`) for one session over a `Connection`.

    `routes` maps an operation name to its (method, path, ...) — the client's
    route table; the session's bearer goes with every call and stream.
    """

    def __init__(self, connection: Connection, *, bearer: str | None,
                 routes: Mapping[str, Sequence[Any]]) -> None:
        self.connection = connection
        self.bearer = bearer
        self.routes = routes

    async def run(self, plan: plans.Plan[T], on_emit: Callable[[Any], None] | None = None) -> T:
        """Run `plan` to its end; its return value. What it emits goes to `on_emit`."""
        result: list[T] = []
        async with contextlib.aclosing(self.iterate(_returning(plan, result))) as items:
            async for item in items:
                if on_emit is not None:
                    on_emit(item)
        return result[0]

    async def iterate(self, plan: plans.Plan[Any]) -> AsyncGenerator[Any, None]:
        """What `plan` emits, item by item, while its steps are performed."""
        from commonroom.wire import plans  # not at import: a one-shot `ce` verb runs no plan

        events: Events | None = None
        reply: Any = None
        failure: errors.CommonroomError | None = None
        try:
            while True:
                try:
                    step = plan.send(reply) if failure is None else plan.throw(failure)
                except StopIteration:
                    return
                reply, failure = None, None
                if isinstance(step, plans.Emit):
                    yield step.item
                    continue
                try:
                    if isinstance(step, plans.Open):
                        if events is not None:
                            await events.aclose()
                            events = None
                        events = await self.connection.open_events(
                            step.path, {**calls.bearer_headers(self.bearer), **step.headers})
                    elif isinstance(step, plans.Next):
                        assert events is not None, "Next before Open"
                        reply = await events.next()
                    else:
                        reply = await self._perform(step)
                except errors.CommonroomError as error:
                    failure = error
        finally:
            plan.close()
            if events is not None:
                await events.aclose()

    async def _perform(self, step: plans.Step) -> Any:
        from commonroom.wire import plans

        if isinstance(step, plans.Call):
            route = self.routes[step.op]
            method, path = str(route[0]), str(route[1])
            return await self.connection.call(method, path, step.params, bearer=self.bearer,
                                              hold=step.hold)
        if isinstance(step, plans.Sleep):
            await io.sleep(step.seconds)
            return None
        if isinstance(step, plans.Now):
            return io.now()
        raise AssertionError(f"not a step: {step!r}")


def _returning(plan: plans.Plan[T], result: list[T]) -> plans.Plan[None]:
    result.append((yield from plan))
