"""Real MCP clients against a real `ce serve`, each doing an agent's whole loop (issues 20, 30).

The loop: list tools (every name matching the pattern clients enforce, only the tools the
session can use), read a region, check it out, propose, hold `workspace_proposal_wait` until
the host approves (`ce review --approve`, a real `ce`), commit, release, subscribe to the
region's resource and see another agent's commit there, end the session.

- The official Python SDK 2.x runs it against a room started the default way, in MCP
  2026-07-28 (discover, no initialize); its legacy initialize is refused there (-32022).
- The clients of MCP's older (initialize) eras, the Python SDK 2.x in its legacy mode, the
  Python SDK 1.x (its own venv) and the TypeScript SDK on Node (what VS Code and Cursor embed),
  run it through the stdio bridge `ce mcp` against a default room (the room and session in
  the bridge's env block, as `ce mcp config` prints it), and by URL only against a room
  started with `--mcp-legacy`. `mcp_client_envs` builds the last two from the registries.

Also on a real room with `--mcp-legacy`: a legacy session after `ce leave` and after a room
restart.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commonroom.credentials import read_credentials
from tests.e2e import mcp_client_envs
from tests.e2e.conftest import RoomProcess, ce, ce_ok, ce_path, start_room

pytestmark = pytest.mark.e2e
CLIENTS_DIR = Path(__file__).resolve().parent / "mcp_clients"
REGION = "Problem"
STEP_TIMEOUT = 60.0
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # Claude Desktop, the OpenAI API, Copilot
OLDER_ERAS = ["python-sdk-2-legacy", "python-sdk-1", "typescript-sdk"]


def http_call(port: int, method: str, path: str, bearer: str | None = None, body: Any = None,
              headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        sent = dict(headers or {})
        if bearer is not None:
            sent["Authorization"] = f"Bearer {bearer}"
        data = None if body is None else json.dumps(body)
        if data is not None:
            sent["Content-Type"] = "application/json"
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None, {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


def host_approves(doc: Path, proposal_id: str) -> None:
    """The host approves with a real `ce review` (the one place these tests review by CLI)."""
    review = ce("review", str(doc), proposal_id, "--approve", "--yes", "--json")
    assert review.returncode == 0, review.stderr


def host_approves_over_http(port: int, host: str, proposal_id: str) -> None:
    """The host approves over REST (the one place these tests call the review operation),
    bound to the revision it read."""
    status, shown, _ = http_call(port, "GET", f"/workspace/proposal?proposal_id={proposal_id}", host)
    assert status == 200, shown
    status, answer, _ = http_call(port, "POST", "/workspace/proposal/review", host,
                                  {"proposal_id": proposal_id, "decision": "approve",
                                   "revision": shown["revision"]})
    assert status == 200, answer


def another_agent_commits(port: int, host: str, region: str) -> int:
    """Another participant changes REGION: propose, the host approves, commit."""
    status, invite, _ = http_call(port, "POST", "/workspace/invite", host, {})
    assert status == 200, invite
    status, joined, _ = http_call(port, "POST", "/session/join", None,
                                  {"invite": invite["invitation"], "name": "other-agent"})
    assert status == 200, joined
    me = joined["session_id"]
    status, read, _ = http_call(port, "GET", f"/workspace/read?region={region}", me)
    assert status == 200, read
    status, proposal, _ = http_call(port, "POST", "/workspace/propose", me, {
        "region": region, "base_version": read["version"], "summary": "another agent",
        "content": read["content"].rstrip() + "\n\nAnother agent added this.\n"})
    assert status == 200, proposal
    host_approves_over_http(port, host, proposal["proposal_id"])
    status, committed, _ = http_call(port, "POST", "/workspace/commit", me,
                                     {"proposal_id": proposal["proposal_id"]})
    assert status == 200, committed
    return int(committed["version"])


class ClientProcess:
    """A client script with pipes; its JSON step lines read in a thread."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.stderr_path = cwd / f".mcp-client-{os.getpid()}-{id(self)}.err"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, cwd=cwd, text=True, env=env)
        self.steps: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.steps.put(json.loads(line))
        self.steps.put(None)

    def expect(self, step: str) -> dict[str, Any]:
        try:
            got = self.steps.get(timeout=STEP_TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no {step!r} within {STEP_TIMEOUT} s:\n{self.stderr()}") from None
        assert got is not None and got["step"] == step, (step, got, self.stderr())
        return got

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> int | None:
        if self.proc.poll() is None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
        return self.proc.returncode


def client_command(kind: str, mode: str) -> tuple[list[str], Path]:
    """The client script of `kind` in `mode` (`modern`, `url` or `stdio`)."""
    if kind.startswith("python-sdk-2"):
        return [sys.executable, str(CLIENTS_DIR / "py_client.py"), mode, REGION], CLIENTS_DIR
    if kind == "python-sdk-1":
        python = mcp_client_envs.python_sdk_1()
        return [str(python), str(CLIENTS_DIR / "py_client.py"), mode, REGION], CLIENTS_DIR
    script = mcp_client_envs.typescript_client()
    return [mcp_client_envs.node(), str(script), mode, REGION], script.parent


def client_env(mode: str, agent: dict[str, Any], invitation: str) -> dict[str, str]:
    """What the client knows: the URL and bearer, or (stdio) the bridge's env block."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CE_", "MCP_TEST_"))}
    if mode == "stdio":
        return {**env, "MCP_TEST_CE": ce_path(), "CE_INVITATION": invitation,
                "CE_SESSION": agent["session_id"]}
    return {**env, "MCP_TEST_URL": agent["mcp_url"], "MCP_TEST_BEARER": agent["session_id"]}


def start_client(kind: str, mode: str, agent: dict[str, Any], invitation: str) -> ClientProcess:
    argv, cwd = client_command(kind, mode)
    return ClientProcess(argv, cwd, client_env(mode, agent, invitation))


def run_the_loop(room: RoomProcess, doc: Path, kind: str, mode: str) -> dict[str, Any]:
    """The client does the whole loop; what it said when it started."""
    port = room.ready["ingress_port"]
    invitation = room.ready["invitation"]
    agent = ce_ok("join", invitation, "--name", kind, "--no-hold")
    creds = read_credentials(doc)
    assert creds is not None
    client = start_client(kind, mode, agent, invitation)
    try:
        started = client.expect("initialized")
        names = client.expect("tools")["names"]
        assert all(NAME_PATTERN.match(name) for name in names), names
        assert names[0] == "workspace_status" and "workspace_proposal_wait" in names
        assert not {"workspace_review", "workspace_invite", "workspace_policy_add"} & set(names)
        read = client.expect("read")
        proposed = client.expect("proposed")  # the client now holds workspace_proposal_wait
        host_approves(doc, proposed["proposal_id"])
        assert client.expect("reviewed")["status"] == "approved"
        committed = client.expect("committed")
        assert committed["version"] == read["version"] + 1
        assert "SDK" in doc.read_text() and "was here." in doc.read_text()  # the agent's edit landed
        client.expect("subscribed")
        another_agent_commits(port, creds.host_session, REGION)
        assert client.expect("notified")["uri"] == f"commonroom://workspace/region/{REGION}"
        client.expect("closed")
        assert client.close() == 0, client.stderr()
        assert "Traceback" not in room.stderr()
        started["bearer"] = agent["session_id"]
        return started
    finally:
        client.close()
        client.stderr_path.unlink(missing_ok=True)


@pytest.fixture
def legacy_room(doc: Path) -> Iterator[RoomProcess]:
    process = start_room(doc, "--port-ingress", "0", "--mcp-legacy")
    try:
        yield process
    finally:
        process.close()


def test_the_python_sdk_runs_the_loop_in_2026_07_28_against_a_default_room(
        room: RoomProcess, doc: Path) -> None:
    started = run_the_loop(room, doc, "python-sdk-2", "modern")
    assert started["protocolVersion"] == "2026-07-28" and started["sessionId"] is None
    assert started["supported"] == ["2026-07-28"]


@pytest.mark.parametrize("kind", OLDER_ERAS)
def test_an_older_client_runs_the_loop_through_ce_mcp(room: RoomProcess, doc: Path, kind: str) -> None:
    started = run_the_loop(room, doc, kind, "stdio")
    assert started["sessionId"] is None  # the bridge is its server: no HTTP session anywhere


@pytest.mark.parametrize("kind", OLDER_ERAS)
def test_an_older_client_runs_the_loop_by_url_with_mcp_legacy(legacy_room: RoomProcess, doc: Path,
                                                              kind: str) -> None:
    started = run_the_loop(legacy_room, doc, kind, "url")
    assert started["sessionId"], started
    if started["protocolVersion"] is not None:  # the SDKs that say so
        assert started["protocolVersion"] == "2025-11-25"
    # The client ended its session: its id is unknown now.
    status, answer, _ = http_call(legacy_room.ready["ingress_port"], "POST", "/mcp", started["bearer"],
                                  {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                  {"Mcp-Session-Id": started["sessionId"],
                                   "Accept": "application/json, text/event-stream"})
    assert status == 404, answer


@pytest.mark.parametrize("kind", OLDER_ERAS)
def test_an_older_client_is_refused_by_url_on_a_default_room(room: RoomProcess, kind: str) -> None:
    agent = ce_ok("join", room.ready["invitation"], "--name", kind, "--no-hold")
    client = start_client(kind, "url", agent, room.ready["invitation"])
    try:
        assert client.proc.wait(STEP_TIMEOUT) != 0  # it gives up at once: no hang, no kill
        said = []
        while (step := client.steps.get(timeout=STEP_TIMEOUT)) is not None:
            said.append(step["step"])
        assert "initialized" not in said, said
        assert "Traceback" not in room.stderr()
    finally:
        client.close()
        client.stderr_path.unlink(missing_ok=True)


def legacy_session(port: int, bearer: str) -> str:
    status, answer, headers = http_call(port, "POST", "/mcp", bearer, {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "e2e", "version": "1"}}},
        {"Accept": "application/json, text/event-stream"})
    assert status == 200, answer
    return headers["mcp-session-id"]


def ping(port: int, bearer: str, session_id: str) -> int:
    status, _, _ = http_call(port, "POST", "/mcp", bearer, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                             {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18",
                              "Accept": "application/json, text/event-stream"})
    return status


def test_a_session_ends_with_ce_leave_and_with_the_room(doc: Path) -> None:
    room = start_room(doc, "--port-ingress", "0", "--mcp-legacy")
    try:
        port = room.ready["ingress_port"]
        leaver = ce_ok("join", room.ready["invitation"], "--name", "leaver", "--no-hold")
        session_id = legacy_session(port, leaver["session_id"])
        assert ping(port, leaver["session_id"], session_id) == 200
        assert ce("leave", "--json").returncode == 0  # the saved profile's session
        assert ping(port, leaver["session_id"], session_id) == 404

        stayer = ce_ok("join", ce_ok("invite", str(doc))["invitation"], "--name", "stayer", "--no-hold")
        session_id = legacy_session(port, stayer["session_id"])
        room.close()
        room = start_room(doc, "--port-ingress", str(port), "--mcp-legacy")
        assert ping(port, stayer["session_id"], session_id) == 404  # the room forgot it
        again = legacy_session(port, stayer["session_id"])  # the bearer still works: initialize again
        assert ping(port, stayer["session_id"], again) == 200
    finally:
        room.close()
