"""MCP figures (TARGETS.md "MCP and the page"; issues 10 and 20): tools/call throughput in each era,
notification fan-out to both eras' streams, RSS per idle legacy session, `ce mcp` overhead.

Usage: ``.venv/bin/python tools/bench/bench_mcp.py [--seconds 5] [--rounds 2] [--commits 60]
[--legacy-sessions 200] [--parts throughput,fanout,memory,bridge]``

In one run, the room in its own process (`loadgen.room_server`, rate limit
10**9) and the load in others:

1. ``mcp_call_ratio``: ``POST /mcp tools/call workspace.status`` per second
   over keep-alive against ``GET /workspace/status`` per second, in each era:
   2026-07-28 (stateless: every connection sends the same request) and a
   legacy session (2025-11-25; one session per connection, since one
   session's requests that overlap need distinct ids). Same agent bearer,
   the raw-socket generator (`loadgen.run_load`, 16 connections),
   interleaved for ``--rounds`` rounds: the best of each, each round's ratio
   (its three loads ran back to back) and their median, and the room's CPU
   per request (read by the load process around its run: contention-proof,
   where req/s on a shared machine is not) as a ratio. Target: >= 0.8 each.
2. ``mcp_notify_p99_ms_100``: 100 open notification streams, 50 ``GET /mcp``
   of 2026-07-28 and 50 legacy sessions' ``GET /mcp`` (10 agents, each with 5
   of each; every stream's subscriptions hold
   ``commonroom://workspace/document``); the host commits ``--commits`` times,
   one at a time; for each commit, the time from sending the commit request
   until ``notifications/resources/updated`` has arrived on all 100 streams.
   Target: p99 < 100 ms.
3. ``legacy_session_kb``: (room RSS with ``--legacy-sessions`` idle legacy
   sessions, each with its GET stream open − RSS before them) ÷ their number,
   after a warm-up of 20; the same for as many 2026-07-28 ``GET /mcp`` streams
   for scale. Target: < 64 KB.
4. ``tools/call workspace.status`` round trips through one long-lived
   ``ce mcp`` process (stdin/stdout pipes) against direct ``POST /mcp`` from
   this process, sequentially, with a new connection per request (what the
   bridge's byte client does) and, for information, over keep-alive.
   Target: bridge / direct (new connection) <= 1.5.

Figures are printed as they come; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import loadgen

ROOM_CPU = 0
LOAD_CPU = 1
VERSION = "2026-07-28"
LEGACY = "2025-11-25"
DOCUMENT = "commonroom://workspace/document"


def mcp_body(method: str, params: dict[str, Any], rid: Any = 1) -> bytes:
    params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": VERSION,
                                  "io.modelcontextprotocol/clientCapabilities": {}}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def mcp_request(bearer: str, method: str, params: dict[str, Any], *, close: bool = False,
                name: str | None = None) -> bytes:
    body = mcp_body(method, params)
    lines = ["POST /mcp HTTP/1.1", f"Host: {loadgen.HOST}", f"Authorization: Bearer {bearer}",
             "Content-Type: application/json", "Accept: application/json, text/event-stream",
             f"MCP-Protocol-Version: {VERSION}", f"Mcp-Method: {method}",
             f"Content-Length: {len(body)}"]
    if name is not None:
        lines.append(f"Mcp-Name: {name}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def status_tool_request(bearer: str, close: bool = False) -> bytes:
    return mcp_request(bearer, "tools/call", {"name": "workspace_status", "arguments": {}},
                       close=close, name="workspace.status")


def legacy_post(bearer: str, session_id: str | None, message: dict[str, Any]) -> bytes:
    """A legacy-era POST /mcp: no `_meta`, the session header once there is a session."""
    body = json.dumps(message).encode()
    lines = ["POST /mcp HTTP/1.1", f"Host: {loadgen.HOST}", f"Authorization: Bearer {bearer}",
             "Content-Type: application/json", "Accept: application/json, text/event-stream",
             f"Content-Length: {len(body)}"]
    if session_id is not None:
        lines += [f"Mcp-Session-Id: {session_id}", f"MCP-Protocol-Version: {LEGACY}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def legacy_session(port: int, bearer: str) -> str:
    """initialize + notifications/initialized: a legacy session's id."""
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sock.sendall(legacy_post(bearer, None, {
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}}))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("initialize: the room closed the connection")
            data += chunk
    finally:
        sock.close()
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    found = [line.split(":", 1)[1].strip() for line in head.split("\r\n")
             if line.lower().startswith("mcp-session-id:")]
    if not head.startswith("HTTP/1.1 200") or not found:
        raise RuntimeError(f"initialize answered {head[:200]!r}")
    http = loadgen.Http(port)
    try:
        status, body = http.raw(legacy_post(bearer, found[0], {
            "jsonrpc": "2.0", "method": "notifications/initialized"}))
    finally:
        http.close()
    if status != 202:
        raise RuntimeError(f"notifications/initialized answered {status}: {body[:200]!r}")
    return found[0]


def legacy_status_tool_request(bearer: str, session_id: str) -> bytes:
    return legacy_post(bearer, session_id, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                            "params": {"name": "workspace_status", "arguments": {}}})


def run_load_child(args: argparse.Namespace) -> None:
    """`bench_mcp.py load ...`: one load run in this (child) process, one JSON line."""
    loadgen.pin(args.cpu)
    request: bytes | list[bytes]
    if args.kind == "mcp":
        request = status_tool_request(args.bearer)
    elif args.kind == "legacy":
        # One session per connection (of its own agent: `--bearer` lists them), opened before
        # the clock starts.
        bearers = args.bearer.split(",")
        request = [legacy_status_tool_request(b, legacy_session(args.port, b))
                   for b in (bearers[i % len(bearers)] for i in range(args.conns))]
    else:
        request = loadgen.build_request("GET", "/workspace/status", bearer=args.bearer)
    # The room's CPU per request: contention-proof where req/s is not (a busy shared core
    # lowers req/s, not the work per request). Read here, around the load alone.
    before = loadgen.cpu_seconds(args.room_pid) if args.room_pid else None
    result = loadgen.run_load(args.port, request, close=False, conns=args.conns,
                              seconds=args.seconds, warmup=args.warmup)
    after = loadgen.cpu_seconds(args.room_pid) if args.room_pid else None
    if before is not None and after is not None and result["total_requests"]:
        result["server_cpu_us_per_request"] = round((after - before) / result["total_requests"] * 1e6)
    print(json.dumps(result), flush=True)


def measure(kind: str, room: Any, bearer: str, args: argparse.Namespace, cpu: int | None
            ) -> dict[str, Any]:
    command = [sys.executable, __file__, "load", kind, "--port", str(room.port), "--bearer", bearer,
               "--room-pid", str(room.pid), "--conns", str(args.conns), "--seconds", str(args.seconds),
               "--warmup", str(args.warmup), *loadgen.cpu_args(cpu)]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          timeout=args.seconds + args.warmup + 60)
    if done.returncode != 0:
        raise RuntimeError(f"load {kind} failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- 2. notification fan-out ------------------------------------------------------------------


def open_stream(port: int, bearer: str, session_id: str | None = None) -> socket.socket:
    """One live notification stream: a 2026-07-28 `GET /mcp`, or a legacy session's."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    era = (f"MCP-Protocol-Version: {VERSION}\r\n" if session_id is None else
           f"Mcp-Session-Id: {session_id}\r\nMCP-Protocol-Version: {LEGACY}\r\n")
    sock.sendall((f"GET /mcp HTTP/1.1\r\nHost: {loadgen.HOST}\r\nAuthorization: Bearer {bearer}\r\n"
                  f"Accept: text/event-stream\r\n{era}\r\n").encode())
    head = b""
    while b"\n\n" not in head.partition(b"\r\n\r\n")[2]:  # the first frame: the stream is live
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("a GET /mcp stream closed at once")
        head += data
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"GET /mcp answered {head[:100]!r}")
    sock.setblocking(False)
    return sock


def subscribe(port: int, bearer: str, session_id: str | None) -> None:
    """`resources/subscribe` the document, in the stream's era."""
    http = loadgen.Http(port)
    try:
        if session_id is None:
            request = mcp_request(bearer, "resources/subscribe", {"uri": DOCUMENT})
        else:
            request = legacy_post(bearer, session_id, {"jsonrpc": "2.0", "id": 2, "method":
                                                       "resources/subscribe", "params": {"uri": DOCUMENT}})
        status, body = http.raw(request)
    finally:
        http.close()
    if status != 200 or b'"error"' in body:
        raise RuntimeError(f"subscribe answered {status}: {body[:200]!r}")


def fan_out(port: int, host_bearer: str, streams: list[socket.socket], commits: int,
            doc_text: str, after_answer: list[float] | None = None) -> list[float]:
    selector = selectors.DefaultSelector()
    for index, sock in enumerate(streams):
        selector.register(sock, selectors.EVENT_READ, index)
    if not streams:
        selector.register(socket.socketpair()[0], selectors.EVENT_READ, -1)  # never ready
    http = loadgen.Http(port)
    version = http.call("GET", "/workspace/status", bearer=host_bearer)["version"]
    marker = b'"uri":"' + DOCUMENT.encode() + b'"'
    latencies = []
    text = doc_text
    try:
        for i in range(commits):
            text += f"\nline {i}\n"
            body = json.dumps({"content": text, "summary": f"bench {i}",
                               "base_version": version}).encode()
            request = loadgen.build_request("POST", "/workspace/commit", bearer=host_bearer,
                                            body=body)
            pending = set(range(len(streams)))
            buffers = [b""] * len(streams)
            started = time.perf_counter()
            status, answer = http.raw(request)  # the commit answers before the fan-out ends
            answered = time.perf_counter()
            if status != 200:
                raise RuntimeError(f"commit answered {status}: {answer[:200]!r}")
            version = json.loads(answer)["version"]
            deadline = started + 10
            while pending:
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"{len(pending)} streams got no notification in 10 s")
                for key, _ in selector.select(timeout=1.0):
                    index = key.data
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        raise RuntimeError("a GET /mcp stream closed")
                    buffers[index] += data
                    if index in pending and marker in buffers[index]:
                        pending.discard(index)
                        buffers[index] = b""
            done = time.perf_counter()
            latencies.append(done - started)
            if after_answer is not None:
                after_answer.append(done - answered)
            time.sleep(0.02)  # one commit at a time; let the streams go quiet
    finally:
        http.close()
        selector.close()
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- 3. ce mcp round trips ---------------------------------------------------------------------


class Bridged:
    """One long-lived `ce mcp` process, asked over its stdin/stdout pipes."""

    def __init__(self, invitation: str, bearer: str) -> None:
        ce = Path(sys.executable).parent / "ce"
        self.proc = subprocess.Popen([str(ce), "mcp", invitation, "--session", bearer],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.ask(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "bench", "version": "1"}})

    def ask(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                          "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            message: dict[str, Any] = json.loads(self.proc.stdout.readline())
            if message.get("id") == rid:
                return message

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def round_trips(port: int, invitation: str, bearer: str, count: int) -> dict[str, list[float]]:
    """Interleaved: one direct call on a new connection, one through the bridge, one over
    keep-alive, and again; so a burst of other work on the machine hits all three alike."""
    keepalive = loadgen.Http(port)
    close_request = status_tool_request(bearer, close=True)
    keep_request = status_tool_request(bearer)
    bridge = Bridged(invitation, bearer)
    times: dict[str, list[float]] = {"direct_close": [], "bridge": [], "direct_keepalive": []}
    try:
        for rid in range(1, count + 1):
            started = time.perf_counter()
            fresh = loadgen.Http(port)
            status, body = fresh.raw(close_request)
            fresh.close()
            times["direct_close"].append(time.perf_counter() - started)
            if status != 200 or b'"isError":false' not in body:
                raise RuntimeError(f"tools/call answered {status}: {body[:200]!r}")
            started = time.perf_counter()
            answer = bridge.ask(rid, "tools/call", {"name": "workspace_status", "arguments": {}})
            times["bridge"].append(time.perf_counter() - started)
            if answer.get("result", {}).get("isError") is not False:
                raise RuntimeError(f"bridge answered {answer}")
            started = time.perf_counter()
            status, body = keepalive.raw(keep_request)
            times["direct_keepalive"].append(time.perf_counter() - started)
    finally:
        keepalive.close()
        bridge.close()
    return times


def median_ms(values: list[float]) -> float:
    return round(percentile(values, 0.5) * 1000, 3)


def mean_ms(values: list[float]) -> float:
    return round(sum(values) / len(values) * 1000, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    load = sub.add_parser("load")
    load.add_argument("kind", choices=["mcp", "legacy", "rest"])
    load.add_argument("--port", type=int, required=True)
    load.add_argument("--bearer", required=True)
    load.add_argument("--conns", type=int, default=16)
    load.add_argument("--seconds", type=float, default=5.0)
    load.add_argument("--warmup", type=float, default=1.0)
    load.add_argument("--cpu", type=int)
    load.add_argument("--room-pid", type=int)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--conns", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--round-trips", type=int, default=300)
    parser.add_argument("--legacy-sessions", type=int, default=150)
    parser.add_argument("--parts", default="throughput,fanout,memory,bridge",
                        help="which figures to measure (comma-separated)")
    args = parser.parse_args()
    if args.command == "load":
        run_load_child(args)
        return

    pinned = loadgen.pinning_available()
    room_cpu, load_cpu = (ROOM_CPU, LOAD_CPU) if pinned else (None, None)
    started = time.monotonic()
    summary: dict[str, Any] = {"pinning": pinned}
    with tempfile.TemporaryDirectory(prefix="commonroom-bench-mcp-") as tmp:
        doc = Path(tmp) / "bench.md"
        doc_text = "# Bench\n\nMCP benchmark document.\n\n## Notes\n\nNothing yet.\n"
        doc.write_text(doc_text)
        with loadgen.room_server(doc, room_cpu, mcp_legacy=True) as room:
            agent = room.join("bench")
            parts = set(args.parts.split(","))
            best: dict[str, float] = {}
            # The legacy load: one session per connection, 4 per agent (the per-participant
            # stream cap counts legacy sessions).
            legacy_agents = ",".join(room.join(f"legacy{i}") for i in range(-(-args.conns // 4)))
            cpu_us: dict[str, list[float]] = {}
            ratios: dict[str, list[float]] = {"mcp": [], "legacy": []}
            for round_ in range(1, args.rounds + 1 if "throughput" in parts else 1):
                rps: dict[str, float] = {}
                for kind in ("rest", "mcp", "legacy"):
                    bearer = legacy_agents if kind == "legacy" else agent
                    result = measure(kind, room, bearer, args, load_cpu)
                    print(f"round {round_} {kind:6} {json.dumps(result)}", flush=True)
                    best[kind] = max(best.get(kind, 0.0), result["rps"])
                    rps[kind] = result["rps"]
                    if "server_cpu_us_per_request" in result:
                        cpu_us.setdefault(kind, []).append(result["server_cpu_us_per_request"])
                for kind in ratios:  # each round's three loads ran back to back
                    ratios[kind].append(rps[kind] / rps["rest"])
            if best:
                summary["rest_status_rps"] = best["rest"]
                summary["mcp_status_tool_rps"] = best["mcp"]
                summary["legacy_status_tool_rps"] = best["legacy"]
                summary["mcp_call_ratio_2026"] = round(best["mcp"] / best["rest"], 3)
                summary["mcp_call_ratio_legacy"] = round(best["legacy"] / best["rest"], 3)
                for kind, era in (("mcp", "2026"), ("legacy", "legacy")):
                    summary[f"mcp_call_ratio_{era}_rounds"] = [round(r, 3) for r in ratios[kind]]
                    summary[f"mcp_call_ratio_{era}_median_round"] = round(percentile(ratios[kind], 0.5), 3)
                    if cpu_us.get(kind) and cpu_us.get("rest"):
                        # Requests per CPU second, tools/call over GET status: the capacity ratio.
                        summary[f"mcp_cpu_ratio_{era}"] = round(
                            percentile(cpu_us["rest"], 0.5) / percentile(cpu_us[kind], 0.5), 3)
                summary["server_cpu_us_per_request_medians"] = {
                    kind: percentile(values, 0.5) for kind, values in cpu_us.items()}
                print(f"tools/call / GET status (best of each): 2026-07-28 {summary['mcp_call_ratio_2026']},"
                      f" legacy {summary['mcp_call_ratio_legacy']}; per CPU: 2026-07-28"
                      f" {summary.get('mcp_cpu_ratio_2026')}, legacy {summary.get('mcp_cpu_ratio_legacy')}",
                      flush=True)
            if "fanout" in parts:
                fanout_figures(room, args, doc, summary)

            if "bridge" in parts:
                bridge_figures(room, agent, args, summary, load_cpu)
        if "memory" in parts:
            memory_figures(doc, room_cpu, args, summary)
    summary["total_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(summary), flush=True)


def fanout_figures(room: Any, args: argparse.Namespace, doc: Path, summary: dict[str, Any]) -> None:

    # The commit alone, no stream open: what the fan-out figure includes anyway.
    alone = fan_out(room.port, room.host_session, [], args.commits, doc.read_text())
    summary["commit_alone_p50_ms"] = round(percentile(alone, 0.5) * 1000, 2)
    summary["commit_alone_p90_ms"] = round(percentile(alone, 0.90) * 1000, 2)
    summary["commit_alone_p99_ms"] = round(percentile(alone, 0.99) * 1000, 2)
    print(f"commit alone: p50 {summary['commit_alone_p50_ms']} ms,"
          f" p99 {summary['commit_alone_p99_ms']} ms", flush=True)
    doc_text = doc.read_text()

    # 25 agents, each with 2 streams of each era: 50 + 50 (a participant holds at most 8
    # streams: 2 GET /mcp, 2 legacy sessions and their 2 GET streams stay under it).
    streams = []
    for i in range(25):
        bearer = room.join(f"watcher{i}")
        subscribe(room.port, bearer, None)
        streams += [open_stream(room.port, bearer) for _ in range(2)]
        for _ in range(2):
            session_id = legacy_session(room.port, bearer)
            subscribe(room.port, bearer, session_id)
            streams.append(open_stream(room.port, bearer, session_id))
    after_answer: list[float] = []
    try:
        latencies = fan_out(room.port, room.host_session, streams, args.commits, doc_text,
                            after_answer)
    finally:
        for sock in streams:
            sock.close()
    summary["fanout_streams"] = len(streams)
    summary["fanout_commits"] = len(latencies)
    summary["fanout_p50_ms"] = round(percentile(latencies, 0.5) * 1000, 2)
    summary["fanout_p90_ms"] = round(percentile(latencies, 0.90) * 1000, 2)
    summary["fanout_p99_ms"] = round(percentile(latencies, 0.99) * 1000, 2)
    summary["fanout_max_ms"] = round(max(latencies) * 1000, 2)
    # From the commit's answer: the fan-out alone (the room publishes before it answers).
    summary["fanout_after_answer_p50_ms"] = round(percentile(after_answer, 0.5) * 1000, 2)
    summary["fanout_after_answer_p99_ms"] = round(percentile(after_answer, 0.99) * 1000, 2)
    print(f"commit -> 50 + 50 GET /mcp streams (2026-07-28 + legacy): p50 {summary['fanout_p50_ms']} ms,"
          f" p99 {summary['fanout_p99_ms']} ms", flush=True)


# -- 3. memory per idle legacy session ----------------------------------------------------------


def memory_figures(doc: Path, cpu: int | None, args: argparse.Namespace,
                   summary: dict[str, Any]) -> None:
    """RSS per idle legacy session with its GET stream open; per 2026-07-28 GET stream for scale.

    Each era in a fresh room on a fresh file: memory an earlier part freed would be reused and
    hide the cost, and sessions outlive a room in its sidecar (at most 64 active).
    """
    per_agent = 3  # sessions (and streams) per agent: under the per-participant stream cap
    for era, legacy in (("legacy", True), ("modern", False)):
        fresh = doc.with_name(f"memory-{era}.md")
        fresh.write_text(doc.read_text())
        with loadgen.room_server(fresh, cpu, mcp_legacy=True) as room:
            agents = [room.join(f"idle{i}") for i in range(-(-(args.legacy_sessions + 20) // per_agent))]
            slots = [bearer for bearer in agents for _ in range(per_agent)]

            def open_many(bearers: list[str], legacy: bool = legacy, port: int = room.port
                          ) -> list[socket.socket]:
                return [open_stream(port, b, legacy_session(port, b) if legacy else None)
                        for b in bearers]

            warm = open_many(slots[:20])  # allocator pools, first-use caches
            time.sleep(1.0)
            before = loadgen.rss_kb(room.pid)
            opened = open_many(slots[20:20 + args.legacy_sessions])
            time.sleep(1.0)
            after = loadgen.rss_kb(room.pid)
            per = round((after - before) / len(opened), 1)
            key = "legacy_session_kb" if legacy else "modern_get_stream_kb"
            summary[key] = per
            summary[f"{key}_rss"] = {"before_kb": before, "after_kb": after, "count": len(opened)}
            what = "sessions with their GET stream" if legacy else "GET /mcp streams"
            print(f"{era}: {len(opened)} idle {what}: {before} -> {after} KB RSS, {per} KB each",
                  flush=True)
            for sock in warm + opened:
                sock.close()


def bridge_figures(room: Any, agent: str, args: argparse.Namespace, summary: dict[str, Any],
                   cpu: int | None = None) -> None:
    # This process and the bridge it starts share the load core, away from the room's.
    summary["bridge_pinning"] = loadgen.pin(cpu)
    times = round_trips(room.port, room.invitation, agent, args.round_trips)
    for key, values in times.items():
        summary[f"{key}_median_ms"] = median_ms(values)
        summary[f"{key}_mean_ms"] = mean_ms(values)
    summary["bridge_over_direct_close"] = round(
        summary["bridge_median_ms"] / summary["direct_close_median_ms"], 3)
    summary["bridge_over_direct_keepalive"] = round(
        summary["bridge_median_ms"] / summary["direct_keepalive_median_ms"], 3)
    print(f"ce mcp round trip median {summary['bridge_median_ms']} ms; direct (new connection)"
          f" {summary['direct_close_median_ms']} ms; ratio {summary['bridge_over_direct_close']}",
          flush=True)


if __name__ == "__main__":
    main()
