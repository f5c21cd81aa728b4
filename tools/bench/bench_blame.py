"""`blame_cost` (shared/spec/TARGETS.md): `GET /workspace/blame` of one 2 KB region after
1,000 versions of a 1 MB document, divided by a plain read of that region.

Usage: ``python tools/bench/bench_blame.py [--versions 1000] [--rounds 300] [--cpu 0]``

1. Builds a 1 MB document of 500 sections of about 2 KB (tools/bench/bench_engine.py's
   generator) and its history in-process: `--versions` - 1 region commits
   (propose -> approve -> commit) of one changed line each, by two agents, every fifth
   amended by the host (edit before approve), every 50th a whole-document raw commit,
   so the line history has every kind of origin.
2. Starts a real room process on it (`loadgen.room_server`, rate limit off, pinned to
   `--cpu` when given) and, over one keep-alive connection from this process, times
   `--rounds` rounds of `GET /workspace/read?region=R` then `GET /workspace/blame?region=R`
   for a random section R (interleaved, so both see the same machine); the figure is the
   ratio of the medians, with the p90s and the in-process (engine only) medians for scale.

The last line is one JSON object of every figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tools.bench import loadgen  # noqa: E402
from tools.bench.bench_engine import agent_of, edit_one_line, make_document  # noqa: E402

from commonroom.engine import dispatch, sessions  # noqa: E402
from commonroom.engine.dispatch import open_engine  # noqa: E402

FIGURES: dict[str, Any] = {}


def report(key: str, value: Any, unit: str = "") -> None:
    FIGURES[key] = value
    shown = f"{value:.3f}" if isinstance(value, float) else str(value)
    print(f"  {key}: {shown}{(' ' + unit) if unit else ''}", flush=True)


def build_history(path: Path, versions: int, seed: int) -> list[str]:
    """The document's history; the region paths of its sections."""
    engine = open_engine(path)
    try:
        host = sessions.mint_host_session(engine)
        agents = [agent_of(engine, host), agent_of(engine, host)]
        rng = random.Random(seed)
        regions = [p for p in engine.current().outline.paths() if "/Section " in p]
        t0 = time.perf_counter()
        while engine.current_version < versions:
            n = engine.current_version
            if n % 50 == 0:
                text = engine.current().text.replace("# Bench document", f"# Bench document {n}", 1)
                text = text.replace(f"# Bench document {n - 50}", "# Bench document", 1)
                _ok(dispatch.execute(engine, "workspace.commit", host, {
                    "base_version": n, "summary": f"raw {n}", "content": text}))
                continue
            region = rng.choice(regions)
            outline = engine.current().outline
            content = edit_one_line(rng, outline.region_text(outline.resolve(region)), n)
            agent = agents[n % 2]
            proposal = _ok(dispatch.execute(engine, "workspace.propose", agent, {
                "region": region, "base_version": n, "summary": f"edit {n}", "content": content}))
            review: dict[str, Any] = {"proposal_id": proposal.proposal_id, "revision": proposal.revision,
                                      "decision": "approve"}
            if n % 5 == 0:
                review["content"] = edit_one_line(rng, content, n + 100_000)
            _ok(dispatch.execute(engine, "workspace.review", host, review))
            _ok(dispatch.execute(engine, "workspace.commit", agent,
                                 {"proposal_id": proposal.proposal_id}))
            if engine.current_version % 200 == 0:
                print(f"    {engine.current_version} versions", flush=True)
        report("history_s", time.perf_counter() - t0, "s")
        report("versions", engine.current_version)
        rows, size = engine.conn.execute(
            "SELECT count(*), sum(length(origins)) FROM blame_sections").fetchone()
        report("blame_rows", rows)
        report("blame_row_bytes", size)
        # the engine alone, for scale
        read_ns: list[int] = []
        blame_ns: list[int] = []
        for _ in range(200):
            region = rng.choice(regions)
            t0n = time.perf_counter_ns()
            _ok(dispatch.execute(engine, "workspace.read", host, {"region": region}))
            t1n = time.perf_counter_ns()
            _ok(dispatch.execute(engine, "workspace.blame", host, {"region": region}))
            blame_ns.append(time.perf_counter_ns() - t1n)
            read_ns.append(t1n - t0n)
        report("engine_read_us", statistics.median(read_ns) / 1000, "us (median, in-process)")
        report("engine_blame_us", statistics.median(blame_ns) / 1000, "us (median, in-process)")
        return regions
    finally:
        engine.close()


def _ok(outcome: Any) -> Any:
    if outcome.error is not None:
        raise RuntimeError(str(outcome.error))
    return outcome.result


def timed_get(conn: http.client.HTTPConnection, path: str, bearer: str) -> tuple[int, bytes]:
    t0 = time.perf_counter_ns()
    conn.request("GET", path, headers={"Host": "commonroom", "Authorization": f"Bearer {bearer}"})
    response = conn.getresponse()
    body = response.read()
    elapsed = time.perf_counter_ns() - t0
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
    return elapsed, body


def over_http(path: Path, regions: list[str], rounds: int, cpu: int | None, seed: int) -> None:
    rng = random.Random(seed + 1)
    with loadgen.room_server(path, cpu) as room:
        conn = http.client.HTTPConnection("127.0.0.1", room.port, timeout=30)
        try:
            read_ns: list[int] = []
            blame_ns: list[int] = []
            sizes: list[int] = []
            for n in range(rounds + 20):
                query = urllib.parse.quote(rng.choice(regions))
                read_t, body = timed_get(conn, f"/workspace/read?region={query}", room.host_session)
                blame_t, _ = timed_get(conn, f"/workspace/blame?region={query}", room.host_session)
                if n >= 20:  # after warm-up
                    read_ns.append(read_t)
                    blame_ns.append(blame_t)
                    sizes.append(len(json.loads(body)["content"].encode()))
        finally:
            conn.close()
    read_med, blame_med = statistics.median(read_ns), statistics.median(blame_ns)
    report("region_bytes_median", int(statistics.median(sizes)))
    report("read_ms_median", read_med / 1e6, "ms")
    report("blame_ms_median", blame_med / 1e6, "ms")
    report("read_ms_p90", statistics.quantiles(read_ns, n=10)[-1] / 1e6, "ms")
    report("blame_ms_p90", statistics.quantiles(blame_ns, n=10)[-1] / 1e6, "ms")
    report("blame_cost", blame_med / read_med, "(target <= 5)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--cpu", type=int, default=None, help="pin the room to this core")
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    print(f"blame_cost: {args.versions} versions of a 1 MB document, load {os.getloadavg()}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-blame-") as folder:
        pieces, _ = make_document(5, 100, 2000, seed=args.seed)
        text = "".join(pieces)
        path = Path(folder) / "blame.md"
        path.write_text(text)
        report("doc_bytes", len(text.encode()))
        print("[1] history", flush=True)
        regions = build_history(path, args.versions, args.seed)
        print("[2] over HTTP, a room process", flush=True)
        over_http(path, regions, args.rounds, args.cpu, args.seed)
    print(json.dumps(FIGURES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
