"""`heavy_read_isolation` (TARGETS.md, "Many agents at once"): the host's status while one
agent asks, again and again, for the largest answers the room computes.

Usage: ``python tools/bench/bench_heavy_read_isolation.py [--seconds 15] [--connections 2]``
(about a minute)

A real `ce serve` on samples/idea.md (a temporary folder, deleted at the end). Two agents
with default invitations each propose a 256 KiB text (one on Risks, one on Open
questions) and revise it to another, both of the costliest shape for a line diff
(tools/hostile/heavy_reads.py, lines of 20 bytes: the shape that costs the most below
the bound). Then, over CONNECTIONS connections at once, an agent asks as fast as the
room lets it for its proposal (the diff of its two revisions and the diff against the
current text) and for the diff of the whole document between two versions:

- `honours`: the first agent, which sleeps the `Retry-After` it is told on a 429 (the
  figure for well-behaved clients);
- `floods`: the second, which asks again at once (a client that ignores `Retry-After`).

Meanwhile the host's `GET /workspace/status` (the host bearer, a new connection each,
every 0.1 s) is timed: SECONDS with nothing else going on (the baseline), then SECONDS
during each agent's run.

Figures: the host's status p50 / p99 / max in each phase; `heavy_read_isolation` = p99
during ÷ p99 baseline, per agent (TARGET ≤ 2.0); each agent's answers (200 / 429) and
the slowest 200 it got (wall time). The room CPU of one answer (TARGET ≤ 250 ms): before
the baseline, with nothing else running, each heavy read (the proposal with its two
diffs, `workspace.diff` of the whole document, `workspace.blame` of the whole document)
is asked 5 times with the host's bearer and the room process's CPU time (all its
threads, /proc/PID/task/*/schedstat) is read before and after each; the largest is
`max_answer_cpu_ms`.

The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.hostile.heavy_reads import revisions  # noqa: E402

SAMPLE = ROOT / "samples" / "idea.md"
# The host's status every 0.1 s: ~150 calls a phase, so the p99 is not just the maximum;
# the three phases (45 s) stay inside the host's own 600 requests a minute.
POLL_EVERY = 0.1


def _ce() -> str:
    beside = Path(sys.executable).parent / "ce"
    return str(beside) if beside.exists() else "ce"


def _call(port: int, method: str, path: str, bearer: str | None = None,
          body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": "commonroom", "Content-Type": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def _ok(port: int, method: str, path: str, bearer: str | None = None, body: Any = None) -> Any:
    status, answer = _call(port, method, path, bearer, body)
    if status != 200:
        raise RuntimeError(f"{method} {path}: {status} {answer}")
    return answer


def _poll(port: int, bearer: str, seconds: float) -> list[float]:
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        started = time.perf_counter()
        status, _ = _call(port, "GET", "/workspace/status", bearer)
        latencies.append(time.perf_counter() - started if status == 200 else math.inf)
        time.sleep(POLL_EVERY)
    return latencies


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50": round(_percentile(values, 0.5) * 1000, 1),
            "p90": round(_percentile(values, 0.9) * 1000, 1),
            "p99": round(_percentile(values, 0.99) * 1000, 1),
            "max": round(max(values) * 1000, 1), "calls": len(values)}


def _room_cpu_seconds(pid: int) -> float:
    """CPU time of process `pid`, all its threads, in ns resolution (/proc/PID/task/*/schedstat:
    the first field is the thread's time on a CPU; /proc/PID/stat counts 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def _answer_cpu_ms(pid: int, port: int, bearer: str, paths: list[str]) -> dict[str, float]:
    """The room's CPU for each heavy read alone (the largest of 5 asks each), ms."""
    costs: dict[str, float] = {}
    for path in paths:
        worst = 0.0
        for _ in range(5):
            before = _room_cpu_seconds(pid)
            _ok(port, "GET", path, bearer)
            time.sleep(0.05)  # the answer's after-send work (flush) is the room's too
            worst = max(worst, _room_cpu_seconds(pid) - before)
        costs[path.split("?")[0]] = round(worst * 1000, 1)
    return costs


def _propose_heavy(port: int, bearer: str, region: str, heading: str) -> str:
    first, second = revisions(heading, size=250 * 1024, line_bytes=20)
    version = _ok(port, "GET", "/workspace/status", bearer)["version"]
    made = _ok(port, "POST", "/workspace/propose", bearer, {
        "region": region, "base_version": version, "summary": "long", "content": first})
    _ok(port, "POST", "/workspace/proposal/revise", bearer,
        {"proposal_id": made["proposal_id"], "content": second})
    return str(made["proposal_id"])


def _attack(port: int, host_bearer: str, agent: str, paths: list[str], seconds: float,
            connections: int, honours: bool) -> dict[str, Any]:
    stop = threading.Event()
    answers: list[tuple[int, float]] = []

    def hammer(k: int) -> None:
        n = k
        while not stop.is_set():
            started = time.perf_counter()
            status, body = _call(port, "GET", paths[n % len(paths)], agent)
            answers.append((status, time.perf_counter() - started))
            n += 1
            if status == 429 and honours:
                stop.wait(float(body.get("retry_after_seconds", 1)))

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(connections)]
    for thread in threads:
        thread.start()
    try:
        during = _poll(port, host_bearer, seconds)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    served = [elapsed for status, elapsed in answers if status == 200]
    return {
        "during": during,
        "agent_answers_200": len(served),
        "agent_answers_429": sum(1 for status, _ in answers if status == 429),
        "agent_slowest_200_ms": round(max(served) * 1000, 1) if served else None,
    }


def run(seconds: float, connections: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="heavy-"))
    doc = folder / "idea.md"
    shutil.copyfile(SAMPLE, doc)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(folder), "XDG_CONFIG_HOME": str(folder)}
    room = subprocess.Popen([_ce(), "serve", str(doc), "--json", "--port-owner", "0",
                             "--port-ingress", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                            env=env, cwd=folder)
    phases: dict[str, dict[str, Any]] = {}
    try:
        assert room.stdout is not None
        ready = json.loads(room.stdout.readline())
        port = int(ready["ingress_port"])
        os.environ["XDG_RUNTIME_DIR"] = str(folder)  # where `ce serve` wrote its credentials
        from commonroom.credentials import read_credentials

        credentials = read_credentials(doc)
        assert credentials is not None
        host_bearer = str(credentials.host_session)
        invitations = {"honours": ready["invitation"],
                       "floods": _ok(port, "POST", "/workspace/invite", host_bearer, {})["invitation"]}
        agents = {name: _ok(port, "POST", "/session/join", None,
                            {"invite": invite, "name": name})["session_id"]
                  for name, invite in invitations.items()}
        version = _ok(port, "GET", "/workspace/status", host_bearer)["version"]
        proposals = {"honours": _propose_heavy(port, agents["honours"], "Risks", "## Risks"),
                     "floods": _propose_heavy(port, agents["floods"], "Open questions",
                                              "## Open questions")}
        diff_path = f"/workspace/diff?base_version=1&to_version={version}"
        cpu = _answer_cpu_ms(room.pid, port, host_bearer, [
            f"/workspace/proposal?proposal_id={proposals['floods']}", diff_path,
            "/workspace/blame?region=workspace"])
        baseline = _poll(port, host_bearer, seconds)
        for name in ("honours", "floods"):
            paths = [f"/workspace/proposal?proposal_id={proposals[name]}", diff_path]
            phases[name] = _attack(port, host_bearer, agents[name], paths, seconds, connections,
                                   honours=name == "honours")
    finally:
        room.send_signal(signal.SIGINT)
        try:
            room.wait(10)
        except subprocess.TimeoutExpired:
            room.kill()
            room.wait()
        shutil.rmtree(folder, ignore_errors=True)
    base = _ms(baseline)
    figures: dict[str, Any] = {"status_baseline_ms": base}
    for name, phase in phases.items():
        hot = _ms(phase.pop("during"))
        figures[name] = {
            "status_during_ms": hot,
            "heavy_read_isolation": round(hot["p99"] / base["p99"], 2) if base["p99"] else None,
            **phase,
        }
    figures["heavy_read_isolation_honours"] = figures["honours"]["heavy_read_isolation"]
    figures["heavy_read_isolation_floods"] = figures["floods"]["heavy_read_isolation"]
    figures["answer_cpu_ms"] = cpu
    figures["max_answer_cpu_ms"] = max(cpu.values())
    figures["seconds"], figures["connections"] = seconds, connections
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--connections", type=int, default=2)
    args = parser.parse_args()
    figures = run(args.seconds, args.connections)
    figures["machine"] = (f"{platform.machine()} {os.cpu_count()} cores, Python"
                          f" {platform.python_version()}, load {os.getloadavg()[0]:.1f}")
    for key, value in figures.items():
        print(f"{key}: {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
