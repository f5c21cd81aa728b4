"""SSE streams that write their own body: the hub's direct lane, over the real ingress.

Every stream here is parsed by the byte client's h11, which refuses a broken
chunked framing: the bytes the room writes around hypercorn and h11 must be
exactly what h11 itself would have written.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import pytest
import trio

from commonroom.http import stream_views
from commonroom.http.connection import HardenedTCPServer
from commonroom.wire import aio
from tests.service.conftest import LiveRoom, count_direct


async def _latest(live: LiveRoom, bearer: str) -> int:
    """The room's newest event id (a long-poll that does not wait)."""
    answer = await live.call("GET", "/workspace/wait?cursor=0&timeout_seconds=0", bearer)
    latest: int = answer.json()["latest_event_id"]
    return latest


async def _sse(live: LiveRoom, bearer: str) -> Any:
    """An observe stream from the newest event on: it misses nothing made after this
    call, however late its pump subscribes (no sleep to wait for it)."""
    path = f"/workspace/observe?since_event_id={await _latest(live, bearer)}"
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    status, _, chunks = await aio.open_stream(
        stream, path, headers={"Authorization": f"Bearer {bearer}"})
    assert status == 200
    return chunks


async def _pairs(live: LiveRoom, bearer: str, count: int) -> None:
    for _ in range(count):
        lease = (await live.call("POST", "/workspace/checkout", bearer, {"region": "Goals"})).json()
        await live.call("POST", "/workspace/release", bearer, {"lease_id": lease["lease_id"]})


async def _events_until(chunks: Any, last_type: str, count: int) -> list[dict[str, Any]]:
    """The stream's events until the `count`-th event of `last_type`."""
    events: list[dict[str, Any]] = []
    seen = 0
    async with aclosing(aio.iter_sse(chunks)) as messages:
        with trio.fail_after(10):
            async for message in messages:
                if message.comment is not None or not message.id:
                    continue
                event = json.loads(message.data)
                assert int(message.id) == event["event_id"] and message.event == event["type"]
                events.append(event)
                if event["type"] == last_type:
                    seen += 1
                    if seen == count:
                        break
    return events


async def test_live_events_take_the_direct_lane(live: LiveRoom, monkeypatch: pytest.MonkeyPatch) -> None:
    delivered = count_direct(monkeypatch, stream_views.SSEWriter)
    agent = await live.join()
    watcher = await live.join("watcher")
    chunks = await _sse(live, watcher["session_id"])
    # Events from now on reach it, most of them without its task.
    await _pairs(live, agent["session_id"], 10)
    events = await _events_until(chunks, "lease.released", 10)
    ids = [event["event_id"] for event in events]
    assert ids == list(range(ids[0], ids[0] + 20))
    assert len(delivered) >= 10, delivered  # the lane was used, not just the reader's task
    assert set(delivered) <= set(ids)


async def test_direct_writes_that_go_out_in_part_are_finished_in_order(
    live: LiveRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every socket write the streams make takes only half its bytes at first: the
    direct lane owes the rest to the stream's pump, which writes it before anything else."""
    delivered = count_direct(monkeypatch, stream_views.SSEWriter)
    real = HardenedTCPServer.send_nowait

    def half(self: HardenedTCPServer, data: bytes) -> int | None:
        return real(self, data[: max(1, len(data) // 2)])

    monkeypatch.setattr(HardenedTCPServer, "send_nowait", half)
    agent = await live.join()
    watcher = await live.join("watcher")
    chunks = await _sse(live, watcher["session_id"])
    await _pairs(live, agent["session_id"], 15)
    events = await _events_until(chunks, "lease.released", 15)
    ids = [event["event_id"] for event in events]
    assert ids == list(range(ids[0], ids[0] + 30))
    assert delivered, "no event took the direct lane"


async def test_an_event_addressed_to_the_reader_takes_its_task(
    live: LiveRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    delivered = count_direct(monkeypatch, stream_views.SSEWriter)
    sender = await live.join("sender")
    reader = await live.join("reader")
    chunks = await _sse(live, reader["session_id"])
    await live.call("POST", "/workspace/message", sender["session_id"], {"text": "for all"})
    await live.call("POST", "/workspace/message", sender["session_id"],
                    {"text": "for you", "to": [reader["participant_id"]]})
    events = await _events_until(chunks, "message.sent", 2)
    messages = [e for e in events if e["type"] == "message.sent"]
    assert [m.get("addressed", False) for m in messages] == [False, True]
    addressed_id = messages[1]["event_id"]
    assert addressed_id not in delivered  # its own copy, framed by the reader's task


async def test_an_http_1_0_stream_is_close_delimited_and_takes_the_channel(
    live: LiveRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    delivered = count_direct(monkeypatch, stream_views.SSEWriter)
    agent = await live.join()
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    since = await _latest(live, agent["session_id"])
    request = (f"GET /workspace/observe?since_event_id={since} HTTP/1.0\r\nHost: 127.0.0.1\r\n"
               f"Authorization: Bearer {agent['session_id']}\r\n\r\n").encode()
    received = b""
    async with stream:
        await stream.send_all(request)
        await _pairs(live, agent["session_id"], 2)
        with trio.fail_after(10):
            while received.count(b"event: lease.released") < 2:
                data = await stream.receive_some(65536)
                assert data, received
                received += data
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding" not in head.lower()
    assert body.startswith(b"retry: 5000\n\n")  # no chunk sizes: the body is the events
    assert delivered == []


async def test_among_many_direct_streams_an_addressed_event_is_marked_for_its_reader_only(
    live: LiveRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One commit's fan-out frames each event once for every stream on the lane; the
    reader an event is addressed to still gets its own copy (`addressed: true`), and
    no other stream ever does, whatever order the shared frames were built in."""
    delivered = count_direct(monkeypatch, stream_views.SSEWriter)
    sender = await live.join("sender")
    readers = [await live.join(f"reader {k}") for k in range(4)]
    streams = [await _sse(live, reader["session_id"]) for reader in readers]
    first, second = readers[0]["participant_id"], readers[2]["participant_id"]
    sent = [("for all", None), ("for the first", [first]), ("for all again", None),
            ("for the third", [second]), ("for both", [first, second])]
    for text, to in sent:
        await live.call("POST", "/workspace/message", sender["session_id"],
                        {"text": text, **({} if to is None else {"to": to})})
    seen: list[list[dict[str, Any]]] = []
    for chunks in streams:
        events = await _events_until(chunks, "message.sent", len(sent))
        seen.append([e for e in events if e["type"] == "message.sent"])
    for reader, messages in zip(readers, seen, strict=True):
        assert [m["payload"]["text"] for m in messages] == [text for text, _ in sent]
        marked = [m["payload"]["text"] for m in messages if m.get("addressed", False)]
        assert marked == [text for text, to in sent
                          if to is not None and reader["participant_id"] in to]
        # Every stream got the same event ids; only the addressed copies differ.
        assert [m["event_id"] for m in messages] == [m["event_id"] for m in seen[0]]
    for_all = {m["event_id"] for m in seen[0] if not m["payload"].get("to")}
    # The lane was used for the messages for everyone (a stream whose task was busy at that
    # moment took them the buffered way, which is just as right).
    assert for_all & set(delivered), delivered
