"""Issue 31's two flooding attacks against a real `ce serve`; others' latency during each.

    .venv/bin/python -m tools.hostile.room_rules [--seconds 15]

Starts `ce serve` on a copy of samples/idea.md, joins a bystander agent that polls
`GET /workspace/status` every 0.2 s (inside its own rate limit) and an attacker agent
(a default invitation). Phases, each SECONDS long: the baseline (no attack); F3, the
attacker proposes and revises 209 KB texts of the costliest diff shape
(tools/hostile/heavy_reads.py) and asks for its proposal over 4 connections as fast as
the room answers; F7, the attacker opens a thread and replies with 8,000-byte bodies
over 4 connections as fast as the room answers. Prints per phase the bystander's p50 /
p99 / max and failed calls, and what the attacker got (status counts); the last line
is one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tools.hostile.heavy_reads import revisions

from commonroom.credentials import read_credentials

REPO = Path(__file__).resolve().parents[2]
POLL_EVERY = 0.2
BODY = "spam " * 1600


def _call(port: int, method: str, path: str, bearer: str | None = None,
          body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": "commonroom", "Content-Type": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def _poll(port: int, bearer: str, stop: threading.Event) -> list[float]:
    out: list[float] = []
    while not stop.is_set():
        started = time.perf_counter()
        try:
            status, _ = _call(port, "GET", "/workspace/status", bearer)
        except OSError:
            status = 0
        out.append(time.perf_counter() - started if status == 200 else math.inf)
        stop.wait(POLL_EVERY)
    return out


def _figures(latencies: list[float], answers: collections.Counter[int]) -> dict[str, Any]:
    finite = sorted(x for x in latencies if math.isfinite(x))

    def pick(fraction: float) -> float:
        return round(finite[min(len(finite) - 1, math.ceil(fraction * len(finite)) - 1)] * 1000, 1)

    return {"p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": round(finite[-1] * 1000, 1),
            "calls": len(latencies), "failed": len(latencies) - len(finite),
            "attacker": dict(sorted(answers.items()))}


def _phase(port: int, bystander: str, seconds: float, attack: Any) -> dict[str, Any]:
    stop = threading.Event()
    answers: collections.Counter[int] = collections.Counter()
    latencies: list[float] = []
    poller = threading.Thread(target=lambda: latencies.extend(_poll(port, bystander, stop)))
    poller.start()
    workers = [threading.Thread(target=attack, args=(stop, answers)) for _ in range(4)] if attack else []
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for thread in (poller, *workers):
        thread.join()
    return _figures(latencies, answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rules-"))
    doc = folder / "idea.md"
    shutil.copyfile(REPO / "samples" / "idea.md", doc)
    os.environ["XDG_RUNTIME_DIR"] = os.environ["XDG_CONFIG_HOME"] = str(folder)
    ce = str(Path(sys.executable).parent / "ce")
    room = subprocess.Popen([ce, "serve", str(doc), "--json", "--port-owner", "0",
                             "--port-ingress", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                            cwd=folder)
    try:
        assert room.stdout is not None
        ready = json.loads(room.stdout.readline())
        port = int(ready["ingress_port"])
        credentials = read_credentials(doc)
        assert credentials is not None

        def join(name: str) -> str:
            invitation = _call(port, "POST", "/workspace/invite", str(credentials.host_session),
                               {})[1]["invitation"]
            return str(_call(port, "POST", "/session/join", None,
                             {"invite": invitation, "name": name})[1]["session_id"])

        bystander, attacker = join("bystander"), join("attacker")
        first, second = revisions("## Risks")
        version = _call(port, "GET", "/workspace/status", attacker)[1]["version"]
        made = _call(port, "POST", "/workspace/propose", attacker, {
            "region": "Risks", "base_version": version, "summary": "long", "content": first})[1]
        _call(port, "POST", "/workspace/proposal/revise", attacker,
              {"proposal_id": made["proposal_id"], "content": second})
        thread = _call(port, "POST", "/workspace/thread", attacker,
                       {"region": "Problem", "body": "a question"})[1]

        def heavy(stop: threading.Event, answers: collections.Counter[int]) -> None:
            while not stop.is_set():
                answers[_call(port, "GET", f"/workspace/proposal?proposal_id={made['proposal_id']}",
                              attacker)[0]] += 1

        def spam(stop: threading.Event, answers: collections.Counter[int]) -> None:
            while not stop.is_set():
                answers[_call(port, "POST", "/workspace/thread/reply", attacker,
                              {"thread_id": thread["thread_id"], "body": BODY})[0]] += 1

        figures = {"baseline": _phase(port, bystander, args.seconds, None),
                   "F3 costly diffs": _phase(port, bystander, args.seconds, heavy),
                   "F7 thread spam": _phase(port, bystander, args.seconds, spam)}
    finally:
        room.send_signal(signal.SIGINT)
        try:
            room.wait(10)
        except subprocess.TimeoutExpired:
            room.kill()
            room.wait()
        shutil.rmtree(folder, ignore_errors=True)
    figures["load"] = round(os.getloadavg()[0], 1)  # type: ignore[assignment]
    for name, value in figures.items():
        print(f"{name}: {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
