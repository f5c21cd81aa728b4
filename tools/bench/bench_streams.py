"""Live-stream and start/stop figures of TARGETS.md ("Live streams", "Start and stop").

Usage: ``.venv/bin/python tools/bench/bench_streams.py [--subscribers 1000]``

* ``serve_ready_s``: ``ce serve sample.md --json --port-ingress 0 --port-owner 0``
  from process start until its ready line, median of 5 (each stopped with SIGINT).
* One room (`commonroom.service.serve_room` with requests_per_minute = 10**9,
  heartbeat 15 s; pinned to core 0) and 1,000 SSE subscribers
  (``GET /workspace/observe``, one agent session, all in one ``selectors``
  process on core 1; see `loadgen.run_subscribers`). This script (core 1)
  does the commits and reads the figures:

  - ``rss_per_subscriber_kb``: (room VmRSS with the streams open and idle
    minus VmRSS before they opened) / subscribers;
  - ``throughput_with_streams``: keep-alive ``GET /workspace/status`` req/s
    (16 connections, load generator on core 1) with the streams open divided
    by the same before they opened;
  - ``fanout_p99_ms_1000``: 20 raw host commits (``POST /workspace/commit``
    with base_version/summary/content), one at a time; for each, the time
    from *sending the commit request* until the *last* subscriber has the
    whole ``change.committed`` event (both sides read ``time.monotonic()``:
    one clock). Median and p99 (of 20, p99 is the max). Timing from the
    answer would measure nothing useful: the room answers before it wakes
    the subscribers (the answer-based figures are still printed);
  - ``commit_answer_ratio``: median commit answer time (request sent ->
    answer in) with the subscribers open ÷ the same on 20 commits before they
    opened (target <= 1.5: the fan-out must not delay the caller);
  - ``slow_subscriber_isolation``: 600 commits without, then 600 with one
    extra subscriber that stops reading (SO_RCVBUF 4 KiB) until the end of
    the phase (about 80 s: enough events to overflow its 256-event buffer
    once the socket is full, within the room's 120 s write timeout, past
    which a reader that takes nothing is disconnected); the others' p99
    (compared on commit sent -> last subscriber: the answer-based p99 sits
    near 0 ms, so its ratio is noise; both are printed) and the room's RSS
    must stay within 10 %, and the slow one's socket, read at the end,
    should hold ``event: resync``;
  - ``stop_s``: SIGINT to the room with the streams open until it exits.

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import loadgen

ROOM_CPU = 0
CLIENT_CPU = 1
REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "idea.md"


# ---------------------------------------------------------------------------- start


def serve_ready_times(sample: Path, runs: int) -> tuple[list[float], str]:
    """Seconds from starting `ce serve --json` until its ready line, `runs` times."""
    ce = Path(loadgen.PYTHON).parent / "ce"
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="commonroom-ready-") as tmp:
        doc = Path(tmp) / sample.name
        shutil.copy(sample, doc)
        if ce.exists():
            command = [str(ce), "serve", str(doc), "--json", "--port-ingress", "0",
                       "--port-owner", "0"]
            how = "ce serve FILE --json --port-ingress 0 --port-owner 0"
        else:
            command = loadgen.loadgen_command("room", str(doc))
            how = "loadgen.py room FILE (no ce script found)"
        for _ in range(runs):
            started = time.monotonic()
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            times.append(time.monotonic() - started)
            if not line.startswith("{"):
                raise RuntimeError(f"ce serve printed {line!r}")
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=15)
    return times, how


# ---------------------------------------------------------------------------- commits


class Committer:
    """Raw host commits of the whole document, one at a time."""

    def __init__(self, room: loadgen.RoomProcess, text: str) -> None:
        self.http = loadgen.Http(room.port)
        self.host = room.host_session
        self.text = text
        self.version = int(self.http.call("GET", "/workspace/status", bearer=self.host)["version"])
        self.n = 0

    def commit(self) -> tuple[int, float]:
        """(new version, time.monotonic() when the answer was in)."""
        self.n += 1
        self.sent = time.monotonic()
        answer = self.http.call("POST", "/workspace/commit", {
            "base_version": self.version, "summary": f"bench commit {self.n}",
            "content": f"{self.text}\nBench commit {self.n}.\n",
        }, bearer=self.host)
        answered = time.monotonic()
        self.version = int(answer["version"])
        return self.version, answered


class Subscribers:
    """The subscriber process and its reports."""

    def __init__(self, port: int, bearer: str | Path, count: int, cpu: int | None) -> None:
        """`bearer`: one session for every stream, or a file of bearers to spread them over."""
        who = (["--bearers-file", str(bearer)] if isinstance(bearer, Path)
               else ["--bearer", bearer])
        self.child = loadgen.Child(
            loadgen.loadgen_command("subscribe", "--port", str(port), *who,
                                    "--count", str(count), *loadgen.cpu_args(cpu)),
            stdin=True,
        )
        ready = self.child.reader.get_json(120)
        self.ready = int(ready["ready"])
        self.all_closed: float | None = None

    def _next(self, timeout: float) -> dict[str, Any]:
        line = self.child.reader.get_json(timeout)
        if "all_closed" in line:
            self.all_closed = float(line["all_closed"])
        return line

    def wait_version(self, version: int, timeout: float) -> dict[str, Any]:
        """The report of the change.committed event of `version` (flushed if incomplete)."""
        deadline = time.monotonic() + timeout
        flushed = False
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._next(max(0.001, left) if not flushed else 10.0)
            except TimeoutError:
                if flushed:
                    raise
                self.child.send("flush")
                flushed = True
                continue
            if line.get("version") == version:
                return line

    def stats(self) -> dict[str, Any]:
        self.child.send("stats")
        while True:
            line = self._next(10)
            if "open" in line:
                return line

    def wait_all_closed(self, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while self.all_closed is None and time.monotonic() < deadline:
            try:
                self._next(max(0.001, deadline - time.monotonic()))
            except (TimeoutError, RuntimeError):
                break
        return self.all_closed

    def close(self) -> None:
        if self.child.proc.poll() is None:
            try:
                self.child.send("quit")
                self.child.proc.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.child.stop(signal.SIGKILL)


def answer_times(committer: Committer, commits: int) -> list[float]:
    """Commit request sent -> answer in, ms, for `commits` commits (no subscribers needed)."""
    out: list[float] = []
    for _ in range(commits):
        _, answered = committer.commit()
        out.append((answered - committer.sent) * 1000)
    return out


def fanout_run(committer: Committer, subs: Subscribers, commits: int) -> dict[str, Any]:
    """`commits` commits one at a time; latency from each request to the last subscriber."""
    last_ms: list[float] = []
    first_ms: list[float] = []
    from_send_ms: list[float] = []
    answer_ms: list[float] = []
    incomplete = 0
    for _ in range(commits):
        version, answered = committer.commit()
        sent = committer.sent
        answer_ms.append((answered - sent) * 1000)
        report = subs.wait_version(version, timeout=10.0)
        if not report.get("complete", True):
            incomplete += 1
        # The room publishes before it answers, so the last subscriber can be
        # earlier than the answer: that counts as 0 (raw values in *_raw).
        last_ms.append((report["last"] - answered) * 1000)
        first_ms.append((report["first"] - answered) * 1000)
        from_send_ms.append((report["last"] - sent) * 1000)
    clamped = [max(0.0, value) for value in last_ms]
    return {
        "commits": commits,
        "median_ms": round(statistics.median(clamped), 2),
        "p99_ms": round(_p99(clamped), 2),
        "max_ms": round(max(clamped), 2),
        "raw_median_ms": round(statistics.median(last_ms), 2),
        "first_subscriber_raw_median_ms": round(statistics.median(first_ms), 2),
        "from_request_median_ms": round(statistics.median(from_send_ms), 2),
        "from_request_p99_ms": round(_p99(from_send_ms), 2),
        "answer_median_ms": round(statistics.median(answer_ms), 2),
        "incomplete": incomplete,
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


# ---------------------------------------------------------------------------- slow subscriber


def open_slow_subscriber(port: int, bearer: str) -> socket.socket:
    """An observe stream whose client never reads (a 4 KiB receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(loadgen.build_request("GET", "/workspace/observe", bearer=bearer))
    return sock


def drain_slow_subscriber(sock: socket.socket) -> dict[str, Any]:
    """Read what the slow subscriber's socket holds, until EOF/reset or 3 s of silence."""
    data = bytearray()
    ending = "open (3 s without data)"
    sock.settimeout(3.0)
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            ending = "reset"
            break
        if not chunk:
            ending = "closed by the room"
            break
        data += chunk
    sock.close()
    return {
        "bytes": len(data),
        "events": data.count(b"\nevent: ") + data.startswith(b"event: "),
        "committed_events": data.count(b"event: change.committed"),
        "got_resync": b"event: resync" in data,
        "connection": ending,
    }


# ---------------------------------------------------------------------------- main


def _idle_cpu(pid: int, seconds: float) -> float | None:
    """The room's CPU use (cores) while nothing but its streams runs."""
    before = loadgen.cpu_seconds(pid)
    time.sleep(seconds)
    after = loadgen.cpu_seconds(pid)
    return None if before is None or after is None else round((after - before) / seconds, 3)


def _show(label: str, value: Any) -> None:
    print(f"{label:30} {json.dumps(value)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--slow-commits", type=int, default=600)
    parser.add_argument("--seconds", type=float, default=8.0, help="status load per figure")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--ready-runs", type=int, default=5)
    parser.add_argument("--fanout-only", action="store_true",
                        help="only the fan-out figures (no ready runs, no isolation phase): "
                             "for profiling the broadcaster")
    args = parser.parse_args()
    if args.fanout_only:
        args.ready_runs = 1
    started = time.monotonic()
    loadgen.raise_nofile()

    pinned = loadgen.pinning_available()
    room_cpu = ROOM_CPU if pinned else None
    client_cpu = CLIENT_CPU if pinned else None
    pinning = (f"room core {ROOM_CPU}; subscribers, load generator and this script core "
               f"{CLIENT_CPU}" if pinned else "not pinned")
    if pinned:
        loadgen.pin(CLIENT_CPU)
    _show("pinning", pinning)
    _show("room rate limit", f"requests_per_minute={loadgen.HUGE_RATE} (benchmark setting)")

    ready_times, how = serve_ready_times(SAMPLE, args.ready_runs)
    serve_ready_s = round(statistics.median(ready_times), 3)
    _show("serve_ready_s", {"median": serve_ready_s, "runs": [round(t, 3) for t in ready_times],
                            "command": how})

    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="commonroom-streams-") as tmp:
        doc = Path(tmp) / "streams.md"
        text = SAMPLE.read_text()
        doc.write_text(text)
        with loadgen.room_server(doc, room_cpu) as room:
            agent = room.join("streams")
            committer = Committer(room, text)
            load = {"bearer": agent, "mode": "keepalive", "conns": 16, "seconds": args.seconds,
                    "warmup": args.warmup, "cpu": client_cpu, "server_pid": room.pid}
            # Warm the room (imports, caches), then the baseline figures.
            loadgen.measure_load(room.port, "/workspace/status", **{**load, "seconds": 1.0,
                                                                     "warmup": 0.5})
            idle_none = _idle_cpu(room.pid, 2.0)
            rss_none = loadgen.rss_kb(room.pid)
            status_none = loadgen.measure_load(room.port, "/workspace/status", **load)
            _show("status_keepalive (no streams)", status_none)
            answers_none = answer_times(committer, args.commits)
            _show("commit answer ms (no streams)", {"median": round(statistics.median(answers_none), 2)})

            subs = Subscribers(room.port, agent, args.subscribers, client_cpu)
            try:
                _show("subscribers ready", subs.ready)
                time.sleep(1.0)  # every stream subscribed and past its first check
                idle_subs = _idle_cpu(room.pid, 3.0)
                _show("idle room CPU (cores)", {"none": idle_none, "with_streams": idle_subs})
                rss_subs = loadgen.rss_kb(room.pid)
                per_sub_kb = (rss_subs - rss_none) / subs.ready
                _show("rss", {"none_kb": rss_none, "with_streams_kb": rss_subs,
                              "per_subscriber_kb": round(per_sub_kb, 2)})
                status_with = loadgen.measure_load(room.port, "/workspace/status", **load)
                _show(f"status_keepalive ({subs.ready} streams)", status_with)

                fanout = fanout_run(committer, subs, args.commits)
                _show("fanout", fanout)
                if args.fanout_only:
                    answer_ratio = fanout["answer_median_ms"] / statistics.median(answers_none)
                    print(json.dumps({"fanout_p99_ms_1000": fanout["from_request_p99_ms"],
                                      "fanout_median_ms": fanout["from_request_median_ms"],
                                      "commit_answer_ratio": round(answer_ratio, 3),
                                      "subscribers": subs.ready}), flush=True)
                    return

                plain = fanout_run(committer, subs, args.slow_commits)
                rss_plain = loadgen.rss_kb(room.pid)
                plain["rss_kb"] = rss_plain
                _show("isolation: without slow one", plain)
                slow_sock = open_slow_subscriber(room.port, agent)
                time.sleep(0.5)
                with_slow = fanout_run(committer, subs, args.slow_commits)
                rss_slow = loadgen.rss_kb(room.pid)
                with_slow["rss_kb"] = rss_slow
                _show("isolation: with slow one", with_slow)
                slow = drain_slow_subscriber(slow_sock)
                _show("slow subscriber's socket", slow)
                stats = subs.stats()
                _show("subscribers", stats)

                stop_s = room.child.stop(signal.SIGINT, timeout=30)
                closed_at = subs.wait_all_closed(5.0)
                _show("stop_s", {"stop_s": round(stop_s, 3), "streams_open": stats["open"],
                                 "exit_code": room.child.proc.returncode,
                                 "all_streams_closed": closed_at is not None})
            finally:
                subs.close()

    # Compared on the full fanout time (commit sent -> last subscriber): the
    # answer-based p99 sits near 0 ms (clamped) and its ratio is noise.
    p99_ratio = with_slow["from_request_p99_ms"] / plain["from_request_p99_ms"]
    answer_ratio = (with_slow["p99_ms"] / plain["p99_ms"]) if plain["p99_ms"] > 0 else None
    rss_ratio = rss_slow / rss_plain
    holds = p99_ratio <= 1.10 and rss_ratio <= 1.10 and bool(slow["got_resync"])
    result = {
        "fanout_p99_ms_1000": fanout["from_request_p99_ms"],
        "fanout_median_ms": fanout["from_request_median_ms"],
        "fanout_from_answer_p99_ms": fanout["p99_ms"],
        "commit_answer_ratio": round(fanout["answer_median_ms"] / statistics.median(answers_none), 3),
        "commit_answer_ms": {"none": round(statistics.median(answers_none), 2),
                             "with_streams": fanout["answer_median_ms"]},
        "rss_per_subscriber_kb": round(per_sub_kb, 2),
        "throughput_with_streams": round(status_with["rps"] / status_none["rps"], 3),
        "slow_subscriber_isolation": holds,
        "slow_p99_ratio": round(p99_ratio, 3),
        "slow_rss_ratio": round(rss_ratio, 3),
        "slow_p99_from_request_ms": {"without": plain["from_request_p99_ms"],
                                     "with": with_slow["from_request_p99_ms"]},
        "slow_p99_from_answer_ms": {"without": plain["p99_ms"], "with": with_slow["p99_ms"],
                                    "ratio": None if answer_ratio is None
                                    else round(answer_ratio, 3)},
        "slow_got_resync": slow["got_resync"],
        "slow_connection": slow["connection"],
        "stop_s": round(stop_s, 3),
        "serve_ready_s": serve_ready_s,
        "subscribers": subs.ready,
        "status_rps": {"none": status_none["rps"], "with_streams": status_with["rps"]},
        "rss_kb": {"none": rss_none, "with_streams": rss_subs},
        "idle_room_cpu_cores": {"none": idle_none, "with_streams": idle_subs},
        "pinning": pinning,
        "requests_per_minute": loadgen.HUGE_RATE,
        "total_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
