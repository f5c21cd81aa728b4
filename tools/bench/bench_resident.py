"""Resident agents' figures (shared/spec/TARGETS.md): ``wake_ms`` and ``resident_idle``.

Usage: ``python tools/bench/bench_resident.py [--wakes 50] [--idle-seconds 60]``

A real ``ce serve`` and a real ``ce agent`` over a minimal ACP agent on the official ACP SDK's
agent side (``tools/bench/acp_timing_agent.py``), which writes the wall-clock time at which each
``session/prompt`` reaches it and answers every turn with one room message through its MCP
server (so the idle-turn guard never pauses it).

- ``wake_ms``: the host posts room text addressed to the agent (``POST /workspace/message``);
  the time from just before that request until the prompt reaches the agent, p50 and p95 of
  ``--wakes`` (target p95 < 300 ms). The host alternates three senders (the room's loop guard
  allows 20 addressed messages per pair in 5 minutes); each wake waits for the previous turn.
- ``resident_idle``: then nothing happens for ``--idle-seconds``: ``connect()`` calls made by
  ``ce agent`` itself and by its ``ce mcp`` bridge (strace, attached to each), and ``ce agent``'s
  RSS at the end (targets: 0 requests beyond its one stream; RSS < 60 MB).

The last line is one JSON object with every figure.
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
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CE = str(Path(sys.executable).parent / "ce")
AGENT = Path(__file__).with_name("acp_timing_agent.py")
FIGURES: dict[str, Any] = {}


def report(key: str, value: Any, unit: str = "") -> None:
    FIGURES[key] = value
    shown = f"{value:.1f}" if isinstance(value, float) else str(value)
    print(f"  {key}: {shown}{(' ' + unit) if unit else ''}", flush=True)


def http(port: int, method: str, path: str, bearer: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers=headers)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def prompts(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def wait_for(check: Any, bound: float = 60.0) -> Any:
    deadline = time.monotonic() + bound
    while not (found := check()):
        if time.monotonic() > deadline:
            raise SystemExit("the agent did not answer in time")
        time.sleep(0.005)
    return found


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wakes", type=int, default=50)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-resident-"))
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp / "config")}
    doc = tmp / "idea.md"
    shutil.copyfile(ROOT / "samples" / "idea.md", doc)
    serve = subprocess.Popen([CE, "serve", str(doc), "--json", "--port-owner", "0",
                              "--port-ingress", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, text=True)
    agent = None
    try:
        assert serve.stdout is not None
        ready = json.loads(serve.stdout.readline())
        port = int(ready["ingress_port"])
        sys.path.insert(0, str(ROOT / "src"))
        from commonroom.credentials import read_credentials

        creds = read_credentials(doc)
        assert creds is not None
        host = str(creds.host_session)
        senders = [host]
        for name in ("alice", "bob", "watcher"):
            invite = http(port, "POST", "/workspace/invite", host, {})["invitation"]
            senders.append(http(port, "POST", "/session/join", "", {
                "invite": invite, "name": name})["session_id"])
        watcher = senders.pop()  # reads the runtime's state (its own rate budget)
        log = tmp / "agent.log"
        agent = subprocess.Popen(
            [CE, "agent", ready["invitation"], "--name", "bot", "--max-turns", "1000", "--",
             sys.executable, str(AGENT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**env, "ACP_TIMING_LOG": str(log)})

        def bot() -> dict[str, Any] | None:
            time.sleep(0.15)  # at most ~400 reads a minute: within the room's rate limit
            parts = http(port, "GET", "/workspace/participants", watcher)["participants"]
            return next((p for p in parts if p["name"] == "bot" and p.get("runtime")), None)

        me = wait_for(bot)
        wait_for(lambda: any(row.get("event") == "ready" for row in prompts(log)))
        samples: list[float] = []
        for n in range(args.wakes):
            sender = senders[n % len(senders)]
            seen = len([r for r in prompts(log) if r.get("event") == "prompt"])
            sent = time.time()
            http(port, "POST", "/workspace/message", sender,
                 {"text": f"wake {n}", "to": [me["participant_id"]]})
            got = wait_for(lambda seen=seen: [r for r in prompts(log)
                                              if r.get("event") == "prompt"][seen:])
            samples.append((got[0]["at"] - sent) * 1000)
            wait_for(lambda seen=seen: any(r.get("event") == "answered" and r.get("n") == seen + 1
                                           for r in prompts(log)))
            wait_for(lambda: (bot() or {}).get("runtime", {}).get("state") == "idle")
        samples.sort()
        report("wake_ms_p50", statistics.median(samples), "ms")
        report("wake_ms_p95", samples[max(0, int(len(samples) * 0.95) - 1)], "ms")
        report("wake_ms_max", samples[-1], "ms")
        # resident_idle: from 2 s after the last turn (its last report and reads are done)
        time.sleep(2)
        bridge = [pid for child in children(agent.pid) for pid in children(child)]
        tracers = []
        for pid, name in [(agent.pid, "agent"), *[(b, "bridge") for b in bridge]]:
            out = tmp / f"strace-{name}-{pid}.txt"
            tracers.append((name, out, subprocess.Popen(
                ["strace", "-tt", "-e", "trace=connect", "-p", str(pid), "-o", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        time.sleep(args.idle_seconds)
        for _name, _out, tracer in tracers:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(10)
        by: dict[str, int] = {}
        for name, out, _tracer in tracers:
            text = out.read_text() if out.exists() else ""
            by[name] = by.get(name, 0) + text.count("connect(")
        report("resident_idle_connects_agent", by.get("agent", 0))
        report("resident_idle_connects_bridge", by.get("bridge", 0))
        report("resident_idle_rss_mb", rss_mb(agent.pid), "MB")
        FIGURES["idle_seconds"] = args.idle_seconds
        FIGURES["wakes"] = args.wakes
        print(json.dumps(FIGURES))
    finally:
        for process in (agent, serve):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")


if __name__ == "__main__":
    main()
