"""The owner API that gives the page's invitation panel every client's MCP snippet."""

from __future__ import annotations

import json
from pathlib import Path

from tests.service.conftest import LiveRoom


async def owner_login(live: LiveRoom) -> dict[str, str]:
    """The owner page's login header, the way the page gets it, for a JSON body."""
    return {**await live.owner_login(), "Content-Type": "application/json"}


async def test_the_owner_api_renders_every_clients_stdio_snippet(live: LiveRoom) -> None:
    headers = await owner_login(live)
    port = live.ready.owner_port
    invite = (await live.call("POST", "/workspace/invite", live.host_session, {})).json()["invitation"]
    answer = await live.raw("POST", "/owner/api/mcp/configs", port=port, headers=headers,
                            body={"invitation": invite, "name": "helper"})
    assert answer.status == 200, answer.body
    body = answer.json()
    assert body["mcp_url"] == f"http://127.0.0.1:{live.ready.ingress_port}/mcp"
    clients = [c["client"] for c in body["configs"]]
    assert clients == ["claude-code", "claude-desktop", "vscode", "cursor", "codex", "windsurf", "zed",
                       "gemini"]
    desktop = json.loads(body["configs"][1]["text"])["mcpServers"]["commonroom"]
    assert Path(desktop["command"]).is_absolute() and Path(desktop["command"]).name == "ce"
    # The invitation is a secret: in the env block the client sets, never on a command line.
    assert desktop["args"] == ["mcp", "--name", "helper"]
    assert desktop["env"] == {"CE_INVITATION": invite}
    assert all(c["transport"] == "stdio" and c["secret"] for c in body["configs"])
    for config in body["configs"]:
        if config["format"] == "shell":
            assert invite not in config["text"], config
        elif config["format"] == "json":
            block = json.loads(config["text"])
            server = (block.get("mcpServers") or block.get("servers")
                      or block["context_servers"])["commonroom"]
            assert invite not in json.dumps(server["args"]), config
        else:
            assert 'args = ["mcp", "--name", "helper"]' in config["text"], config
    assert live.host_session not in answer.body.decode()
    # Like every owner request: the login header; and a body to work on.
    no_login = {k: v for k, v in headers.items() if k != "X-Commonroom-Owner"}
    refused = await live.raw("POST", "/owner/api/mcp/configs", port=port, headers=no_login,
                             body={"invitation": invite})
    assert refused.status == 401
    bad = await live.raw("POST", "/owner/api/mcp/configs", port=port, headers=headers, body={"nope": 1})
    assert bad.status == 400 and bad.json()["error"] == "invalid_request"
    broken = await live.raw("POST", "/owner/api/mcp/configs", port=port, headers=headers,
                            body={"invitation": "commonroom://join/not-base64!"})
    assert broken.status == 400 and broken.json()["error"] == "invalid_request"
    # The ingress has no such route: bearers never reach the owner API.
    assert (await live.call("POST", "/owner/api/mcp/configs", live.host_session,
                            {"invitation": invite})).status == 404
