"""`commit_cost_10mb` from the client's side (TARGETS.md "Document size and history").

Usage: ``.venv/bin/python tools/bench/bench_commit_http.py [--commits 30] [--profile FILE]``

A real ``ce serve DOC --json --port-owner 0 --port-ingress 0`` (its own protocol
limits) around the 10 MB / 10,000-section document of `bench_engine.py`, pinned to
core 0 with ``taskset``; this script (core 1) is one agent and the host over raw
keep-alive HTTP/1.1 (`loadgen.Http`). For each commit: read a random region, propose a
one-line edit of it, the host approves, and the agent's ``POST /workspace/commit``
is timed from the request sent until its answer is in. After each commit (and a
short pause for the room's writer thread to free the old file), the same 10 MB are
written atomically by this process (temp file, fsync, rename, folder fsync:
`store.document.DocumentFile.write`, what the commit does) and timed.

* ``commit_cost_10mb``: median commit request ÷ median atomic write, same run
  (target ≤ 2.0); ``bench_engine.py``'s figure is the same commit in process;
* ``room_rss_ratio_10mb_http``: the room's VmRSS after the commits ÷ after its
  first read (target ≤ 1.5);
* ``room_cpu_ms_per_commit``, ``room_minor_faults_per_commit``: what the room spent while
  it answered the commit requests (/proc; clock ticks of 10 ms, averaged over the commits):
  less noisy than the wall-clock figures on a shared machine;
* ``--profile FILE``: ``py-spy record`` on the room during the timed commits
  (``--format raw``: collapsed stacks; `summarize` prints the top frames).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import loadgen
from bench_engine import edit_one_line, make_document

from commonroom.credentials import read_credentials
from commonroom.store.document import DocumentFile

ROOM_CPU = 0
CLIENT_CPU = 1


def _show(label: str, value: Any) -> None:
    print(f"{label:30} {json.dumps(value)}", flush=True)


def start_room(doc: Path, pinned: bool) -> subprocess.Popen[str]:
    ce = str(Path(loadgen.PYTHON).parent / "ce")
    command = [ce, "serve", str(doc), "--json", "--port-owner", "0", "--port-ingress", "0"]
    if pinned and shutil.which("taskset"):
        command = ["taskset", "-c", str(ROOM_CPU), *command]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("{"):
        proc.kill()
        raise RuntimeError(f"ce serve printed {line!r}")
    proc.ready = json.loads(line)  # type: ignore[attr-defined]
    return proc


def room_counters(pid: int) -> dict[str, float]:
    """The room's CPU milliseconds (user + system, all threads) and minor page faults so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {"cpu_ms": (int(fields[11]) + int(fields[12])) * 1000 / ticks,
            "minor_faults": int(fields[7])}


def summarize(raw: Path, top: int = 25) -> list[tuple[str, float]]:
    """The share of samples in which each function appears (inclusive), from py-spy raw."""
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        for frame in {frame.split(" (")[0] + " " + frame.rsplit("/", 1)[-1].rstrip(")")
                      for frame in stack.split(";")}:
            inclusive[frame] += n
    return [(name, round(100 * n / total, 1)) for name, n in inclusive.most_common(top)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="py-spy raw output for the timed commits")
    args = parser.parse_args()
    pinned = loadgen.pinning_available()
    if pinned:
        loadgen.pin(CLIENT_CPU)
    pinning = (f"room core {ROOM_CPU} (taskset), this script core {CLIENT_CPU}" if pinned
               else "not pinned")
    _show("pinning", pinning)
    rng = random.Random(31)
    pieces, _ = make_document(100, 100, 1000, seed=11)
    with tempfile.TemporaryDirectory(prefix="commonroom-commit-http-") as tmp:
        folder = Path(tmp)
        doc = folder / "big.md"
        doc.write_bytes("".join(pieces).encode())
        _show("document", {"bytes": doc.stat().st_size, "sections": 100 * 100})
        target = DocumentFile(folder / "atomic.md")
        room = start_room(doc, pinned)
        profiler: subprocess.Popen[bytes] | None = None
        try:
            credentials = read_credentials(doc)
            assert credentials is not None
            host = credentials.host_session
            http = loadgen.Http(int(room.ready["ingress_port"]))  # type: ignore[attr-defined]
            invite = http.call("POST", "/workspace/invite", {}, bearer=host)
            agent = http.call("POST", "/session/join", {"invite": invite["invitation"],
                                                        "name": "bench"})["session_id"]
            region = "Part 1/Section 1"
            http.call("GET", f"/workspace/read?{loadgen.region_query(region)}", bearer=agent)
            time.sleep(1.0)
            rss_first = loadgen.rss_kb(room.pid)
            spent: Counter[str] = Counter()

            def one_commit(n: int) -> float:
                region = f"Part {rng.randint(1, 100)}/Section {rng.randint(1, 100)}"
                read = http.call("GET", f"/workspace/read?{loadgen.region_query(region)}",
                                 bearer=agent)
                proposal = http.call("POST", "/workspace/propose", {
                    "region": region, "base_version": read["version"], "summary": f"edit {n}",
                    "content": edit_one_line(rng, read["content"], n),
                }, bearer=agent)
                http.call("POST", "/workspace/proposal/review", {
                    "proposal_id": proposal["proposal_id"], "revision": proposal["revision"],
                    "decision": "approve"}, bearer=host)
                before = room_counters(room.pid)
                sent = time.perf_counter()
                http.call("POST", "/workspace/commit", {"proposal_id": proposal["proposal_id"]},
                          bearer=agent)
                elapsed = (time.perf_counter() - sent) * 1000
                for name, value in room_counters(room.pid).items():
                    spent[name] += value - before[name]
                return elapsed

            for n in range(args.warmup):
                one_commit(n)
            spent.clear()
            if args.profile is not None:
                profiler = subprocess.Popen(
                    [str(Path(loadgen.PYTHON).parent / "py-spy"), "record", "--pid",
                     str(room.pid), "--format", "raw", "--rate", "250", "--output",
                     str(args.profile), "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.0)
            commit_ms: list[float] = []
            write_ms: list[float] = []
            for n in range(args.commits):
                commit_ms.append(one_commit(100 + n))
                data = doc.read_bytes()
                time.sleep(0.05)  # the room's writer thread frees the replaced file
                started = time.perf_counter()
                target.write(data)
                write_ms.append((time.perf_counter() - started) * 1000)
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(30)
            time.sleep(1.0)
            rss_after = loadgen.rss_kb(room.pid)
            http.close()
        finally:
            if profiler is not None and profiler.poll() is None:
                profiler.kill()
            room.send_signal(signal.SIGINT)
            room.wait(30)
    commit = statistics.median(commit_ms)
    write = statistics.median(write_ms)
    _show("commit request ms", {"median": round(commit, 2), "all": [round(x, 1) for x in commit_ms]})
    _show("atomic write ms", {"median": round(write, 2), "all": [round(x, 1) for x in write_ms]})
    top = summarize(args.profile) if args.profile is not None and args.profile.exists() else None
    if top:
        for name, share in top:
            print(f"  {share:5.1f}%  {name}")
    print(json.dumps({
        "commit_cost_10mb": round(commit / write, 3),
        "commit_ms": round(commit, 2),
        "atomic_write_ms": round(write, 2),
        "room_rss_ratio_10mb_http": round(rss_after / rss_first, 3),
        # the room's own work while it answered the commit requests: CPU (its threads, the
        # kernel's write into the page cache included) and page faults (fresh memory)
        "room_cpu_ms_per_commit": round(spent["cpu_ms"] / args.commits, 2),
        "room_minor_faults_per_commit": round(spent["minor_faults"] / args.commits),
        "rss_kb": {"first_read": rss_first, "after": rss_after},
        "commits": args.commits,
        "pinning": pinning,
        "load_average": os.getloadavg()[0],
    }), flush=True)


if __name__ == "__main__":
    main()
