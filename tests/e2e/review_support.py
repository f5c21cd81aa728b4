"""MCP over plain HTTP for the review conversation's end-to-end tests (issue 22)."""

from __future__ import annotations

import json
from typing import Any, Protocol

VERSION = "2026-07-28"


class Caller(Protocol):
    def call(self, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]: ...


def _call_tool(agent: Caller, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": arguments, "_meta": {
                   "io.modelcontextprotocol/protocolVersion": VERSION,
                   "io.modelcontextprotocol/clientCapabilities": {},
                   "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"}}}}
    status, answer, _ = agent.call("POST", "/mcp", message, headers={
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call", "Mcp-Name": name})
    assert status == 200, answer
    result: dict[str, Any] = answer["result"]
    return result


def mcp_tool(agent: Caller, name: str, **arguments: Any) -> Any:
    """One MCP 2026-07-28 tools/call on the room's /mcp, as an MCP client sends it."""
    result = _call_tool(agent, name, arguments)
    assert result["isError"] is False, result
    return result["structuredContent"]


def mcp_error(agent: Caller, name: str, **arguments: Any) -> dict[str, Any]:
    """A tools/call the room refuses: the protocol's error object, from the tool result."""
    result = _call_tool(agent, name, arguments)
    assert result["isError"] is True, result
    error: dict[str, Any] = json.loads(result["content"][0]["text"])
    return error
