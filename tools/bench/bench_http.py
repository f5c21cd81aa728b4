"""Request figures of TARGETS.md "Requests": the room's routes against a bare quart-trio app.

Usage: ``.venv/bin/python tools/bench/bench_http.py [--seconds 10] [--warmup 2]``

In one run, each server in its own process and the load generator
(`loadgen.run_load`, raw sockets, one request at a time per connection) in
another:

* bare: a stock ``QuartTrio`` app answering ``{"ok": true}``, served by
  `commonroom.http.serving.serve` with ``ServeConfig(port=0)`` (the room's
  hypercorn config: the baseline of every ratio) and, for information, by
  plain ``hypercorn.trio.serve``;
* the room (`commonroom.service.serve_room`, requests_per_minute = 10**9 so
  the 600/min bearer limit does not cap the figures): ``GET /workspace/status``
  and ``GET /workspace/read?region=Bench/Payload`` (a ~2 KB region), with an
  agent bearer and ``Host: commonroom``;

each over keep-alive (16 connections) and with a new TCP connection per
request (``Connection: close``); then checkout -> propose -> (host) approve ->
commit -> release cycles of one agent over keep-alive. The servers run on
core 0 and the load on core 1 when pinning works. The bare app and the room
run side by side and their measurements are interleaved for ``--rounds``
rounds (each figure: the best round), so a burst of other work on a shared
machine spoils one window rather than one whole figure. Figures are printed
as they come; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import loadgen

ROOM_CPU = 0
LOAD_CPU = 1
PAYLOAD_REGION = "Bench/Payload"
SCRATCH_REGION = "Bench/Scratch"


def bench_document() -> str:
    """A small document whose `Bench/Payload` region is about 2 KB."""
    payload = "".join(
        f"- Line {i:02d} of the payload: the quick brown fox jumps over the lazy dog.\n"
        for i in range(26)
    )
    return (
        "# Bench\n\nA document for the request benchmarks.\n\n"
        f"## Payload\n\n{payload}\n"
        "## Scratch\n\nCycle 0 wrote this line.\n\n"
        "## Notes\n\nNothing here.\n"
    )


def _show(label: str, result: dict[str, Any]) -> None:
    print(f"{label:26} {json.dumps(result)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2,
                        help="interleaved rounds of bare/status/read; each figure is the best")
    args = parser.parse_args()

    pinned = loadgen.pinning_available()
    room_cpu = ROOM_CPU if pinned else None
    load_cpu = LOAD_CPU if pinned else None
    pinning = (f"server core {ROOM_CPU}, load generator core {LOAD_CPU}" if pinned
               else "not pinned (os.sched_setaffinity unavailable or < 2 cores)")
    print(f"pinning: {pinning}", flush=True)
    print(f"room rate limit: requests_per_minute={loadgen.HUGE_RATE} (benchmark setting)",
          flush=True)
    started = time.monotonic()
    common = {"conns": args.conns, "seconds": args.seconds, "warmup": args.warmup,
              "cpu": load_cpu}
    figures: dict[str, dict[str, Any]] = {}

    with loadgen.bare_server("stock", room_cpu) as (child, port):
        for mode in ("keepalive", "close"):
            result = loadgen.measure_load(port, "/hello", bearer="bench", mode=mode,
                                          server_pid=child.pid, **common)
            figures[f"stock_hypercorn_{mode}"] = result
            _show(f"stock_hypercorn_{mode}", result)

    rounds: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="commonroom-bench-") as tmp:
        doc = Path(tmp) / "bench.md"
        doc.write_text(bench_document())
        with loadgen.bare_server("hardened", room_cpu) as (bare, bare_port), \
                loadgen.room_server(doc, room_cpu) as room:
            agent = room.join("bench")
            http = loadgen.Http(room.port)
            read_path = f"/workspace/read?{loadgen.region_query(PAYLOAD_REGION)}"
            status, body = http.raw(loadgen.build_request("GET", read_path, bearer=agent))
            http.close()
            if status != 200:
                raise RuntimeError(f"read answered {status}: {body[:200]!r}")
            print(f"read response body: {len(body)} bytes", flush=True)
            targets = (
                ("bare", bare_port, "/hello", bare.pid),
                ("status", room.port, "/workspace/status", room.pid),
                ("read", room.port, read_path, room.pid),
            )
            # Interleaved rounds, both servers up: a burst of other work on the
            # machine hits one short window, not a whole figure.
            for round_ in range(1, args.rounds + 1):
                for mode in ("keepalive", "close"):
                    for name, port, path, pid in targets:
                        result = loadgen.measure_load(port, path, bearer=agent, mode=mode,
                                                      server_pid=pid, **common)
                        key = f"{name}_{mode}"
                        rounds.setdefault(key, []).append(result["rps"])
                        if key not in figures or result["rps"] > figures[key]["rps"]:
                            figures[key] = result
                        _show(f"round {round_} {key}", result)
            cycle_args = ["cycle", "--port", str(room.port), "--agent", agent,
                          "--host-bearer", room.host_session, "--region", SCRATCH_REGION,
                          "--seconds", str(args.seconds), "--warmup", str(args.warmup),
                          *loadgen.cpu_args(load_cpu)]
            cycle = loadgen.run_child_json(cycle_args, timeout=args.seconds + args.warmup + 60)
            _show("write_cycle", cycle)

    def ratio(name: str, mode: str) -> float:
        value: float = figures[f"{name}_{mode}"]["rps"] / figures[f"bare_{mode}"]["rps"]
        return round(value, 3)

    def cpu_ratio(name: str, mode: str) -> float:
        value: float = (figures[f"bare_{mode}"]["server_cpu_us_per_req"]
                        / figures[f"{name}_{mode}"]["server_cpu_us_per_req"])
        return round(value, 3)

    summary: dict[str, Any] = {
        "status_ratio_keepalive": ratio("status", "keepalive"),
        "read_ratio_keepalive": ratio("read", "keepalive"),
        "status_ratio_close": ratio("status", "close"),
        "read_ratio_close": ratio("read", "close"),
        "write_cycle_per_s": cycle["cycles_per_s"],
        "bare_keepalive_rps": figures["bare_keepalive"]["rps"],
        "bare_close_rps": figures["bare_close"]["rps"],
        "stock_hypercorn_keepalive_rps": figures["stock_hypercorn_keepalive"]["rps"],
        "stock_hypercorn_close_rps": figures["stock_hypercorn_close"]["rps"],
        "status_keepalive_rps": figures["status_keepalive"]["rps"],
        "status_close_rps": figures["status_close"]["rps"],
        "read_keepalive_rps": figures["read_keepalive"]["rps"],
        "read_close_rps": figures["read_close"]["rps"],
        "write_cycle_step_mean_ms": cycle["step_mean_ms"],
        # The same ratios from server CPU per request (bare / room): what the
        # req/s ratios would be on an uncontended core.
        "cpu_ratios": {f"{name}_{mode}": cpu_ratio(name, mode)
                       for name in ("status", "read") for mode in ("keepalive", "close")},
        "server_cpu_us_per_req": {key: figures[key].get("server_cpu_us_per_req")
                                  for key in sorted(figures)},
        "rps_by_round": rounds,
        "rounds": args.rounds,
        "connections": args.conns,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "pinning": pinning,
        "requests_per_minute": loadgen.HUGE_RATE,
        "total_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
