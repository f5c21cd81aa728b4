"""Requests/second of ``GET /hello``: stock quart-trio + hypercorn vs commonroom's serve().

Usage: ``python tools/bench/bench_serving.py [--seconds 4] [--rounds 2]``

For each server (a: a stock `QuartTrio` app under plain ``hypercorn.trio.serve``;
b: the same app under `commonroom.http.serving.serve`) it starts the server in
a subprocess and a load generator in another, and measures two workloads:

* ``keepalive``: 16 connections, each sending requests back to back;
* ``newconn``: 16 concurrent clients, each opening a connection per request
  (``Connection: close``).

The generator is a raw-socket, ``selectors``-based loop (no wrk needed). It
reads each response up to its ``Content-Length`` and, in ``newconn``, closes
the socket itself, so the stock server (which never closes) is measured fairly.
Each rps figure is the best of ``--rounds`` runs; the server's CPU time per
request (from /proc, the least of the runs) is reported too, as it is steadier
than rps on a shared machine. The last line printed is JSON with the figures
and the hardened/stock ratios (rps: higher is better; cpu: lower is better).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from functools import partial
from typing import Any

REQUEST_KEEPALIVE = b"GET /hello HTTP/1.1\r\nHost: bench\r\n\r\n"
REQUEST_CLOSE = b"GET /hello HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"


# ---------------------------------------------------------------------------- server side


def _make_app() -> Any:
    from quart_trio import QuartTrio

    app = QuartTrio("bench")

    @app.get("/hello")
    async def hello() -> dict[str, bool]:
        return {"ok": True}

    return app


def run_server(kind: str) -> None:
    import trio

    async def main() -> None:
        from commonroom.http.serving import ServeConfig, serve, wait_for_stop_signal

        app = _make_app()
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            await nursery.start(wait_for_stop_signal, stop)
            if kind == "stock":
                from hypercorn.config import Config
                from hypercorn.trio import serve as hypercorn_serve

                config = Config()
                config.bind = ["127.0.0.1:0"]
                config.accesslog = None
                config.errorlog = None
                config.graceful_timeout = 0.5
                binds = await nursery.start(partial(hypercorn_serve, app, config, shutdown_trigger=stop.wait))
                port = int(binds[0].rsplit(":", 1)[1])
            else:
                port = await nursery.start(
                    partial(serve, app, ServeConfig(graceful_timeout=0.5), shutdown_trigger=stop.wait)
                )
            print(port, flush=True)

    trio.run(main)


# ---------------------------------------------------------------------------- load side


class _Client:
    __slots__ = ("buf", "sock", "started")

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.buf = bytearray()
        self.started = 0.0


def _response_complete(buf: bytearray) -> bool:
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return False
    length = 0
    for line in bytes(buf[:end]).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if not buf.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"unexpected response {bytes(buf[:80])!r}")
    return len(buf) >= end + 4 + length


def run_load(port: int, mode: str, conns: int, seconds: float, warmup: float) -> None:
    keepalive = mode == "keepalive"
    request = REQUEST_KEEPALIVE if keepalive else REQUEST_CLOSE
    selector = selectors.DefaultSelector()
    errors = 0

    def connect(client: _Client) -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        client.sock = sock
        selector.register(sock, selectors.EVENT_READ, client)

    def send(client: _Client) -> None:
        assert client.sock is not None
        client.buf.clear()
        client.started = time.perf_counter()
        client.sock.sendall(request)

    def close(client: _Client) -> None:
        assert client.sock is not None
        selector.unregister(client.sock)
        client.sock.close()
        client.sock = None

    clients = [_Client() for _ in range(conns)]
    for client in clients:
        connect(client)
        send(client)

    count = 0
    total = 0
    latencies: list[float] = []
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    while True:
        now = time.perf_counter()
        if now >= stop_at:
            break
        for key, _ in selector.select(timeout=0.5):
            client = key.data
            assert client.sock is not None
            try:
                data = client.sock.recv(65536)
            except (ConnectionResetError, BlockingIOError):
                data = b""
            if not data:
                errors += 1
                close(client)
                connect(client)
                send(client)
                continue
            client.buf += data
            if not _response_complete(client.buf):
                continue
            done = time.perf_counter()
            total += 1
            if done >= measure_from:
                count += 1
                latencies.append(done - client.started)
            if not keepalive:
                close(client)
                connect(client)
            send(client)
    elapsed = time.perf_counter() - measure_from
    for client in clients:
        if client.sock is not None:
            close(client)
    latencies.sort()
    print(
        json.dumps(
            {
                "requests": count,
                "total_requests": total,
                "seconds": round(elapsed, 3),
                "rps": round(count / elapsed, 1),
                "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2) if latencies else None,
                "p99_ms": round(latencies[len(latencies) * 99 // 100] * 1000, 2) if latencies else None,
                "errors": errors,
            }
        ),
        flush=True,
    )


# ---------------------------------------------------------------------------- orchestration


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(kind: str, modes: list[str], conns: int, seconds: float) -> dict[str, Any]:
    me = os.path.abspath(__file__)
    server = subprocess.Popen([sys.executable, me, "--serve", kind], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        results: dict[str, Any] = {}
        for mode in modes:
            cpu_before = _cpu_seconds(server.pid)
            load = subprocess.run(
                [
                    sys.executable,
                    me,
                    "--load",
                    str(port),
                    "--mode",
                    mode,
                    "--conns",
                    str(conns),
                    "--seconds",
                    str(seconds),
                ],
                capture_output=True,
                text=True,
                timeout=seconds + 30,
                check=True,
            )
            result = json.loads(load.stdout.strip().splitlines()[-1])
            cpu_after = _cpu_seconds(server.pid)
            if cpu_before is not None and cpu_after is not None and result["total_requests"]:
                per_request = (cpu_after - cpu_before) / result["total_requests"]
                result["server_cpu_us_per_req"] = round(per_request * 1e6, 1)
            results[mode] = result
        return results
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--serve", choices=["stock", "hardened"], help=argparse.SUPPRESS)
    parser.add_argument("--load", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="keepalive", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=float, default=0.5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        run_server(args.serve)
        return
    if args.load:
        run_load(args.load, args.mode, args.conns, args.seconds, args.warmup)
        return

    modes = ["keepalive", "newconn"]
    best_rps: dict[str, float] = {}
    least_cpu: dict[str, float] = {}
    for round_ in range(args.rounds):
        for kind in ("stock", "hardened"):
            results = _measure(kind, modes, args.conns, args.seconds)
            for mode, result in results.items():
                key = f"{kind}_{mode}"
                print(f"round {round_ + 1} {key:20} {json.dumps(result)}", flush=True)
                best_rps[key] = max(best_rps.get(key, 0.0), result["rps"])
                cpu = result.get("server_cpu_us_per_req")
                if cpu is not None:
                    least_cpu[key] = min(least_cpu.get(key, math.inf), cpu)
    # rps is the headline; server CPU per request is steadier on a shared machine.
    summary: dict[str, Any] = {f"rps_{key}": best_rps[key] for key in sorted(best_rps)}
    summary.update({f"cpu_us_{key}": least_cpu[key] for key in sorted(least_cpu)})
    for mode in modes:
        summary[f"ratio_rps_{mode}"] = round(best_rps[f"hardened_{mode}"] / best_rps[f"stock_{mode}"], 3)
        if f"hardened_{mode}" in least_cpu and f"stock_{mode}" in least_cpu:
            summary[f"ratio_cpu_{mode}"] = round(least_cpu[f"hardened_{mode}"] / least_cpu[f"stock_{mode}"], 3)
    summary["connections"] = args.conns
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
