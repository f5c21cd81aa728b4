"""The client side of the Agent Client Protocol (ACP v1), sans I/O.

ACP is JSON-RPC 2.0, one message per line, over the agent's stdin/stdout. This
module holds the client's half of the wire and nothing else: `AcpPeer` numbers
requests, frames them, parses what the agent writes and sorts it into answers
(matched to their request), requests from the agent (`session/request_permission`,
`fs/*`, ...) and notifications (`session/update`). The trio driver
(`cli/resident.py`) moves the bytes.

Hand-written rather than the official SDK (`agent-client-protocol`) because that
SDK runs on asyncio with pydantic models: `ce` is trio throughout, and a second
event loop in a thread plus pydantic would cost `ce agent` most of its memory
budget (an idle runtime stays under 60 MB) for five methods. The wire is tested
against the SDK's agent side (`tests/e2e/acp_agent.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

PROTOCOL_VERSION: Final = 1
# JSON-RPC's codes the client answers with.
METHOD_NOT_FOUND: Final = -32601
PARSE_ERROR: Final = -32700
# ACP's "authentication required" (an agent that needs a sign-in or a key).
AUTH_REQUIRED: Final = -32000
# A line longer than this from the agent is not a message (a runaway agent cannot fill memory).
LINE_MAX_BYTES: Final = 8 * 1024 * 1024
PREVIEW_MAX: Final = 500


class AcpError(Exception):
    """The agent answered a request with an error (or broke the protocol)."""

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.data = data


@attrs.frozen
class Answer:
    request_id: int
    result: Any
    error: AcpError | None


@attrs.frozen
class AgentRequest:
    """A request the agent sent to the client; answer it with `AcpPeer.respond`."""

    request_id: Any
    method: str
    params: Mapping[str, Any]


@attrs.frozen
class Notification:
    method: str
    params: Mapping[str, Any]


Incoming = Answer | AgentRequest | Notification


class AcpPeer:
    """Frames the client's messages and sorts the agent's; holds no I/O and no clock."""

    def __init__(self) -> None:
        self._next_id = 0
        self._buffer = b""
        self.pending: dict[int, str] = {}

    def request(self, method: str, params: Mapping[str, Any]) -> tuple[int, bytes]:
        self._next_id += 1
        self.pending[self._next_id] = method
        return self._next_id, _line({"jsonrpc": "2.0", "id": self._next_id, "method": method,
                                     "params": dict(params)})

    def notify(self, method: str, params: Mapping[str, Any]) -> bytes:
        return _line({"jsonrpc": "2.0", "method": method, "params": dict(params)})

    def respond(self, request_id: Any, result: Any) -> bytes:
        return _line({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: Any, code: int, message: str) -> bytes:
        return _line({"jsonrpc": "2.0", "id": request_id,
                      "error": {"code": code, "message": message}})

    def receive(self, data: bytes) -> list[Incoming]:
        """Feed bytes from the agent's stdout; the whole messages they completed."""
        self._buffer += data
        out: list[Incoming] = []
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = self._parse(line)
            if message is not None:
                out.append(message)
        if len(self._buffer) > LINE_MAX_BYTES:
            self._buffer = b""
            raise AcpError(f"the agent wrote a line over {LINE_MAX_BYTES} bytes")
        return out

    def _parse(self, line: bytes) -> Incoming | None:
        if not line.strip():
            return None
        try:
            message = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None  # an agent's stray log line on stdout: not a message
        if not isinstance(message, dict):
            return None
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if isinstance(method, str):
            if "id" in message and message["id"] is not None:
                return AgentRequest(message["id"], method, params)
            return Notification(method, params)
        request_id = message.get("id")
        if not isinstance(request_id, int) or request_id not in self.pending:
            return None
        self.pending.pop(request_id)
        error = message.get("error")
        if isinstance(error, dict):
            return Answer(request_id, None, AcpError(str(error.get("message") or "error"),
                                                     error.get("code"), error.get("data")))
        return Answer(request_id, message.get("result"), None)


def _line(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


# -- the messages of ACP v1 the runtime sends --------------------------------------------


def initialize_params() -> dict[str, Any]:
    # No file system and no terminal: the agent acts in the room through its MCP server.
    return {"protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                   "terminal": False},
            "clientInfo": {"name": "commonroom", "title": "ce agent", "version": _version()}}


def _version() -> str:
    from commonroom import __version__

    return __version__


def new_session_params(cwd: str, mcp_command: str, mcp_args: Sequence[str],
                       mcp_env: Mapping[str, str]) -> dict[str, Any]:
    """`session/new` with the room as the agent's one MCP server (a stdio server: the
    `ce mcp` bridge; its secrets in `env`, never in `args`)."""
    return {"cwd": cwd, "mcpServers": [{
        "name": "commonroom", "command": mcp_command, "args": list(mcp_args),
        "env": [{"name": key, "value": value} for key, value in mcp_env.items()]}]}


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


CANCELLED: Final[dict[str, Any]] = {"outcome": {"outcome": "cancelled"}}


def env_auth_method(methods: Any, environ: Mapping[str, str]) -> str | None:
    """The first `env_var` auth method the agent offers whose variables are all set."""
    for method in methods if isinstance(methods, list) else []:
        if not isinstance(method, Mapping) or method.get("type") != "env_var":
            continue
        names = [v.get("name") for v in method.get("vars") or [] if isinstance(v, Mapping)]
        if names and all(isinstance(n, str) and environ.get(n) for n in names):
            return str(method.get("id"))
    return None


# -- what the agent sends ------------------------------------------------------------------

_OPTION_KINDS: Final = ("allow_once", "allow_always", "reject_once", "reject_always")


def permission_request(params: Mapping[str, Any]) -> dict[str, Any]:
    """A `session/request_permission` as the room's permission request body.

    The options go through exactly (id, name, kind); the tool's input becomes a
    bounded preview (the room refuses a longer one rather than cutting it).
    """
    tool_call = params.get("toolCall")
    tool_call = tool_call if isinstance(tool_call, Mapping) else {}
    title = str(tool_call.get("title") or "The agent asks for permission").strip()
    tool = str(tool_call.get("kind") or "")
    raw = tool_call.get("rawInput")
    preview = "" if raw is None else (raw if isinstance(raw, str)
                                      else json.dumps(raw, ensure_ascii=False, sort_keys=True))
    options = []
    for option in params.get("options") or []:
        if not isinstance(option, Mapping):
            continue
        kind = option.get("kind")
        options.append({"option_id": str(option.get("optionId")), "name": str(option.get("name")),
                        "kind": kind if kind in _OPTION_KINDS else "reject_once"})
    return {"title": _clean(title, 200) or "permission", "tool": _clean(tool, 200),
            "input_preview": _cut(_clean(preview, None), PREVIEW_MAX), "options": options}


def _clean(text: str, limit: int | None) -> str:
    """Control characters out (the room refuses them); tab and newline stay."""
    out = "".join(ch if ch in "\t\n" or not (ord(ch) < 32 or 127 <= ord(ch) < 160) else " "
                  for ch in text)
    return out[:limit] if limit is not None else out


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def progress_of(update: Mapping[str, Any]) -> str | None:
    """One short line for the host from a `session/update` (None: nothing worth showing)."""
    kind = update.get("sessionUpdate")
    if kind == "tool_call":
        return _cut(f"tool: {update.get('title') or update.get('kind') or 'call'}", 200)
    if kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
        return _cut(f"tool {update.get('status')}: {update.get('title') or ''}".rstrip(": "), 200)
    if kind == "plan":
        entries = update.get("entries") or []
        return _cut(f"plan: {len(entries)} steps", 200)
    if kind == "agent_message_chunk":
        content = update.get("content")
        if isinstance(content, Mapping) and content.get("type") == "text":
            return None  # text streams in chunks: the runtime gathers it (`message_text`)
    return None


def message_text(update: Mapping[str, Any]) -> str:
    """The text an `agent_message_chunk` adds ('' for any other update)."""
    if update.get("sessionUpdate") != "agent_message_chunk":
        return ""
    content = update.get("content")
    if isinstance(content, Mapping) and content.get("type") == "text":
        return str(content.get("text") or "")
    return ""
