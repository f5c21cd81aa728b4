"""The HTTP framings of the room's streams: SSE, WebSocket and the long-poll answer.

The stream itself is the room's (`Room.open_stream`: a pump in the room's
nursery); these only turn its batches into bytes. Each batch is written as
one chunk, and each event's frame is built once for all subscribers
(`framing`). Both listeners use them (the owner page's live view too).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from quart import Response, request, websocket

from commonroom.engine.observe import StreamStart
from commonroom.http import framing
from commonroom.http.common import json_response
from commonroom.http.hardened_app import streaming_response
from commonroom.protocol.records import to_wire
from commonroom.room.core import Room

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


def sse_response(room: Room, start: StreamStart, *, heartbeat_seconds: float) -> Response:
    """`text/event-stream` for an authorized start, until the stream ends or the client leaves."""
    stream = room.open_stream(start, heartbeat_seconds=heartbeat_seconds)

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


async def wait_response(room: Room, start: StreamStart) -> Response:
    """The long-poll's JSON answer (held up to the start's timeout)."""
    answer = await room.wait(start)
    response = json_response(to_wire(answer))
    response.timeout = None
    return response


async def serve_websocket(room: Room, start: StreamStart, *, heartbeat_seconds: float) -> None:
    """One JSON event per text frame on the accepted WebSocket, then a normal close."""
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
