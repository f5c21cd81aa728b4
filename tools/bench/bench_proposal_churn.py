"""Sidecar growth under the proposal-churn attack (issue 24, item 7).

Usage: ``python tools/bench/bench_proposal_churn.py [--cycles 40] [--kib 250]``  (about 10 s)

One agent with a default invitation runs CYCLES times "propose KIB KiB of text
on one region, then withdraw it" against a real `ce serve` (a temporary folder,
deleted at the end), over HTTP on loopback, as fast as it can. Figures: the
sidecar's growth (the database, its `-wal` and `-shm` together, and the
database alone) from just after the join to the end, the growth per cycle, the
wall time, and how many of the attacker's proposals still hold their text
(rows kept / texts kept, read from the sidecar after the room stopped).
TARGET (issue 24): the growth of the three files stays under 5 MB.

The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "idea.md"


def _ce() -> str:
    beside = Path(sys.executable).parent / "ce"
    return str(beside) if beside.exists() else "ce"


def _call(port: int, method: str, path: str, bearer: str | None = None, body: Any = None) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Host": "commonroom", "Content-Type": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        answer = json.loads(response.read())
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"{method} {path}: {response.status} {answer}")
    return answer


def _size(sidecar: Path) -> tuple[int, int]:
    """(database + -wal + -shm, database alone) in bytes."""
    files = [Path(f"{sidecar}{suffix}") for suffix in ("", "-wal", "-shm")]
    return sum(f.stat().st_size for f in files if f.exists()), sidecar.stat().st_size


def run(cycles: int, kib: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="churn-"))
    doc = folder / "idea.md"
    shutil.copyfile(SAMPLE, doc)
    sidecar = folder / "idea.md.commonroom.db"
    env = {**os.environ, "XDG_RUNTIME_DIR": str(folder), "XDG_CONFIG_HOME": str(folder)}
    room = subprocess.Popen([_ce(), "serve", str(doc), "--json", "--port-owner", "0",
                             "--port-ingress", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True, env=env, cwd=folder)
    try:
        assert room.stdout is not None
        ready = json.loads(room.stdout.readline())
        port = int(ready["ingress_port"])
        joined = _call(port, "POST", "/session/join", None,
                       {"invite": ready["invitation"], "name": "churner"})
        bearer = joined["session_id"]
        read = _call(port, "GET", "/workspace/read?region=Risks", bearer)
        filler = "x" * (kib * 1024 - len(read["content"]) - 16)
        content = read["content"].rstrip("\n") + "\n\n" + filler + "\n\n"
        before_all, before_db = _size(sidecar)
        started = time.perf_counter()
        for n in range(cycles):
            proposal = _call(port, "POST", "/workspace/propose", bearer, {
                "region": "Risks", "base_version": read["version"], "summary": f"churn {n}",
                "content": content})
            _call(port, "POST", "/workspace/proposal/withdraw", bearer,
                  {"proposal_id": proposal["proposal_id"]})
        seconds = time.perf_counter() - started
        after_all, after_db = _size(sidecar)
    finally:
        room.send_signal(signal.SIGINT)
        try:
            room.wait(10)
        except subprocess.TimeoutExpired:
            room.kill()
            room.wait()
    with sqlite3.connect(sidecar) as conn:
        rows, texts = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE pruned_at IS NULL) FROM proposals"
            " WHERE summary LIKE 'churn %'").fetchone()
    shutil.rmtree(folder, ignore_errors=True)
    mib = 1024 * 1024
    return {
        "cycles": cycles, "proposal_kib": kib,
        "growth_mib": round((after_all - before_all) / mib, 2),
        "growth_db_mib": round((after_db - before_db) / mib, 2),
        "growth_per_cycle_kib": round((after_all - before_all) / 1024 / cycles, 1),
        "seconds": round(seconds, 2), "proposal_rows_kept": rows, "proposal_texts_kept": texts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--kib", type=int, default=250)
    args = parser.parse_args()
    figures = run(args.cycles, args.kib)
    figures["machine"] = f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"
    for key, value in figures.items():
        print(f"{key}: {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
