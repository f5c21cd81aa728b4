"""A room that accepts and goes silent: `AsyncClient.observe` and `Client.observe` end or reconnect.

The servers are real listeners on 127.0.0.1 that keep the connection open and
send nothing more — a half-open link as the client sees it. The trio client
runs under trio's autojump clock, so its default bounds (45 s of silence, a
60 s call) pass in virtual time; the blocking client is given short bounds.
(`ce observe` against the same kind of room: tests/e2e/test_ce_lifetimes.py.)
"""

from __future__ import annotations

import functools
import threading
import time

import pytest
import trio
import trio.testing

import commonroom
from commonroom.protocol.events import Event
from commonroom.wire.timeouts import DEFAULT, Timeouts
from tests.silent_room import HEAD, SilentRoom, chunk, started_event

INVITATION = "commonroom://join/not-decoded-when-a-hint-is-given"


def loopback(port: int) -> dict[str, object]:
    return {"type": "loopback", "encrypted": False, "mode": "private", "address": "127.0.0.1",
            "port": port}


async def serve_silently(nursery: trio.Nursery, scripts: list[bytes], requests: list[bytes]) -> int:
    """Answer each connection with the next script (none: no answer at all), then stay silent."""

    async def handler(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        requests.append(data)
        if scripts:
            await stream.send_all(scripts.pop(0))
        await trio.sleep_forever()

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    return int(listeners[0].socket.getsockname()[1])


def stream_of(*event_ids: int) -> bytes:
    return HEAD + chunk(b"retry: 100\n\n") + b"".join(chunk(started_event(i)) for i in event_ids)


async def test_async_observe_reconnects_after_a_silence_from_the_last_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    requests: list[bytes] = []
    async with trio.open_nursery() as nursery:
        port = await serve_silently(nursery, [stream_of(1), stream_of(2)], requests)
        client = commonroom.AsyncClient(INVITATION, session="ses_watcher", hint=loopback(port))
        seen: list[int] = []
        started = trio.current_time()
        with trio.fail_after(10 * DEFAULT.silence):
            async for item in client.observe():
                assert isinstance(item, Event)
                seen.append(item.event_id)
                if len(seen) == 2:
                    break
        waited = trio.current_time() - started
        nursery.cancel_scope.cancel()
    assert seen == [1, 2]
    assert DEFAULT.silence <= waited < DEFAULT.silence + 5  # dropped by the bound, not by the room
    assert len(requests) == 2 and b"last-event-id: 1" in requests[1].lower()


async def test_async_observe_of_a_room_that_never_answers_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    requests: list[bytes] = []
    async with trio.open_nursery() as nursery:
        port = await serve_silently(nursery, [], requests)
        client = commonroom.AsyncClient(INVITATION, session="ses_watcher", hint=loopback(port))
        started = trio.current_time()
        with pytest.raises(commonroom.TransportUnavailable, match="did not answer in time"):
            async for _ in client.observe():
                pass
        assert trio.current_time() - started == pytest.approx(DEFAULT.call, abs=1)
        nursery.cancel_scope.cancel()
    assert len(requests) == 1


def test_blocking_observe_reconnects_after_a_silence_from_the_last_event() -> None:
    room = SilentRoom([[1], [2]])
    client = commonroom.Client(INVITATION, session="ses_watcher", hint=room.hint(),
                               timeouts=Timeouts(silence=0.3))
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        for item in client.observe():
            assert isinstance(item, Event)
            seen.append(item.event_id)
            if len(seen) == 2:
                break
        done.set()

    watcher = threading.Thread(target=watch, daemon=True)
    started = time.monotonic()
    watcher.start()
    try:
        assert done.wait(10), "observe never came back from the silent connection"
        assert time.monotonic() - started >= 0.3
    finally:
        room.close()
        client.close()
        watcher.join(5)
    assert seen == [1, 2]
    assert room.last_event_ids() == [None, "1"]
