"""`ce mcp config CLIENT` for every client, and where `ce serve` / `ce join` say the MCP URL is.

Each snippet is parsed as its client would (JSON, TOML or a shell command line), its command
path must be an absolute path that exists, and the URL (with the bearer passed the way the
snippet passes it) must answer an MCP initialize on the real room; one stdio snippet is run as
the client would run it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import RoomProcess, ce, ce_ok

pytestmark = pytest.mark.e2e
CLIENTS = ("claude-code", "claude-desktop", "vscode", "cursor", "codex", "windsurf", "zed", "gemini")


def initialize_at(url: str, authorization: str) -> tuple[int, str | None]:
    """POST a legacy initialize to URL with that Authorization: (status, Mcp-Session-Id)."""
    parts = urlsplit(url)
    assert parts.scheme == "http" and parts.hostname == "127.0.0.1", url
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "config-test", "version": "1"}}})
    connection = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
    try:
        connection.request("POST", parts.path, body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "Authorization": authorization})
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Mcp-Session-Id")
    finally:
        connection.close()


def server_of(snippet: dict[str, Any]) -> tuple[str | None, str | None, list[str] | None]:
    """(url, Authorization header, command line) of a snippet, read as its client reads it."""
    text, client = snippet["text"], snippet["client"]
    if snippet["format"] == "shell":
        argv = shlex.split(text)
        assert argv[:3] == ["claude", "mcp", "add"], argv
        if "--transport" in argv:
            header = argv[argv.index("--header") + 1]
            return argv[argv.index("commonroom") + 1], header.split(": ", 1)[1], None
        return None, None, argv[argv.index("--") + 1:]
    if snippet["format"] == "toml":
        server = tomllib.loads(text)["mcp_servers"]["commonroom"]
        if "url" in server:
            token = snippet["env"][server["bearer_token_env_var"]]  # Codex reads it from there
            return server["url"], f"Bearer {token}", None
        return None, None, [server["command"], *server["args"]]
    block = json.loads(text)
    server = (block.get("mcpServers") or block.get("servers") or block["context_servers"])["commonroom"]
    if "command" in server:
        return None, None, [server["command"], *server["args"]]
    url = server.get("url") or server.get("serverUrl") or server.get("httpUrl")
    header = server["headers"]["Authorization"]
    if client == "vscode":
        assert block["inputs"][0]["password"] is True
        token = re.search(r"paste (ses_\S+)", snippet["secret"])
        assert token is not None, snippet["secret"]
        header = header.replace("${input:commonroom-session}", token.group(1))  # as VS Code does
    return url, header, None


def check_command(argv: list[str], invitation: str) -> None:
    path = Path(argv[0])
    assert path.is_absolute() and path.exists() and os.access(path, os.X_OK), argv[0]
    assert argv[1:3] == ["mcp", invitation]


@pytest.fixture
def joined(room: RoomProcess) -> dict[str, Any]:
    return dict(ce_ok("join", room.ready["invitation"], "--name", "configured", "--no-hold"))


def test_the_human_ready_output_has_the_mcp_url_on_its_own_line(doc: Path) -> None:
    serve = RoomProcess(["serve", str(doc), "--port-owner", "0", "--port-ingress", "0"], doc.parent)
    try:
        serve.wait_for_line("MCP endpoint")
        url = serve.next_line()
        assert url is not None and re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp\n", url), url
    finally:
        serve.close()


def test_each_client_config_parses_and_its_url_answers(room: RoomProcess, joined: dict[str, Any]) -> None:
    invitation = room.ready["invitation"]
    mcp_url = room.ready["mcp_url"]  # `ce serve --json` and `ce join --json` say where MCP is
    assert mcp_url == f"http://127.0.0.1:{room.ready['ingress_port']}/mcp"
    assert joined["mcp_url"] == mcp_url
    for client in CLIENTS:
        snippet = ce_ok("mcp", "config", client)  # the saved profile's room and session
        assert snippet["client"] == client and snippet["where"] and snippet["secret"]
        url, header, argv = server_of(snippet)
        if client == "claude-desktop":
            assert snippet["transport"] == "stdio" and argv is not None
            check_command(argv, invitation)
            assert argv[-2:] == ["--session", joined["session_id"]]
        else:
            assert snippet["transport"] == "http" and url == mcp_url and header, client
            status, session_id = initialize_at(url, header)
            assert status == 200 and session_id, (client, status)
            if client == "codex":
                assert joined["session_id"] not in snippet["text"]  # the token lives in the environment
            _, _, argv = server_of(ce_ok("mcp", "config", client, "--stdio"))
            assert argv is not None, client
            check_command(argv, invitation)
        # The human form: the snippet alone on stdout (redirectable into the file), notes on stderr.
        human = ce("mcp", "config", client)
        assert human.returncode == 0 and human.stdout.strip() == snippet["text"].strip(), client
        assert snippet["where"] in human.stderr
    # An explicit invitation and session; and what cannot be made is a usage error.
    vscode = ce_ok("mcp", "config", "vscode", invitation, "--session", joined["session_id"])
    assert json.loads(vscode["text"])["servers"]["commonroom"]["url"] == room.ready["mcp_url"]
    for args, needle in [
        (("claude-desktop", "--http"), "stdio"),
        (("notepad",), "unknown client"),
        (("cursor", invitation), "needs a session"),
        (("cursor", "--session", "ses_x"), "goes with INVITATION"),
    ]:
        refused = ce("mcp", "config", *args)
        assert refused.returncode == 2 and needle in refused.stderr, (args, refused.stderr)
        assert refused.stdout == ""


def test_a_stdio_snippet_runs_as_its_client_runs_it(room: RoomProcess, doc: Path, tmp_path: Path) -> None:
    invitation = ce_ok("invite", str(doc), "--max-uses", "1")["invitation"]
    snippet = ce_ok("mcp", "config", "claude-desktop", invitation, "--name", "desktop")
    _, _, argv = server_of(snippet)
    assert argv is not None
    check_command(argv, invitation)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "desktop-config"), "PATH": "/usr/bin:/bin"}
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "d", "version": "1"}}}
    # No venv on PATH, as for a desktop app: only the absolute path finds `ce`.
    client = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert client.stdin is not None and client.stdout is not None
        client.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "ping"}) + "\n")
        client.stdin.flush()
        assert json.loads(client.stdout.readline()) == {"jsonrpc": "2.0", "id": 0, "result": {}}
        client.stdin.write(json.dumps(message) + "\n")
        client.stdin.flush()
        answer = json.loads(client.stdout.readline())
        assert answer["result"]["serverInfo"]["name"] == "commonroom"
        client.stdin.close()
        assert client.wait(30) == 0
    finally:
        client.kill()
        client.wait()


def test_a_room_without_a_loopback_hint_offers_stdio_only() -> None:
    import base64

    payload = {"capabilities": ["read"], "expires_at": "2030-01-01T00:00:00.000000+00:00",
               "protocol": "commonroom", "secret": "x", "version": "1",
               "transport": {"type": "tailcat", "address": "room.example.ts.net", "port": 443,
                             "encrypted": True, "mode": "private"},
               "workspace_id": "ws_abcdefghijklmnopqrstuvwxyz"}
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    invitation = "commonroom://join/" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    refused = ce("mcp", "config", "zed", invitation, "--session", "ses_x")
    assert refused.returncode == 2 and "--stdio" in refused.stderr
    stdio = ce_ok("mcp", "config", "zed", invitation, "--stdio")
    assert json.loads(stdio["text"])["context_servers"]["commonroom"]["args"][:2] == ["mcp", invitation]
