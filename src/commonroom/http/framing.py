"""Framing stream items for the wire: server-sent events and WebSocket text frames.

An event's frame is built once and shared by every subscriber (the same
`Event` object reaches all of them through the hub): `format_sse` keeps the
frames of the newest events in a small cache keyed by the event object, so
1,000 subscribers cost one `json.dumps` and one encode, not 1,000. An
addressed copy is its own object and gets its own frame. `sse_chunk` frames
a whole batch as one write.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

from commonroom.protocol.events import Event
from commonroom.room.streams import StreamItem

SSE_PREAMBLE: Final = b"retry: 5000\n\n"
HEARTBEAT_FRAME: Final = b": hb\n\n"
_CACHE_SIZE: Final = 1024

# id(event) -> (event, frame): the event is kept so its id cannot be reused meanwhile.
_sse_frames: OrderedDict[int, tuple[Event, bytes]] = OrderedDict()


def _event_frame(event: Event) -> bytes:
    key = id(event)
    cached = _sse_frames.get(key)
    if cached is not None and cached[0] is event:
        return cached[1]
    frame = f"id: {event.event_id}\nevent: {event.type}\ndata: {event.wire}\n\n".encode()
    _sse_frames[key] = (event, frame)
    if len(_sse_frames) > _CACHE_SIZE:
        _sse_frames.popitem(last=False)
    return frame


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
    return b""


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
