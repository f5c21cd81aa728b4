"""A room opened for a large audience (TARGETS.md "Many agents at once", "Live streams").

Usage: ``.venv/bin/python tools/bench/bench_audience.py [--max-sessions 200]
[--sessions 125] [--streams-per-session 8] [--commits 20]``

One room started as ``ce serve --max-sessions 200`` starts it (`serve_room` with
``ServeOptions(max_sessions=200)``; the protocol's stream caps kept: 8 a session),
pinned to core 0, with requests_per_minute and the anonymous join limit at 10**9 so
the 125 joins are not what is measured. 125 watcher sessions join (read + observe,
as a dashboard does: two invitations of 64 sessions each) and each opens 8
``GET /workspace/observe`` streams: 1,000 streams, all in one ``selectors`` process
on core 1 (`loadgen.run_subscribers` with a file of bearers). This script (core 1)
commits and reads the figures:

* ``session_idle_kb``: (room VmRSS with the 125 sessions joined and idle, no stream
  open − VmRSS before they joined) ÷ 125: what one idle session costs;
* ``rss_per_subscriber_kb``: (room VmRSS with the 1,000 streams open and idle −
  VmRSS with the sessions alone) ÷ streams (target < 64);
* ``fanout_p99_ms_1000``: 20 host commits one at a time; each from *sending the
  commit request* until the *last* of the 1,000 streams has the whole
  ``change.committed`` event, p99 (of 20: the maximum; target < 100 ms);
* ``cpu_ms_per_commit``: the room's and the subscribers' CPU per commit during those 20;
  ``other_processes_cores``: what the rest of the machine used meanwhile, in cores (near 0
  on a quiet machine);
* ``one_more_stream_status``: the status one more stream of the first session gets
  (429 when it already holds 8: the room keeps its per-session cap while it holds
  the audience).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import loadgen
from bench_streams import SAMPLE, Committer, Subscribers, fanout_run

ROOM_CPU = 0
CLIENT_CPU = 1
INVITATION_SESSIONS = 64  # the most one invitation seats (protocol.limits)


def _show(label: str, value: Any) -> None:
    print(f"{label:30} {json.dumps(value)}", flush=True)


def join_watchers(room: loadgen.RoomProcess, sessions: int) -> list[str]:
    """`sessions` read + observe sessions, through invitations of up to 64 sessions each."""
    http = loadgen.Http(room.port)
    bearers: list[str] = []
    invitation = ""
    try:
        for index in range(sessions):
            if index % INVITATION_SESSIONS == 0:
                invitation = http.call("POST", "/workspace/invite", {
                    "capabilities": ["read", "observe"], "max_uses": None,
                    "max_sessions": INVITATION_SESSIONS, "label": "dashboards",
                }, bearer=room.host_session)["invitation"]
            joined = http.call("POST", "/session/join", {"invite": invitation,
                                                         "name": "dashboard"})
            bearers.append(str(joined["session_id"]))
    finally:
        http.close()
    return bearers


def stream_status(port: int, bearer: str) -> int:
    """The HTTP status one more observe stream of `bearer` gets."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(loadgen.build_request("GET", "/workspace/observe", bearer=bearer))
        head = sock.recv(4096)
    return int(head.split(b" ", 2)[1])


def _others(busy: tuple[float | None, float | None],
            ours: list[tuple[float | None, float | None]], seconds: float) -> float | None:
    """The cores the rest of the machine used meanwhile: its busy CPU less our processes'."""
    if busy[0] is None or busy[1] is None:
        return None
    spent = busy[1] - busy[0]
    for before, after in ours:
        if before is None or after is None:
            return None
        spent -= after - before
    return round(spent / seconds, 2)


def settled_rss(pid: int, seconds: float = 1.5) -> int:
    """The room's VmRSS after `seconds` of quiet (its heartbeats and sweeps included)."""
    time.sleep(seconds)
    return loadgen.rss_kb(pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-sessions", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=125)
    parser.add_argument("--streams-per-session", type=int, default=8)
    parser.add_argument("--commits", type=int, default=20)
    args = parser.parse_args()
    started = time.monotonic()
    loadgen.raise_nofile()
    pinned = loadgen.pinning_available()
    room_cpu = ROOM_CPU if pinned else None
    client_cpu = CLIENT_CPU if pinned else None
    if pinned:
        loadgen.pin(CLIENT_CPU)
    pinning = (f"room core {ROOM_CPU}; subscribers and this script core {CLIENT_CPU}"
               if pinned else "not pinned")
    _show("pinning", pinning)
    streams = args.sessions * args.streams_per_session

    with tempfile.TemporaryDirectory(prefix="commonroom-audience-") as tmp:
        doc = Path(tmp) / "audience.md"
        text = SAMPLE.read_text()
        doc.write_text(text)
        with loadgen.room_server(doc, room_cpu, max_sessions=args.max_sessions) as room:
            committer = Committer(room, text)
            loadgen.measure_load(room.port, "/workspace/status", bearer=room.host_session,
                                 mode="keepalive", conns=4, seconds=1.0, warmup=0.5,
                                 cpu=client_cpu, server_pid=room.pid)  # warm the room
            for _ in range(5):
                committer.commit()
            limits = loadgen.Http(room.port).call("GET", "/workspace/diagnostics",
                                                  bearer=room.host_session)["limits"]
            _show("room limits", limits)
            rss_empty = settled_rss(room.pid)
            bearers = join_watchers(room, args.sessions)
            rss_sessions = settled_rss(room.pid)
            session_kb = (rss_sessions - rss_empty) / args.sessions
            _show("sessions", {"joined": len(bearers), "rss_before_kb": rss_empty,
                               "rss_after_kb": rss_sessions,
                               "session_idle_kb": round(session_kb, 2)})
            bearers_file = Path(tmp) / "bearers"
            bearers_file.touch(mode=0o600)
            bearers_file.write_text("\n".join(bearers) + "\n")
            subs = Subscribers(room.port, bearers_file, streams, client_cpu)
            try:
                _show("streams ready", subs.ready)
                rss_streams = settled_rss(room.pid)
                per_stream_kb = (rss_streams - rss_sessions) / max(1, subs.ready)
                _show("rss with streams", {"kb": rss_streams,
                                           "per_subscriber_kb": round(per_stream_kb, 2)})
                ninth = stream_status(room.port, bearers[0])
                _show("one more stream of session 1", ninth)
                cpu_before = (loadgen.cpu_seconds(room.pid), loadgen.cpu_seconds(subs.child.pid))
                own_before, busy_before = loadgen.cpu_seconds(os.getpid()), loadgen.machine_busy_seconds()
                fanout_started = time.monotonic()
                fanout = fanout_run(committer, subs, args.commits)
                fanout_s = time.monotonic() - fanout_started
                cpu_after = (loadgen.cpu_seconds(room.pid), loadgen.cpu_seconds(subs.child.pid))
                own_after, busy_after = loadgen.cpu_seconds(os.getpid()), loadgen.machine_busy_seconds()
                fanout["other_processes_cores"] = _others(
                    (busy_before, busy_after), [(own_before, own_after), *zip(cpu_before, cpu_after,
                                                                               strict=True)],
                    fanout_s)
                fanout["cpu_ms_per_commit"] = {
                    who: (round((after - before) * 1000 / args.commits, 2)
                          if before is not None and after is not None else None)
                    for who, before, after in zip(("room", "subscribers"), cpu_before, cpu_after,
                                                  strict=True)}
                _show("fanout", fanout)
                stats = subs.stats()
            finally:
                subs.close()

    result = {
        "fanout_p99_ms_1000": fanout["from_request_p99_ms"],
        "fanout_median_ms": fanout["from_request_median_ms"],
        "commit_answer_median_ms": fanout["answer_median_ms"],
        "incomplete": fanout["incomplete"],
        "cpu_ms_per_commit": fanout["cpu_ms_per_commit"],
        "other_processes_cores": fanout["other_processes_cores"],
        "rss_per_subscriber_kb": round(per_stream_kb, 2),
        "session_idle_kb": round(session_kb, 2),
        "rss_kb": {"no_guests": rss_empty, "sessions": rss_sessions, "streams": rss_streams},
        "streams": subs.ready,
        "streams_open_at_end": stats["open"],
        "sessions": len(bearers),
        "max_sessions": limits.get("max_sessions"),
        "max_participants": limits.get("max_participants"),
        "one_more_stream_status": ninth,
        "pinning": pinning,
        "requests_per_minute": loadgen.HUGE_RATE,
        "total_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
