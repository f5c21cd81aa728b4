"""`read_during_commits`: a region read's p99 while another agent commits in a loop (TARGETS.md).

Usage: ``.venv/bin/python tools/bench/bench_read_during_commits.py [--seconds 15]``

A real ``ce serve DOC --json --port-owner 0 --port-ingress 0`` around the 10 MB /
10,000-section document of `bench_engine.py`, pinned to core 0 with ``taskset``
when it is there; this script (core 1) is the agents and the host over raw
keep-alive HTTP/1.1 (`loadgen.Http`), one connection per thread.

* the reader: ``GET /workspace/read`` of one 2 KB region ten times a second
  (on a fixed schedule; each read timed from the request sent until its answer
  is in);
* phase 1, ``--seconds`` long: the reader alone;
* phase 2, as long: the reader while a writer agent commits to other regions in a
  loop (read a region, propose a one-line edit, a reviewer approves, commit: the
  10 MB version write with its fsyncs), each cycle's calls spread over a few
  writer sessions and as many reviewers (participants invited with `approve`), so
  the room's per-participant request limit (600 a minute) never refuses them. A
  refusal would stop the commits early and flatter the figure: the run fails instead.

``read_during_commits`` = p99 with commits ÷ p99 alone (target ≤ 2.0); both p99s,
the maxima and the commits made are printed. The last line printed is one JSON
object. Under a loaded machine the figures are noisy: the load average is printed.
A 15 s phase has 150 reads, so its p99 is its second slowest read: to compare two
trees, ``--seconds 60`` (600 reads a phase, the calls spread over more sessions) gives
a steadier p99.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import loadgen
from bench_commit_http import CLIENT_CPU, ROOM_CPU, start_room
from bench_engine import edit_one_line, make_document, make_section

from commonroom.credentials import read_credentials

READS_PER_SECOND = 10
READ_PART, READ_SECTION = 50, 50
READ_REGION = f"Part {READ_PART}/Section {READ_SECTION}"
READ_BYTES = 2048  # the reader's region is made this size; the others are ~1 KB
WRITER_SESSIONS = 4
SESSION_SECONDS = 15.0
"""What one set of sessions carries: a phase longer than this spreads its calls over more
sessions (each phase ``ceil(seconds / SESSION_SECONDS)`` times as many), so that none meets
the room's request limit (600 a minute, and its burst)."""


def _show(label: str, value: Any) -> None:
    print(f"{label:30} {json.dumps(value)}", flush=True)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def read_loop(port: int, bearers: list[str], seconds: float) -> list[float]:
    """Read the region on a fixed schedule for `seconds`, the sessions `bearers` in turn;
    the latencies in ms."""
    http = loadgen.Http(port)
    path = f"/workspace/read?{loadgen.region_query(READ_REGION)}"
    latencies: list[float] = []
    start = time.perf_counter()
    try:
        for n in range(int(seconds * READS_PER_SECOND)):
            due = start + n / READS_PER_SECOND
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            sent = time.perf_counter()
            http.call("GET", path, bearer=bearers[n % len(bearers)])
            latencies.append((time.perf_counter() - sent) * 1000)
    finally:
        http.close()
    return latencies


def commit_loop(port: int, writers: list[str], reviewers: list[str], stop: threading.Event,
                commits: list[float], rate: float | None = None) -> None:
    """Commit one-line edits to random regions (never the reader's) until `stop`: back to
    back, or `rate` cycles a second at most."""
    http = loadgen.Http(port)
    rng = random.Random(7)
    n = 0
    start = time.perf_counter()
    try:
        while not stop.is_set():
            if rate is not None:
                pause = start + n / rate - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
            agent, reviewer = writers[n % len(writers)], reviewers[n % len(reviewers)]
            region = READ_REGION
            while region == READ_REGION:
                region = f"Part {rng.randint(1, 100)}/Section {rng.randint(1, 100)}"
            read = http.call("GET", f"/workspace/read?{loadgen.region_query(region)}",
                             bearer=agent)
            proposal = http.call("POST", "/workspace/propose", {
                "region": region, "base_version": read["version"], "summary": f"edit {n}",
                "content": edit_one_line(rng, read["content"], n)}, bearer=agent)
            http.call("POST", "/workspace/proposal/review", {
                "proposal_id": proposal["proposal_id"], "revision": proposal["revision"],
                "decision": "approve"}, bearer=reviewer)
            sent = time.perf_counter()
            http.call("POST", "/workspace/commit", {"proposal_id": proposal["proposal_id"]},
                      bearer=agent)
            commits.append((time.perf_counter() - sent) * 1000)
            n += 1
    finally:
        http.close()


def summary(latencies: list[float]) -> dict[str, Any]:
    return {"p50": round(statistics.median(latencies), 2),
            "p99": round(percentile(latencies, 0.99), 2),
            "max": round(max(latencies), 2), "reads": len(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=15.0, help="each phase's length")
    parser.add_argument("--commits-per-second", type=float, default=None,
                        help="pace the writer (default: back to back, the figure's setting)")
    args = parser.parse_args()
    pinned = loadgen.pinning_available()
    if pinned:
        loadgen.pin(CLIENT_CPU)
    pinning = (f"room core {ROOM_CPU} (taskset), this script core {CLIENT_CPU}" if pinned
               else "not pinned")
    _show("pinning", pinning)
    pieces, sections = make_document(100, 100, 1000, seed=11)
    pieces[sections[(READ_PART - 1) * 100 + READ_SECTION - 1]] = make_section(
        random.Random(5), READ_PART, READ_SECTION, READ_BYTES)
    with tempfile.TemporaryDirectory(prefix="commonroom-read-commits-") as tmp:
        doc = Path(tmp) / "big.md"
        doc.write_bytes("".join(pieces).encode())
        _show("document", {"bytes": doc.stat().st_size, "sections": 100 * 100})
        room = start_room(doc, pinned)
        try:
            credentials = read_credentials(doc)
            assert credentials is not None
            host = credentials.host_session
            port = int(room.ready["ingress_port"])  # type: ignore[attr-defined]
            http = loadgen.Http(port)
            alone_readers: list[str] = []
            beside_readers: list[str] = []
            writers: list[str] = []
            reviewers: list[str] = []
            # A reader per phase, per set: each session stays far under its request limit.
            # An invitation per set, as one has at most 8 active sessions.
            for n in range(math.ceil(args.seconds / SESSION_SECONDS)):
                invite = http.call("POST", "/workspace/invite",
                                   {"max_uses": 2 + WRITER_SESSIONS}, bearer=host)
                review_invite = http.call("POST", "/workspace/invite", {
                    "max_uses": WRITER_SESSIONS, "capabilities": ["read", "approve"]},
                    bearer=host)

                def join(name: str, invitation: str = invite["invitation"]) -> str:
                    joined = http.call("POST", "/session/join",
                                       {"invite": invitation, "name": name})
                    return str(joined["session_id"])

                alone_readers.append(join(f"reader-alone-{n}"))
                beside_readers.append(join(f"reader-beside-{n}"))
                writers.extend(join(f"writer-{n}-{i}") for i in range(WRITER_SESSIONS))
                reviewers.extend(join(f"reviewer-{n}-{i}", review_invite["invitation"])
                                 for i in range(WRITER_SESSIONS))
            region = http.call("GET", f"/workspace/read?{loadgen.region_query(READ_REGION)}",
                               bearer=alone_readers[0])
            _show("read region", {"region": READ_REGION, "bytes": len(region["content"].encode())})
            http.close()
            read_loop(port, alone_readers[:1], 1.0)  # warm: connections, caches
            alone = read_loop(port, alone_readers, args.seconds)
            stop = threading.Event()
            commit_ms: list[float] = []
            writer = threading.Thread(target=commit_loop,
                                      args=(port, writers, reviewers, stop, commit_ms,
                                            args.commits_per_second), daemon=True)
            writer.start()
            while not commit_ms and writer.is_alive():
                time.sleep(0.01)  # the loop is committing before the timed reads start
            beside = read_loop(port, beside_readers, args.seconds)
            if not writer.is_alive():
                raise RuntimeError("the commit loop stopped before the reads did (see its error)")
            made = len(commit_ms)
            stop.set()
            writer.join(60)
        finally:
            room.send_signal(signal.SIGINT)
            room.wait(30)
    quiet, busy = summary(alone), summary(beside)
    _show("read ms, no commits", quiet)
    _show("read ms, while committing", busy)
    _show("commit request ms", {"median": round(statistics.median(commit_ms), 2),
                                "max": round(max(commit_ms), 2), "commits": made})
    print(json.dumps({
        "read_during_commits": round(busy["p99"] / quiet["p99"], 3),
        "p99_ms": {"alone": quiet["p99"], "while_committing": busy["p99"]},
        "max_ms": {"alone": quiet["max"], "while_committing": busy["max"]},
        "commits": made,
        "seconds": args.seconds,
        "commits_per_second": args.commits_per_second or "back to back",
        "pinning": pinning,
        "load_average": os.getloadavg()[0],
    }), flush=True)


if __name__ == "__main__":
    main()
