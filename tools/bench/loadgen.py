"""Shared load generation for the commonroom benchmarks (`bench_http`, `bench_streams`).

The benchmarks import this module as ``loadgen`` (Python puts the running
script's folder, ``tools/bench``, first on ``sys.path``) and also run it as a
script for the processes they start, so the room, the load and the
subscribers never share a process:

* ``loadgen.py bare KIND``: a stock ``QuartTrio`` app answering
  ``{"ok": true}`` on ``GET /hello``, under `commonroom.http.serving.serve`
  with ``ServeConfig(port=0)`` (``KIND`` = ``hardened``: the room's hypercorn
  config) or plain ``hypercorn.trio.serve`` (``stock``).
* ``loadgen.py room FILE``: `commonroom.service.serve_room` around FILE with
  a huge rate limit (``--rpm``, default 10**9; the CLI has no flag for it).
* ``loadgen.py load``: the raw-socket HTTP/1.1 generator (`run_load`).
* ``loadgen.py cycle``: checkout -> propose -> approve -> commit -> release
  cycles (`run_cycles`).
* ``loadgen.py engine-cycle FILE``: the same cycles on the engine alone, in
  process, no HTTP (`run_engine_cycles`): what the room's own work costs.
* ``loadgen.py subscribe``: many SSE subscribers in one ``selectors`` loop
  (`run_subscribers`).

Every server prints one JSON line when it is ready; every load run prints its
result as one JSON line. ``--cpu N`` pins a process to core N when
``os.sched_setaffinity`` works (called before any thread starts, so the
room's store thread is pinned too).

The generator is pipeline-free: one request at a time per connection, each
response read up to its ``Content-Length``; any status but 200 is an error.
In ``close`` mode every request opens a new TCP connection and says
``Connection: close`` (what the byte client does); the generator closes its
end as soon as the response is complete.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from queue import Empty, Queue
from typing import IO, Any
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
HUGE_RATE = 10**9
"""requests_per_minute of benchmark rooms: the 600/min bearer limit would cap every figure."""
HOST = "commonroom"

# ---------------------------------------------------------------------------- process helpers


def pin(cpu: int | None) -> str:
    """Pin this process to one core; says what happened."""
    if cpu is None:
        return "not pinned"
    try:
        os.sched_setaffinity(0, {cpu})
    except (AttributeError, OSError, ValueError) as error:
        return f"not pinned ({error})"
    return f"core {cpu}"


def pinning_available() -> bool:
    """Two cores to pin to (room on 0, load on 1)?"""
    try:
        cores = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return False
    return {0, 1} <= cores


def cpu_args(cpu: int | None) -> list[str]:
    return [] if cpu is None else ["--cpu", str(cpu)]


def raise_nofile() -> int:
    """Raise the open-file soft limit to the hard limit; returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def rss_kb(pid: int) -> int:
    """VmRSS of a process in KiB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float | None:
    """CPU seconds every core of the machine spent busy since boot (Linux /proc/stat)."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait.
    values = [int(value) for value in fields[1:9]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


class LineReader:
    """Reads a child's stdout lines on a thread so the caller can wait with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: Queue[str | None] = Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def get(self, timeout: float) -> str | None:
        """The next line; None once the output ended; raises TimeoutError."""
        try:
            return self._lines.get(timeout=timeout)
        except Empty:
            raise TimeoutError(f"no output within {timeout:.1f} s") from None

    def get_json(self, timeout: float) -> dict[str, Any]:
        """The next line that is a JSON object (other lines are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.get(max(0.001, deadline - time.monotonic()))
            if line is None:
                raise RuntimeError("the process ended before printing a JSON line")
            if line.startswith("{"):
                result: dict[str, Any] = json.loads(line)
                return result


class Child:
    """A started process with a line reader on its stdout."""

    def __init__(self, args: Sequence[str], *, stdin: bool = False) -> None:
        self.proc = subprocess.Popen(
            list(args),
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        self.reader = LineReader(self.proc.stdout)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15.0) -> float:
        """Send `sig` and wait for the exit; the seconds it took (kills on timeout)."""
        if self.proc.poll() is not None:
            return 0.0
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return time.monotonic() - started

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def loadgen_command(*args: str) -> list[str]:
    return [PYTHON, str(HERE / "loadgen.py"), *args]


def run_child_json(args: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run a loadgen subcommand to completion; its last stdout line as JSON."""
    done = subprocess.run(
        loadgen_command(*args), capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"loadgen {args[0]} failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------------- servers


def _bare_app() -> Any:
    from quart_trio import QuartTrio

    app = QuartTrio("bench", static_folder=None)

    @app.get("/hello")
    async def hello() -> dict[str, bool]:
        return {"ok": True}

    return app


def run_bare_server(kind: str) -> None:
    import trio

    async def main() -> None:
        from commonroom.http.serving import ServeConfig, serve, wait_for_stop_signal

        app = _bare_app()
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
                binds = await nursery.start(
                    partial(hypercorn_serve, app, config, shutdown_trigger=stop.wait)
                )
                port = int(binds[0].rsplit(":", 1)[1])
            else:
                port = await nursery.start(
                    partial(serve, app, ServeConfig(port=0), shutdown_trigger=stop.wait)
                )
            print(json.dumps({"port": port, "pid": os.getpid()}), flush=True)

    trio.run(main)


def run_room_server(path: Path, rpm: int, heartbeat: float, mcp_legacy: bool = False,
                    max_sessions: int | None = None) -> None:
    import trio

    from commonroom.credentials import read_credentials
    from commonroom.service import Ready, ServeOptions, serve_room

    options = ServeOptions(
        path=path,
        owner_port=0,
        ingress_port=0,
        install_signal_handlers=True,
        requests_per_minute=rpm,
        anonymous_per_minute=rpm,
        heartbeat_seconds=heartbeat,
        # The stream benchmarks open 1,000 streams on one session; the cap itself is
        # what tools/hostile/connections.py measures. With `max_sessions` (a large room:
        # `ce serve --max-sessions N`) the room keeps the protocol's stream caps, and the
        # streams are spread over many sessions as dashboards would hold them.
        **({} if max_sessions is not None else {"streams_per_session": 10**6,
                                                 "streams_per_participant": 10**6}),
        **({} if max_sessions is None else {"max_sessions": max_sessions}),
        mcp_legacy=mcp_legacy,
    )

    def on_ready(ready: Ready) -> None:
        creds = read_credentials(path)  # written just before on_ready
        line = ready.ready_json()
        line["host_session"] = creds.host_session if creds else None
        line["pid"] = os.getpid()
        print(json.dumps(line), flush=True)

    trio.run(partial(serve_room, options, on_ready=on_ready))


@contextmanager
def bare_server(kind: str, cpu: int | None) -> Iterator[tuple[Child, int]]:
    """A bare hello app in its own process: (child, port)."""
    with Child(loadgen_command("bare", kind, *cpu_args(cpu))) as child:
        ready = child.reader.get_json(60)
        yield child, int(ready["port"])


@dataclass
class RoomProcess:
    child: Child
    port: int
    invitation: str
    host_session: str

    @property
    def pid(self) -> int:
        return self.child.pid

    def join(self, name: str) -> str:
        """A new agent session (a fresh invitation from the host each time)."""
        http = Http(self.port)
        try:
            invite = http.call("POST", "/workspace/invite", {}, bearer=self.host_session)
            joined = http.call("POST", "/session/join", {"invite": invite["invitation"],
                                                         "name": name})
        finally:
            http.close()
        session: str = joined["session_id"]
        return session


@contextmanager
def room_server(
    path: Path, cpu: int | None, *, heartbeat: float = 15.0, rpm: int = HUGE_RATE,
    mcp_legacy: bool = False, max_sessions: int | None = None,
) -> Iterator[RoomProcess]:
    """A room around `path` in its own process, rate limit `rpm` a minute (`mcp_legacy`:
    started as with `ce serve --mcp-legacy`; `max_sessions`: as with `--max-sessions N`,
    and the protocol's stream caps kept)."""
    cmd = loadgen_command(
        "room", str(path), "--rpm", str(rpm), "--heartbeat", str(heartbeat), *cpu_args(cpu),
        *(["--mcp-legacy"] if mcp_legacy else []),
        *([] if max_sessions is None else ["--max-sessions", str(max_sessions)]),
    )
    with Child(cmd) as child:
        ready = child.reader.get_json(60)
        yield RoomProcess(child, int(ready["ingress_port"]), ready["invitation"],
                          ready["host_session"])


# ---------------------------------------------------------------------------- HTTP/1.1 bytes


def build_request(
    method: str,
    path: str,
    *,
    bearer: str | None = None,
    body: bytes | None = None,
    close: bool = False,
    host: str = HOST,
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    if bearer is not None:
        lines.append(f"Authorization: Bearer {bearer}")
    if body is not None:
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def region_query(region: str) -> str:
    return "region=" + quote(region, safe="")


def _parse_head(head: bytes) -> tuple[int, int, bool]:
    """(status, content length, server closes) of a response head (without the blank line)."""
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    closes = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            closes = True
    return status, length, closes


class Http:
    """A blocking keep-alive HTTP/1.1 client for JSON calls (reconnects when closed)."""

    def __init__(self, port: int, *, timeout: float = 60.0) -> None:
        self.port = port
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.buf = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.buf = b""
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _recv(self, sock: socket.socket) -> None:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed mid-response")
        self.buf += data

    def raw(self, request: bytes) -> tuple[int, bytes]:
        """Send one request, read its response: (status, body)."""
        fresh = self.sock is None
        sock = self.sock or self._connect()
        try:
            sock.sendall(request)
            while b"\r\n\r\n" not in self.buf:
                self._recv(sock)
        except (ConnectionError, BrokenPipeError):
            if fresh:
                raise
            self.close()  # a keep-alive connection the server had closed: once more
            return self.raw(request)
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status, length, closes = _parse_head(head)
        while len(self.buf) < length:
            self._recv(sock)
        body, self.buf = self.buf[:length], self.buf[length:]
        if closes:
            self.close()
        return status, body

    def call(
        self, method: str, path: str, params: dict[str, Any] | None = None, *,
        bearer: str | None = None,
    ) -> dict[str, Any]:
        """A JSON call; raises on any status but 200."""
        body = None if params is None else json.dumps(params).encode()
        status, answer = self.raw(build_request(method, path, bearer=bearer, body=body))
        if status != 200:
            raise RuntimeError(f"{method} {path} -> {status}: {answer[:300]!r}")
        result: dict[str, Any] = json.loads(answer)
        return result


# ---------------------------------------------------------------------------- request load


class _Conn:
    __slots__ = ("buf", "expect", "request", "sock", "started")

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.request = b""
        self.buf = bytearray()
        self.expect = -1  # total response bytes once the head is in, else -1
        self.started = 0.0


def _percentile(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))
    return sorted_values[index]


def run_load(
    port: int, request: bytes | Sequence[bytes], *, close: bool, conns: int, seconds: float,
    warmup: float,
) -> dict[str, Any]:
    """`conns` connections, one request at a time each, for `warmup` + `seconds`.

    `request` is the bytes every connection sends, or one request per connection
    (a legacy MCP session per connection: one session's requests need distinct ids
    when they overlap, so each connection has its own session).
    """
    requests = [request] * conns if isinstance(request, bytes) else list(request)
    if len(requests) != conns:
        raise ValueError("one request per connection")
    selector = selectors.DefaultSelector()
    errors = 0
    non_ok = 0

    def connect(conn: _Conn) -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn.sock = sock
        selector.register(sock, selectors.EVENT_READ, conn)

    def send(conn: _Conn) -> None:
        assert conn.sock is not None
        conn.buf.clear()
        conn.expect = -1
        conn.started = time.perf_counter()
        conn.sock.sendall(conn.request)

    def drop(conn: _Conn) -> None:
        assert conn.sock is not None
        selector.unregister(conn.sock)
        conn.sock.close()
        conn.sock = None

    clients = [_Conn() for _ in range(conns)]
    for conn, its_request in zip(clients, requests, strict=True):
        conn.request = its_request
    for conn in clients:
        connect(conn)
        send(conn)

    count = 0
    total = 0
    latencies: list[float] = []
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    while time.perf_counter() < stop_at:
        for key, _ in selector.select(timeout=0.5):
            conn = key.data
            assert conn.sock is not None
            try:
                data = conn.sock.recv(262144)
            except (ConnectionResetError, BlockingIOError):
                data = b""
            if not data:
                errors += 1
                drop(conn)
                connect(conn)
                send(conn)
                continue
            buf = conn.buf
            buf += data
            if conn.expect < 0:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    continue
                status, length, _ = _parse_head(bytes(buf[:end]))
                if status != 200:
                    non_ok += 1
                conn.expect = end + 4 + length
            if len(buf) < conn.expect:
                continue
            done = time.perf_counter()
            total += 1
            if done >= measure_from:
                count += 1
                latencies.append(done - conn.started)
            if close:
                drop(conn)
                connect(conn)
            send(conn)
    elapsed = time.perf_counter() - measure_from
    for conn in clients:
        if conn.sock is not None:
            drop(conn)
    latencies.sort()
    p50 = _percentile(latencies, 0.5)
    p99 = _percentile(latencies, 0.99)
    if non_ok:
        raise RuntimeError(f"{non_ok} responses were not 200 (rate limited? wrong bearer?)")
    return {
        "rps": round(count / elapsed, 1),
        "requests": count,
        "total_requests": total,
        "seconds": round(elapsed, 2),
        "p50_ms": None if p50 is None else round(p50 * 1000, 2),
        "p99_ms": None if p99 is None else round(p99 * 1000, 2),
        "errors": errors,
    }


def measure_load(
    port: int, path: str, *, bearer: str | None, mode: str, conns: int, seconds: float,
    warmup: float, cpu: int | None, server_pid: int | None = None,
) -> dict[str, Any]:
    """`run_load` in a separate process (pinned to `cpu`), plus the server's CPU per request."""
    args = ["load", "--port", str(port), "--path", path, "--mode", mode, "--conns", str(conns),
            "--seconds", str(seconds), "--warmup", str(warmup), *cpu_args(cpu)]
    if bearer is not None:
        args += ["--bearer", bearer]
    before = cpu_seconds(server_pid) if server_pid else None
    result = run_child_json(args, timeout=seconds + warmup + 60)
    after = cpu_seconds(server_pid) if server_pid else None
    if before is not None and after is not None and result["total_requests"]:
        # All threads of the server, over warm-up and measurement: a contention-proof
        # figure (a busy shared core lowers req/s, not CPU per request).
        result["server_cpu_s"] = round(after - before, 2)
        result["server_cpu_us_per_req"] = round(
            (after - before) / result["total_requests"] * 1e6, 1)
    return result


# ---------------------------------------------------------------------------- write cycles


CYCLE_STEPS = ("checkout", "propose", "approve", "commit", "release")
# A cycle step calls an operation as the agent (or, `as_host`, as the host) with
# its params; it answers the result's wire JSON.
Step = Callable[[str, dict[str, Any], bool], dict[str, Any]]


def _timed_cycles(call: Step, version: int, region: str, *, seconds: float,
                  warmup: float) -> dict[str, Any]:
    """checkout -> propose -> (host) approve -> commit -> release, back to back, through `call`."""
    step_time = dict.fromkeys(CYCLE_STEPS, 0.0)
    cycle_times: list[float] = []
    cycles = 0
    n = 0
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    title = region.rsplit("/", 1)[-1]
    while True:
        t0 = time.perf_counter()
        if t0 >= stop_at:
            break
        n += 1
        lease = call("workspace.checkout", {"region": region}, False)
        t1 = time.perf_counter()
        proposal = call("workspace.propose", {
            "region": region, "base_version": version, "summary": f"cycle {n}",
            "content": f"## {title}\n\nCycle {n} wrote this line.\n\n",
        }, False)
        t2 = time.perf_counter()
        call("workspace.review", {"proposal_id": proposal["proposal_id"],
                "revision": proposal["revision"], "decision": "approve"}, True)
        t3 = time.perf_counter()
        version = int(call("workspace.commit", {"proposal_id": proposal["proposal_id"]}, False)["version"])
        t4 = time.perf_counter()
        call("workspace.release", {"lease_id": lease["lease_id"]}, False)
        t5 = time.perf_counter()
        if t0 >= measure_from:
            cycles += 1
            cycle_times.append(t5 - t0)
            for name, (a, b) in zip(CYCLE_STEPS, ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)),
                                    strict=True):
                step_time[name] += b - a
    elapsed = time.perf_counter() - measure_from
    return {
        "cycles_per_s": round(cycles / elapsed, 1),
        "cycles": cycles,
        "seconds": round(elapsed, 2),
        "step_mean_ms": {k: round(v / max(cycles, 1) * 1000, 2) for k, v in step_time.items()},
        "cycle_median_ms": round(statistics.median(cycle_times) * 1000, 3) if cycle_times else None,
        "final_version": version,
    }


def run_cycles(
    port: int, agent: str, host: str, region: str, *, seconds: float, warmup: float
) -> dict[str, Any]:
    """The write cycle over HTTP: one keep-alive connection for the agent, one for the host."""
    from commonroom.protocol.operations import OPERATIONS_BY_NAME

    agent_http = Http(port)
    host_http = Http(port)

    def call(name: str, params: dict[str, Any], as_host: bool) -> dict[str, Any]:
        http, bearer = (host_http, host) if as_host else (agent_http, agent)
        return http.call("POST", OPERATIONS_BY_NAME[name].path, params, bearer=bearer)

    try:
        version = int(agent_http.call("GET", "/workspace/status", bearer=agent)["version"])
        return _timed_cycles(call, version, region, seconds=seconds, warmup=warmup)
    finally:
        agent_http.close()
        host_http.close()


def run_engine_cycles(path: Path, region: str, *, seconds: float, warmup: float) -> dict[str, Any]:
    """The same cycle on the engine alone, in this process: no HTTP, no room, no threads
    but the engine's own writer. A copy of `path` in a temp folder, with the room's
    engine settings; the WAL is checkpointed between cycles when due, as the room does."""
    import tempfile

    from commonroom.engine.facade import EngineConfig, execute, mint_host_session, open_engine
    from commonroom.protocol.invitation import TransportHint
    from commonroom.protocol.records import to_wire

    with tempfile.TemporaryDirectory(prefix="commonroom-engine-cycle-") as tmp:
        doc = Path(tmp) / path.name
        doc.write_bytes(path.read_bytes())
        engine = open_engine(doc, EngineConfig(caller_checkpoints=True))
        try:
            # An invitation needs a transport to name (the room sets its own).
            engine.ports.set_transport("loopback", TransportHint(
                type="loopback", encrypted=False, mode="local", address="127.0.0.1", port=1))
            host = mint_host_session(engine)

            def call(name: str, params: dict[str, Any], as_host: bool) -> dict[str, Any]:
                outcome = execute(engine, name, host if as_host else agent, params)
                if outcome.error is not None:
                    raise RuntimeError(f"{name}: {outcome.error.code}: {outcome.error}")
                if engine.checkpoint_due:
                    engine.checkpoint()
                answer: dict[str, Any] = to_wire(outcome.result)
                return answer

            agent = ""
            invitation = call("workspace.invite", {}, True)["invitation"]
            agent = call("session.join", {"invite": invitation, "name": "bench"}, True)["session_id"]
            version = int(call("workspace.status", {}, False)["version"])
            return _timed_cycles(call, version, region, seconds=seconds, warmup=warmup)
        finally:
            engine.close()


# ---------------------------------------------------------------------------- SSE subscribers


class _Sub:
    """One SSE connection: HTTP head, then a chunked body of server-sent events."""

    __slots__ = ("body", "chunk_left", "head_done", "open", "raw", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.raw = bytearray()  # undecoded bytes (head, chunk framing)
        self.body = bytearray()  # decoded SSE text not yet split into messages
        self.head_done = False
        self.chunk_left = -1  # bytes left in the current chunk (+2 for CRLF); -1: need a size
        self.open = True

    def feed(self, data: bytes) -> list[bytes]:
        """Feed raw bytes; the complete SSE messages they finish."""
        if self.head_done and self.chunk_left < 0 and not self.raw and not self.body:
            # The usual case, and the one a commit's fan-out makes 1,000 times at once: the
            # read is exactly one whole chunk holding whole messages. Taken without copies,
            # so the subscribers' own parsing weighs as little as it can on the figure.
            eol = data.find(b"\r\n")
            if 0 < eol <= 8:
                size = int(data[:eol], 16)
                if size and len(data) == eol + size + 4 and data.endswith(b"\n\n\r\n"):
                    return data[eol + 2 : -4].split(b"\n\n")
        raw = self.raw
        raw += data
        if not self.head_done:
            end = raw.find(b"\r\n\r\n")
            if end < 0:
                return []
            status = int(bytes(raw[: end]).split(b" ", 2)[1])
            if status != 200:
                raise RuntimeError(f"observe answered {status}: {bytes(raw[:300])!r}")
            del raw[: end + 4]
            self.head_done = True
        while raw:
            if self.chunk_left < 0:
                eol = raw.find(b"\r\n")
                if eol < 0:
                    break
                size = int(bytes(raw[:eol]).split(b";")[0], 16)
                del raw[: eol + 2]
                self.chunk_left = size + 2
            take = min(self.chunk_left, len(raw))
            self.body += raw[:take]
            del raw[:take]
            self.chunk_left -= take
            if self.chunk_left == 0:
                del self.body[-2:]  # the chunk's CRLF
                self.chunk_left = -1
        messages: list[bytes] = []
        while True:
            end = self.body.find(b"\n\n")
            if end < 0:
                return messages
            messages.append(bytes(self.body[:end]))
            del self.body[: end + 2]


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run_subscribers(port: int, bearers: Sequence[str], count: int, batch: int) -> None:
    """Hold `count` observe streams; report when every open one has each change.committed.

    Stream i is opened with `bearers[i % len(bearers)]` (one session for all of them, or
    many sessions of a few streams each, as a room of dashboards holds them).

    Prints ``{"ready": n}`` once all streams answered, then per committed
    event ``{"event_id", "version", "first", "last", "count"}`` (first/last:
    time.monotonic() when the first/last subscriber had the whole event) as
    soon as every open stream has it. Commands on stdin: ``flush`` (report
    incomplete events too, then ``{"flushed": true}``), ``stats``, ``quit``.
    When the last stream closes it prints ``{"all_closed": t}``.
    """
    raise_nofile()
    selector = selectors.DefaultSelector()
    requests = [build_request("GET", "/workspace/observe", bearer=bearer) for bearer in bearers]
    subs: list[_Sub] = []
    pending: dict[int, list[Any]] = {}  # event_id -> [count, first, last, version]
    resyncs = 0
    closed = 0
    nbytes = 0
    ends: dict[str, int] = {}

    def handle(sub: _Sub, now: float) -> None:
        nonlocal resyncs, closed, nbytes
        try:
            data = sub.sock.recv(262144)
        except (ConnectionResetError, BlockingIOError) as error:
            data = b""
            ends[type(error).__name__] = ends.get(type(error).__name__, 0) + 1
        if not data:
            sub.open = False
            closed += 1
            selector.unregister(sub.sock)
            sub.sock.close()
            return
        nbytes += len(data)
        for message in sub.feed(data):
            if b"event: change.committed" in message:
                event_id = 0
                if message.startswith(b"id: "):  # the room's frames start with their id
                    event_id = int(message[4 : message.find(b"\n")])
                else:
                    for line in message.split(b"\n"):
                        if line.startswith(b"id: "):
                            event_id = int(line[4:])
                            break
                record = pending.get(event_id)
                if record is None:
                    version = None
                    for line in message.split(b"\n"):
                        if line.startswith(b"data: "):
                            version = json.loads(line[6:])["payload"]["version"]
                    pending[event_id] = [1, now, now, version]
                else:
                    record[0] += 1
                    record[2] = now
            elif b"event: resync" in message:
                resyncs += 1

    def report(complete_only: bool) -> None:
        open_now = sum(1 for sub in subs if sub.open)
        for event_id in sorted(pending):
            n, first, last, version = pending[event_id]
            if complete_only and n < open_now:
                continue
            del pending[event_id]
            _emit({"event_id": event_id, "version": version, "first": first, "last": last,
                   "count": n, "complete": n >= open_now})

    # Connect in batches: the listener's backlog is 128.
    for offset in range(0, count, batch):
        group: list[_Sub] = []
        for index in range(offset, offset + min(batch, count - offset)):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(requests[index % len(requests)])
            sock.setblocking(False)
            sub = _Sub(sock)
            selector.register(sock, selectors.EVENT_READ, sub)
            group.append(sub)
        subs += group
        deadline = time.monotonic() + 30
        while not all(sub.head_done or not sub.open for sub in group):
            if time.monotonic() > deadline:
                raise RuntimeError("streams did not answer within 30 s")
            for key, _ in selector.select(timeout=0.5):
                handle(key.data, time.monotonic())
    _emit({"ready": sum(1 for sub in subs if sub.open), "closed": closed})

    stdin = sys.stdin
    selector.register(stdin, selectors.EVENT_READ, None)
    all_closed_reported = False
    while True:
        for key, _ in selector.select(timeout=1.0):
            now = time.monotonic()
            if key.data is None:
                command = stdin.readline().strip()
                if command in ("", "quit"):
                    return
                if command == "flush":
                    report(False)
                    _emit({"flushed": True})
                elif command == "stats":
                    _emit({"open": sum(1 for sub in subs if sub.open), "closed": closed,
                           "resyncs": resyncs, "bytes": nbytes, "ends": ends})
                continue
            handle(key.data, now)
        if pending:
            report(True)
        if closed == len(subs) and not all_closed_reported:
            all_closed_reported = True
            _emit({"all_closed": time.monotonic()})


# ---------------------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    bare = sub.add_parser("bare")
    bare.add_argument("kind", choices=["stock", "hardened"])

    room = sub.add_parser("room")
    room.add_argument("file", type=Path)
    room.add_argument("--rpm", type=int, default=HUGE_RATE)
    room.add_argument("--heartbeat", type=float, default=15.0)
    room.add_argument("--mcp-legacy", action="store_true")
    room.add_argument("--max-sessions", type=int)

    load = sub.add_parser("load")
    load.add_argument("--port", type=int, required=True)
    load.add_argument("--path", required=True)
    load.add_argument("--bearer")
    load.add_argument("--mode", choices=["keepalive", "close"], default="keepalive")
    load.add_argument("--conns", type=int, default=16)
    load.add_argument("--seconds", type=float, default=10.0)
    load.add_argument("--warmup", type=float, default=2.0)

    cycle = sub.add_parser("cycle")
    cycle.add_argument("--port", type=int, required=True)
    cycle.add_argument("--agent", required=True)
    cycle.add_argument("--host-bearer", required=True)
    cycle.add_argument("--region", required=True)
    cycle.add_argument("--seconds", type=float, default=10.0)
    cycle.add_argument("--warmup", type=float, default=2.0)

    engine_cycle = sub.add_parser("engine-cycle")
    engine_cycle.add_argument("file", type=Path)
    engine_cycle.add_argument("--region", required=True)
    engine_cycle.add_argument("--seconds", type=float, default=10.0)
    engine_cycle.add_argument("--warmup", type=float, default=2.0)

    subscribe = sub.add_parser("subscribe")
    subscribe.add_argument("--port", type=int, required=True)
    bearer = subscribe.add_mutually_exclusive_group(required=True)
    bearer.add_argument("--bearer")
    bearer.add_argument("--bearers-file", type=Path,
                        help="one session bearer a line: streams are spread over them")
    subscribe.add_argument("--count", type=int, default=1000)
    subscribe.add_argument("--batch", type=int, default=100)

    for each in (bare, room, load, cycle, engine_cycle, subscribe):
        each.add_argument("--cpu", type=int)
    args = parser.parse_args(argv)
    pin(args.cpu)

    if args.command == "bare":
        run_bare_server(args.kind)
    elif args.command == "room":
        raise_nofile()
        run_room_server(args.file.resolve(), args.rpm, args.heartbeat, args.mcp_legacy,
                        args.max_sessions)
    elif args.command == "load":
        request = build_request("GET", args.path, bearer=args.bearer,
                                close=args.mode == "close")
        print(json.dumps(run_load(args.port, request, close=args.mode == "close",
                                  conns=args.conns, seconds=args.seconds,
                                  warmup=args.warmup)), flush=True)
    elif args.command == "cycle":
        print(json.dumps(run_cycles(args.port, args.agent, args.host_bearer, args.region,
                                    seconds=args.seconds, warmup=args.warmup)), flush=True)
    elif args.command == "engine-cycle":
        print(json.dumps(run_engine_cycles(args.file.resolve(), args.region, seconds=args.seconds,
                                           warmup=args.warmup)), flush=True)
    elif args.command == "subscribe":
        bearers = ([args.bearer] if args.bearer else
                   args.bearers_file.read_text().split())
        run_subscribers(args.port, bearers, args.count, args.batch)


if __name__ == "__main__":
    main()
