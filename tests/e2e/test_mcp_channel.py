"""`ce mcp --channel` under the official MCP Python SDK's stdio client (docs/spec/PROTOCOL.md 19):
the `claude/channel` capabilities in the initialize answer, a message addressed to the session
arriving as `notifications/claude/channel` (unaddressed text never does), and a Claude Code
permission prompt relayed to the host and answered with the host's verdict.

The SDK's high-level client drops notifications outside the MCP schema (as Claude Code's would
not), so the test speaks through the SDK's stdio transport (`stdio_client`) and reads the raw
messages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

from tests.e2e.conftest import Room, ce, ce_path

pytestmark = pytest.mark.e2e
BOUND = 30.0


def _channel_session(served: Room) -> tuple[StdioServerParameters, dict[str, Any]]:
    joined = served.join("claude")
    invitation = served.invite()["invitation"]
    params = StdioServerParameters(command=ce_path(), args=["mcp", "--channel"], env={
        **os.environ, "CE_INVITATION": invitation, "CE_SESSION": joined["session_id"]})
    return params, joined


async def _next(read: Any, method: str) -> dict[str, Any]:
    with anyio.fail_after(BOUND):
        while True:
            item = await read.receive()
            if isinstance(item, Exception):
                raise item
            message = item.message.model_dump(by_alias=True, exclude_none=True)
            if message.get("method") == method or (method == "" and "result" in message):
                found: dict[str, Any] = message
                return found


async def _initialize(read: Any, write: Any) -> dict[str, Any]:
    await write.send(SessionMessage(t.JSONRPCRequest(
        jsonrpc="2.0", id=1, method="initialize", params={
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "claude-code-like", "version": "1"}})))
    answer = await _next(read, "")
    await write.send(SessionMessage(t.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/initialized")))
    return answer


def test_an_addressed_message_arrives_as_a_channel_notification(
    served: Room, tmp_path: Path,
) -> None:
    params, joined = _channel_session(served)
    errlog = tmp_path / "bridge.err"

    async def main() -> None:
        with errlog.open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                await _body(read, write)

    async def _body(read: Any, write: Any) -> None:
        answer = await _initialize(read, write)
        experimental = answer["result"]["capabilities"]["experimental"]
        assert experimental == {"claude/channel": {}, "claude/channel/permission": {}}
        await _until_open(errlog)
        await anyio.to_thread.run_sync(lambda: _say(served, "nobody in particular"))
        await anyio.to_thread.run_sync(lambda: _say(served, "claude, tighten Risks", "claude"))
        note = await _next(read, "notifications/claude/channel")
        assert "claude, tighten Risks" in note["params"]["content"]
        assert "host" in note["params"]["content"]
        meta = note["params"]["meta"]
        assert meta["event_type"] == "message.sent" and meta["from_name"] == "host"
        assert all(key.replace("_", "").isalnum() for key in meta)
        assert joined["session_id"] not in json.dumps(note)

    anyio.run(main)


def test_a_permission_prompt_is_relayed_and_the_hosts_verdict_returned(served: Room) -> None:
    params, joined = _channel_session(served)

    async def main() -> None:
        async with stdio_client(params) as (read, write):
            await _initialize(read, write)
            await write.send(SessionMessage(t.JSONRPCNotification(
                jsonrpc="2.0", method="notifications/claude/channel/permission_request",
                params={"request_id": "abcde", "tool_name": "Bash",
                        "description": "List the files", "input_preview": '{"command":"ls"}'})))
            with anyio.fail_after(BOUND):
                while not (pending := served.ok("GET", "/workspace/permissions",
                                                 served.host_session)["permissions"]):
                    await anyio.sleep(0.05)
            asked = pending[0]
            assert (asked["title"], asked["tool"], asked["input_preview"]) == (
                "List the files", "Bash", '{"command":"ls"}')
            assert [o["option_id"] for o in asked["options"]] == ["allow", "deny"]
            status, _ = served.call("POST", "/workspace/permission/answer", joined["session_id"],
                                    {"permission_id": asked["permission_id"], "option_id": "allow"})
            assert status == 403  # the session never answers its own prompt
            served.ok("POST", "/workspace/permission/answer", served.host_session,
                      {"permission_id": asked["permission_id"], "option_id": "allow"})
            verdict = await _next(read, "notifications/claude/channel/permission")
            assert verdict["params"] == {"request_id": "abcde", "behavior": "allow"}

    anyio.run(main)


async def _until_open(errlog: Path) -> None:
    """The bridge says on stderr when its channel follows the room (from then on nothing
    addressed to it is missed)."""
    with anyio.fail_after(BOUND):
        while "channel open" not in errlog.read_text():
            await anyio.sleep(0.05)


def _say(served: Room, text: str, *to: str) -> None:
    result = ce("say", str(served.doc), text, *[w for name in to for w in ("--to", name)])
    assert result.returncode == 0, result.stderr
