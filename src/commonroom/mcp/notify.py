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
from contextlib import aclosing
from typing import Any, Final

import attrs

from commonroom.engine.observe import StreamStart
from commonroom.engine.regions import related
from commonroom.mcp import wire
from commonroom.mcp.resources import BY_URI, SUBSCRIBABLE, uri_of
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


async def open_room_stream(
    room: Room, start: StreamStart, heartbeat: float, *, resume: bool = False,
    on_open: Callable[[RoomStream], None] | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """The items of every MCP stream, from a stream the room owns (a pump in its nursery).

    Live from the event its authorization saw, or (`resume`) replayed from the
    cursor the client sent. `on_open` learns the room stream (a legacy
    session keeps it, to end it when a newer stream replaces it).

    stream-slot: every MCP stream (`GET /mcp` of both eras, `subscriptions/listen`)
    is opened here: the place a per-participant stream cap counts it.
    """
    live = start if resume and start.cursor is not None else attrs.evolve(
        start, cursor=start.latest_event_id)
    async with room.open_stream(live, heartbeat_seconds=heartbeat) as stream:
        if on_open is not None:
            on_open(stream)
        while True:
            batch = await stream.next_batch()
            for item in batch:
                yield item
            if batch[-1].kind == "end":
                return


async def session_stream(
    room: Room, start: StreamStart, subscriptions: Subscriptions, heartbeat: float,
    regions: RegionPaths = _NO_REGIONS,
) -> AsyncGenerator[bytes, None]:
    """2026-07-28 `GET /mcp`: `notifications/resources/updated` for the session's subscribed URIs."""
    yield PING  # the stream is open: a client may start acting now
    session_hash = start.actor.session_hash
    async with aclosing(open_room_stream(room, start, heartbeat)) as items:
        async for item in items:
            if item.kind == "heartbeat":
                yield PING
            elif item.kind == "end":
                return
            else:
                for uri in changed_uris(item, subscriptions.of(session_hash), regions):
                    yield _updated_frame(uri)


def _cursor_of(item: StreamItem) -> int | None:
    """The event id a client has seen once it has this item's frames."""
    if item.event is not None:
        return item.event.event_id
    if item.kind == "resync" and item.data is not None:
        latest = item.data.get("latest_event_id")
        return latest if isinstance(latest, int) else None
    return None


async def legacy_session_stream(
    room: Room, start: StreamStart, watched: Collection[str], heartbeat: float, *,
    priming: bool, on_open: Callable[[RoomStream], None], on_close: Callable[[RoomStream], None],
    regions: RegionPaths = _NO_REGIONS,
) -> AsyncGenerator[bytes, None]:
    """A legacy session's `GET /mcp`: resumable `notifications/resources/updated` frames.

    `watched` is the session's live subscription set; `start.cursor` is the
    client's `Last-Event-ID` (None: live from now).
    """
    opened: list[RoomStream] = []

    def remember(stream: RoomStream) -> None:
        opened.append(stream)
        on_open(stream)

    resume = start.cursor is not None
    cursor = start.cursor if resume else start.latest_event_id
    if priming:  # 2025-11-25: an id and empty data, so a reconnect can say where it was
        yield RETRY + f"id: {cursor}\ndata: \n\n".encode()
    else:
        yield RETRY + PING
    try:
        async with aclosing(open_room_stream(room, start, heartbeat, resume=resume,
                                             on_open=remember)) as items:
            async for item in items:
                if item.kind == "heartbeat":
                    yield PING
                elif item.kind == "end":
                    return
                else:
                    uris = changed_uris(item, watched, regions)
                    if uris:
                        frames = [_updated_frame(uri) for uri in uris]
                        event_id = _cursor_of(item)
                        if event_id is not None:
                            frames[-1] = f"id: {event_id}\n".encode() + frames[-1]
                        yield b"".join(frames)
    finally:
        for stream in opened:
            on_close(stream)


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


async def listen_stream(
    room: Room, start: StreamStart, wanted: ListenFilter, subscription_id: wire.RequestId,
    heartbeat: float, regions: RegionPaths = _NO_REGIONS,
) -> AsyncGenerator[bytes, None]:
    """The SSE answer of `subscriptions/listen`: ack first, tagged frames, a final result."""
    tag = {wire.META_SUBSCRIPTION: subscription_id}
    yield sse({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"notifications": wanted.acknowledged(), "_meta": tag}})
    async with aclosing(open_room_stream(room, start, heartbeat)) as items:
        async for item in items:
            if item.kind == "heartbeat":
                yield PING
            elif item.kind == "end":
                break
            else:
                for uri in changed_uris(item, wanted.resource_subscriptions, regions):
                    yield sse(updated(uri, subscription_id))
                if wanted.task_ids:
                    task = _task_notification(item, wanted.task_ids, subscription_id)
                    if task is not None:
                        yield sse(task)
    # A graceful end (room stopping, session ended): the listen request's result.
    yield sse(wire.result_message(subscription_id, {"resultType": "complete", "_meta": tag}))
