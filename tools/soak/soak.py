"""Soak: a real room, many agents for N minutes, an invariant checker and a secrets audit.

    .venv/bin/python tools/soak/soak.py --agents 32 --minutes 10

Starts `ce serve FILE --json` (the CLI's own `main`, in a Python that logs
everything at DEBUG to the room's stderr: the most verbose the room can be)
around a fresh markdown file in a temp folder, then runs, as trio tasks of
this process, over raw HTTP/1.1 (the byte client, one connection per
request, as `ce` does):

- `--agents` agents that lease (1-minute leases: some are left to expire),
  read, propose, wait for the review, commit, renew, release, withdraw, send
  room text (some addressed), request and answer handoffs, read around, and
  leave and rejoin (at most `--rejoins-per-minute`: joins share the
  anonymous 60/min limit);
- `--observers` observers on `GET /workspace/observe` that drop their
  connection now and then and resume with `Last-Event-ID` or
  `?since_event_id`;
- a host script on the owner port (the one-time owner link of the ready line,
  its fragment token exchanged for the page credential header): it watches the owner page's event stream,
  approves (some amended) or rejects every proposal, mints invitations, and
  revokes a participant's sessions now and then (agents and observers).

It samples the room's VmRSS every second, times every request, and at the end
checks the invariants (`checker.py`) against the streams, the acknowledged
commits and the final state, and audits what the room said for the secrets it
handed out (`secrets_audit.py`). Prints its figures, then one JSON line; exits
1 on any violation or secret found.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import trio

if __package__ in (None, ""):  # run as a script: the repository root holds `tools`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.soak.checker import Ack, Checker, ObserverLog, related
from tools.soak.secrets_audit import Secret, find_secrets

from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import secret_from
from commonroom.protocol.operations import OPERATIONS_BY_NAME
from commonroom.wire import aio

REQUEST_TIMEOUT = 30.0
READY_TIMEOUT = 30.0
MCP_VERSION = "2026-07-28"
# The room, started the way `ce` starts it, with every logger at DEBUG on stderr.
LAUNCH = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,"
    " format='%(asctime)s %(levelname)s %(name)s %(message)s')\n"
    "from commonroom.cli.main import main\n"
    "sys.argv[0] = 'ce'\n"
    "main()\n"
)
EDIT_LINE = re.compile(r"^edited: .*$", re.MULTILINE)
PARTS = ("Alpha", "Beta", "Gamma", "Delta", "Epsilon", "Zeta", "Eta", "Theta")
CHILDREN = ("one", "two", "three")


def soak_document() -> str:
    """Eight sections of three subsections; every region's own text has one `edited:` line."""
    lines = ["# Soak room", "", "edited: nobody", ""]
    for part in PARTS:
        lines += [f"## {part}", "", "edited: nobody", ""]
        for child in CHILDREN:
            lines += [f"### {part} {child}", "", "edited: nobody", ""]
    return "\n".join(lines)


@dataclass
class SoakConfig:
    agents: int = 32
    minutes: float = 10.0
    observers: int = 4
    seed: int = 1
    warmup_fraction: float = 0.25  # RSS slope is fitted after this share of the run
    think_s: tuple[float, float] = (0.2, 1.0)  # pause between an agent's actions
    rejoins_per_minute: float = 8.0  # leaves + rejoins of agents, all together
    revoke_every_s: float = 10.0  # the host revokes someone's sessions this often
    reconnect_every_s: float = 15.0  # mean time between an observer's reconnects
    expiry_slack_s: float = 2.0  # lease.expired at most this late (PROTOCOL: within 1 s)
    stream_end_slack_s: float = 2.0  # a revoked session's stream ends at most this late (1 s)
    stall_s: float = 30.0  # observer 0 stops reading (at most this long) 30 % into the run (0: never)
    drain_s: float = 5.0  # after the load, wait for the leases expiring within this many seconds
    max_rss_slope_kb_per_min: float | None = None  # a violation above it (None: report only)
    workdir: Path | None = None  # None: a temp folder, removed afterwards


# ---------------------------------------------------------------------------- the room process


class RoomProcess:
    """`ce serve DOC --json --port-owner 0 --port-ingress 0`, logging at DEBUG."""

    def __init__(self, doc: Path, runtime_dir: Path) -> None:
        self.doc = doc
        self.runtime_dir = runtime_dir
        self.stderr_path = doc.parent / "room.stderr"
        self.stdout = bytearray()
        self.ready: dict[str, Any] = {}
        self._ready_event = trio.Event()
        self._eof = trio.Event()
        self.proc: trio.Process | None = None
        self.returncode: int | None = None

    async def start(self, nursery: trio.Nursery) -> None:
        env = dict(os.environ, XDG_RUNTIME_DIR=str(self.runtime_dir), PYTHONUNBUFFERED="1")
        with self.stderr_path.open("wb") as stderr:
            self.proc = await trio.lowlevel.open_process(
                [sys.executable, "-c", LAUNCH, "serve", str(self.doc), "--json",
                 "--port-owner", "0", "--port-ingress", "0"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                env=env, cwd=str(self.doc.parent),
            )
        nursery.start_soon(self._read_stdout)
        with trio.move_on_after(READY_TIMEOUT):
            await self._ready_event.wait()
        if not self.ready:
            await self.stop()
            raise RuntimeError(f"the room did not get ready:\n{self.stderr_text()[-4000:]}")

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for chunk in self.proc.stdout:
            self.stdout += chunk
            if not self.ready and b"\n" in self.stdout:
                self.ready = json.loads(self.stdout.split(b"\n", 1)[0])
                self._ready_event.set()
        self._eof.set()
        self._ready_event.set()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def stop(self) -> int:
        """SIGINT as Ctrl-C; SIGKILL after 10 s. The exit code."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
            with trio.move_on_after(10):
                await self.proc.wait()
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
        with trio.move_on_after(5):
            await self._eof.wait()
        self.returncode = await self.proc.wait()
        return self.returncode

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stdout_after_ready(self) -> str:
        """Everything the room printed on stdout after its ready line (which carries secrets)."""
        return bytes(self.stdout).split(b"\n", 1)[1].decode(errors="replace") if b"\n" in self.stdout else ""

    def rss_kb(self) -> int | None:
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        return int(found.group(1)) if found else None


# ---------------------------------------------------------------------------- wire


@dataclass
class Answer:
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def code(self) -> str | None:
        return self.body.get("error") if isinstance(self.body, dict) else None

    def __getitem__(self, key: str) -> Any:
        return self.body[key]


class Refused(Exception):
    """The room refused a join it should have accepted (recorded as a violation)."""


class SessionEnded(Exception):
    """A 401: the agent's session was revoked (or ended) under it."""


@dataclass
class Wire:
    """Every request of the soak: timed per operation; error bodies and answers kept for the audit."""

    violations: list[str]
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    codes: Counter[tuple[str, str]] = field(default_factory=Counter)
    error_bodies: list[tuple[str, str]] = field(default_factory=list)
    answers: list[tuple[str, str]] = field(default_factory=list)
    requests: int = 0

    async def call(
        self, op: str, port: int, method: str, path: str, params: dict[str, Any] | None = None, *,
        headers: dict[str, str] | None = None, audit: bool = True, raw: bytes | None = None,
    ) -> Answer:
        """One request on a fresh connection; `audit=False` for the answers that hand out secrets."""
        target, body = path, raw
        sent = dict(headers or {})
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        if method == "GET":
            if clean:
                target += "?" + urlencode(clean)
        elif body is None:
            body = json.dumps(clean).encode()
            sent.setdefault("Content-Type", "application/json")
        started = time.perf_counter()
        self.requests += 1
        try:
            with trio.fail_after(REQUEST_TIMEOUT):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                response = await aio.request(stream, method, target, headers=sent, body=body)
        except trio.TooSlowError:
            self.violations.append(f"{op}: no answer within {REQUEST_TIMEOUT:g} s")
            return Answer(599, {"error": "timeout"})
        except (CommonroomError, OSError) as exc:
            self.violations.append(f"{op}: the room could not be reached ({type(exc).__name__})")
            return Answer(599, {"error": "unreachable"})
        self.latency[op].append(time.perf_counter() - started)
        text = response.body.decode("utf-8", "replace")
        try:
            parsed: Any = json.loads(text)
        except json.JSONDecodeError:
            parsed = None
        if response.status >= 400:
            self.error_bodies.append((f"error body ({op}, {response.status})", text))
            ok_shape = (isinstance(parsed, dict) and isinstance(parsed.get("error"), str)
                        and isinstance(parsed.get("message"), str)
                        and isinstance(parsed.get("details"), dict))
            if not ok_shape and not op.startswith("mcp"):  # MCP errors are JSON-RPC envelopes
                self.violations.append(f"{op}: a {response.status} error not in the protocol's shape")
            self.codes[(op, str(parsed.get("error") if isinstance(parsed, dict) else "?"))] += 1
        else:
            self.codes[(op, "ok")] += 1
            if audit:
                self.answers.append((f"answer ({op})", text))
        if response.status >= 500:
            self.violations.append(f"{op}: HTTP {response.status} {text[:200]}")
        return Answer(response.status, parsed)

    async def stream(self, port: int, path: str, headers: dict[str, str], *, small_window: bool = False
                     ) -> tuple[int, AsyncIterator[aio.SSEMessage] | bytes]:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        if small_window:
            # A small receive window, so a reader that stops reading backs up into the room
            # within seconds instead of into megabytes of loopback buffers.
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        status, _, chunks = await aio.open_stream(stream, path, headers=headers)
        self.requests += 1
        if status != 200:
            async with chunks:
                raw = await chunks.read_all()
            self.error_bodies.append((f"error body (observe, {status})", raw.decode(errors="replace")))
            return status, raw
        return status, aio.iter_sse(chunks)


def route(op: str) -> tuple[str, str]:
    spec = OPERATIONS_BY_NAME[op]
    return spec.method, spec.path


# ---------------------------------------------------------------------------- participants


@dataclass
class Agent:
    index: int
    rng: random.Random
    generation: int = 0
    session: str = ""
    participant_id: str = ""
    edits: int = 0
    leaving: bool = False  # its leave is in flight: others may see it gone already

    @property
    def name(self) -> str:
        return f"agent-{self.index:02d}-g{self.generation}"


@dataclass
class Observer:
    index: int
    log: ObserverLog
    rng: random.Random
    generation: int = 0
    session: str = ""
    participant_id: str = ""
    revoked_at: float | None = None  # perf_counter when the host's revoke was answered
    # Set when the host starts revoking: the room may end the stream before the host has
    # read its answer (events are published once the answer is written).
    revoke_done: trio.Event | None = None
    sleepy: bool = False  # stops reading once for `stall_s`: the room must drop it to `resync`
    stalled: bool = False


@dataclass
class Figures:
    commits: int = 0
    stale_commits: int = 0
    proposals: int = 0
    approved: int = 0
    amended: int = 0
    rejected: int = 0
    withdrawn: int = 0
    lease_conflicts: int = 0
    abandoned_leases: int = 0
    renewals: int = 0
    messages: int = 0
    handoffs_requested: int = 0
    handoffs_answered: int = 0
    leaves: int = 0
    rejoins: int = 0
    revokes: int = 0
    reconnects: int = 0
    rate_limited: int = 0
    max_stream_end_s: float = 0.0


class Soak:
    def __init__(self, config: SoakConfig, workdir: Path) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.workdir = workdir
        self.violations: list[str] = []
        self.wire = Wire(self.violations)
        self.figures = Figures()
        self.secrets: list[Secret] = []
        self.ended_sessions: dict[str, float] = {}  # bearer -> perf_counter when it ended
        self.acks: list[Ack] = []
        self.acked_texts: list[tuple[int, str, str]] = []  # (version, region, content)
        self.agents: list[Agent] = []
        self.observers: list[Observer] = []
        self.owner_log = ObserverLog("owner page stream", 0)
        self.regions: list[str] = []
        self.final_target: int | None = None
        self.observers_done = 0
        self.all_observers_done = trio.Event()
        self.rss: list[tuple[float, int]] = []
        self.leave_tickets = 1
        doc = workdir / "soak.md"
        doc.write_text(soak_document())
        runtime = workdir / "runtime"
        runtime.mkdir(mode=0o700)
        self.room = RoomProcess(doc, runtime)
        self.owner_credential = ""

    def violate(self, text: str) -> None:
        self.violations.append(text)

    def secret(self, kind: str, value: str) -> None:
        self.secrets.append(Secret(kind, value))

    # -- ports ----------------------------------------------------------------------

    @property
    def ingress(self) -> int:
        return int(self.room.ready["ingress_port"])

    @property
    def owner(self) -> int:
        return int(self.room.ready["owner_port"])

    # -- the host on the owner port ---------------------------------------------------

    async def owner_login(self) -> None:
        token = urlsplit(self.room.ready["human_url"]).fragment.removeprefix("token=")
        self.secret("owner_login_token", token)
        host = {"Host": f"127.0.0.1:{self.owner}", "Content-Type": "application/json"}
        stream = await trio.open_tcp_stream("127.0.0.1", self.owner)
        login = await aio.request(stream, "POST", "/owner/login", headers=host,
                                         body=json.dumps({"token": token}).encode())
        if login.status != 200:
            raise RuntimeError(f"owner login failed ({login.status})")
        self.owner_credential = str(login.json()["credential"])
        self.secret("owner_credential", self.owner_credential)
        creds = list((self.room.runtime_dir / "commonroom").glob("*.host.json"))
        for path in creds:
            self.secret("host_session", json.loads(path.read_text())["host_session"])

    def owner_headers(self) -> dict[str, str]:
        return {"Host": f"127.0.0.1:{self.owner}", "X-Commonroom-Owner": self.owner_credential}

    async def host(self, op: str, params: dict[str, Any] | None = None, *, expect: tuple[str, ...] = (),
                   audit: bool = True) -> Answer:
        method, path = route(op)
        answer = await self.wire.call(op, self.owner, method, "/owner/api" + path, params,
                                      headers=self.owner_headers(), audit=audit)
        if not answer.ok and answer.code not in expect and answer.status < 599:
            self.violate(f"host {op}: unexpected {answer.status} {answer.code}: {_message(answer)}")
        return answer

    async def invitation(self, capabilities: list[str] | None = None) -> str:
        answer = await self.host("workspace.invite", {"capabilities": capabilities, "max_uses": 1,
                                                      "expires_in_minutes": 30}, audit=False)
        if not answer.ok:
            raise RuntimeError(f"the host could not invite: {answer.body}")
        uri = str(answer["invitation"])
        self.secret("invitation_secret", secret_from(uri))
        self.secret("invitation_uri", uri.rsplit("/", 1)[1].rstrip("="))
        return uri

    async def join(self, invitation: str, name: str) -> Answer:
        method, path = route("session.join")
        while True:
            answer = await self.wire.call("session.join", self.ingress, method, path,
                                          {"invite": invitation, "name": name, "kind": "agent"},
                                          audit=False)
            if answer.status == 429 and answer.body.get("details", {}).get("scope") == "requests":
                self.figures.rate_limited += 1  # the anonymous 60/min: wait, as a client should
                await trio.sleep(float(answer.body.get("retry_after_seconds", 1)))
                continue
            if not answer.ok:
                # The soak never has more than agents + observers in the room, far below the
                # room's limits (64 sessions, 256 participants): any refusal is a bug.
                self.violate(f"{name}: the room refused a join: {answer.status} {answer.code}:"
                             f" {_message(answer)}")
                raise Refused(name)
            self.secret("session", str(answer["session_id"]))
            return answer

    async def reviewer(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Reads the owner page's event stream (an observer too) and reviews every proposal."""
        status, messages = await self.wire.stream(self.owner, "/owner/api/workspace/observe?since_event_id=0",
                                                  self.owner_headers())
        if isinstance(messages, bytes):
            raise RuntimeError(f"owner observe: {status}")
        task_status.started()
        async with trio.open_nursery() as nursery, aclosing(messages) as stream:  # type: ignore[type-var]
            async for message in stream:
                event = self.take(self.owner_log, message)
                if event is None:
                    continue
                if event["type"] == "proposal.created" and self.final_target is None:
                    nursery.start_soon(self.review, event["payload"]["proposal_id"])
                if self.final_target is not None and self.owner_log.last_id >= self.final_target:
                    break
        self.observer_finished()

    async def review(self, proposal_id: str) -> None:
        await trio.sleep(self.rng.uniform(0.05, 0.5))  # a person reading the diff
        roll = self.rng.random()
        expect = ("proposal_conflict",)  # withdrawn or superseded meanwhile
        if roll < 0.2:
            answer = await self.host("workspace.review", {"proposal_id": proposal_id, "decision": "reject",
                                                          "comment": "not now"}, expect=expect)
            self.figures.rejected += answer.ok
            return
        params: dict[str, Any] = {"proposal_id": proposal_id, "revision": 1, "decision": "approve"}
        if roll > 0.92:
            detail = await self.host("workspace.proposal", {"proposal_id": proposal_id})
            if detail.ok:
                params["content"] = EDIT_LINE.sub(lambda m: m.group(0) + " (amended)",
                                                  str(detail["content"]), count=1)
        answer = await self.host("workspace.review", params, expect=expect)
        if answer.ok:
            self.figures.approved += 1
            self.figures.amended += "content" in params

    async def revoker(self) -> None:
        """Now and then end someone's sessions: an agent (it rejoins) or an observer (it resumes)."""
        while True:
            await trio.sleep(self.config.revoke_every_s)
            if self.observers and self.rng.random() < 0.3:
                observer = self.rng.choice(self.observers)
                if not observer.session or observer.revoke_done is not None or observer.sleepy:
                    continue
                bearer = observer.session
                done = observer.revoke_done = trio.Event()
                answer = await self.host("session.revoke", {"participant_id": observer.participant_id})
                if answer.ok:
                    observer.revoked_at = time.perf_counter()
                    self.ended_sessions[bearer] = observer.revoked_at
                    self.figures.revokes += 1
                done.set()
                continue
            agent = self.rng.choice(self.agents)
            if not agent.session:
                continue
            bearer = agent.session
            answer = await self.host("session.revoke", {"participant_id": agent.participant_id})
            if answer.ok:
                self.ended_sessions.setdefault(bearer, time.perf_counter())
                self.figures.revokes += 1

    async def ticket_dispenser(self) -> None:
        """Leaves are budgeted: each rejoin costs an anonymous request (60/min per address)."""
        while True:
            await trio.sleep(60 / self.config.rejoins_per_minute)
            self.leave_tickets = min(self.leave_tickets + 1, 3)

    # -- agents -----------------------------------------------------------------------

    async def call(self, agent: Agent, op: str, params: dict[str, Any] | None = None, *,
                   expect: tuple[str, ...] = (), retry_429: bool = True) -> Answer:
        """An agent's request; 429 waits and retries; 401 raises `SessionEnded`."""
        method, path = route(op)
        bearer = agent.session
        while True:
            started = time.perf_counter()
            answer = await self.wire.call(op, self.ingress, method, path, params,
                                          headers={"Authorization": f"Bearer {bearer}"})
            if answer.status == 429 and retry_429:
                self.figures.rate_limited += 1
                await trio.sleep(float(answer.body.get("retry_after_seconds", 1)))
                continue
            break
        ended = self.ended_sessions.get(bearer)
        if answer.ok and ended is not None and started > ended:
            self.violate(f"{op}: a session answered after it was ended")
        if answer.ok or answer.code in expect or answer.status == 599:
            return answer
        if answer.status == 401:
            raise SessionEnded(answer.code)
        self.violate(f"{agent.name} {op}: unexpected {answer.status} {answer.code}: {_message(answer)}")
        return answer

    async def start_agent(self, agent: Agent) -> None:
        agent.generation += 1
        joined = await self.join(await self.invitation(), agent.name)
        agent.session, agent.participant_id = str(joined["session_id"]), str(joined["participant_id"])
        agent.leaving = False

    async def run_agent(self, agent: Agent) -> None:
        try:
            await self.start_agent(agent)
            while True:
                try:
                    await self.act(agent)
                except SessionEnded:
                    self.figures.rejoins += 1
                    await self.check_ended(agent.session)
                    agent.session = ""
                    await self.start_agent(agent)
                await trio.sleep(agent.rng.uniform(*self.config.think_s))
        except Refused:
            agent.session = ""  # this agent is out; the violation is recorded

    async def act(self, agent: Agent) -> None:
        roll = agent.rng.random()
        if roll < 0.55:
            await self.edit(agent)
        elif roll < 0.68:
            await self.message(agent)
        elif roll < 0.75:
            await self.request_handoff(agent)
        elif roll < 0.87:
            await self.answer_handoffs(agent)
        elif roll < 0.97 or self.leave_tickets <= 0:
            await self.read_around(agent)
        else:
            self.leave_tickets -= 1
            await self.leave_and_rejoin(agent)

    async def edit(self, agent: Agent) -> None:
        rng = agent.rng
        region = rng.choice(self.regions) if rng.random() < 0.1 else rng.choice(self.leaf_regions)
        lease = await self.call(agent, "workspace.checkout", {"region": region, "minutes": 1},
                                expect=("lease_conflict",))
        if not lease.ok:
            self.figures.lease_conflicts += lease.code == "lease_conflict"
            return
        read = await self.call(agent, "workspace.read", {"region": region})
        if not read.ok:
            return
        agent.edits += 1
        content = EDIT_LINE.sub(f"edited: {agent.name} #{agent.edits}", str(read["content"]), count=1)
        proposal = await self.call(agent, "workspace.propose", {
            "region": region, "content": content, "base_version": read["version"],
            "summary": f"{agent.name} edit {agent.edits}"}, expect=("stale_version",))
        if proposal.ok:
            self.figures.proposals += 1
            await self.see_through(agent, str(proposal["proposal_id"]), str(lease["lease_id"]))
        if rng.random() < 0.12:
            self.figures.abandoned_leases += 1  # left to expire (1 minute)
            return
        await self.call(agent, "workspace.release", {"lease_id": lease["lease_id"]},
                        expect=("invalid_request",))  # it may have expired meanwhile

    async def see_through(self, agent: Agent, proposal_id: str, lease_id: str) -> None:
        """Withdraw, or wait for the host's review and commit when approved."""
        if agent.rng.random() < 0.05:
            withdrawn = await self.call(agent, "workspace.withdraw", {"proposal_id": proposal_id},
                                        expect=("proposal_conflict",))
            self.figures.withdrawn += withdrawn.ok
            return
        detail = None
        with trio.move_on_after(30):
            while True:
                answer = await self.call(agent, "workspace.proposal", {"proposal_id": proposal_id})
                if not answer.ok:
                    return
                if answer["status"] != "pending":
                    detail = answer
                    break
                await trio.sleep(0.3)  # the host reviews within half a second; poll, as a simple agent does
        if detail is None or detail["status"] != "approved":
            return
        if agent.rng.random() < 0.1:
            renewed = await self.call(agent, "workspace.renew", {"lease_id": lease_id, "minutes": 1},
                                      expect=("invalid_request",))
            self.figures.renewals += renewed.ok
        # Shielded (each request is bounded by REQUEST_TIMEOUT): the end of the load phase
        # cancels the agents, and a commit the room made but whose answer was cancelled
        # would leave a version nobody counted as acknowledged.
        with trio.CancelScope(shield=True):
            committed = await self.call(agent, "workspace.commit", {"proposal_id": proposal_id},
                                        expect=("stale_version",))
        if committed.ok:
            self.figures.commits += 1
            self.acks.append(Ack(int(committed["version"]), str(committed["region"]), agent.participant_id))
            self.acked_texts.append((int(committed["version"]), str(committed["region"]), str(detail["content"])))
        elif committed.code == "stale_version":
            self.figures.stale_commits += 1

    def someone_else(self, agent: Agent) -> Agent | None:
        others = [other for other in self.agents if other is not agent and other.session]
        return agent.rng.choice(others) if others else None

    async def message(self, agent: Agent) -> None:
        params: dict[str, Any] = {"text": f"{agent.name} says hello ({agent.edits} edits)"}
        target = None
        if agent.rng.random() < 0.2:
            target = self.someone_else(agent)
            if target is not None:
                params["to"] = [target.participant_id]
        answer = await self.call(agent, "workspace.message", params, retry_429=False,
                                 expect=("limit_exceeded", "invalid_request"))
        self.figures.messages += answer.ok
        self.check_target(agent, answer, target, params.get("to", [""])[0])

    def check_target(self, agent: Agent, answer: Answer, target: Agent | None, pid: str) -> None:
        """invalid_request is fine only when the addressed participant left meanwhile."""
        if answer.code == "invalid_request" and (target is None or (target.participant_id == pid
                                                                   and not target.leaving)):
            self.violate(f"{agent.name}: invalid_request addressing a present participant: {_message(answer)}")

    async def request_handoff(self, agent: Agent) -> None:
        target = self.someone_else(agent)
        if target is None:
            return
        pid = target.participant_id
        answer = await self.call(agent, "handoff.request", {
            "to_participant_id": pid, "summary": f"please look at {agent.rng.choice(PARTS)}"},
            retry_429=False, expect=("limit_exceeded", "invalid_request"))
        self.figures.handoffs_requested += answer.ok
        self.check_target(agent, answer, target, pid)

    async def answer_handoffs(self, agent: Agent) -> None:
        listed = await self.call(agent, "workspace.handoffs", {"status": "requested", "limit": 200})
        if not listed.ok:
            return
        for handoff in listed["handoffs"]:
            if handoff["to_participant_id"] != agent.participant_id:
                continue
            accept = agent.rng.random() < 0.7
            answer = await self.call(agent, "handoff.respond", {
                "handoff_id": handoff["handoff_id"], "decision": "accept" if accept else "decline"},
                expect=("handoff_conflict",))
            self.figures.handoffs_answered += answer.ok
            if answer.ok and accept:
                await self.call(agent, "handoff.result", {
                    "handoff_id": handoff["handoff_id"], "status": "completed", "summary": "done"},
                    expect=("handoff_conflict",))

    async def read_around(self, agent: Agent) -> None:
        if agent.rng.random() < 0.2:
            await self.mcp_tool(agent, agent.rng.choice(["workspace_status", "workspace_leases",
                                                         "workspace_participants"]))
            return
        op = agent.rng.choice(["workspace.status", "workspace.summary", "workspace.participants",
                               "workspace.leases", "workspace.room", "workspace.diagnostics",
                               "workspace.messages", "workspace.history", "workspace.proposals"])
        params = {"limit": 20} if op in ("workspace.messages", "workspace.history") else None
        await self.call(agent, op, params)

    async def mcp_tool(self, agent: Agent, name: str) -> None:
        """The same reads over MCP (`tools/call` on POST /mcp), as an MCP agent does."""
        message = mcp_message("tools/call", {"name": name, "arguments": {}})
        headers = mcp_headers("tools/call", agent.session) | {"Mcp-Name": name}
        while True:
            answer = await self.wire.call(f"mcp {name}", self.ingress, "POST", "/mcp", headers=headers,
                                          raw=json.dumps(message).encode())
            if answer.status != 429:
                break
            self.figures.rate_limited += 1
            await trio.sleep(1)
        if answer.status == 401:
            raise SessionEnded("unauthorized")
        result = answer.body.get("result") if isinstance(answer.body, dict) else None
        if isinstance(result, dict) and result.get("isError"):
            # A tool's commonroom error is a result (docs/spec/PROTOCOL.md 12): its text is the error object.
            error = json.loads(result["content"][0]["text"])
            if error.get("error") in ("unauthorized", "session_expired"):
                raise SessionEnded(str(error["error"]))
        if answer.status != 200 or not isinstance(result, dict) or result.get("isError"):
            self.violate(f"{agent.name} MCP {name}: {answer.status} {json.dumps(answer.body)[:200]}")

    async def leave_and_rejoin(self, agent: Agent) -> None:
        bearer = agent.session
        agent.leaving = True
        left = await self.call(agent, "workspace.leave")
        if left.ok:
            self.ended_sessions[bearer] = time.perf_counter()
            self.figures.leaves += 1
            await self.check_ended(bearer)
            agent.session = ""
            await self.start_agent(agent)

    async def check_ended(self, bearer: str) -> None:
        """An ended session (left, revoked) must never be served again."""
        method, path = route("workspace.status")
        answer = await self.wire.call("probe ended session", self.ingress, method, path,
                                      headers={"Authorization": f"Bearer {bearer}"})
        while answer.status == 429:
            await trio.sleep(float(answer.body.get("retry_after_seconds", 1)))
            answer = await self.wire.call("probe ended session", self.ingress, method, path,
                                          headers={"Authorization": f"Bearer {bearer}"})
        if answer.code != "unauthorized":
            self.violate(f"an ended session answered {answer.status} {answer.code}")

    @property
    def leaf_regions(self) -> list[str]:
        return [r for r in self.regions if r.count("/") == 2]

    # -- observers --------------------------------------------------------------------

    def take(self, log: ObserverLog, message: aio.SSEMessage) -> dict[str, Any] | None:
        if message.comment is not None or not message.data:
            return None
        data = json.loads(message.data)
        if message.event == "resync":
            log.resync(int(data["latest_event_id"]), str(data["reason"]))
            return None
        if message.id != str(data.get("event_id")):
            self.violate(f"{log.name}: SSE id {message.id!r} is not the event's id {data.get('event_id')}")
        self.events_raw.setdefault(int(data["event_id"]), message.data)
        log.event(data)
        return dict(data)

    events_raw: dict[int, str]
    started: float = 0.0
    stall_at: float = 0.0

    async def run_observer(self, observer: Observer) -> None:
        try:
            await self.observe(observer)
        except Refused:
            self.observer_finished()  # out; the violation is recorded (and its log stops short)

    async def observe(self, observer: Observer) -> None:
        while True:
            if not observer.session:
                observer.generation += 1
                joined = await self.join(await self.invitation(["read", "observe"]),
                                         f"observer-{observer.index}-g{observer.generation}")
                observer.session = str(joined["session_id"])
                observer.participant_id = str(joined["participant_id"])
                observer.revoked_at = observer.revoke_done = None
            headers = {"Authorization": f"Bearer {observer.session}"}
            path = "/workspace/observe"
            last = observer.log.last_id
            if observer.rng.random() < 0.5:
                headers["Last-Event-ID"] = str(last)
            else:
                path += f"?since_event_id={last}"
            status, messages = await self.wire.stream(self.ingress, path, headers,
                                                      small_window=observer.sleepy)
            if isinstance(messages, bytes):
                if status == 401:
                    observer.session = ""  # revoked before the stream opened: rejoin
                    continue
                if status == 429:
                    await trio.sleep(1)
                    continue
                self.violate(f"{observer.log.name}: observe answered {status}")
                return
            done = await self.read_stream(observer, messages)
            if done:
                self.observer_finished()
                return
            self.figures.reconnects += 1

    async def read_stream(self, observer: Observer, messages: AsyncIterator[aio.SSEMessage]) -> bool:
        """True when the observer has seen everything (the soak is over)."""
        drop_after = observer.rng.expovariate(1 / self.config.reconnect_every_s)
        if observer.sleepy:
            drop_after = float("inf")  # it keeps its one stream, to fall behind on it
        with trio.move_on_after(drop_after) as scope:
            async with aclosing(messages) as stream:  # type: ignore[type-var]
                try:
                    async for message in stream:
                        self.take(observer.log, message)
                        if (observer.sleepy and not observer.stalled
                                and time.perf_counter() - self.started > self.stall_at):
                            observer.stalled = True
                            await self.stall(observer)
                        if self.final_target is not None and observer.log.last_id >= self.final_target:
                            return True
                except CommonroomError:
                    pass  # the connection broke: resume below
        if scope.cancelled_caught:
            return False  # our own reconnect
        # The room ended the stream: only a revoked session may see that.
        ended_at = time.perf_counter()
        if observer.revoke_done is not None:
            with trio.move_on_after(REQUEST_TIMEOUT):
                await observer.revoke_done.wait()
        if observer.revoked_at is None:
            self.violate(f"{observer.log.name}: the room ended a live session's stream after event"
                         f" {observer.log.last_id} (revoke in flight: {observer.revoke_done is not None})")
        else:
            late = ended_at - observer.revoked_at  # negative: ended before the host read its answer
            self.figures.max_stream_end_s = max(self.figures.max_stream_end_s, late)
            if late > 1 + self.config.stream_end_slack_s:
                self.violate(f"{observer.log.name}: stream ended {late:.2f} s after the revoke")
            await self.check_ended(observer.session)
        observer.session = ""
        return False

    async def stall(self, observer: Observer) -> None:
        """Stop reading (at most `stall_s`) until the room published 1,000 events meanwhile:
        far more than a stream's buffer (256) and its small socket window hold."""
        mark = observer.log.last_id
        with trio.move_on_after(self.config.stall_s):
            while self.owner_log.last_id - mark < 1000:
                await trio.sleep(0.5)

    def observer_finished(self) -> None:
        self.observers_done += 1
        if self.observers_done == len(self.observers) + 1:
            self.all_observers_done.set()

    # -- the run ----------------------------------------------------------------------

    async def sample_rss(self) -> None:
        start = time.perf_counter()
        while True:
            kb = self.room.rss_kb()
            if kb is not None:
                self.rss.append((time.perf_counter() - start, kb))
            await trio.sleep(1)

    async def run(self) -> dict[str, Any]:
        self.events_raw = {}
        config = self.config
        started = self.started = time.perf_counter()
        self.stall_at = config.minutes * 60 * 0.3
        async with trio.open_nursery() as room_nursery:
            await self.room.start(room_nursery)
            try:
                await self.owner_login()
                regions = await self.host("workspace.regions")
                self.regions = [r["region"] for r in regions["regions"]]
                async with trio.open_nursery() as observing:
                    await observing.start(self.reviewer)
                    for index in range(config.observers):
                        observer = Observer(index, ObserverLog(f"observer {index}", 0),
                                            random.Random(config.seed * 7919 + index),
                                            sleepy=index == 0 and config.stall_s > 0)
                        self.observers.append(observer)
                        observing.start_soon(self.run_observer, observer)
                    async with trio.open_nursery() as load:
                        load.start_soon(self.sample_rss)
                        load.start_soon(self.ticket_dispenser)
                        load.start_soon(self.revoker)
                        for index in range(config.agents):
                            agent = Agent(index, random.Random(config.seed * 1000 + index))
                            self.agents.append(agent)
                            load.start_soon(self.run_agent, agent)
                        await trio.sleep(config.minutes * 60)
                        load.cancel_scope.cancel()
                    load_seconds = time.perf_counter() - started
                    await self.drain_expiries()
                    room = await self.host("workspace.room")
                    self.final_target = int(room["latest_event_id"])
                    with trio.move_on_after(20):
                        await self.all_observers_done.wait()
                    observing.cancel_scope.cancel()
                final = await self.final_state()
                audit_texts = await self.audit_fetches()
            finally:
                returncode = await self.room.stop()
                room_nursery.cancel_scope.cancel()
        return self.summarise(load_seconds, returncode, final, audit_texts)

    async def drain_expiries(self) -> None:
        """Let the leases due within `drain_s` expire, so a short run sees the sweeper at work."""
        leases = (await self.host("workspace.leases"))["leases"]
        now = datetime.now(UTC)
        due = [(datetime.fromisoformat(lease["expires_at"]) - now).total_seconds() for lease in leases]
        due = [seconds for seconds in due if seconds <= self.config.drain_s]
        if due:
            await trio.sleep(max(0.0, max(due)) + 1.5)  # the sweeper ends a lease within 1 s

    async def final_state(self) -> dict[str, Any]:
        status = await self.host("workspace.status")
        file_hash = hashlib.sha256(self.room.doc.read_bytes()).hexdigest()
        if status["content_hash"] not in (file_hash, f"sha256:{file_hash}"):
            self.violate("the file on disk is not the current version")
        versions: list[int] = []
        cursor = 1
        while True:
            page = await self.host("workspace.changes_since", {"version": cursor, "limit": 200})
            changes = page["changes"]
            versions += [int(c["version"]) for c in changes]
            if not changes or changes[-1]["version"] >= status["version"]:
                break
            cursor = int(changes[-1]["version"])
        if versions != list(range(2, int(status["version"]) + 1)):
            self.violate("changes_since: the versions are not 2..current without gaps")
        for version, region, content in self.acked_texts:
            read = await self.host("workspace.read", {"region": region, "version": version})
            if not read.ok or read["content"] != content:
                self.violate(f"acknowledged version {version} does not hold the approved text of {region!r}")
        leases = (await self.host("workspace.leases"))["leases"]
        for i, one in enumerate(leases):
            for other in leases[i + 1:]:
                if one["participant_id"] != other["participant_id"] and related(one["region"], other["region"]):
                    self.violate(f"final state: leases {one['lease_id']} and {other['lease_id']} overlap")
        return {"version": int(status["version"]), "active_leases_at_end": len(leases)}

    async def audit_fetches(self) -> list[tuple[str, str]]:
        """What the room says to anyone who asks: diagnostics, OpenAPI, discovery, MCP discovery."""
        agent = next((a for a in self.agents if a.session), None)
        texts: list[tuple[str, str]] = []
        fetches: list[tuple[str, str, dict[str, str]]] = [
            ("openapi", "/openapi.json", {}), ("discovery", "/.well-known/agent-workspace", {}),
            ("protocol", "/protocol", {}), ("skills", "/skills", {}), ("skill", "/skills/commonroom", {}),
        ]
        if agent is not None:
            fetches.append(("diagnostics", "/workspace/diagnostics",
                            {"Authorization": f"Bearer {agent.session}"}))
        for name, path, headers in fetches:
            answer = await self.wire.call(name, self.ingress, "GET", path, headers=headers, audit=False)
            texts.append((name, json.dumps(answer.body)))
        owner_diag = await self.host("workspace.diagnostics", audit=False)
        texts.append(("owner diagnostics", json.dumps(owner_diag.body)))
        for method in ("initialize", "server/discover", "tools/list", "resources/list",
                       "resources/templates/list", "prompts/list"):
            for bearer in ([None, agent.session] if agent is not None else [None]):
                message = mcp_message(method, {})
                headers = mcp_headers(method, bearer)
                answer = await self.wire.call("mcp", self.ingress, "POST", "/mcp", headers=headers,
                                              raw=json.dumps(message).encode(), audit=False)
                if method != "initialize" and answer.status != 200:
                    self.violate(f"MCP {method}: HTTP {answer.status}")
                texts.append((f"MCP {method}", json.dumps(answer.body)))
        return texts

    def summarise(self, load_seconds: float, returncode: int, final: dict[str, Any],
                  audit_texts: list[tuple[str, str]]) -> dict[str, Any]:
        if returncode != 0:
            self.violate(f"the room exited {returncode} on SIGINT")
        stderr = self.room.stderr_text()
        if "Traceback" in stderr:
            self.violate("the room logged a traceback (an internal error)")
        checker = Checker(expiry_slack_s=self.config.expiry_slack_s)
        checker.check_streams([self.owner_log, *(o.log for o in self.observers)], self.final_target or 0)
        checker.check_history(self.acks)
        texts = [*((f"event {i}", raw) for i, raw in self.events_raw.items()),
                 *(("room stderr", line) for line in stderr.splitlines()),
                 ("room stdout after the ready line", self.room.stdout_after_ready()),
                 *self.wire.error_bodies, *self.wire.answers, *audit_texts]
        hits = find_secrets(self.secrets, texts)
        slope = rss_slope(self.rss, self.config.warmup_fraction)
        limit = self.config.max_rss_slope_kb_per_min
        if limit is not None and slope is not None and slope > limit:
            self.violate(f"RSS grew {slope:.0f} kB/min after warm-up (limit {limit:.0f})")
        violations = self.violations + checker.report.violations
        latency = {op: percentiles(values) for op, values in sorted(self.wire.latency.items())}
        return {
            "agents": self.config.agents, "observers": self.config.observers,
            "minutes": round(load_seconds / 60, 2), "requests": self.wire.requests,
            "commits": self.figures.commits, "events": checker.report.events_checked,
            "last_event_id": self.final_target, "final_version": final["version"],
            "figures": asdict(self.figures), "checker": asdict(checker.report) | {"violations": None},
            "violations": len(self.violations) + checker.report.violation_count,
            "violation_list": violations[:50],
            "rss_kb_first": self.rss[0][1] if self.rss else None,
            "rss_kb_last": self.rss[-1][1] if self.rss else None,
            "rss_slope_kb_per_min": None if slope is None else round(slope, 1),
            "rss_kb_every_30s": list({int(t // 30): kb for t, kb in reversed(self.rss)}.values())[::-1],
            "p99_ms": {op: v["p99_ms"] for op, v in latency.items()}, "latency": latency,
            "secrets_handed_out": len({s.value for s in self.secrets}),
            "texts_audited": len(texts), "audited_bytes": sum(len(t) for _, t in texts),
            "secrets_found": len(hits), "secret_hits": [asdict(h) for h in hits[:20]],
            "codes": {f"{op} {code}": n for (op, code), n in sorted(self.wire.codes.items())},
            "final": final, "room_exit": returncode,
        }


def mcp_message(method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": MCP_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "0"}}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}


def mcp_headers(method: str, bearer: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MCP_VERSION, "Mcp-Method": method}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return headers


def _message(answer: Answer) -> str:
    return str(answer.body.get("message", "")) if isinstance(answer.body, dict) else repr(answer.body)[:200]


def percentiles(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)

    return {"n": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 1)}


def rss_slope(samples: list[tuple[float, int]], warmup_fraction: float) -> float | None:
    """Least-squares slope of VmRSS (kB per minute) over the samples after the warm-up."""
    if not samples:
        return None
    end = samples[-1][0]
    kept = [(t, kb) for t, kb in samples if t >= end * warmup_fraction]
    if len(kept) < 3:
        return None
    mean_t = sum(t for t, _ in kept) / len(kept)
    mean_kb = sum(kb for _, kb in kept) / len(kept)
    var = sum((t - mean_t) ** 2 for t, _ in kept)
    if var == 0:
        return None
    return sum((t - mean_t) * (kb - mean_kb) for t, kb in kept) / var * 60


async def run_soak(config: SoakConfig) -> dict[str, Any]:
    """Run one soak; its figures (see `Soak.summarise`)."""
    async with _workdir(config.workdir) as workdir:
        return await Soak(config, workdir).run()


@asynccontextmanager
async def _workdir(given: Path | None) -> AsyncIterator[Path]:
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    folder = Path(tempfile.mkdtemp(prefix="commonroom-soak-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def print_figures(result: dict[str, Any]) -> None:
    figures = result["figures"]
    print(f"soak: {result['agents']} agents, {result['observers']} observers + the owner page stream,"
          f" {result['minutes']} min, {result['requests']} requests")
    print(f"  commits {result['commits']} (stale {figures['stale_commits']}), proposals {figures['proposals']}"
          f" (approved {figures['approved']}, amended {figures['amended']}, rejected {figures['rejected']},"
          f" withdrawn {figures['withdrawn']}), final version {result['final_version']}")
    print(f"  events {result['events']} (last id {result['last_event_id']}), resyncs {result['checker']['resyncs']},"
          f" observer reconnects {figures['reconnects']}")
    print(f"  leases acquired {result['checker']['lease_acquisitions']}, expired {result['checker']['lease_expiries']}"
          f" (latest {result['checker']['max_expiry_lateness_s']:.3f} s after expiry), conflicts"
          f" {figures['lease_conflicts']}, renewals {figures['renewals']}")
    print(f"  messages {figures['messages']}, handoffs {figures['handoffs_requested']} requested /"
          f" {figures['handoffs_answered']} answered, leaves {figures['leaves']}, rejoins after revoke"
          f" {figures['rejoins']}, revokes {figures['revokes']} (stream ended <= {figures['max_stream_end_s']:.2f} s"
          f" after), 429s waited out {figures['rate_limited']}")
    print(f"  RSS {result['rss_kb_first']} -> {result['rss_kb_last']} kB, slope after warm-up"
          f" {result['rss_slope_kb_per_min']} kB/min; every 30 s: {result['rss_kb_every_30s']}")
    for op, stats in result["latency"].items():
        print(f"  {op:28} n={stats['n']:6} p50={stats['p50_ms']:7.1f} ms p99={stats['p99_ms']:7.1f} ms"
              f" max={stats['max_ms']:7.1f} ms")
    print(f"  secrets handed out {result['secrets_handed_out']}, texts audited {result['texts_audited']}"
          f" ({result['audited_bytes']} bytes), secrets found {result['secrets_found']}")
    print(f"  invariant violations {result['violations']}")
    for text in result["violation_list"]:
        print(f"    VIOLATION {text}")
    for hit in result["secret_hits"]:
        print(f"    SECRET {hit['kind']} ({hit['fingerprint']}) in {hit['source']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--observers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rejoins-per-minute", type=float, default=8.0,
                        help="leaves + rejoins of agents per minute, all together (joins share the"
                        " anonymous 60/min limit)")
    parser.add_argument("--max-rss-slope", type=float, default=None, metavar="KB_PER_MIN",
                        help="fail when VmRSS grows faster than this after warm-up")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="run in DIR and keep the room's file, sidecar and stderr")
    args = parser.parse_args(argv)
    config = SoakConfig(agents=args.agents, minutes=args.minutes, observers=args.observers, seed=args.seed,
                        rejoins_per_minute=args.rejoins_per_minute,
                        max_rss_slope_kb_per_min=args.max_rss_slope, workdir=args.keep)
    result = trio.run(run_soak, config)
    print_figures(result)
    print(json.dumps(result))
    return 1 if result["violations"] or result["secrets_found"] else 0


if __name__ == "__main__":
    sys.exit(main())
