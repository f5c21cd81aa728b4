"""Change notifications: `resources/subscribe` state, the `GET /mcp` stream and `subscriptions/listen`.

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

Subscriptions made with `resources/subscribe` live in the room process,
keyed by the session's hash (never the bearer); a session's `GET /mcp`
streams read them at every event, so a subscription made after the stream
opened applies at once. They are gone when the room stops, like every live
subscriber (the client subscribes again; it rereads anyway).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Collection, Iterable
from contextlib import aclosing
from typing import Any, Final

import attrs

from commonroom.engine.observe import StreamStart
from commonroom.mcp import wire
from commonroom.mcp.resources import BY_URI, SUBSCRIBABLE, uri_of
from commonroom.room.core import Room
from commonroom.room.streams import StreamItem

PING: Final = b": ping\n\n"
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


def changed_uris(item: StreamItem, watched: Collection[str]) -> list[str]:
    """The watched URIs an item says changed, in the resources' order."""
    if not watched:
        return []
    if item.kind == "resync":
        found: Iterable[str] = watched
    elif item.kind == "event" and item.event is not None:
        found = [uri for r in item.event.resources
                 if (uri := uri_of(r)) is not None and uri in watched]
        if not found:
            return []
    else:
        return []
    return sorted(found, key=lambda uri: _URI_ORDER.get(uri, len(_URI_ORDER)))


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


async def _observe(room: Room, start: StreamStart, heartbeat: float
                   ) -> AsyncGenerator[StreamItem, None]:
    """The session's live items, from a stream the room owns (a pump in its nursery)."""
    live = attrs.evolve(start, cursor=start.latest_event_id)
    async with room.open_stream(live, heartbeat_seconds=heartbeat) as stream:
        while True:
            batch = await stream.next_batch()
            for item in batch:
                yield item
            if batch[-1].kind == "end":
                return


async def session_stream(
    room: Room, start: StreamStart, subscriptions: Subscriptions, heartbeat: float
) -> AsyncGenerator[bytes, None]:
    """`GET /mcp`: `notifications/resources/updated` for the session's subscribed URIs."""
    yield PING  # the stream is open: a client may start acting now
    session_hash = start.actor.session_hash
    async with aclosing(_observe(room, start, heartbeat)) as items:
        async for item in items:
            if item.kind == "heartbeat":
                yield PING
            elif item.kind == "end":
                return
            else:
                for uri in changed_uris(item, subscriptions.of(session_hash)):
                    yield _updated_frame(uri)


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


def listen_filter(params: dict[str, Any]) -> ListenFilter:
    """The honoured subset of `params.notifications`; list-changed kinds are never honoured."""
    asked = params.get("notifications")
    if not isinstance(asked, dict):
        raise wire.invalid_params("subscriptions/listen needs params.notifications (an object)")
    uris = _strings(asked.get("resourceSubscriptions"), "resourceSubscriptions")
    task_ids = _strings(asked.get("taskIds"), "taskIds")
    honoured = tuple(dict.fromkeys(uri for uri in uris if uri in BY_URI))
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
    heartbeat: float,
) -> AsyncGenerator[bytes, None]:
    """The SSE answer of `subscriptions/listen`: ack first, tagged frames, a final result."""
    tag = {wire.META_SUBSCRIPTION: subscription_id}
    yield sse({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"notifications": wanted.acknowledged(), "_meta": tag}})
    async with aclosing(_observe(room, start, heartbeat)) as items:
        async for item in items:
            if item.kind == "heartbeat":
                yield PING
            elif item.kind == "end":
                break
            else:
                for uri in changed_uris(item, wanted.resource_subscriptions):
                    yield sse(updated(uri, subscription_id))
                if wanted.task_ids:
                    task = _task_notification(item, wanted.task_ids, subscription_id)
                    if task is not None:
                        yield sse(task)
    # A graceful end (room stopping, session ended): the listen request's result.
    yield sse(wire.result_message(subscription_id, {"resultType": "complete", "_meta": tag}))
