"""Framing stream items for the wire: server-sent events and WebSocket text frames.

An event's frame is built once and shared by every subscriber (the same
`Event` object reaches all of them through the hub): `format_sse` keeps the
frames of the newest events in a small cache keyed by the event object, so
1,000 subscribers cost one `json.dumps` and one encode, not 1,000. An
addressed copy is its own object and gets its own frame. `sse_chunk` frames
a whole batch as one write. `http_chunk` wraps a frame as one HTTP/1.1 chunk,
for streams that write their own body bytes; an event's chunk is cached with
its frame.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Final

from commonroom.protocol.events import Event
from commonroom.room.streams import StreamItem

SSE_PREAMBLE: Final = b"retry: 5000\n\n"
HEARTBEAT_FRAME: Final = b": hb\n\n"
_CACHE_SIZE: Final = 1024

# id(event) -> [event, frame, chunk or None]: the event is kept so its id cannot be
# reused meanwhile; the chunk is built the first time a stream asks for it.
_sse_frames: OrderedDict[int, list[Any]] = OrderedDict()


def _cached(event: Event) -> list[Any]:
    key = id(event)
    cached = _sse_frames.get(key)
    if cached is not None and cached[0] is event:
        return cached
    frame = f"id: {event.event_id}\nevent: {event.type}\ndata: {event.wire}\n\n".encode()
    entry = _sse_frames[key] = [event, frame, None]
    if len(_sse_frames) > _CACHE_SIZE:
        _sse_frames.popitem(last=False)
    return entry


def _event_frame(event: Event) -> bytes:
    frame: bytes = _cached(event)[1]
    return frame


def http_chunk(frame: bytes) -> bytes:
    """`frame` as one HTTP/1.1 chunk (b"" stays b"": an empty chunk would end the body)."""
    if not frame:
        return b""
    return b"%x\r\n%b\r\n" % (len(frame), frame)


# The last event asked for and its chunk: a commit's fan-out asks for the same event once
# per stream, 1,000 times in a row, and this answers without the cache's look-up.
_last_chunk: tuple[Event | None, bytes] = (None, b"")


def sse_event_chunk(event: Event) -> bytes:
    """The event's frame as one HTTP/1.1 chunk, built once for every subscriber."""
    global _last_chunk
    last, chunk = _last_chunk
    if last is event:
        return chunk
    entry = _cached(event)
    built: bytes | None = entry[2]
    if built is None:
        built = entry[2] = http_chunk(entry[1])
    _last_chunk = (event, built)
    return built


def format_sse(item: StreamItem) -> bytes:
    """One server-sent event for an item (b"" for `end` and `live`); send SSE_PREAMBLE first."""
    if item.kind == "event":
        assert item.event is not None
        return _event_frame(item.event)
    if item.kind == "resync":
        data = json.dumps(item.data or {}, separators=(",", ":"))
        return f"event: resync\ndata: {data}\n\n".encode()
    if item.kind == "heartbeat":
        return HEARTBEAT_FRAME
    return b""  # end, live, flush


def sse_chunk(items: Iterable[StreamItem]) -> bytes:
    """A batch of items as one chunk (one socket write per batch, not per event)."""
    return b"".join(format_sse(item) for item in items)


def format_ws(item: StreamItem) -> str | None:
    """One WebSocket text frame for an item; None for heartbeat, live and end."""
    if item.kind == "event":
        assert item.event is not None
        return item.event.wire
    if item.kind == "resync":
        return json.dumps({"type": "resync", **(item.data or {})}, separators=(",", ":"))
    return None
