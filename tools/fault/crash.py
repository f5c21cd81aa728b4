"""Crash harness: SIGKILL a real `ce serve` mid-commit, restart it, check nothing acknowledged is lost.

    python tools/fault/crash.py --mode points --kills 60      # every write point in turn
    python tools/fault/crash.py --mode random --kills 2000    # at seeded random moments
    python tools/fault/crash.py --mode both --kills 2000 --seed 7

Several agents (threads, plain HTTP on the session ingress) each own one
section of a scratch document and commit to it as fast as they can: checkout
-> read -> propose -> approve (the host session, from the room's credential
file) -> commit. The room is killed with SIGKILL

* ``points``: through the test-only hook `commonroom.store.faults`
  (``COMMONROOM_FAULT=POINT:N``): the room kills itself the N-th time it
  reaches POINT; the points are taken in turn, N is seeded-random in 1..3;
* ``random``: by the harness, after a seeded-random delay.

After every restart (and once more at the end) it checks, through the API
and the file:

* every version acknowledged to a client (commit answered 200) is still
  there, byte-exact (its whole text hashes to the acknowledged content_hash
  and holds the section text that was committed);
* no silent revert: the version is at least the last acknowledged one, each
  section holds its last acknowledged text or the one whose commit was in
  flight at the kill, the versions run 1..current without a gap and none is
  an ``external edit`` (a recovery that took the old file for an edit);
* the file on disk equals the current version;
* event ids are contiguous, and every event seen before the kill is still
  there with the same type; each acknowledged version has its
  ``change.committed`` event;
* no stray ``.<name>.*.tmp`` temp file is left beside the document;
* no version a reader saw vanished or changed: a reader thread reads the
  whole document all along (read-only operations run on their own
  connection, engine/readpath.py), its versions never go back within a run of
  the room, and each one it saw is still there after the restart with the
  text it saw.

It prints one JSON object of figures (kills, acknowledged versions, lost,
per point) and exits 1 when any check failed. `run` is what
tests/reliability/test_crash.py calls for the CI-sized form.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root holds `tools`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.fault.forkserver import ForkedProcess, ForkServer

from commonroom.store.faults import ENV as FAULT_ENV
from commonroom.store.faults import POINTS

READY_TIMEOUT = 20.0
DEATH_TIMEOUT = 20.0  # a fault point not reached in this long is a failure
REQUEST_TIMEOUT = 10.0
HISTORY_PAGE = 200


class RoomDown(Exception):
    """The room stopped answering (it was killed): the agent's round ends."""


class CheckFailed(AssertionError):
    pass


def ce_path() -> str:
    beside = Path(sys.executable).parent / "ce"
    found = str(beside) if beside.exists() else shutil.which("ce")
    if not found:
        raise SystemExit("the `ce` console script is not installed (pip install -e .)")
    return found


def section(index: int) -> str:
    return f"Agent {index}"


def initial_section(index: int, agents: int) -> str:
    """A section's first text: its region runs up to the next heading, blank line included."""
    return f"## {section(index)}\n\nnothing yet\n" + ("\n" if index + 1 < agents else "")


def initial_document(agents: int) -> str:
    return "# Crash harness\n\nEach agent owns one section below.\n\n" + "".join(
        initial_section(i, agents) for i in range(agents))


# ------------------------------------------------------------------ the room


class Room:
    """One `ce serve` process on the harness's document: exec'd, or forked by `launcher`
    (tools/fault/forkserver.py: the same `ce serve`, without its second of imports)."""

    def __init__(self, doc: Path, runtime: Path, fault: str | None, *extra: str,
                 launcher: ForkServer | None = None) -> None:
        self.doc = doc
        self.runtime = runtime
        self.fault = fault
        env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
        env.pop(FAULT_ENV, None)
        if fault is not None:
            env[FAULT_ENV] = fault
        self.stderr_path = runtime / "room.err"
        self._stderr = self.stderr_path.open("wb")
        argv = [ce_path(), "serve", str(doc), "--json", "--port-owner", "0", "--port-ingress", "0",
                *extra]
        self.proc: subprocess.Popen[bytes] | ForkedProcess
        if launcher is None:
            self.proc = subprocess.Popen(argv, cwd=doc.parent, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        else:
            read_end, write_end = os.pipe()
            try:
                self.proc = launcher.spawn(argv, env=env, cwd=str(doc.parent), stdout=write_end,
                                           stderr=self._stderr.fileno(),
                                           stdout_reader=os.fdopen(read_end, "rb"))
            finally:
                os.close(write_end)
        self.port = 0
        self.host = ""
        self.invitation = ""

    def wait_ready(self) -> bool:
        """True once the ready line is read; False if the room died first (a fault in recovery)."""
        assert self.proc.stdout is not None
        line = _readline(self.proc.stdout, READY_TIMEOUT)
        if not line:
            self.proc.wait(READY_TIMEOUT)
            return False
        ready = json.loads(line)
        self.port = int(ready["ingress_port"])
        self.invitation = str(ready["invitation"])
        self.host = self._host_session()
        return True

    def _host_session(self) -> str:
        # The room writes its credential file before it prints the ready line.
        for path in (self.runtime / "commonroom").glob(f"{self.doc.name}-*.host.json"):
            creds = json.loads(path.read_text())
            if creds.get("pid") == self.proc.pid:
                return str(creds["host_session"])
        raise CheckFailed("no credential file of the running room")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(DEATH_TIMEOUT)

    def stop(self) -> int:
        """SIGINT, as Ctrl-C (SIGKILL after 10 s); its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")


def _readline(stream: Any, timeout: float) -> bytes:
    """One line from a pipe, or b"" at EOF; a room that says nothing in `timeout` is a failure."""
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not result:
        raise CheckFailed(f"the room printed no ready line within {timeout} s")
    return result[0]


# ------------------------------------------------------------------ HTTP


def call(port: int, method: str, path: str, bearer: str | None = None,
         body: Any = None, params: dict[str, Any] | None = None) -> tuple[int, Any]:
    """One request on a fresh connection; RoomDown when the room is gone."""
    if params:
        path += "?" + urllib.parse.urlencode(params)
    headers = {"Host": "commonroom"}
    data = None
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        raw = response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise RoomDown(str(exc)) from None
    finally:
        conn.close()
    try:
        return response.status, json.loads(raw)
    except ValueError:
        raise CheckFailed(f"{method} {path}: a non-JSON body ({response.status})") from None


def ok(port: int, method: str, path: str, bearer: str | None = None,
       body: Any = None, params: dict[str, Any] | None = None) -> Any:
    status, answer = call(port, method, path, bearer, body, params)
    if status != 200:
        raise CheckFailed(f"{method} {path}: {status} {answer}")
    return answer


# ------------------------------------------------------------------ agents


@dataclass
class Ack:
    version: int
    content_hash: str
    agent: int
    text: str  # the section text that was committed


@dataclass
class Agent:
    index: int
    session: str = ""
    seq: int = 0
    acked: list[Ack] = field(default_factory=list)
    baseline: str = ""  # what the section is known to hold: last acknowledged or checked
    in_flight: str | None = None  # section text whose commit got no answer
    errors: list[str] = field(default_factory=list)
    down: str = ""  # why its last round ended

    @property
    def region(self) -> str:
        return section(self.index)



@dataclass
class Reader:
    """Reads the whole document while the agents commit: what it saw must never vanish."""

    session: str = ""
    seen: dict[int, str] = field(default_factory=dict)  # version -> hash of the text read
    checked: set[int] = field(default_factory=set)  # versions verified after a restart
    reads: int = 0
    errors: list[str] = field(default_factory=list)


READ_PAUSE = 0.05  # a reader's pace: under the request limit of its one session


def reader_round(reader: Reader, room: Room, stop: threading.Event) -> None:
    """Read the whole document until the room goes away (or `stop`)."""
    last = 0
    try:
        while not stop.is_set():
            status, answer = call(room.port, "GET", "/workspace/read", reader.session,
                                  params={"region": "workspace"})
            if status == 429:
                time.sleep(float(answer.get("retry_after_seconds") or 1))
                continue
            if status != 200:
                reader.errors.append(f"read answered {status} {answer}")
                return
            version = int(answer["version"])
            digest = hashlib.sha256(answer["content"].encode("utf-8", "surrogateescape")).hexdigest()
            if version < last:
                reader.errors.append(f"a reader went back from version {last} to {version}")
                return
            if reader.seen.setdefault(version, digest) != digest:
                reader.errors.append(f"version {version} was read with two different texts")
                return
            last = version
            reader.reads += 1
            time.sleep(READ_PAUSE)
    except RoomDown:
        pass  # killed: the round is over


def check_reads(room: Room, reader: Reader) -> None:
    """Every version the reader saw is still there, with the text it saw."""
    for version in sorted(set(reader.seen) - reader.checked):
        status, whole = read_version(room.port, room.host, version)
        if status == 404:
            raise CheckFailed(f"version {version}, which a reader saw, vanished")
        if status != 200:
            raise CheckFailed(f"reading version {version}: {status} {whole}")
        digest = hashlib.sha256(whole["content"].encode("utf-8", "surrogateescape")).hexdigest()
        if digest != reader.seen[version]:
            raise CheckFailed(f"version {version} changed after a reader saw it")
        reader.checked.add(version)


def agent_round(agent: Agent, room: Room, agents: int, stop: threading.Event, token: str) -> None:
    """Commit to the agent's section until the room goes away (or `stop`)."""
    try:
        _commit_loop(agent, room, agents, stop, token)
    except RoomDown as down:
        agent.down = str(down)  # killed (the round is over), or the room failed us: see below
    except CheckFailed as failure:
        agent.errors.append(str(failure))


def _commit_loop(agent: Agent, room: Room, agents: int, stop: threading.Event, token: str) -> None:
    port = room.port
    while not stop.is_set():
        ok(port, "POST", "/workspace/checkout", agent.session,
           {"region": agent.region, "minutes": 15})
        read = ok(port, "GET", "/workspace/read", agent.session, params={"region": agent.region})
        agent.seq += 1
        text = f"## {agent.region}\n\ncommit {agent.index}.{agent.seq} {token}\n"
        if agent.index + 1 < agents:
            text += "\n"  # a section before the next heading keeps its blank line
        proposal = ok(port, "POST", "/workspace/propose", agent.session, {
            "region": agent.region, "base_version": read["version"],
            "summary": f"commit {agent.index}.{agent.seq}", "content": text})
        ok(port, "POST", "/workspace/proposal/review", room.host,
           {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
        agent.in_flight = text
        status, answer = call(port, "POST", "/workspace/commit", agent.session,
                              {"proposal_id": proposal["proposal_id"]})
        if status != 200:
            agent.in_flight = None
            agent.errors.append(f"commit answered {status} {answer}")
            return
        agent.acked.append(Ack(int(answer["version"]), str(answer["content_hash"]),
                               agent.index, text))
        agent.baseline, agent.in_flight = text, None


# ------------------------------------------------------------------ checks


@dataclass
class Ledger:
    """What the checks carry from one restart to the next."""

    checked_versions: int = 0  # acknowledged versions verified byte-exact so far
    version_floor: int = 1  # versions 1..floor were seen gapless and not external
    events: dict[int, str] = field(default_factory=dict)  # event id -> type, as last seen
    max_event_id: int = 0
    lost: int = 0  # acknowledged versions found missing or changed


def check_room(room: Room, agents: list[Agent], ledger: Ledger, *, full: bool = False) -> None:
    """Everything promised after a crash; CheckFailed names the first thing broken."""
    port, host = room.port, room.host
    status = ok(port, "GET", "/workspace/status", host)
    current = int(status["version"])
    acked = sorted((a for agent in agents for a in agent.acked), key=lambda a: a.version)
    if acked and current < acked[-1].version:
        raise CheckFailed(f"silent revert: version {current} < acknowledged {acked[-1].version}")
    # The file equals the current version.
    on_disk = hashlib.sha256(room.doc.read_bytes()).hexdigest()
    if on_disk != status["content_hash"]:
        raise CheckFailed(f"the file differs from version {current}")
    strays = sorted(p.name for p in room.doc.parent.glob(f".{room.doc.name}.*.tmp"))
    if strays:
        raise CheckFailed(f"stray temp files survived the restart: {strays}")
    # Each section holds its last acknowledged text (or the one in flight at the kill).
    for agent in agents:
        text = ok(port, "GET", "/workspace/read", host, params={"region": agent.region})["content"]
        allowed = {agent.baseline, agent.in_flight} - {None}
        if text not in allowed:
            raise CheckFailed(f"section {agent.region!r} reverted: {text!r}, expected one of {allowed}")
        agent.baseline, agent.in_flight = text, None  # an unanswered commit that landed stays
    _check_versions(port, host, ledger, current)
    # Acknowledged versions, byte-exact: the new ones now, all of them at the end.
    new = acked[ledger.checked_versions:]
    todo = acked if full else new
    lost: list[int] = []
    # Spread the reads over every session: each bearer may make 600 requests a minute.
    bearers = [host, *(agent.session for agent in agents)]
    for n, ack in enumerate(todo):
        status_code, whole = read_version(port, bearers[n % len(bearers)], ack.version)
        if status_code == 404:
            lost.append(ack.version)
            continue
        if status_code != 200:
            raise CheckFailed(f"reading version {ack.version}: {status_code} {whole}")
        data = whole["content"].encode("utf-8", "surrogateescape")
        if (whole["truncated"] or hashlib.sha256(data).hexdigest() != ack.content_hash
                or ack.text not in whole["content"]):
            lost.append(ack.version)
    if lost:
        ledger.lost = len(lost)
        raise CheckFailed(f"acknowledged versions lost or changed: {lost[:20]}")
    ledger.checked_versions = len(acked)
    _check_events(port, host, ledger, {a.version for a in new})


def read_version(port: int, bearer: str, version: int) -> tuple[int, Any]:
    """The whole text of `version`, waiting out the rate limit (the final check reads them all)."""
    while True:
        status, answer = call(port, "GET", "/workspace/read", bearer,
                              params={"region": "workspace", "version": version})
        if status != 429:
            return status, answer
        time.sleep(min(5.0, float(answer.get("retry_after_seconds") or 1)))


def _check_versions(port: int, host: str, ledger: Ledger, current: int) -> None:
    """Versions run floor+1..current with no gap, and none is a recovery's false external edit."""
    after = ledger.version_floor
    while after < current:
        page = ok(port, "GET", "/workspace/changes_since", host,
                  params={"version": after, "limit": HISTORY_PAGE})
        changes = page["changes"]
        if not changes:
            raise CheckFailed(f"versions after {after} are missing (current {current})")
        for change in changes:
            if change["version"] != after + 1:
                raise CheckFailed(f"version gap: {after} then {change['version']}")
            if change["participant_id"] is None:
                raise CheckFailed(f"version {change['version']} is an external edit ({change['summary']})")
            after = change["version"]
    ledger.version_floor = current


def _check_events(port: int, host: str, ledger: Ledger, versions: set[int]) -> None:
    """Event ids contiguous down to what was seen before; earlier events unchanged."""
    seen: dict[int, str] = {}
    committed: set[int] = set()
    before: int | None = None
    while True:
        params: dict[str, Any] = {"limit": HISTORY_PAGE}
        if before is not None:
            params["before_event_id"] = before
        events = ok(port, "GET", "/workspace/history", host, params=params)["events"]
        for event in events:
            event_id = int(event["event_id"])
            if before is not None and event_id != before - 1:
                raise CheckFailed(f"event ids jump from {before} to {event_id}")
            seen[event_id] = str(event["type"])
            if event["type"] == "change.committed":
                committed.add(int(event["payload"]["version"]))
            before = event_id
        if len(events) < HISTORY_PAGE or before is None or before <= ledger.max_event_id:
            break
    if not seen:
        raise CheckFailed("the history is empty")
    if max(seen) < ledger.max_event_id:
        raise CheckFailed(f"events lost: newest is {max(seen)}, {ledger.max_event_id} was seen before")
    for event_id, kind in seen.items():
        if event_id in ledger.events and ledger.events[event_id] != kind:
            raise CheckFailed(f"event {event_id} changed from {ledger.events[event_id]} to {kind}")
    oldest = min(seen)
    missing = {v for v in versions if v not in committed}
    if missing and oldest <= ledger.max_event_id:
        # Only when the pages reached back to the last check (they do unless the
        # ring of 2000 turned over in between).
        raise CheckFailed(f"no change.committed event for acknowledged versions {sorted(missing)}")
    ledger.events = seen
    ledger.max_event_id = max(seen)


# ------------------------------------------------------------------ the run


@dataclass
class Figures:
    mode: str
    seed: int
    agents: int
    kills: int = 0
    kills_in_recovery: int = 0  # a fault point reached while the restart rolled a version forward
    acknowledged: int = 0
    reads: int = 0  # whole-document reads answered while the agents committed
    versions_read: int = 0  # distinct versions the reader saw (each checked after restarts)
    lost: int = 0
    restarts: int = 0
    per_point: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def plan(mode: str, kills: int, rng: random.Random, points: tuple[str, ...] = POINTS,
         ) -> list[tuple[str, str | None, float]]:
    """(label, fault env value or None, harness kill delay) per kill; the points taken in turn."""
    steps: list[tuple[str, str | None, float]] = []
    for n in range(kills):
        if mode == "points" or (mode == "both" and n % 2 == 0):
            point = points[(n if mode == "points" else n // 2) % len(points)]
            steps.append((point, f"{point}:{rng.randint(1, 3)}", 0.0))
        else:
            steps.append(("random", None, rng.uniform(0.0, 0.25)))
    return steps


@contextlib.contextmanager
def scratch(folder: Path | None) -> Iterator[Path]:
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="commonroom-crash-") as name:
        yield Path(name)


def run(mode: str, kills: int, *, seed: int = 1, agents: int = 4, folder: Path | None = None,
        log: Any = None, points: tuple[str, ...] = POINTS,
        launcher: ForkServer | None = None) -> Figures:
    """Kill the room `kills` times; the figures, with `failures` empty when every check held.

    `points`: the write points the points mode takes in turn (default: all of them).
    `launcher`: fork each start of `ce serve` from this server instead of exec'ing it."""
    rng = random.Random(seed)
    figures = Figures(mode=mode, seed=seed, agents=agents)
    started = time.monotonic()
    steps = plan(mode, kills, rng, points)
    start = functools.partial(_start_until_up, launcher=launcher)
    with scratch(folder) as base:
        doc_dir = base / "doc"
        runtime = base / "runtime"
        doc_dir.mkdir()
        runtime.mkdir(mode=0o700)
        doc = doc_dir / "crash.md"
        doc.write_text(initial_document(agents))
        crew = [Agent(i, baseline=initial_section(i, agents)) for i in range(agents)]
        reader = Reader()
        ledger = Ledger()
        room: Room | None = None
        try:
            # The first start creates the workspace (a version row), so no fault is armed in it.
            room = start(doc, runtime, figures, None)
            invite = ok(room.port, "POST", "/workspace/invite", room.host,
                        {"max_uses": agents + 1})
            for agent in crew:
                joined = ok(room.port, "POST", "/session/join",
                            body={"invite": invite["invitation"], "name": f"agent-{agent.index}"})
                agent.session = joined["session_id"]
            reader.session = ok(room.port, "POST", "/session/join",
                                body={"invite": invite["invitation"], "name": "reader"})["session_id"]
            check_room(room, crew, ledger)
            if steps and steps[0][1] is not None:
                room.stop()
                room.close()
                room = start(doc, runtime, figures, steps[0][1])
            for n, (_, _, delay) in enumerate(steps):
                # The room was started with this step's fault armed (or none: random
                # mode, or its point was already reached while recovering).
                label = _drive_until_killed(room, crew, rng, delay, reader)
                figures.kills += 1
                figures.per_point[label] = figures.per_point.get(label, 0) + 1
                room.close()
                following = steps[n + 1][1] if n + 1 < len(steps) else None
                room = start(doc, runtime, figures, following)
                check_room(room, crew, ledger)
                check_reads(room, reader)
                if log is not None:
                    acked = sum(len(a.acked) for a in crew)
                    print(f"kill {figures.kills} at {label}: {acked} acknowledged so far", file=log)
            check_room(room, crew, ledger, full=True)
            check_reads(room, reader)
            code = room.stop()
            if code != 0:
                raise CheckFailed(f"the room exited {code} on SIGINT: {room.stderr()[-400:]}")
        except CheckFailed as failure:
            figures.failures.append(str(failure))
        finally:
            if room is not None:
                room.close()
        for agent in crew:
            figures.failures.extend(f"agent {agent.index}: {e}" for e in agent.errors)
        figures.failures.extend(f"reader: {e}" for e in reader.errors)
        figures.reads, figures.versions_read = reader.reads, len(reader.seen)
        figures.acknowledged = sum(len(a.acked) for a in crew)
        figures.lost = ledger.lost
    figures.seconds = round(time.monotonic() - started, 1)
    return figures


def _start_until_up(doc: Path, runtime: Path, figures: Figures, fault: str | None, *,
                    launcher: ForkServer | None) -> Room:
    """Start the room (with `fault` armed); a fault point reached while it recovers is a
    kill too, counted as such, and then it starts without the hook."""
    room = Room(doc, runtime, fault, launcher=launcher)
    figures.restarts += 1
    if room.wait_ready():
        return room
    point = fault.partition(":")[0] if fault else "?"
    if room.proc.returncode != -signal.SIGKILL or f"SIGKILL at {point}" not in room.stderr():
        raise CheckFailed(f"the room did not start ({room.proc.returncode}): {room.stderr()[-600:]}")
    figures.kills += 1
    figures.kills_in_recovery += 1
    label = f"{point} (in recovery)"
    figures.per_point[label] = figures.per_point.get(label, 0) + 1
    room.close()
    return _start_until_up(doc, runtime, figures, None, launcher=launcher)


def _drive_until_killed(room: Room, crew: list[Agent], rng: random.Random, delay: float,
                        reader: Reader) -> str:
    """Agents commit (and the reader reads) until the room dies: at its armed fault point,
    or by our SIGKILL after `delay`. Returns where it died."""
    stop = threading.Event()
    token = f"{rng.getrandbits(48):012x}"
    before = sum(len(agent.acked) for agent in crew)
    threads = [threading.Thread(target=agent_round, args=(agent, room, len(crew), stop, token),
                                daemon=True) for agent in crew]
    reading = threading.Thread(target=reader_round, args=(reader, room, stop), daemon=True)
    reading.start()
    for thread in threads:
        thread.start()
    try:
        if room.fault is None:
            # The seeded delay runs from this round's first acknowledged commit, so every
            # round has work in flight when it dies however slow the machine is (a bare
            # delay from the start killed rounds that had not reached a commit yet).
            _wait_for_an_acknowledgement(room, crew, threads, before)
            time.sleep(delay)
            room.kill()
            label = "random"
        else:
            label = room.fault.partition(":")[0]
            deadline = time.monotonic() + DEATH_TIMEOUT
            while room.proc.poll() is None:
                if not any(t.is_alive() for t in threads):
                    # The agents saw their connections close: the kernel closes a killed
                    # process's sockets a moment before its parent can reap it.
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        room.proc.wait(2.0)
                    if room.proc.poll() is not None:
                        break
                if time.monotonic() > deadline or not any(t.is_alive() for t in threads):
                    raise CheckFailed(f"fault point {room.fault} not reached: the agents stopped"
                                      f" ({[a.down for a in crew]}) or {DEATH_TIMEOUT} s passed")
                time.sleep(0.005)
            _expect_fault_kill(room, label)
    finally:
        stop.set()
        if room.proc.poll() is None:
            room.kill()
        for thread in [*threads, reading]:
            thread.join(REQUEST_TIMEOUT + 5)
    return label


def _wait_for_an_acknowledgement(room: Room, crew: list[Agent], threads: list[threading.Thread],
                                 before: int) -> None:
    deadline = time.monotonic() + DEATH_TIMEOUT
    while sum(len(agent.acked) for agent in crew) <= before:
        if time.monotonic() > deadline or not any(t.is_alive() for t in threads):
            raise CheckFailed(f"no commit acknowledged in {DEATH_TIMEOUT} s of a round"
                              f" ({[a.down for a in crew]}): {room.stderr()[-400:]}")
        time.sleep(0.005)


def _expect_fault_kill(room: Room, label: str) -> None:
    if room.proc.returncode != -signal.SIGKILL or f"SIGKILL at {label}" not in room.stderr():
        raise CheckFailed(f"the room died ({room.proc.returncode}) but not at {label}:"
                          f" {room.stderr()[-600:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--mode", choices=("points", "random", "both"), default="both")
    parser.add_argument("--kills", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--folder", type=Path, help="work folder (default: a fresh temp folder)")
    parser.add_argument("--point", action="append", choices=POINTS, dest="points",
                        help="only this write point (repeatable; default: every point)")
    parser.add_argument("--fork", action="store_true",
                        help="fork each start of `ce serve` from one process that imported it"
                             " (tools/fault/forkserver.py) instead of exec'ing it: same kills,"
                             " about a second less CPU per restart")
    parser.add_argument("--quiet", action="store_true", help="no line per kill")
    args = parser.parse_args()
    launcher = ForkServer() if args.fork else None
    try:
        figures = run(args.mode, args.kills, seed=args.seed, agents=args.agents,
                      folder=args.folder, log=None if args.quiet else sys.stderr,
                      points=tuple(args.points or POINTS), launcher=launcher)
    finally:
        if launcher is not None:
            launcher.close()
    print(json.dumps(figures.as_json(), indent=2))
    return 1 if figures.failures else 0


if __name__ == "__main__":
    sys.exit(main())
