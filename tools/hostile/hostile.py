"""Hostile clients at full size against a real `ce serve`; others' p99 during each (issue 14).

    .venv/bin/python -m tools.hostile.hostile [--seconds 10] [--only NAME ...]

Starts `ce serve --ephemeral` on a copy of samples/idea.md, joins bystanders
(well-behaved clients polling GET /workspace/status, each within its own
rate limit) and attacker agents, then for each attack: the bystanders' p50 /
p99 / max latency and failed calls while the attack runs (first with no
attack: the baseline), how many requests or connections the attack made,
and every answer that broke the error contract (5xx, non-JSON error body,
not the protocol's shape). The attacks (tools/hostile/attacks.py):

- slowloris: 1,000 connections sending a request head a byte a second;
- never-reader: 50 SSE/WebSocket observers that never read, while 6 agents
  make ~840 events;
- half-open: 10,000 connections that never finish a request (RLIMIT_NOFILE
  is raised to its hard limit here; `ce serve` inherits it);
- chunked: 1 MiB + 1 byte chunked bodies, 4 at a time, for the whole window;
- nesting: 1 MiB bodies nested as deep as they go, 4 at a time;
- arrays: 100,000-item arrays in five places, 4 at a time;
- utf8: non-UTF-8 bytes in every field of every operation and every header;
- websocket: 8 observe WebSockets offering permessage-deflate, each sending
  64 MiB messages back to back (the room refuses compression and cuts a
  message at 64 KiB).

Each line also has the room's peak RSS during the attack (from /proc).

Finally SIGINT, with the attackers of the last attack gone: exit code and
seconds to exit. Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from itertools import cycle
from pathlib import Path
from typing import Any

import trio
from tests.reliability.abuse_support import peak_rss_kib
from tools.hostile import attacks

from commonroom.credentials import read_credentials

REPO = Path(__file__).resolve().parents[2]
BYSTANDERS = 4
ATTACKERS = 12
REGIONS = ("Problem", "Who it is for", "The idea", "Risks", "First milestone", "Open questions")
"""samples/idea.md's sections: one writer each, so their leases never conflict."""
PROBE_INTERVAL = 0.2  # 4 bystanders: 20 calls a second, each well inside 600 a minute


class Tally:
    """What one attack did and saw."""

    def __init__(self) -> None:
        self.sent = 0
        self.statuses: collections.Counter[int] = collections.Counter()
        self.broken: list[str] = []
        self.notes: list[str] = []

    def add(self, name: str, answer: attacks.Answer) -> None:
        self.sent += 1
        self.statuses[answer.status] += 1
        problem = attacks.shape_problem(answer)
        if problem is not None and len(self.broken) < 5:
            self.broken.append(f"{name}: {problem}")


def raise_fd_limit() -> int:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def start_room(folder: Path) -> tuple[subprocess.Popen[str], dict[str, Any], Path]:
    doc = folder / "idea.md"
    shutil.copyfile(REPO / "samples" / "idea.md", doc)
    ce = Path(sys.executable).parent / "ce"
    process = subprocess.Popen(
        [str(ce), "serve", str(doc), "--json", "--ephemeral", "--port-owner", "0", "--port-ingress", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=(folder / "serve.err").open("wb"),
        text=True, cwd=folder)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"ce serve did not start: {(folder / 'serve.err').read_text()}")
    return process, json.loads(line), doc


async def call(port: int, method: str, path: str, bearer: str | None, body: Any = None) -> Any:
    headers = [attacks.JSON_TYPE] + ([attacks.bearer_header(bearer)] if bearer else [])
    answer = await attacks.exchange(port, attacks.raw_request(
        method.encode(), path.encode(), headers, b"" if body is None else json.dumps(body).encode()))
    if answer.status != 200:
        raise SystemExit(f"{method} {path}: {answer.status} {answer.body[:200]!r}")
    return answer.json()


async def join(port: int, host: str, name: str) -> str:
    invite = await call(port, "POST", "/workspace/invite", host, {})
    joined = await call(port, "POST", "/session/join", None, {"invite": invite["invitation"], "name": name})
    bearer: str = joined["session_id"]
    return bearer


async def repeat(seconds: float, workers: int, once: Callable[[], Awaitable[None]]) -> None:
    """Run `once` back to back in `workers` tasks for `seconds`."""
    async def worker() -> None:
        while True:
            await once()

    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:
            for _ in range(workers):
                nursery.start_soon(worker)


def attack_plan(port: int, host: str, attackers: list[str], seconds: float
                ) -> dict[str, Callable[[Tally], Awaitable[None]]]:
    bearers = cycle(attackers)

    async def idle(tally: Tally) -> None:
        await trio.sleep(seconds)

    async def slowloris(tally: Tally) -> None:
        cut = await attacks.slowloris(port, connections=1000, byte_every=1.0, give_up_after=seconds)
        tally.sent = len(cut)
        done = sorted(c for c in cut if c is not None)
        tally.notes.append(f"cut by the room: {len(done)}/{len(cut)}, after median"
                           f" {attacks.percentile(done, 0.5):.1f} s, max {max(done, default=math.nan):.1f} s")

    async def never_reader(tally: Tally) -> None:
        stalled = await attacks.never_reading_streams(port, host, streams=50)
        made = 0

        async def flood(writer: str, region: str) -> None:
            nonlocal made
            for _ in range(70):
                lease = await call(port, "POST", "/workspace/checkout", writer, {"region": region})
                await call(port, "POST", "/workspace/release", writer, {"lease_id": lease["lease_id"]})
                made += 2

        try:
            with trio.move_on_after(seconds):
                async with trio.open_nursery() as nursery:
                    for writer, region in zip(attackers, REGIONS, strict=False):
                        nursery.start_soon(flood, writer, region)
                await trio.sleep_forever()
        finally:
            for stream in stalled:
                await stream.aclose()
        tally.sent = len(stalled)
        tally.notes.append(f"{made} events while 50 streams never read")

    async def half_open(tally: Tally) -> None:
        opened, closed = await attacks.half_open(port, connections=10_000, hold=seconds)
        tally.sent = opened
        tally.notes.append(f"opened {opened}, closed by the room within the window: {closed}")

    async def chunked(tally: Tally) -> None:
        async def once() -> None:
            tally.add("chunked", await attacks.chunked_overflow(port, next(bearers)))
        await repeat(seconds, 4, once)

    async def nesting(tally: Tally) -> None:
        async def once() -> None:
            for name, answer in (await attacks.deep_json(port, next(bearers), size=attacks.MIB - 1024)).items():
                tally.add(name, answer)
        await repeat(seconds, 4, once)

    async def arrays(tally: Tally) -> None:
        async def once() -> None:
            for name, answer in (await attacks.huge_arrays(port, next(bearers), items=100_000)).items():
                tally.add(name, answer)
        await repeat(seconds, 4, once)

    async def utf8(tally: Tally) -> None:
        requests = list(attacks.invalid_utf8_requests(host).items())
        # The same requests under each attacker's bearer in turn (each has its own rate window).
        index = 0

        async def once() -> None:
            nonlocal index
            name, request = requests[index % len(requests)]
            index += 1
            tally.add(name, await attacks.exchange(port, request.replace(host.encode(), next(bearers).encode())))
        await repeat(seconds, 4, once)
        tally.notes.append(f"{len(requests)} distinct requests")

    async def websocket(tally: Tally) -> None:
        async def once() -> None:
            head = await attacks.websocket_message(port, next(bearers), size=64 * attacks.MIB)
            tally.sent += 1
            tally.statuses[int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1") else 0] += 1
            if b"sec-websocket-extensions" in head.lower():
                tally.broken.append("compression was accepted")
        await repeat(seconds, 8, once)

    return {"baseline": idle, "slowloris": slowloris, "never-reader": never_reader,
            "half-open": half_open, "chunked": chunked, "nesting": nesting, "arrays": arrays,
            "utf8": utf8, "websocket": websocket}


async def run(seconds: float, only: list[str]) -> None:
    limit = raise_fd_limit()
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
        process, ready, doc = start_room(Path(folder))
        try:
            port = int(ready["ingress_port"])
            credentials = read_credentials(doc)
            assert credentials is not None
            host = credentials.host_session
            bystanders = [await join(port, host, f"bystander{n}") for n in range(BYSTANDERS)]
            attackers = [await join(port, host, f"attacker{n}") for n in range(ATTACKERS)]
            print(f"ce serve pid {process.pid}, RLIMIT_NOFILE {limit}, {seconds:g} s per attack,"
                  f" {BYSTANDERS} bystanders every {PROBE_INTERVAL} s")
            print(f"{'attack':<13} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'calls':>6} {'failed':>6}"
                  f" {'sent':>6} {'RSS MB':>6}  answers / notes")
            for name, attack in attack_plan(port, host, attackers, seconds).items():
                if only and name not in only and name != "baseline":
                    continue
                tally = Tally()
                done = trio.Event()
                latencies: list[float] = []

                async def poll(bearer: str, done: trio.Event = done, latencies: list[float] = latencies) -> None:
                    latencies.extend(await attacks.probe(port, bearer, done, interval=PROBE_INTERVAL))

                peak: list[int] = []

                async def watch(done: trio.Event = done, peak: list[int] = peak) -> None:
                    peak.append(await peak_rss_kib(process.pid, done))

                async with trio.open_nursery() as nursery:
                    for bearer in bystanders:
                        nursery.start_soon(poll, bearer)
                    nursery.start_soon(watch)
                    try:
                        await attack(tally)
                    finally:
                        done.set()
                ok = [x for x in latencies if math.isfinite(x)]
                answers = ", ".join(f"{status}x{count}" for status, count in sorted(tally.statuses.items()))
                print(f"{name:<13} {attacks.percentile(ok, 0.5) * 1000:7.1f}"
                      f" {attacks.percentile(ok, 0.99) * 1000:7.1f} {max(ok, default=math.nan) * 1000:7.1f}"
                      f" {len(latencies):6d} {len(latencies) - len(ok):6d} {tally.sent:6d}"
                      f" {peak[0] / 1024:6.0f}  "
                      + "; ".join(x for x in [answers, *tally.notes] if x))
                for problem in tally.broken:
                    print(f"    CONTRACT BROKEN: {problem}")
                await trio.sleep(6)  # let the room close what the attack left (keep-alive 5 s)
            started = time.monotonic()
            process.send_signal(signal.SIGINT)
            code = process.wait(15)
            print(f"SIGINT: exit code {code} after {time.monotonic() - started:.2f} s;"
                  f" stderr tracebacks: {(Path(folder) / 'serve.err').read_text().count('Traceback')}")
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each attack runs")
    parser.add_argument("--only", nargs="*", default=[], help="attack names to run (baseline always)")
    options = parser.parse_args()
    trio.run(run, options.seconds, options.only)


if __name__ == "__main__":
    main()
