"""The connection attacks of issue 24 at full size, against a real `ce serve`, with figures.

Usage: ``.venv/bin/python tools/hostile/connections.py [--streams 1000] [--flood-seconds 10]``

1. **Stream flood.** One agent bearer (a default invitation) attempts
   ``--streams`` streams (SSE, WebSocket, long-poll, ``GET /mcp`` and
   ``subscriptions/listen`` in turn), as fast as one process can (its own,
   so it shares no GIL with the measuring thread), keeping every socket
   open. Meanwhile the host's status request (``GET /workspace/status`` with
   the host bearer on a new connection each time, as ``ce status`` does) runs
   every 20 ms, from before the flood until 2 s after it (and for 6 s before,
   with nothing else going on: the baseline of the same run). Figures: how
   many streams opened and how the rest were refused, the host's status
   latency (p50 / p99 / maximum, and how many were over 200 ms), and the
   room's open descriptors at their peak.
2. **Discovery flood.** Four threads request ``/.well-known/agent-workspace``
   (and the other discovery routes) without pause for ``--flood-seconds``,
   while a joiner joins with a fresh invitation every 250 ms. Figures: the
   flood's answers by status, and the joins: how many, how many answered 200,
   their p99 and maximum latency.

The last line printed is one JSON object. The room is started with the
default limits (``ce serve FILE --json``) in a temp folder and stopped with
SIGINT at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tools.hostile.stream_attack import KINDS, Opened, attempt  # noqa: E402


def call(port: int, method: str, path: str, bearer: str | None = None, body: Any = None
         ) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    request.add_header("Connection", "close")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if bearer:
        request.add_header("Authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(p99 * 1000, 1), "max_ms": round(ordered[-1] * 1000, 1)}


class Room:
    def __init__(self, folder: Path) -> None:
        doc = folder / "idea.md"
        shutil.copyfile(REPO / "samples" / "idea.md", doc)
        ce = Path(sys.executable).parent / "ce"
        self.proc = subprocess.Popen([str(ce), "serve", str(doc), "--json", "--port-owner", "0",
                                      "--port-ingress", "0"], cwd=folder, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        self.ready = json.loads(self.proc.stdout.readline())
        self.port = int(self.ready["ingress_port"])
        from commonroom.credentials import read_credentials

        creds = read_credentials(doc)
        assert creds is not None
        self.host = creds.host_session

    def agent(self, name: str) -> str:
        invite = call(self.port, "POST", "/workspace/invite", self.host, {})[1]["invitation"]
        status, joined = call(self.port, "POST", "/session/join", None, {"invite": invite, "name": name})
        assert status == 200, joined
        return str(joined["session_id"])

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def baseline(room: Room, seconds: float) -> dict[str, Any]:
    """The host's status latency with nothing else going on (same room, same run)."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        assert call(room.port, "GET", "/workspace/status", room.host)[0] == 200
        latencies.append(time.perf_counter() - started)
        time.sleep(0.02)
    return {**quantiles(latencies), "over_200_ms": sum(x > 0.2 for x in latencies)}


def attack(port: int, bearer: str, streams: int, cursor: int) -> None:
    """The attacker's process: `streams` attempts, every socket kept open; prints its outcomes."""
    held: list[Opened] = []
    outcomes: Counter[str] = Counter()
    started = time.perf_counter()
    for n in range(streams):
        kind = KINDS[n % len(KINDS)]
        try:
            got = attempt(port, kind, bearer, cursor=cursor)
        except OSError as error:
            outcomes[f"error {type(error).__name__}"] += 1
            continue
        held.append(got)
        if got.open:
            outcomes["opened"] += 1
        else:
            body = got.body or {}
            if isinstance(body.get("error"), dict):  # a JSON-RPC error: the room's in `data`
                body = body["error"].get("data") or {}
            outcomes[f"{got.status} {body.get('details', {}).get('scope', '?')}"] += 1
    flood_s = time.perf_counter() - started
    print(json.dumps({"outcomes": dict(outcomes), "flood_seconds": round(flood_s, 2)}), flush=True)
    sys.stdin.read()  # hold every socket until the parent is done measuring
    for each in held:
        each.close()


def stream_flood(room: Room, streams: int) -> dict[str, Any]:
    """The attacker in its own process (so it does not share the measuring thread's GIL)."""
    bearer = room.agent("hoarder")
    cursor = int(call(room.port, "GET", "/workspace/room", room.host)[1]["latest_event_id"])
    latencies: list[float] = []
    done = threading.Event()
    fds = [room.open_fds()]

    def host_status() -> None:
        while not done.is_set():
            started = time.perf_counter()
            status, _ = call(room.port, "GET", "/workspace/status", room.host)
            assert status == 200, status
            latencies.append(time.perf_counter() - started)
            fds.append(room.open_fds())
            time.sleep(0.02)

    watcher = threading.Thread(target=host_status)
    watcher.start()
    time.sleep(0.5)
    attacker = subprocess.Popen(
        [sys.executable, __file__, "--attack", str(room.port), bearer, str(streams), str(cursor)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout is not None and attacker.stdin is not None
        report = json.loads(attacker.stdout.readline())
        time.sleep(2.0)  # the streams still held
    finally:
        done.set()
        watcher.join()
        if attacker.stdin is not None:
            attacker.stdin.close()
        attacker.wait(10)
    return {"attempted": streams, **report,
            "host_status": {**quantiles(latencies), "over_200_ms": sum(x > 0.2 for x in latencies)},
            "room_fds_peak": max(fds), "room_fds_before": fds[0]}


def discovery_flood(room: Room, seconds: float) -> dict[str, Any]:
    stop = threading.Event()
    flood: Counter[int] = Counter()
    lock = threading.Lock()
    paths = ("/.well-known/agent-workspace", "/protocol", "/skills", "/openapi.json")

    def flooder(offset: int) -> None:
        n = offset
        while not stop.is_set():
            status, _ = call(room.port, "GET", paths[n % len(paths)])
            with lock:
                flood[status] += 1
            n += 1

    threads = [threading.Thread(target=flooder, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    joins: list[float] = []
    codes: Counter[int] = Counter()
    deadline = time.monotonic() + seconds
    n = 0
    try:
        time.sleep(1.0)  # the flood has used up discovery's window by now
        while time.monotonic() < deadline:
            invite = call(room.port, "POST", "/workspace/invite", room.host, {})[1]["invitation"]
            started = time.perf_counter()
            status, joined = call(room.port, "POST", "/session/join", None,
                                  {"invite": invite, "name": f"j{n}"})
            joins.append(time.perf_counter() - started)
            codes[status] += 1
            n += 1
            if status == 200:  # stay far below the room's 64 active sessions
                call(room.port, "POST", "/workspace/leave", joined["session_id"], {})
            time.sleep(0.25)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return {"flood_answers": dict(flood), "joins": {**quantiles(joins), "by_status": dict(codes)}}


def main() -> None:
    if sys.argv[1:2] == ["--attack"]:
        port, bearer, streams, cursor = sys.argv[2:6]
        attack(int(port), bearer, int(streams), int(cursor))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--flood-seconds", type=float, default=10.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="commonroom-connections-"))
    try:
        room = Room(folder)
        try:
            quiet = baseline(room, 6.0)
            streams = stream_flood(room, args.streams)
        finally:
            room.stop()
        room = Room(folder)  # the same room restarted: its rate windows start empty
        try:
            discovery = discovery_flood(room, args.flood_seconds)
        finally:
            room.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    import resource

    print(json.dumps({"host_status_baseline": quiet, "stream_flood": streams,
                      "discovery_flood": discovery, "load_average": os.getloadavg(),
                      "nofile_hard": resource.getrlimit(resource.RLIMIT_NOFILE)[1]}))


if __name__ == "__main__":
    main()
