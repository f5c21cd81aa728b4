"""The HTTP framings of the room's streams: SSE, WebSocket and the long-poll answer.

The stream itself is the room's (`Room.open_stream`: a pump in the room's
nursery); these only turn its batches into bytes. Each batch is written as
one chunk, and each event's frame is built once for all subscribers
(`framing`). Both listeners use them (the owner page's live view too).

An SSE stream over HTTP/1.1 on our own connection writes its own body
(`SSEWriter`): the response head and the preamble go out the usual way
(quart, hypercorn, h11 choose chunked framing for a 1.1 answer without a
length), then the room's pump writes every item as one pre-framed HTTP chunk
straight to the socket, and the hub writes live events for it while it waits
(the direct lane, `room/hub.py`): a commit's fan-out skips quart's send,
hypercorn's stream, h11 and two task switches per subscriber. When the pump is
done the body ends the usual way, and h11 writes the final empty chunk: the
framing h11 tracks is the same as if it had written every chunk itself. Any
other connection (HTTP/1.0, a test client, WebSocket, MCP) takes the channel.

Every stream holds a slot of the room's `StreamSlots` (8 per session and per
participant) for as long as its answer lasts: `sse_response` and
`wait_response` take it themselves, a WebSocket's caller takes it before the
handshake, and `held_until_sent` ties one to any streaming response (MCP).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, Callable
from typing import Any

import trio
from quart import Response, request, websocket

from commonroom.engine.facade import StreamStart
from commonroom.http import framing
from commonroom.http.common import json_response
from commonroom.http.connection import HardenedTCPServer, current_connection
from commonroom.http.hardened_app import after_send, streaming_response
from commonroom.protocol.events import Event
from commonroom.protocol.records import to_wire
from commonroom.room.core import Room
from commonroom.room.slots import StreamSlot
from commonroom.room.streams import Again, StreamItem

SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


async def open_start(room: Room, name: str, bearer: str | None, params: dict[str, Any]) -> StreamStart:
    """Authorize and bound a stream operation of the table (raises its CommonroomError)."""
    outcome = await room.execute(name, bearer, params, from_query=True)
    if outcome.error is not None:
        raise outcome.error
    start: StreamStart = outcome.result
    return start


def observe_params() -> dict[str, Any]:
    """The observe cursor of this request: `Last-Event-ID` wins over `?since_event_id=` (§8)."""
    params = dict(request.args.items())
    last_event_id = request.headers.get("Last-Event-ID")
    if last_event_id:
        params["since_event_id"] = last_event_id
    return params


class DirectWriter:
    """A stream that writes its own body chunks on our connection (see the module doc).

    Subclasses say how an item and a live event become one HTTP chunk (an empty chunk:
    nothing for this stream); the writing, the hub's lane and the owed remainder are here.
    """

    def __init__(self, connection: HardenedTCPServer) -> None:
        self._connection = connection
        self._head_sent = trio.Event()
        self._head_out = False  # `_head_sent` as a plain flag, for the hub's lane
        self.done = trio.Event()
        self.cancel_scope = trio.CancelScope()
        self._owed = b""  # the rest of a chunk the direct lane wrote in part
        self._gone = False

    def item_chunk(self, item: StreamItem) -> bytes:
        raise NotImplementedError

    def event_chunk(self, event: Event) -> bytes:
        raise NotImplementedError

    # The pump's side (room/pumps.py).

    async def ready(self) -> None:
        await self._head_sent.wait()

    async def write_item(self, item: StreamItem) -> bool:
        data, self._owed = self._owed + self.item_chunk(item), b""
        if not data:
            return True
        if self._gone or not await self._connection.send_stream_bytes(data):
            self._gone = True
            return False
        return True

    def finished(self) -> None:
        self.done.set()

    # The hub's side: a live event while the pump waits.

    def write_event_nowait(self, event: Event, owe: Callable[[], None]) -> bool:
        if self._gone or self._owed or not self._head_out:
            return False
        chunk = self.event_chunk(event)
        if not chunk:
            return True  # nothing for this stream: taken, and nothing to write
        sent = self._connection.send_nowait(chunk)
        if sent is None:
            self._gone = True
            return False
        if sent == 0:
            return False  # busy or full: the pump writes it, waiting
        if sent < len(chunk):
            self._owed = chunk[sent:]
            owe()
        return True

    # The response's side.

    def head_sent(self) -> None:
        self._head_out = True
        self._head_sent.set()

    def close(self) -> None:
        """The response is over (ended, or the client left): stop the pump."""
        self._gone = True
        self.cancel_scope.cancel()


class SSEWriter(DirectWriter):
    """The observe stream's direct writer: each event's SSE frame is built once for all."""

    def item_chunk(self, item: StreamItem) -> bytes:
        if item.kind == "event" and item.event is not None:
            return framing.sse_event_chunk(item.event)
        return framing.http_chunk(framing.format_sse(item))

    def event_chunk(self, event: Event) -> bytes:
        return framing.sse_event_chunk(event)


def held_until_sent(response: Response, slot: StreamSlot) -> Response:
    """`response` holds `slot` (room/slots.py) until its sending is over, however it ends.

    A response dropped before it was ever sent gives the slot back when it is
    collected, so no path leaks one.
    """
    weakref.finalize(response, slot.release)
    return after_send(response, slot.release)


def sse_response(
    room: Room, start: StreamStart, *, heartbeat_seconds: float,
    on_stop: Callable[[Callable[[], None]], None] | None = None,
) -> Response:
    """`text/event-stream` for an authorized start, until the stream ends or the client leaves.

    Raises `limit_exceeded` (scope `streams`) when the caller holds its cap of
    streams. `on_stop`, when given, is called once with a function that ends
    the stream from outside (its body then finishes as if the room had ended it).
    """
    slot = room.stream_slots.acquire(start.actor)
    try:
        response = _sse_response(room, start, heartbeat_seconds, on_stop or (lambda stop: None))
        return held_until_sent(response, slot)
    except BaseException:
        slot.release()
        raise


def _sse_response(room: Room, start: StreamStart, heartbeat_seconds: float,
                  on_stop: Callable[[Callable[[], None]], None]) -> Response:
    connection = current_connection()
    if connection is not None and request.http_version == "1.1":
        writer = SSEWriter(connection)
        on_stop(writer.close)
        return _writing_sse_response(room, start, writer, heartbeat_seconds=heartbeat_seconds)
    stream = room.open_stream(start, heartbeat_seconds=heartbeat_seconds)
    on_stop(stream.stop)

    async def body() -> AsyncGenerator[bytes, None]:
        async with stream:
            yield framing.SSE_PREAMBLE
            while True:
                batch = await stream.next_batch()
                chunk = framing.sse_chunk(batch)
                if chunk:
                    yield chunk
                if batch[-1].kind == "end":
                    return

    return streaming_response(body(), headers=SSE_HEADERS)


def _writing_sse_response(
    room: Room, start: StreamStart, writer: SSEWriter, *, heartbeat_seconds: float
) -> Response:
    room.open_writing_stream(start, writer, heartbeat_seconds=heartbeat_seconds)

    async def body() -> AsyncGenerator[bytes, None]:
        try:
            yield framing.SSE_PREAMBLE
            # Resumed: quart has written the head and the preamble (h11 chose chunked).
            writer.head_sent()
            await writer.done.wait()
        finally:
            writer.close()

    # A response that is never sent never starts its body: the pump must stop anyway.
    return after_send(streaming_response(body(), headers=SSE_HEADERS), writer.close)


def reopener(room: Room, name: str, bearer: str | None, params: dict[str, Any]) -> Again:
    """`Room.wait`'s `again` for a long-poll: the same operation, bearer and parameters."""

    async def again() -> StreamStart:
        return await open_start(room, name, bearer, params)

    return again


async def wait_response(room: Room, start: StreamStart, again: Again) -> Response:
    """A long-poll operation's JSON answer (held up to its timeout); a wait holds a stream slot.

    A wait for a person runs the operation again (`again`, from `reopener`) when an event
    names what it watches."""
    with room.stream_slots.acquire(start.actor):
        answer = await room.wait(start, again)
    response = json_response(to_wire(answer))
    response.timeout = None
    return response


async def serve_websocket(room: Room, start: StreamStart, *, heartbeat_seconds: float) -> None:
    """One JSON event per text frame on the accepted WebSocket, then a normal close.

    The caller holds the stream's slot (taken before the handshake is accepted,
    so a refusal is an HTTP answer).
    """
    await websocket.accept()
    async with room.open_stream(start, heartbeat_seconds=heartbeat_seconds) as stream:
        while True:
            batch = await stream.next_batch()
            for item in batch:
                frame = framing.format_ws(item)
                if frame is not None:
                    await websocket.send(frame)
            if batch[-1].kind == "end":
                break
    await websocket.close(1000)
