"""`ce mcp config CLIENT` for every client, for both kinds of room, and where `ce serve` /
`ce join` say the MCP URL is.

Each snippet is parsed as its client would (JSON, TOML or a shell command line), its command
path must be an absolute path that exists, no command line it makes holds a secret (other
local users read `/proc/PID/cmdline`), and its form follows the room: a room started the
default way speaks MCP 2026-07-28 only, so clients of the older eras get the stdio bridge;
with `ce serve --mcp-legacy` they get the URL, which must answer their initialize. One stdio
snippet is run as the client would run it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import RoomProcess, ce, ce_ok, start_room

pytestmark = pytest.mark.e2e
CLIENTS = ("claude-code", "claude-desktop", "vscode", "cursor", "codex", "windsurf", "zed", "gemini")
SPEAKS_2026 = ("claude-code",)  # the others open with initialize (MCP's older eras)
STDIO_ONLY = ("claude-desktop",)
VERSION = "2026-07-28"


def post_mcp(url: str, authorization: str, body: dict[str, Any], headers: dict[str, str]
             ) -> tuple[int, Any, str | None]:
    parts = urlsplit(url)
    assert parts.scheme == "http" and parts.hostname == "127.0.0.1", url
    connection = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
    try:
        connection.request("POST", parts.path, body=json.dumps(body), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "Authorization": authorization, **headers})
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None, response.getheader("Mcp-Session-Id")
    finally:
        connection.close()


def initialize_at(url: str, authorization: str) -> tuple[int, Any, str | None]:
    """POST a legacy initialize to URL with that Authorization: (status, answer, session id)."""
    return post_mcp(url, authorization, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                         "params": {"protocolVersion": "2025-06-18",
                                                    "capabilities": {},
                                                    "clientInfo": {"name": "config-test",
                                                                   "version": "1"}}}, {})


def tools_at(url: str, authorization: str) -> tuple[int, Any]:
    """A 2026-07-28 tools/list at URL with that Authorization: (status, result)."""
    status, answer, _ = post_mcp(url, authorization, {
        "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {}}}},
        {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list"})
    return status, answer.get("result") if isinstance(answer, dict) else answer


def server_of(snippet: dict[str, Any]) -> tuple[str | None, str | None, list[str] | None,
                                              dict[str, str]]:
    """(url, Authorization header, command line, env block) of a snippet, read as its client
    reads it (variables it expands filled in from the snippet's `env`)."""
    text, client = snippet["text"], snippet["client"]
    expand = snippet["env"]
    if snippet["format"] == "shell":
        argv = shlex.split(text)
        assert argv[:3] == ["claude", "mcp", "add"], argv
        assert not any(value in " ".join(argv) for value in expand.values()), argv
        if "--transport" in argv:
            header = argv[argv.index("--header") + 1]
            for key, value in expand.items():  # what Claude Code does with ${VAR}
                header = header.replace("${" + key + "}", value)
            return argv[argv.index("commonroom") + 1], header.split(": ", 1)[1], None, {}
        return None, None, argv[argv.index("--") + 1:], {}
    if snippet["format"] == "toml":
        server = tomllib.loads(text)["mcp_servers"]["commonroom"]
        if "url" in server:
            token = expand[server["bearer_token_env_var"]]  # Codex reads it from there
            return server["url"], f"Bearer {token}", None, {}
        return None, None, [server["command"], *server["args"]], dict(server.get("env", {}))
    block = json.loads(text)
    server = (block.get("mcpServers") or block.get("servers") or block["context_servers"])["commonroom"]
    if "command" in server:
        env = dict(server.get("env", {}))
        if client == "vscode" and env:  # VS Code prompts for its inputs: the secret note says them
            assert all(i["password"] is True for i in block["inputs"])
            for key in env:
                pasted = re.search(rf"{key}=(\S+)", snippet["secret"])
                assert pasted is not None, snippet["secret"]
                env[key] = pasted.group(1)
        return None, None, [server["command"], *server["args"]], env
    url = server.get("url") or server.get("serverUrl") or server.get("httpUrl")
    header = server["headers"]["Authorization"]
    if client == "vscode":
        assert block["inputs"][0]["password"] is True
        token = re.search(r"paste (ses_\S+)", snippet["secret"])
        assert token is not None, snippet["secret"]
        header = header.replace("${input:commonroom-session}", token.group(1))  # as VS Code does
    return url, header, None, {}


def check_command(argv: list[str], *secrets: str) -> None:
    """The bridge's command line: an absolute `ce`, `mcp`, and no secret anywhere in it."""
    path = Path(argv[0])
    assert path.is_absolute() and path.exists() and os.access(path, os.X_OK), argv[0]
    assert argv[1] == "mcp", argv
    line = " ".join(argv)
    assert "ses_" not in line and "commonroom://" not in line, argv
    assert not any(secret in line for secret in secrets), argv


@pytest.fixture(params=["default", "mcp-legacy"])
def any_room(request: pytest.FixtureRequest, doc: Path) -> Iterator[tuple[str, RoomProcess]]:
    """A room started the default way, and one with `--mcp-legacy`."""
    extra = ("--mcp-legacy",) if request.param == "mcp-legacy" else ()
    process = start_room(doc, "--port-ingress", "0", *extra)
    try:
        yield request.param, process
    finally:
        process.close()


def test_the_human_ready_output_has_the_mcp_url_on_its_own_line(doc: Path) -> None:
    serve = RoomProcess(["serve", str(doc), "--port-owner", "0", "--port-ingress", "0"], doc.parent)
    try:
        serve.wait_for_line("MCP endpoint")
        url = serve.next_line()
        assert url is not None and re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp\n", url), url
    finally:
        serve.close()


def test_every_snippet_follows_the_room_and_no_command_line_holds_a_secret(
        any_room: tuple[str, RoomProcess]) -> None:
    kind, room = any_room
    legacy_room = kind == "mcp-legacy"
    invitation = room.ready["invitation"]
    mcp_url = room.ready["mcp_url"]  # `ce serve --json` and `ce join --json` say where MCP is
    assert mcp_url == f"http://127.0.0.1:{room.ready['ingress_port']}/mcp"
    joined = ce_ok("join", invitation, "--name", "configured", "--no-hold")
    assert joined["mcp_url"] == mcp_url
    secrets = (joined["session_id"], invitation)
    for client in CLIENTS:
        snippet = ce_ok("mcp", "config", client)  # the saved profile's room and session
        assert snippet["client"] == client and snippet["where"] and snippet["secret"]
        url, header, argv, env = server_of(snippet)
        by_url = client not in STDIO_ONLY and (client in SPEAKS_2026 or legacy_room)
        assert snippet["transport"] == ("http" if by_url else "stdio"), (kind, client)
        if by_url:
            assert url == mcp_url and header, client
            if client in SPEAKS_2026:
                status, listed = tools_at(url, header)  # what it speaks: 2026-07-28
                assert status == 200 and listed["cacheScope"] == "private", (client, listed)
            else:
                status, answer, session_id = initialize_at(url, header)
                assert status == 200 and session_id, (client, status, answer)
            assert joined["session_id"] not in (snippet["text"] if client in ("codex", "claude-code")
                                                else "")  # the token lives in the environment
        else:
            assert argv is not None and not env, client
            check_command(argv, *secrets)
            assert argv[2:] == ["--profile", joined["workspace_id"]]  # the saved profile
        # Forced to the bridge with an invitation and a session: both in the env block only.
        if client not in STDIO_ONLY:
            forced = ce_ok("mcp", "config", client, invitation, "--session", joined["session_id"],
                           "--stdio")
        else:
            forced = ce_ok("mcp", "config", client, invitation, "--session", joined["session_id"])
        _, _, argv, env = server_of(forced)
        assert argv is not None, client
        check_command(argv, *secrets)
        assert env == {"CE_INVITATION": invitation, "CE_SESSION": joined["session_id"]}, client
        # The human form: the snippet alone on stdout (redirectable into the file), notes on stderr.
        human = ce("mcp", "config", client)
        assert human.returncode == 0 and human.stdout.strip() == snippet["text"].strip(), client
        assert snippet["where"] in human.stderr
    # What cannot be made is a usage error.
    refusals = [
        (("claude-desktop", "--http"), "stdio"),
        (("notepad",), "unknown client"),
        (("cursor", invitation, "--http"), "needs a session" if legacy_room else "--mcp-legacy"),
        (("cursor", "--session", "ses_x"), "goes with INVITATION"),
    ]
    if not legacy_room:
        refusals.append((("vscode", "--http"), "ce serve --mcp-legacy"))
    for args, needle in refusals:
        refused = ce("mcp", "config", *args)
        assert refused.returncode == 2 and needle in refused.stderr, (args, refused.stderr)
        assert refused.stdout == ""


def test_a_stdio_snippet_runs_as_its_client_runs_it(room: RoomProcess, doc: Path, tmp_path: Path) -> None:
    invitation = ce_ok("invite", str(doc), "--max-uses", "1")["invitation"]
    snippet = ce_ok("mcp", "config", "claude-desktop", invitation, "--name", "desktop")
    _, _, argv, env = server_of(snippet)
    assert argv is not None
    check_command(argv, invitation)
    assert env == {"CE_INVITATION": invitation}  # the bridge joins once with it
    client_env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "desktop-config"),
                  "PATH": "/usr/bin:/bin", **env}
    client_env.pop("CE_SESSION", None)
    client_env.pop("CE_PROFILE", None)
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "d", "version": "1"}}}
    # No venv on PATH, as for a desktop app: only the absolute path finds `ce`.
    client = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=client_env)
    try:
        assert client.stdin is not None and client.stdout is not None
        client.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "ping"}) + "\n")
        client.stdin.flush()
        assert json.loads(client.stdout.readline()) == {"jsonrpc": "2.0", "id": 0, "result": {}}
        client.stdin.write(json.dumps(message) + "\n")
        client.stdin.flush()
        answer = json.loads(client.stdout.readline())
        assert answer["result"]["serverInfo"]["name"] == "commonroom"
        client.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n")
        client.stdin.flush()
        tools = json.loads(client.stdout.readline())["result"]["tools"]
        assert "workspace_proposal_wait" in {t["name"] for t in tools}  # the bridge joined
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
    refused = ce("mcp", "config", "zed", invitation, "--session", "ses_x", "--http")
    assert refused.returncode == 2 and "--stdio" in refused.stderr
    stdio = ce_ok("mcp", "config", "zed", invitation, "--stdio")
    server = json.loads(stdio["text"])["context_servers"]["commonroom"]
    assert server["args"] == ["mcp", "--name", "zed"] and server["env"] == {"CE_INVITATION": invitation}
