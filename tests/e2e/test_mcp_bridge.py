"""`ce mcp` driven through a real pipe as a legacy stdio MCP client would, across restarts."""

from __future__ import annotations

import json
import os
import queue
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from commonroom.credentials import read_credentials
from tests.e2e.conftest import ce_ok, ce_path, start_room

pytestmark = pytest.mark.e2e
DOCUMENT = "commonroom://workspace/document"
LINE_TIMEOUT = 15.0


class Bridge:
    """`ce mcp ...` with pipes; stdout read line by line in a thread."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.stderr_path = cwd / f".ce-mcp-{id(self)}.err"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen([ce_path(), "mcp", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=cwd)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.raw: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout: float = LINE_TIMEOUT) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"ce mcp wrote nothing in {timeout} s; stderr:\n{self.stderr()}") from None
        assert line is not None, f"ce mcp closed stdout; stderr:\n{self.stderr()}"
        message: dict[str, Any] = json.loads(line)  # stdout carries only JSON-RPC
        return message

    def answer(self, rid: Any) -> dict[str, Any]:
        """The answer to request `rid` (notifications on the way are skipped)."""
        while True:
            message = self.next()
            if message.get("id") == rid and "method" not in message:
                return message

    def notification(self, uri: str) -> dict[str, Any]:
        while True:
            message = self.next()
            if message.get("method") == "notifications/resources/updated" and \
                    message["params"]["uri"] == uri:
                return message

    def request(self, rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return self.answer(rid)

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def close_stdin_and_wait(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(10)
        finally:
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self._stderr.close()


def legacy_handshake(bridge: Bridge) -> dict[str, Any]:
    init = bridge.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "legacy-client", "version": "1"}})
    bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    result: dict[str, Any] = init["result"]
    return result


def host_commit(doc: Path, invitation: str, marker: str) -> None:
    creds = read_credentials(doc)
    assert creds is not None
    status = ce_ok("call", invitation, "GET", "/workspace/status", "--session", creds.host_session)
    body = {"content": doc.read_text() + f"\n{marker}\n", "summary": marker,
            "base_version": status["version"]}
    ce_ok("call", invitation, "POST", "/workspace/commit", "--session", creds.host_session,
          "--body", json.dumps(body))


def test_ce_mcp_serves_a_legacy_client_across_restarts(doc: Path, tmp_path: Path) -> None:
    config = tmp_path / "config"
    env = {**os.environ, "XDG_CONFIG_HOME": str(config)}
    room = start_room(doc, "--port-ingress", "0")
    bridges: list[Bridge] = []
    try:
        port = room.ready["ingress_port"]
        invitation = ce_ok("invite", str(doc), "--max-uses", "1")["invitation"]
        bridge = Bridge([invitation, "--name", "claude"], env, tmp_path)
        bridges.append(bridge)
        init = legacy_handshake(bridge)
        assert init["protocolVersion"] == "2025-06-18"
        assert init["serverInfo"]["name"] == "commonroom"
        assert "workspace_propose" in init["instructions"]
        assert bridge.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
        tools = bridge.request(2, "tools/list")["result"]["tools"]
        assert tools[0]["name"] == "workspace_status"
        status = bridge.request(3, "tools/call", {"name": "workspace_status", "arguments": {}})
        assert status["result"]["isError"] is False
        version = status["result"]["structuredContent"]["version"]
        subscribed = bridge.request(4, "resources/subscribe", {"uri": DOCUMENT})["result"]
        # The older eras' framing: no 2026-07-28 result fields (strict clients refuse them).
        assert not {"resultType", "ttlMs", "cacheScope"} & set(subscribed), subscribed

        profile = config / "commonroom" / "mcp-sessions.json"
        assert stat.S_IMODE(profile.stat().st_mode) == 0o600
        assert stat.S_IMODE(profile.parent.stat().st_mode) == 0o700
        assert invitation.split("/")[-1] not in profile.read_text()  # no invitation in it

        # Another participant changes the document: a notification arrives on stdout.
        host_commit(doc, invitation, "first change")
        bridge.notification(DOCUMENT)

        # The room restarts on the same port; the bridge reconnects and subscribes again.
        room.close()
        room = start_room(doc, "--port-ingress", str(port))
        bridge.notification(DOCUMENT)  # the reconnect hint: changes may have been missed
        host_commit(doc, invitation, "second change")
        bridge.notification(DOCUMENT)
        after = bridge.request(5, "tools/call", {"name": "workspace_status", "arguments": {}})
        assert after["result"]["structuredContent"]["version"] == version + 2
        assert bridge.close_stdin_and_wait() == 0  # EOF ends it cleanly

        # The client restarts: the single-use invitation is not spent again.
        again = Bridge([invitation, "--name", "claude"], env, tmp_path)
        bridges.append(again)
        legacy_handshake(again)
        mine = again.request(6, "tools/call", {"name": "workspace_participants", "arguments": {}})
        names = [p["name"] for p in mine["result"]["structuredContent"]["participants"]]
        assert names.count("claude") == 1
        assert again.close_stdin_and_wait() == 0
        for b in bridges:
            assert "Traceback" not in b.stderr()
            assert all(json.loads(line) for line in b.raw)
    finally:
        for b in bridges:
            b.kill()
        room.close()


def test_ce_mcp_joins_again_when_the_room_refuses_its_kept_session(doc: Path, tmp_path: Path) -> None:
    """The room answers a bearer that is no longer a session with HTTP 401 (issue 20): the
    bridge reads that and joins once more with its invitation."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    room = start_room(doc, "--port-ingress", "0")
    bridge = None
    try:
        invitation = ce_ok("invite", str(doc), "--max-uses", "2")["invitation"]
        bridge = Bridge([invitation, "--name", "claude"], env, tmp_path)
        legacy_handshake(bridge)
        listed = bridge.request(1, "tools/call", {"name": "workspace_participants", "arguments": {}})
        mine = [p for p in listed["result"]["structuredContent"]["participants"] if p["name"] == "claude"]
        creds = read_credentials(doc)
        assert creds is not None and len(mine) == 1
        ce_ok("call", invitation, "POST", "/workspace/session/revoke", "--session", creds.host_session,
              "--body", json.dumps({"participant_id": mine[0]["participant_id"]}))
        after = bridge.request(2, "tools/call", {"name": "workspace_status", "arguments": {}})
        assert after["result"]["isError"] is False, after  # answered on a fresh session
        assert bridge.close_stdin_and_wait() == 0
        assert "Traceback" not in bridge.stderr()
    finally:
        if bridge is not None:
            bridge.kill()
        room.close()
