"""`agents_p99_ratio_32` (TARGETS.md "Many agents at once"): 32 agents writing at once
against one agent alone, in one room, in one run.

Usage: ``.venv/bin/python tools/bench/bench_agents.py [--agents 32] [--seconds 20]
[--sections 64] [--profile FILE]`` (about 1 min)

A real ``ce serve DOC --json --port-owner 0 --port-ingress 0`` (its own protocol
limits: 600 requests a minute per bearer, 64 sessions) around a document of 64
sections, pinned to core 0 with ``taskset`` when there is one; this script is the
agents and the host, on core 1. Each agent is its own session (its own invitation)
with its own section, and runs on its own schedule (agent k starts k/N of a second
into the phase) one write cycle a second, each request over its keep-alive HTTP/1.1
connection (`loadgen.Http`):

    GET /workspace/read?region=R -> POST /workspace/checkout -> POST /workspace/propose
    -> the host approves (POST /owner/api/workspace/proposal/review with the revision it
       saw, through the owner API as the page does: a login credential in
       X-Commonroom-Owner, one keep-alive connection per agent)
    -> POST /workspace/commit -> POST /workspace/release

A cycle that ends late starts the next one at once (none is skipped). Every agent
runs one cycle before the phases (warm-up, not timed). Then two phases in the same
room: SECONDS with agent 1 alone, SECONDS with all AGENTS. Every request is timed
from its bytes sent to its whole answer in.

* ``agents_p99_ratio_32``: p99 of every request with all agents ÷ the same with one
  (target ≤ 2.0);
* ``agents_max_ratio_32``: the maximum with all agents ÷ the maximum with one
  (target ≤ 2.0);
* each phase's p50 / p99 / max, per operation too (the slowest operation shows), its
  cycles, the room's CPU seconds, and ``other_processes_cores``: the CPU the rest of the
  machine used meanwhile, in cores (/proc/stat less the room and this script): near 0 on a
  quiet machine; a figure taken with other work near 1 or above says more about that work;
* ``--profile FILE``: ``py-spy record --format raw`` on the room during the second
  phase (``.venv/bin/pip install py-spy``), and its top frames.

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import loadgen
from bench_commit_http import summarize

ROOM_CPU = 0
CLIENT_CPU = 1
OWNER_HEADER = "X-Commonroom-Owner"
OPERATIONS = ("read", "checkout", "propose", "approve", "commit", "release")


def _show(label: str, value: Any) -> None:
    print(f"{label:30} {json.dumps(value)}", flush=True)


def make_document(sections: int) -> str:
    body = "".join(
        f"## Section {k}\n\nAgent {k} keeps this section. It starts as one line.\n\n"
        for k in range(1, sections + 1))
    return f"# Agents at work\n\nEach section below belongs to one agent.\n\n{body}"


def start_room(doc: Path, pinned: bool) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    ce = str(Path(loadgen.PYTHON).parent / "ce")
    command = [ce, "serve", str(doc), "--json", "--port-owner", "0", "--port-ingress", "0"]
    if pinned and shutil.which("taskset"):
        command = ["taskset", "-c", str(ROOM_CPU), *command]
    # Its credentials and discovery record in the temporary folder, not the user's.
    env = {**os.environ, "XDG_RUNTIME_DIR": str(doc.parent), "XDG_CONFIG_HOME": str(doc.parent)}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True, env=env, cwd=doc.parent)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("{"):
        proc.kill()
        proc.wait()
        raise RuntimeError(f"ce serve printed {line!r}")
    ready: dict[str, Any] = json.loads(line)
    return proc, ready


class Owner:
    """The host as its page is: the owner listener, a login credential on every call."""

    def __init__(self, port: int, credential: str | None) -> None:
        self.http = loadgen.Http(port)
        self.host = f"127.0.0.1:{port}"  # the owner listener answers its own origin only
        self.credential = credential

    @classmethod
    def login(cls, port: int, human_url: str) -> Owner:
        """Spend the one-time link `ce serve` printed, as the page does."""
        owner = cls(port, None)
        token = human_url.split("#token=", 1)[1]
        owner.credential = str(owner.call("POST", "/owner/login", {"token": token})["credential"])
        return owner

    def call(self, method: str, path: str, params: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(params).encode()
        request = loadgen.build_request(method, path, body=body, host=self.host)
        if self.credential is not None:
            head, _, rest = request.partition(b"\r\n\r\n")
            request = (head + f"\r\n{OWNER_HEADER}: {self.credential}".encode()
                       + b"\r\n\r\n" + rest)
        status, answer = self.http.raw(request)
        if status != 200:
            raise RuntimeError(f"owner {path} -> {status}: {answer[:300]!r}")
        result: dict[str, Any] = json.loads(answer)
        return result


class Agent:
    """One agent session on its own section, with its own connections."""

    def __init__(self, index: int, port: int, owner_port: int, credential: str | None,
                 bearer: str) -> None:
        self.index = index
        self.region = f"Agents at work/Section {index}"
        self.bearer = bearer
        self.http = loadgen.Http(port)
        self.owner = Owner(owner_port, credential)
        self.n = 0  # cycles ever run (the text of each edit is new)
        self.cycles = 0  # cycles of the current phase
        self.timings: list[tuple[str, float]] = []
        self.errors: list[str] = []

    def _timed(self, name: str, call: Any) -> dict[str, Any]:
        started = time.perf_counter()
        answer: dict[str, Any] = call()
        self.timings.append((name, time.perf_counter() - started))
        return answer

    def cycle(self) -> None:
        """read -> checkout -> propose -> (host) approve -> commit -> release."""
        self.n += 1
        self.cycles += 1
        http, bearer, region = self.http, self.bearer, self.region
        read = self._timed("read", lambda: http.call(
            "GET", f"/workspace/read?{loadgen.region_query(region)}", bearer=bearer))
        lease = self._timed("checkout", lambda: http.call(
            "POST", "/workspace/checkout", {"region": region}, bearer=bearer))
        title = region.rsplit("/", 1)[-1]
        proposal = self._timed("propose", lambda: http.call("POST", "/workspace/propose", {
            "region": region, "base_version": read["version"], "summary": f"cycle {self.n}",
            "content": f"## {title}\n\nAgent {self.index}, cycle {self.n}, wrote this line.\n\n",
        }, bearer=bearer))
        self._timed("approve", lambda: self.owner.call("POST", "/owner/api/workspace/proposal/review", {
            "proposal_id": proposal["proposal_id"], "revision": proposal["revision"],
            "decision": "approve"}))
        self._timed("commit", lambda: http.call(
            "POST", "/workspace/commit", {"proposal_id": proposal["proposal_id"]}, bearer=bearer))
        self._timed("release", lambda: http.call(
            "POST", "/workspace/release", {"lease_id": lease["lease_id"]}, bearer=bearer))

    def run(self, start_at: float, seconds: float) -> None:
        """One cycle a second from `start_at` (perf_counter) for `seconds`."""
        due = start_at
        stop_at = start_at + seconds
        try:
            while due < stop_at:
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                self.cycle()
                due += 1.0
        except Exception as error:  # the phase reports it
            self.errors.append(f"agent {self.index}: {error}")

    def close(self) -> None:
        self.http.close()
        self.owner.http.close()


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def _ms(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"requests": 0}
    return {"p50": round(_percentile(values, 0.5) * 1000, 2),
            "p99": round(_percentile(values, 0.99) * 1000, 2),
            "max": round(max(values) * 1000, 2), "requests": len(values)}


def run_phase(agents: list[Agent], seconds: float, room_pid: int) -> dict[str, Any]:
    for agent in agents:
        agent.timings.clear()
        agent.cycles = 0
    cpu_before = loadgen.cpu_seconds(room_pid)
    busy_before, own_before = loadgen.machine_busy_seconds(), loadgen.cpu_seconds(os.getpid())
    started = time.perf_counter()
    start_at = started + 0.2
    count = len(agents)
    threads = [threading.Thread(target=agent.run, args=(start_at + k / count, seconds))
               for k, agent in enumerate(agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu_after = loadgen.cpu_seconds(room_pid)
    busy_after, own_after = loadgen.machine_busy_seconds(), loadgen.cpu_seconds(os.getpid())
    elapsed = time.perf_counter() - started
    others = None
    if (busy_before is not None and busy_after is not None and own_before is not None
            and own_after is not None and cpu_before is not None and cpu_after is not None):
        # What the rest of the machine took meanwhile, in cores: on a quiet machine ~0; the
        # room is pinned to one of two cores, so anything near 1 is a core's worth taken from it.
        spent = (busy_after - busy_before) - (own_after - own_before) - (cpu_after - cpu_before)
        others = round(spent / elapsed, 2)
    every: list[float] = []
    by_operation: dict[str, list[float]] = defaultdict(list)
    for agent in agents:
        for name, elapsed in agent.timings:
            every.append(elapsed)
            by_operation[name].append(elapsed)
    errors = [error for agent in agents for error in agent.errors]
    return {
        "agents": count,
        "all": _ms(every),
        "by_operation": {name: _ms(by_operation[name]) for name in OPERATIONS},
        "cycles": sum(agent.cycles for agent in agents),
        "room_cpu_s": (round(cpu_after - cpu_before, 2)
                       if cpu_before is not None and cpu_after is not None else None),
        "other_processes_cores": others,
        "errors": errors[:5],
        "error_count": len(errors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--sections", type=int, default=64)
    parser.add_argument("--profile", type=Path, help="py-spy raw output for the many-agent phase")
    args = parser.parse_args()
    if not 1 <= args.agents <= min(args.sections, 64):
        parser.error("--agents must be 1..min(--sections, 64): one section and session each")
    started = time.monotonic()
    pinned = loadgen.pinning_available()
    if pinned:
        loadgen.pin(CLIENT_CPU)
    pinning = (f"room core {ROOM_CPU} (taskset), agents and host core {CLIENT_CPU}" if pinned
               else "not pinned")
    _show("pinning", pinning)
    with tempfile.TemporaryDirectory(prefix="commonroom-agents-") as tmp:
        doc = Path(tmp) / "agents.md"
        doc.write_text(make_document(args.sections))
        room, ready = start_room(doc, pinned)
        profiler: subprocess.Popen[bytes] | None = None
        agents: list[Agent] = []
        try:
            port, owner_port = int(ready["ingress_port"]), int(ready["owner_port"])
            inviter = Owner.login(owner_port, str(ready["human_url"]))
            credential = inviter.credential
            joiner = loadgen.Http(port)
            for k in range(1, args.agents + 1):
                invitation = inviter.call("POST", "/owner/api/workspace/invite", {})["invitation"]
                session = joiner.call("POST", "/session/join",
                                      {"invite": invitation, "name": f"agent-{k}"})["session_id"]
                agents.append(Agent(k, port, owner_port, credential, str(session)))
            joiner.close()
            inviter.http.close()
            for agent in agents:
                agent.cycle()  # warm-up: every connection open, every path taken once
            one = run_phase(agents[:1], args.seconds, room.pid)
            _show("1 agent", one)
            if args.profile is not None:
                profiler = subprocess.Popen(
                    [str(Path(loadgen.PYTHON).parent / "py-spy"), "record", "--pid",
                     str(room.pid), "--format", "raw", "--rate", "250", "--output",
                     str(args.profile), "--nonblocking", "--threads"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.0)
            many = run_phase(agents, args.seconds, room.pid)
            _show(f"{args.agents} agents", many)
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(30)
        finally:
            for agent in agents:
                agent.close()
            if profiler is not None and profiler.poll() is None:
                profiler.kill()
                profiler.wait()
            room.send_signal(signal.SIGINT)
            try:
                room.wait(30)
            except subprocess.TimeoutExpired:
                room.kill()
                room.wait()
    if args.profile is not None and args.profile.exists():
        for name, share in summarize(args.profile, top=40):
            print(f"  {share:5.1f}%  {name}")
    p99_ratio = many["all"]["p99"] / one["all"]["p99"]
    max_ratio = many["all"]["max"] / one["all"]["max"]
    slowest = max(OPERATIONS, key=lambda name: many["by_operation"][name].get("p99", 0))
    _show("agents_p99_ratio_32", round(p99_ratio, 2))
    _show("agents_max_ratio_32", round(max_ratio, 2))
    _show("slowest operation (p99)", {slowest: many["by_operation"][slowest]})
    print(json.dumps({
        "agents_p99_ratio_32": round(p99_ratio, 3),
        "agents_max_ratio_32": round(max_ratio, 3),
        "one": one, "many": many,
        "slowest_operation": slowest,
        "pinning": pinning,
        "load_average": round(os.getloadavg()[0], 1),
        "total_s": round(time.monotonic() - started, 1),
    }), flush=True)


if __name__ == "__main__":
    main()
