"""Speed of the scripted path (issue 12): a one-shot `ce read`, and the Python client's write cycle.

Usage: ``.venv/bin/python tools/bench/bench_cli.py [--runs 20] [--seconds 10] [--warmup 2]``

In one run, against one room in its own process (`loadgen.room_server`, rate
limit lifted so it is not what is measured):

* ``ce_read_ratio``: median wall time of ``ce read Bench/Payload`` (a whole
  process: start, profile, one request, print) ÷ median of
  ``python -c "import json"`` with the same interpreter, the two interleaved
  ``--runs`` times each, both with bytecode caching on (a temporary
  ``PYTHONPYCACHEPREFIX``; ``PYTHONDONTWRITEBYTECODE`` lifted). Target ≤ 4.
* ``client_cycle_ratio``: checkout → propose → (host) approve → commit →
  release cycles a second with `commonroom.Client` (a new connection per
  request, as the byte client does) ÷ the same cycle over raw keep-alive
  HTTP (`loadgen.run_cycles`, the figure of ``bench_http.py``), each in its
  own process, alternating for ``--rounds`` rounds (best of each). Target ≥ 0.8.

The room runs on core 0 and the measured processes on core 1 when pinning
works. Figures are printed as they come; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import loadgen
from bench_http import PAYLOAD_REGION, SCRATCH_REGION, bench_document

ROOM_CPU = 0
LOAD_CPU = 1


def client_cycles(invitation: str, agent: str, host: str, region: str, *, seconds: float,
                  warmup: float) -> dict[str, Any]:
    """`loadgen.run_cycles`, step for step, through `commonroom.Client`."""
    import commonroom

    bot = commonroom.Client(invitation, session=agent)
    owner = commonroom.Client(invitation, session=host)
    version = bot.status().version
    title = region.rsplit("/", 1)[-1]
    cycles = n = 0
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    while True:
        t0 = time.perf_counter()
        if t0 >= stop_at:
            break
        n += 1
        with bot.checkout(region):
            proposal = bot.propose(region, f"## {title}\n\nCycle {n} wrote this line.\n\n",
                                   base_version=version, summary=f"cycle {n}")
            owner.review(proposal.proposal_id, "approve", revision=proposal.revision)
            version = bot.commit(proposal.proposal_id).version
        if t0 >= measure_from:
            cycles += 1
    elapsed = time.perf_counter() - measure_from
    return {"cycles_per_s": round(cycles / elapsed, 1), "cycles": cycles,
            "seconds": round(elapsed, 2), "final_version": version}


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} exited {result.returncode}: {result.stderr[-300:]!r}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--client-cycle", nargs=4, metavar=("INVITATION", "AGENT", "HOST", "R"),
                        help=argparse.SUPPRESS)  # the child process that runs client cycles
    parser.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    loadgen.pin(args.cpu)
    if args.client_cycle:
        invitation, agent, host, region = args.client_cycle
        print(json.dumps(client_cycles(invitation, agent, host, region, seconds=args.seconds,
                                       warmup=args.warmup)), flush=True)
        return

    pinned = loadgen.pinning_available()
    room_cpu, load_cpu = (ROOM_CPU, LOAD_CPU) if pinned else (None, None)
    print(f"pinning: {'room core 0, measured processes core 1' if pinned else 'not pinned'}",
          flush=True)
    python = sys.executable
    ce = str(Path(python).parent / "ce")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="commonroom-bench-cli-") as tmp:
        doc = Path(tmp) / "bench.md"
        doc.write_text(bench_document())
        env = {**os.environ, "XDG_CONFIG_HOME": str(Path(tmp) / "config"),
               # Bytecode caching as on any normal install, in a folder of our own (some
               # environments set PYTHONDONTWRITEBYTECODE, which recompiles every module
               # of every process: a cost a user never pays).
               "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        for name in ("CE_PROFILE", "CE_INVITATION", "CE_SESSION", "PYTHONDONTWRITEBYTECODE"):
            env.pop(name, None)
        taskset = ["taskset", "-c", str(load_cpu)] if pinned else []
        with loadgen.room_server(doc, room_cpu) as room:
            http = loadgen.Http(room.port)
            invite = http.call("POST", "/workspace/invite", {}, bearer=room.host_session)
            http.close()
            joined = subprocess.run([ce, "join", invite["invitation"], "--name", "bench",
                                     "--no-hold", "--json"], env=env, capture_output=True,
                                    text=True, check=True)
            del joined
            read_cmd = [*taskset, ce, "read", PAYLOAD_REGION]
            json_cmd = [*taskset, python, "-c", "import json"]
            for _ in range(3):  # warm the page cache and the .pyc files
                timed(read_cmd, env)
                timed(json_cmd, env)
            ce_times: list[float] = []
            json_times: list[float] = []
            for _ in range(args.runs):
                json_times.append(timed(json_cmd, env))
                ce_times.append(timed(read_cmd, env))
            figures["ce_read_ms"] = median_ms(ce_times)
            figures["python_import_json_ms"] = median_ms(json_times)
            figures["ce_read_ratio"] = round(statistics.median(ce_times)
                                             / statistics.median(json_times), 2)
            print(f"ce read (median of {args.runs}): {figures['ce_read_ms']} ms;"
                  f" python -c 'import json': {figures['python_import_json_ms']} ms;"
                  f" ratio {figures['ce_read_ratio']}", flush=True)

            raw_best: dict[str, Any] | None = None
            client_best: dict[str, Any] | None = None
            timeout = args.seconds + args.warmup + 60
            for round_ in range(1, args.rounds + 1):
                agent = room.join(f"raw-{round_}")
                raw = loadgen.run_child_json(
                    ["cycle", "--port", str(room.port), "--agent", agent, "--host-bearer",
                     room.host_session, "--region", SCRATCH_REGION, "--seconds",
                     str(args.seconds), "--warmup", str(args.warmup),
                     *loadgen.cpu_args(load_cpu)], timeout=timeout)
                print(f"round {round_} raw_http_cycle {json.dumps(raw)}", flush=True)
                agent = room.join(f"client-{round_}")
                child = subprocess.run(
                    [python, __file__, "--client-cycle", room.invitation, agent,
                     room.host_session, SCRATCH_REGION, "--seconds", str(args.seconds),
                     "--warmup", str(args.warmup), *loadgen.cpu_args(load_cpu)],
                    capture_output=True, text=True, timeout=timeout, check=True)
                client = json.loads(child.stdout.strip().splitlines()[-1])
                print(f"round {round_} client_cycle {json.dumps(client)}", flush=True)
                if raw_best is None or raw["cycles_per_s"] > raw_best["cycles_per_s"]:
                    raw_best = raw
                if client_best is None or client["cycles_per_s"] > client_best["cycles_per_s"]:
                    client_best = client
            assert raw_best is not None and client_best is not None
            figures["raw_http_cycle_per_s"] = raw_best["cycles_per_s"]
            figures["client_cycle_per_s"] = client_best["cycles_per_s"]
            figures["client_cycle_ratio"] = round(
                client_best["cycles_per_s"] / raw_best["cycles_per_s"], 3)
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
