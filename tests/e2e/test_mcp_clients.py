"""Real MCP clients, configured by URL, against a real `ce serve` (issue 20).

Each client does the whole loop over HTTP in the legacy (initialize) era that URL-configured
clients speak: initialize, list tools, read a region, check it out, propose, commit after the
host approved (`ce review --approve`, a real `ce`), release, subscribe to the region's resource,
receive `notifications/resources/updated` after another agent's commit there, and end the
session (DELETE). The clients are the official Python SDK 2.3 (legacy mode, the test venv's),
the Python SDK 1.x (its own venv) and the TypeScript SDK's StreamableHTTPClientTransport on
Node (what VS Code and Cursor embed); `mcp_client_envs` builds the last two from the registries.

Also on a real room: a legacy session after `ce leave` and after a room restart.
"""

from __future__ import annotations

import http.client
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from commonroom.credentials import read_credentials
from tests.e2e import mcp_client_envs
from tests.e2e.conftest import RoomProcess, ce, ce_ok, start_room

pytestmark = pytest.mark.e2e
CLIENTS_DIR = Path(__file__).resolve().parent / "mcp_clients"
REGION = "Problem"
STEP_TIMEOUT = 30.0


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
    http_call(port, "POST", "/workspace/proposal/review", host,
              {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
    status, committed, _ = http_call(port, "POST", "/workspace/commit", me,
                                     {"proposal_id": proposal["proposal_id"]})
    assert status == 200, committed
    return int(committed["version"])


class ClientProcess:
    """A client script with pipes; its JSON step lines read in a thread."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.stderr_path = cwd / f".mcp-client-{id(self)}.err"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, cwd=cwd, text=True)
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


def client_command(kind: str, url: str, bearer: str) -> tuple[list[str], Path]:
    script_args = [url, bearer, REGION]
    if kind == "python-sdk-2-legacy":
        return [sys.executable, str(CLIENTS_DIR / "py_client.py"), *script_args], CLIENTS_DIR
    if kind == "python-sdk-1":
        python = mcp_client_envs.python_sdk_1()
        return [str(python), str(CLIENTS_DIR / "py_client.py"), *script_args], CLIENTS_DIR
    home = mcp_client_envs.typescript_sdk()
    return [mcp_client_envs.node(), str(home / "ts_client.mjs"), *script_args], home


@pytest.mark.parametrize("kind", ["python-sdk-2-legacy", "python-sdk-1", "typescript-sdk"])
def test_a_real_client_does_the_whole_loop(room: RoomProcess, doc: Path, kind: str) -> None:
    port = room.ready["ingress_port"]
    agent = ce_ok("join", room.ready["invitation"], "--name", kind, "--no-hold")
    creds = read_credentials(doc)
    assert creds is not None
    argv, cwd = client_command(kind, agent["mcp_url"], agent["session_id"])
    client = ClientProcess(argv, cwd)
    try:
        started = client.expect("initialized")
        assert started["sessionId"], started
        if started["protocolVersion"] is not None:  # the SDKs that say so
            assert started["protocolVersion"] == "2025-11-25"
        tools = client.expect("tools")
        assert tools["first"] == "workspace.status" and tools["count"] > 30
        read = client.expect("read")
        proposed = client.expect("proposed")
        review = ce("review", str(doc), proposed["proposal_id"], "--approve", "--yes", "--json")
        assert review.returncode == 0, review.stderr
        client.send("approved")
        committed = client.expect("committed")
        assert committed["version"] == read["version"] + 1
        assert "SDK" in doc.read_text() and "was here." in doc.read_text()  # the agent's edit landed
        client.expect("subscribed")
        another_agent_commits(port, creds.host_session, REGION)
        assert client.expect("notified")["uri"] == f"commonroom://workspace/region/{REGION}"
        client.expect("closed")
        assert client.close() == 0, client.stderr()
        # The client ended its session: its id is unknown now.
        status, answer, _ = http_call(port, "POST", "/mcp", agent["session_id"],
                                      {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                      {"Mcp-Session-Id": started["sessionId"],
                                       "Accept": "application/json, text/event-stream"})
        assert status == 404, answer
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
    room = start_room(doc, "--port-ingress", "0")
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
        room = start_room(doc, "--port-ingress", str(port))
        assert ping(port, stayer["session_id"], session_id) == 404  # the room forgot it
        again = legacy_session(port, stayer["session_id"])  # the bearer still works: initialize again
        assert ping(port, stayer["session_id"], again) == 200
    finally:
        room.close()
