"""MCP tools: generated from the operation table, never a second list.

A tool is named like its operation with every `.` written `_` (`workspace_read`,
`thread_open`): MCP clients (Claude Desktop, the OpenAI API behind Codex,
Copilot) refuse a whole server when one tool name does not match
`^[a-zA-Z0-9_-]{1,64}$` (`MCP_NAME_PATTERN`); `protocol.operations.tool_name` is the
one place the name is derived. Every `call` operation except `session.join` (an MCP caller already has its
session) is a tool, plus the long-poll `workspace.wait` (useful to agents
that cannot hold a stream); observe and observe/ws are streams, not tools.
Order is the table's, so `workspace.status` (no arguments, read-only) comes
first: the conformance runner calls the first tool with `{}`.

A commonroom error inside a tool is not a JSON-RPC error: the answer is a
`CallToolResult` with `isError: true` whose one text block is the error
object the HTTP API returns (recovery fields included). Except a failed
login (`AUTH_CODES`): a client must see that as one (HTTP 401), not as a tool
that failed, so `call_tool` raises it.
"""

from __future__ import annotations

import base64
import json
from functools import cache
from typing import Any, Final

from commonroom.engine.facade import Outcome, StreamStart
from commonroom.protocol import records as r
from commonroom.protocol.capabilities import allows
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.operations import MCP_NAME_PATTERN, OPERATIONS, OperationSpec, tool_name
from commonroom.protocol.records import to_wire
from commonroom.protocol.schema import json_schema
from commonroom.room.core import Room

# The errors that mean "no valid bearer": HTTP 401, never an isError result.
AUTH_CODES: Final = frozenset({"unauthorized", "session_expired"})

# The spec says which operations are tools (`OperationSpec.tool`: calls and long-polls,
# never session.join nor a resident runtime's own reports).
TOOL_OPERATIONS: Final[tuple[OperationSpec, ...]] = tuple(op for op in OPERATIONS if op.tool)
TOOLS_BY_NAME: Final[dict[str, OperationSpec]] = {tool_name(op.name): op for op in TOOL_OPERATIONS}
if bad_names := [name for name in TOOLS_BY_NAME if not MCP_NAME_PATTERN.match(name)]:
    raise RuntimeError(f"MCP tool names that clients refuse: {bad_names}")


def _description(op: OperationSpec) -> str:
    needs = f" Needs the '{op.capability}' capability." if op.capability else ""
    return op.summary + needs


def tool(op: OperationSpec) -> dict[str, Any]:
    """One `Tool` of `tools/list`.

    No `outputSchema`: the answers' records were half of the listing (71 KB for 59 tools),
    paid on every turn by every agent; `structuredContent` is still every answer, and its
    shape is in `/openapi.json`. The input schema is the table's, constraints included.
    """
    return {
        "name": tool_name(op.name),
        "title": op.name,
        "description": _description(op),
        "inputSchema": json_schema(op.params, params=True),
        "annotations": {
            "readOnlyHint": op.read_only,
            "destructiveHint": op.destructive,
            "idempotentHint": op.idempotent,
            "openWorldHint": False,
        },
    }


@cache
def tool_list(capabilities: tuple[str, ...] | None = None) -> tuple[dict[str, Any], ...]:
    """Every tool (the public view, `capabilities` None), or only those a session holding
    `capabilities` can call (its view: what `tools/list` shows a valid bearer)."""
    return tuple(tool(op) for op in TOOL_OPERATIONS
                 if capabilities is None or op.capability is None
                 or allows(capabilities, op.capability))


def success_result(answer: Any, media: dict[str, Any] | None = None) -> dict[str, Any]:
    """The answer as text and structured content, plus the file itself when it is one."""
    text = json.dumps(answer, separators=(",", ":"), ensure_ascii=False)
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if media is not None:
        content.append(media)
    return {"content": content, "structuredContent": answer, "isError": False}


def media_content(result: Any) -> dict[str, Any] | None:
    """An attachment or a surface as MCP content: an image as image content, text as text.

    (docs/spec/PROTOCOL.md 10.1 / the Free4Chat seed: a client shows the file itself, not its base64.)
    """
    if not isinstance(result, r.AttachmentData | r.SurfaceData) or result.data_base64 is None:
        return None
    mime = result.mime_type or "application/octet-stream"
    if mime.startswith("image/"):
        return {"type": "image", "data": result.data_base64, "mimeType": mime}
    try:
        return {"type": "text", "text": base64.b64decode(result.data_base64).decode("utf-8")}
    except (ValueError, UnicodeDecodeError):
        return None  # the room stores only text it could decode; nothing else to show


def error_result(error: CommonroomError) -> dict[str, Any]:
    text = json.dumps(error.to_wire(), separators=(",", ":"), ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "isError": True}


async def call_tool(
    room: Room, op: OperationSpec, bearer: str | None, arguments: dict[str, Any]
) -> dict[str, Any]:
    """The CallToolResult body of calling `op`: its answer, or its error as `isError`.

    Raises the CommonroomError of a bearer that is not a valid session (`AUTH_CODES`).
    """
    outcome: Outcome = await room.execute(op.name, bearer, arguments)
    if outcome.error is not None:
        if outcome.error.code in AUTH_CODES:
            raise outcome.error
        return error_result(outcome.error)
    if op.kind == "stream":
        start: StreamStart = outcome.result

        async def again() -> StreamStart:
            rerun = await room.execute(op.name, bearer, arguments)
            if rerun.error is not None:
                raise rerun.error
            fresh: StreamStart = rerun.result
            return fresh

        try:
            waited = await room.wait(start, again)
        except CommonroomError as error:  # the record went away, or the session ended, meanwhile
            if error.code in AUTH_CODES:
                raise
            return error_result(error)
        return success_result(to_wire(waited))
    return success_result(to_wire(outcome.result), media_content(outcome.result))
