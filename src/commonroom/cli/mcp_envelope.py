"""The MCP envelope the `ce mcp` bridge speaks (sans-I/O: no trio, no sockets).

How a stdio client's request becomes a 2026-07-28 request to the room's `POST /mcp`
(`with_meta` adds `params._meta`; `mcp_headers` the routing headers, a value that
is not plain ASCII base64-encoded), and how the room's answer is read back
(`RoomAnswer`: passed through as one stdout line, parsed only when the bridge must
look inside it, e.g. to see that its session died). `mcp_bridge.py` does the I/O.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Final

import attrs

from commonroom.protocol.errors import CommonroomError

VERSION: Final = "2026-07-28"
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
NAME_FIELD: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                     "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
# The JSON-RPC error code of a failure on the bridge's side (the room was not reached).
BRIDGE_ERROR: Final = -32000
# Result fields only 2026-07-28 has: the bridge's clients speak the older eras, whose strict
# result schemas refuse unknown keys (the TypeScript SDK's empty result, for one).
MODERN_ONLY: Final = frozenset({"resultType", "ttlMs", "cacheScope"})


def header_value(value: str) -> str:
    """A header value as MCP sends it: plain when safe, else `=?base64?...?=`."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def mcp_headers(message: dict[str, Any], bearer: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": VERSION, "Mcp-Method": message["method"]}
    field = NAME_FIELD.get(message["method"])
    params = message.get("params")
    if field is not None and isinstance(params, dict) and isinstance(params.get(field), str):
        headers["Mcp-Name"] = header_value(params[field])
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    return headers


def with_meta(message: dict[str, Any], client_info: dict[str, Any] | None,
              client_capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """The request in the 2026-07-28 envelope (the client's own `_meta` keys win)."""
    params = message.get("params")
    params = dict(params) if isinstance(params, dict) else {}
    meta = dict(params.get("_meta") or {})
    meta.setdefault("io.modelcontextprotocol/protocolVersion", VERSION)
    meta.setdefault("io.modelcontextprotocol/clientCapabilities", client_capabilities or {})
    if client_info:
        meta.setdefault("io.modelcontextprotocol/clientInfo", client_info)
    params["_meta"] = meta
    return {**message, "params": params}


@attrs.frozen
class RoomAnswer:
    """The room's answer to one POST, parsed only when someone needs more than its bytes."""

    status: int
    raw: bytes

    def json(self) -> dict[str, Any]:
        try:
            answer = json.loads(self.raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise CommonroomError("transport_unavailable",
                                  f"the room answered HTTP {self.status} without JSON") from None
        if not isinstance(answer, dict):
            raise CommonroomError("transport_unavailable", "the room's answer is not an object")
        return answer

    def line(self) -> bytes:
        """The answer as one stdout line in the older eras' framing: the room's compact JSON as
        is when it is one line and carries no 2026-07-28 result field (`MODERN_ONLY`)."""
        raw = self.raw.strip()
        if (raw.startswith(b"{") and raw.endswith(b"}") and b"\n" not in raw and b"\r" not in raw
                and not any(b'"' + key.encode() + b'"' in raw for key in MODERN_ONLY)):
            return raw + b"\n"
        answer = self.json()
        result = answer.get("result")
        if isinstance(result, dict):
            answer["result"] = {k: v for k, v in result.items() if k not in MODERN_ONLY}
        return json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"

    def session_dead(self) -> bool:
        if self.status == 401:
            return True  # the room answers a bearer that is not a session with 401 (join again)
        if b'"isError":true' not in self.raw:
            return False
        return _session_dead(self.json())


def _session_dead(answer: dict[str, Any]) -> bool:
    """A tool answer saying the bearer is not (or no longer) a session."""
    result = answer.get("result")
    if not isinstance(result, dict) or not result.get("isError"):
        return False
    for block in result.get("content") or []:
        try:
            error = json.loads(block.get("text", ""))
        except (AttributeError, json.JSONDecodeError):
            continue
        if isinstance(error, dict) and error.get("error") in ("unauthorized", "session_expired"):
            return True
    return False
