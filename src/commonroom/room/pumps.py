"""Every open stream is a task of the room: a pump in the room's streams nursery.

Theory of operation: an adapter (SSE, WebSocket, the MCP notification
streams) opens a stream with `Room.open_stream`. The room starts a *pump*
task in its own streams nursery; the pump runs the stream's items
(`streams.observe`) and sends them over a bounded memory channel. The
adapter reads batches from its end (`RoomStream.next_batch`: the first item,
waiting for it, plus every item already queued), frames each batch once and
writes it in one go.

A stream that writes its own bytes (a direct SSE stream, `http/stream_views`)
has no channel: its pump writes each item through the adapter's
`StreamWriter`, and while it waits the hub may write live events for it
(the direct lane, `hub`). Its writer's cancel scope ends it when the
adapter goes away.

Lifetimes: the room owns every pump, so cancelling the room's nursery (or
closing the hub when the room stops) ends every stream; the adapter then
sees `end`. An adapter that goes away closes its end (`aclose`), which
cancels its pump at once (even one waiting for a live event), releasing its
hub subscription. A
reader that stops reading fills the channel; the pump then blocks, the hub
keeps offering events to the subscriber's bounded buffer, and when that
overflows the subscriber is lagged and told `resync` on its next read:
nothing grows without bound and nothing waits on the slow reader.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Final, Protocol

import trio

from commonroom.room.streams import END, DirectWriter, StreamItem

CHANNEL_ITEMS: Final = 64
"""Items a pump may queue ahead of its reader (a batch a reader takes at once)."""


class RoomStream:
    """The adapter's end of one open stream."""

    def __init__(self, receive: trio.MemoryReceiveChannel[StreamItem],
                 pump_scope: trio.CancelScope) -> None:
        self._receive = receive
        self._pump_scope = pump_scope
        self._ended = False

    async def next_batch(self) -> list[StreamItem]:
        """The next items: waits for one, then takes what is already queued.

        The last batch ends with an `end` item; after it, `[END]` again.
        """
        if self._ended:
            return [END]
        try:
            batch = [await self._receive.receive()]
        except (trio.EndOfChannel, trio.ClosedResourceError):
            self._ended = True
            return [END]
        while len(batch) < CHANNEL_ITEMS and batch[-1].kind != "end":
            try:
                batch.append(self._receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
        if batch[-1].kind == "end":
            self._ended = True
        return batch

    def stop(self) -> None:
        """End the stream from outside its reader (its owner logged out, or a client's newer
        stream replaced it): the pump stops now and the reader's next batch is `end`."""
        self._pump_scope.cancel()

    async def aclose(self) -> None:
        """The reader is done: the pump stops now.

        Not at its next send: a pump waiting for a live event would otherwise
        hold its task and hub subscription until the next event or heartbeat.
        """
        self._ended = True
        self._pump_scope.cancel()
        await self._receive.aclose()

    async def __aenter__(self) -> RoomStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def pump(items: AsyncGenerator[StreamItem, None],
               send: trio.MemorySendChannel[StreamItem], scope: trio.CancelScope) -> None:
    """Run one stream in the room's nursery until it ends or its reader leaves."""
    with scope:  # the reader's aclose cancels it
        async with send, aclosing(items):
            try:
                async for item in items:
                    await send.send(item)
                    if item.kind == "end":
                        return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the reader went away


class StreamWriter(DirectWriter, Protocol):
    """The adapter's writer for a stream that writes its own bytes (and takes the direct lane)."""

    cancel_scope: trio.CancelScope
    """Cancelled by the adapter when its reader went away."""

    async def ready(self) -> None:
        """Returns once the stream may write (its response head is out)."""

    async def write_item(self, item: StreamItem) -> bool:
        """Write one item; False when the reader is gone."""
        ...

    def finished(self) -> None:
        """The pump is done: the adapter may end the response."""


async def pump_to_writer(items: AsyncGenerator[StreamItem, None], writer: StreamWriter) -> None:
    """Run one self-writing stream in the room's nursery until it ends or its reader leaves."""
    try:
        with writer.cancel_scope:
            async with aclosing(items):
                await writer.ready()
                async for item in items:
                    if not await writer.write_item(item) or item.kind == "end":
                        return
    finally:
        writer.finished()


def open_pumped(nursery: trio.Nursery, items: AsyncGenerator[StreamItem, None]) -> RoomStream:
    send, receive = trio.open_memory_channel[StreamItem](CHANNEL_ITEMS)
    scope = trio.CancelScope()
    nursery.start_soon(pump, items, send, scope)
    return RoomStream(receive, scope)
