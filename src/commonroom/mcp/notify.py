"""Change notifications: `resources/subscribe` state, the `GET /mcp` streams and `subscriptions/listen`.

Both streams are built on the room's streams (`Room.open_stream`) items (event / resync /
heartbeat / end), so they inherit its rules: no gap from the moment the
stream was authorized (it starts at the cursor the authorization saw), a
revoked or expired session ends the stream at once, a stopping room ends it
cleanly. What a change notifies is derived from the event catalogue only:
`event.resources` names the resources a commit changed, and each subscribed
URI among them gets one `notifications/resources/updated {uri}`. A resync
(the stream lagged or the ring moved past it) may have hidden changes, so it
notifies every URI the stream watches. A notification is a hint: nothing
waits for one, and a client that missed one rereads.

Subscriptions made with `resources/subscribe` live in the room process: a
2026-07-28 caller's are keyed by its session's hash (never the bearer), a
legacy session's are that session's own set (two windows of one client are
two sessions). A `GET /mcp` stream reads them at every event, so a
subscription made after the stream opened applies at once. They are gone
when the room stops, like every live subscriber (the client subscribes
again; it rereads anyway).

A legacy session's stream is resumable (`Last-Event-ID`): each notification
frame of an event carries that event's id on its last frame (a client that
lost the connection half way through an event's frames is sent that event's
frames again: hints, harmless twice), a resync's frames the latest id; a
2025-11-25 session's stream opens with a priming event (an id, empty data)
as that revision asks. Resuming replays from the room's event ring, so
nothing committed while the client was away is missed while the ring holds
it, and a cursor the ring lost is a resync (every watched URI).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Collection, Iterable
from typing import Any, Final

import attrs
import trio

from commonroom.engine.facade import StreamStart, related
from commonroom.http.connection import HardenedTCPServer
from commonroom.http.framing import http_chunk
from commonroom.http.stream_views import DirectWriter
from commonroom.mcp import wire
from commonroom.mcp.resources import BY_URI, SUBSCRIBABLE, uri_of
from commonroom.protocol.events import Event
from commonroom.room.core import Room
from commonroom.room.pumps import RoomStream
from commonroom.room.streams import StreamItem

PING: Final = b": ping\n\n"
SUBSCRIPTIONS_PER_SESSION: Final = 64  # the five workspace URIs and region URIs
REGION_PATHS_KEPT: Final = 4096
RETRY: Final = b"retry: 5000\n"  # how long a client waits before it reconnects (ms)
_NONE: Final[frozenset[str]] = frozenset()
_URI_ORDER: Final[dict[str, int]] = {spec.uri: i for i, spec in enumerate(SUBSCRIBABLE)}


class Subscriptions:
    """`resources/subscribe` URIs per session hash."""

    def __init__(self) -> None:
        self._by_session: dict[bytes, set[str]] = {}

    def add(self, session_hash: bytes, uri: str) -> None:
        self._by_session.setdefault(session_hash, set()).add(uri)

    def remove(self, session_hash: bytes, uri: str) -> None:
        uris = self._by_session.get(session_hash)
        if uris is not None:
            uris.discard(uri)
            if not uris:
                del self._by_session[session_hash]

    def of(self, session_hash: bytes) -> set[str] | frozenset[str]:
        """The session's URIs (the live set: callers only read it)."""
        return self._by_session.get(session_hash, _NONE)


class RegionPaths:
    """Region resource URIs (`commonroom://workspace/region/{path}`) -> the canonical path
    each named when it was subscribed (a bare title, `section:` and percent-encoding are
    resolved once, by the room). Shared by every stream; the oldest are forgotten past
    `REGION_PATHS_KEPT` (their subscribers then get no hint, and reread anyway)."""

    def __init__(self) -> None:
        self._paths: dict[str, str] = {}

    def add(self, uri: str, path: str) -> None:
        self._paths.pop(uri, None)
        self._paths[uri] = path
        while len(self._paths) > REGION_PATHS_KEPT:
            del self._paths[next(iter(self._paths))]

    def get(self, uri: str) -> str | None:
        return self._paths.get(uri)


_NO_REGIONS: Final = RegionPaths()


def changed_uris(item: StreamItem, watched: Collection[str],
                 regions: RegionPaths = _NO_REGIONS) -> list[str]:
    """The watched URIs an item says changed: the workspace ones in the resources' order, then
    region URIs (a document change in that region, an ancestor or a descendant of it)."""
    if not watched:
        return []
    if item.kind == "resync":
        found: Iterable[str] = watched
    elif item.kind == "event" and item.event is not None:
        event = item.event
        found = [uri for r in event.resources
                 if (uri := uri_of(r)) is not None and uri in watched]
        if event.type == "change.committed" and len(watched) > len(found):
            changed = str(getattr(event.payload, "region", ""))
            found += [uri for uri in watched
                      if (path := regions.get(uri)) is not None and related(changed, path)]
        if not found:
            return []
    else:
        return []
    return sorted(found, key=lambda uri: (_URI_ORDER.get(uri, len(_URI_ORDER)), uri))


def sse(message: dict[str, Any]) -> bytes:
    return b"data: " + wire.dumps(message).encode() + b"\n\n"


def _updated_frame(uri: str) -> bytes:
    """The session stream's frame for `uri`: the same bytes for every stream, built once."""
    frame = _FRAMES.get(uri)
    if frame is None:
        frame = _FRAMES[uri] = sse(updated(uri))
    return frame


_FRAMES: dict[str, bytes] = {}


def updated(uri: str, subscription_id: wire.RequestId = None) -> dict[str, Any]:
    params: dict[str, Any] = {"uri": uri}
    if subscription_id is not None:
        params["_meta"] = {wire.META_SUBSCRIPTION: subscription_id}
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params}


def stream_start(start: StreamStart, resume: bool) -> StreamStart:
    """Where a stream starts: at the event its authorization saw, or (`resume`) after the
    client's cursor (its `Last-Event-ID`), replaying what it missed from the ring."""
    if resume and start.cursor is not None:
        return start
    return attrs.evolve(start, cursor=start.latest_event_id)


class Framer:
    """What one MCP stream writes: its preamble, each item's frames, and its keep-alives.

    The stream asks the room for a heartbeat every `keepalive` seconds of silence (half the
    configured heartbeat) and the framer pings whenever `keepalive` has passed since it last
    wrote anything: an event it has nothing to say about (another resource changed) keeps the
    room's stream busy without writing a byte, so the client still hears a `: ping` at least
    every `heartbeat` seconds, however busy the room is with other things.
    """

    def __init__(self, heartbeat: float) -> None:
        self.keepalive = heartbeat / 2
        self.last_write = trio.current_time()

    def preamble(self) -> bytes:
        self.last_write = trio.current_time()
        return PING

    def item_frames(self, item: StreamItem) -> bytes:
        raise NotImplementedError

    def frames(self, item: StreamItem) -> bytes:
        data = b"" if item.kind == "heartbeat" else self.item_frames(item)
        now = trio.current_time()
        if not data and item.kind != "end" and (
                item.kind == "heartbeat" or now - self.last_write >= self.keepalive):
            data = PING
        if data:
            self.last_write = now
        return data


class SessionFramer(Framer):
    """2026-07-28 `GET /mcp`: `notifications/resources/updated` for the bearer's subscriptions."""

    def __init__(self, heartbeat: float, subscriptions: Subscriptions, session_hash: bytes,
                 regions: RegionPaths) -> None:
        super().__init__(heartbeat)
        self.subscriptions = subscriptions
        self.session_hash = session_hash
        self.regions = regions

    def item_frames(self, item: StreamItem) -> bytes:
        uris = changed_uris(item, self.subscriptions.of(self.session_hash), self.regions)
        return b"".join(_updated_frame(uri) for uri in uris)


class LegacyFramer(Framer):
    """A legacy session's `GET /mcp`: the same frames, resumable (event ids), primed in 2025-11-25."""

    def __init__(self, heartbeat: float, watched: Collection[str], regions: RegionPaths, *,
                 priming_cursor: int | None) -> None:
        super().__init__(heartbeat)
        self.watched = watched  # the session's live subscription set
        self.regions = regions
        self.priming_cursor = priming_cursor

    def preamble(self) -> bytes:
        self.last_write = trio.current_time()
        if self.priming_cursor is not None:  # an id and empty data: a reconnect says where it was
            return RETRY + f"id: {self.priming_cursor}\ndata: \n\n".encode()
        return RETRY + PING

    def item_frames(self, item: StreamItem) -> bytes:
        uris = changed_uris(item, self.watched, self.regions)
        if not uris:
            return b""
        frames = [_updated_frame(uri) for uri in uris]
        event_id = _cursor_of(item)
        if event_id is not None:  # on the last frame: the client has all of the event then
            frames[-1] = f"id: {event_id}\n".encode() + frames[-1]
        return b"".join(frames)


def _cursor_of(item: StreamItem) -> int | None:
    """The event id a client has seen once it has this item's frames."""
    if item.event is not None:
        return item.event.event_id
    if item.kind == "resync" and item.data is not None:
        latest = item.data.get("latest_event_id")
        return latest if isinstance(latest, int) else None
    return None


async def framed(
    room: Room, start: StreamStart, framer: Framer, *, resume: bool = False,
    on_open: Callable[[RoomStream], None] | None = None,
    on_close: Callable[[RoomStream], None] | None = None,
) -> AsyncGenerator[bytes, None]:
    """An MCP stream's body on the room's stream (a pump in its nursery), through a channel.

    For a connection that is not ours (HTTP/1.0, a test client); on our own HTTP/1.1
    connection the stream writes its own chunks instead (`NotificationWriter`).
    """
    yield framer.preamble()
    async with room.open_stream(stream_start(start, resume),
                                heartbeat_seconds=framer.keepalive) as stream:
        if on_open is not None:
            on_open(stream)
        try:
            while True:
                batch = await stream.next_batch()
                data = b"".join(framer.frames(item) for item in batch)
                if data:
                    yield data
                if batch[-1].kind == "end":
                    return
        finally:
            if on_close is not None:
                on_close(stream)


class NotificationWriter(DirectWriter):
    """An MCP stream that writes its own HTTP chunks and takes the hub's direct lane.

    The observe stream's writer with the MCP framer's frames: a commit's fan-out to every
    MCP stream is one loop in the publishing task, and an event this stream has nothing to
    say about costs a set lookup. `stop()` ends it (a newer stream of its legacy session).
    """

    def __init__(self, connection: HardenedTCPServer, framer: Framer) -> None:
        super().__init__(connection)
        self._framer = framer

    def item_chunk(self, item: StreamItem) -> bytes:
        return http_chunk(self._framer.frames(item))

    def event_chunk(self, event: Event) -> bytes:
        return http_chunk(self._framer.frames(StreamItem("event", event)))

    def stop(self) -> None:
        self.close()


@attrs.frozen
class ListenFilter:
    """What a `subscriptions/listen` stream honours of what it was asked."""

    resource_subscriptions: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()

    def acknowledged(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.resource_subscriptions:
            out["resourceSubscriptions"] = list(self.resource_subscriptions)
        if self.task_ids:
            out["taskIds"] = list(self.task_ids)
        return out


def requested_uris(params: dict[str, Any]) -> list[str]:
    """`params.notifications.resourceSubscriptions` of a `subscriptions/listen` (checked)."""
    asked = params.get("notifications")
    if not isinstance(asked, dict):
        raise wire.invalid_params("subscriptions/listen needs params.notifications (an object)")
    return _strings(asked.get("resourceSubscriptions"), "resourceSubscriptions")


def listen_filter(params: dict[str, Any], regions: Collection[str] = ()) -> ListenFilter:
    """The honoured subset of `params.notifications`: the workspace URIs and the region URIs
    the room resolved (`regions`); list-changed kinds are never honoured."""
    uris = requested_uris(params)
    task_ids = _strings(params["notifications"].get("taskIds"), "taskIds")
    honoured = tuple(dict.fromkeys(uri for uri in uris if uri in BY_URI or uri in regions))
    return ListenFilter(honoured, tuple(dict.fromkeys(task_ids)))


def _strings(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise wire.invalid_params(f"notifications.{field} must be a list of strings")
    return list(value)


def _task_notification(item: StreamItem, task_ids: tuple[str, ...],
                       subscription_id: wire.RequestId) -> dict[str, Any] | None:
    event = item.event
    if item.kind != "event" or event is None or event.type != "task.updated":
        return None
    task_id = getattr(event.payload, "task_id", None)
    if task_id not in task_ids:
        return None
    params = {"taskId": task_id, "status": getattr(event.payload, "status", None),
              "statusMessage": getattr(event.payload, "status_message", None),
              "lastUpdatedAt": event.created_at,
              "_meta": {wire.META_SUBSCRIPTION: subscription_id}}
    return {"jsonrpc": "2.0", "method": "notifications/tasks", "params": params}


class ListenFramer(Framer):
    """The SSE answer of `subscriptions/listen`: ack first, tagged frames, a final result."""

    def __init__(self, heartbeat: float, wanted: ListenFilter, subscription_id: wire.RequestId,
                 regions: RegionPaths) -> None:
        super().__init__(heartbeat)
        self.wanted = wanted
        self.subscription_id = subscription_id
        self.tag = {wire.META_SUBSCRIPTION: subscription_id}
        self.regions = regions

    def preamble(self) -> bytes:
        self.last_write = trio.current_time()
        return sse({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": self.wanted.acknowledged(), "_meta": self.tag}})

    def item_frames(self, item: StreamItem) -> bytes:
        if item.kind == "end":
            # A graceful end (room stopping, session ended): the listen request's result.
            return sse(wire.result_message(self.subscription_id,
                                           {"resultType": "complete", "_meta": self.tag}))
        frames = [sse(updated(uri, self.subscription_id))
                  for uri in changed_uris(item, self.wanted.resource_subscriptions, self.regions)]
        if self.wanted.task_ids:
            task = _task_notification(item, self.wanted.task_ids, self.subscription_id)
            if task is not None:
                frames.append(sse(task))
        return b"".join(frames)
