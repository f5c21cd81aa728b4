"""The room's own cost of one commit's fan-out to 1,000 streams, in process.

Usage: ``.venv/bin/python tools/bench/bench_fanout_cpu.py [--streams 1000] [--events 200]``
(about 10 s)

`fanout_p99_ms_1000` (`bench_audience.py`) is a wall-clock figure across three
processes: on a shared machine it mostly measures how much of a core the room and
the subscribers got. This prices the room's part alone, the same way on a busy and on
a quiet machine: STREAMS observe streams as the room holds them (`room.streams`'s
stream state with the room's `addressed` rule, the hub's direct lane, the SSE
stream's `http.stream_views.SSEWriter` writing through
`http.connection.HardenedTCPServer`'s non-blocking write) on STREAMS real TCP
connections over 127.0.0.1, every reader parked; then EVENTS `change.committed`
events are published one at a time (`EventHub.publish`, what `Room.publish` does
after a commit) and each publish is timed on this thread, its socket writes
included; the other ends are drained between publishes (not timed).

* ``publish_ms_1000``: the median publish (and the minimum, the least disturbed);
* ``write_only_ms_1000``: the same bytes written to the same sockets by a bare
  ``os.write`` loop, timed the same way: the floor of any fan-out that writes each
  stream's socket itself;
* ``lane_overhead_us_per_stream``: (publish − bare writes) ÷ streams.

The last line printed is one JSON object. Run it with another tree's venv to compare
(``../base/.venv/bin/python tools/bench/bench_fanout_cpu.py``: its `commonroom`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time
from typing import Any

import loadgen
import trio

from commonroom.engine.facade import addressed
from commonroom.http.connection import HardenedTCPServer
from commonroom.http.stream_views import SSEWriter
from commonroom.protocol.events import EVENTS, Event
from commonroom.room.hub import EventHub
from commonroom.room.streams import _Stream


class _Socket:
    def __init__(self, sock: socket.socket) -> None:
        self.socket = sock


class _Connection:
    """A `HardenedTCPServer`'s direct-write half around a plain socket (its own methods)."""

    send_nowait = HardenedTCPServer.send_nowait
    _send_now = HardenedTCPServer._send_now

    def __init__(self, sock: socket.socket) -> None:
        self.write_lock = trio.Lock()
        self.socket_stream = _Socket(sock)


def _tcp_pairs(count: int) -> list[tuple[socket.socket, socket.socket]]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = listener.getsockname()[1]
    pairs = []
    for _ in range(count):
        client = socket.create_connection(("127.0.0.1", port))
        server, _ = listener.accept()
        server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server.setblocking(False)
        client.setblocking(False)
        pairs.append((server, client))
    listener.close()
    return pairs


def _drain(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    for _, client in pairs:
        try:
            while client.recv(1 << 16):
                pass
        except BlockingIOError:
            pass


async def _run(streams: int, events: int) -> dict[str, Any]:
    pairs = _tcp_pairs(streams)
    hub = EventHub()
    held = []
    for index, (server, _) in enumerate(pairs):
        sub = hub.subscribe()
        writer = SSEWriter(_Connection(server))  # type: ignore[arg-type]
        writer.head_sent()
        held.append(_Stream(None, sub, b"session", f"participant-{index}", 15.0,  # type: ignore[arg-type]
                            addressed=addressed, direct=writer))
        sub._parked = True  # waiting in next_batch, caught up at event 0
    payload_type = EVENTS["change.committed"].payload
    publish_s: list[float] = []
    write_s: list[float] = []
    for event_id in range(1, events + 1):
        payload = payload_type(version=event_id, summary=f"bench commit {event_id}",
                               participant_id="host", region=None, source="agent",
                               reverts=None, restores=None, undoes=None)
        event = Event(event_id, "change.committed", "2026-12-05T00:00:00Z", payload)
        _drain(pairs)
        started = time.perf_counter()
        hub.publish([event])
        publish_s.append(time.perf_counter() - started)
        chunk = b"%x\r\n%b\r\n" % (len(event.wire) + 40, b"x" * (len(event.wire) + 40))
        _drain(pairs)
        started = time.perf_counter()
        for server, _ in pairs:
            os.write(server.fileno(), chunk)
        write_s.append(time.perf_counter() - started)
    cursors = {stream.sub.cursor for stream in held}
    for server, client in pairs:
        server.close()
        client.close()
    if cursors != {events}:
        raise RuntimeError(f"not every stream took every event by the lane: cursors {cursors}")
    publish, write = statistics.median(publish_s), statistics.median(write_s)
    return {
        "publish_ms_1000": round(publish * 1000 * 1000 / streams, 3),
        "publish_min_ms_1000": round(min(publish_s) * 1000 * 1000 / streams, 3),
        "write_only_ms_1000": round(write * 1000 * 1000 / streams, 3),
        "write_only_min_ms_1000": round(min(write_s) * 1000 * 1000 / streams, 3),
        "lane_overhead_us_per_stream": round((publish - write) * 1e6 / streams, 3),
        "streams": streams, "events": events,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--cpu", type=int, default=None, help="pin to this core")
    args = parser.parse_args()
    loadgen.raise_nofile()
    pinning = loadgen.pin(args.cpu)
    figures = trio.run(_run, args.streams, args.events)
    figures["pinning"] = pinning
    figures["load_average"] = round(os.getloadavg()[0], 1)
    for key, value in figures.items():
        print(f"{key:30} {value}")
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
