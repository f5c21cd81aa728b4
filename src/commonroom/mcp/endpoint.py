"""`/mcp` on the session ingress: MCP revision 2026-07-28, stateless.

`POST /mcp` takes one JSON-RPC request (`wire.parse` validates the envelope
and headers) and answers JSON, or for `subscriptions/listen` an SSE stream;
a notification gets 202 and an empty body. `GET /mcp` is the session's
notification stream, only with `Accept: text/event-stream`, a valid bearer
and `MCP-Protocol-Version: 2026-07-28`; every other GET, and DELETE (and any
other method), is 405 with `Allow: POST`. There is no initialize handshake
and no `Mcp-Session-Id`: the bearer in `Authorization` is the session, and
the caller's identity always comes from it.

The ingress's guard runs first (Host allow-list, Origin, rate limits: an
MCP request counts like any other, a stream once). A commonroom error inside
a tool is a `CallToolResult` with `isError: true`; outside a tool (reading a
resource, opening a stream) it is a JSON-RPC error whose `data` is the HTTP
API's error object, with that error's HTTP status.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from quart import Response, request
from quart_trio import QuartTrio

from commonroom import discovery
from commonroom.engine.observe import StreamStart
from commonroom.http.common import bearer_from_header, error_response
from commonroom.http.hardened_app import streaming_response
from commonroom.http.stream_views import held_until_sent
from commonroom.mcp import notify, resources, tasks, tools, wire
from commonroom.protocol.capabilities import allows
from commonroom.protocol.errors import CommonroomError
from commonroom.room.core import Room

log = logging.getLogger("commonroom.mcp")

JSON = "application/json"
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
_COMMONROOM_ERROR = -32000  # implementation-defined server error: data is the error object
_BAD_PARAMS_CODES = frozenset({"invalid_request", "invalid_region"})

PROMPT_NAME = "commonroom-workflow"


def room_error(error: CommonroomError) -> wire.McpError:
    """A commonroom error outside a tool: JSON-RPC error, the error object in `data`."""
    code = wire.INVALID_PARAMS if error.code in _BAD_PARAMS_CODES else _COMMONROOM_ERROR
    return wire.McpError(code, error.message, error.to_wire(), http_status=error.http_status)


def rpc_response(message: dict[str, Any], status: int = 200) -> Response:
    response = Response(wire.dumps(message), status=status, content_type=JSON)
    response.headers["Cache-Control"] = "no-store"
    return response


def rpc_error(error: wire.McpError, rid: wire.RequestId = None) -> Response:
    return rpc_response(error.to_wire(rid), error.http_status)


def method_not_allowed() -> Response:
    response = error_response(CommonroomError(
        "invalid_request", "/mcp takes POST (and GET with Accept: text/event-stream, a bearer"
        " and MCP-Protocol-Version: 2026-07-28)"))
    response.status_code = 405
    response.headers["Allow"] = "POST"
    return response


def discover_result() -> dict[str, Any]:
    return {
        "supportedVersions": list(wire.SUPPORTED_VERSIONS),
        "capabilities": {
            "tools": {},
            "resources": {"subscribe": True},
            "prompts": {},
            "extensions": {wire.TASKS_EXTENSION: {}, wire.SKILLS_EXTENSION: {}},
        },
        "instructions": discovery.mcp_instructions(),
        "ttlMs": 0,
        "cacheScope": "public",
    }


def _skill_entry() -> dict[str, Any]:
    _, digest, size = resources.skill_file()
    return {
        "uri": resources.SKILL_URI,
        "frontmatter": {"name": "commonroom",
                        "description": "Work with people on one markdown document in a commonroom."},
        "resources": [{"uri": resources.SKILL_URI, "mimeType": "text/markdown",
                       "digest": digest, "size": size}],
    }


def _prompt() -> dict[str, Any]:
    return {"name": PROMPT_NAME, "title": "Work in a commonroom",
            "description": "The room's workflow: read, lease, propose, wait for approval, commit.",
            "arguments": []}


class McpEndpoint:
    """The handlers of `/mcp` for one room."""

    def __init__(self, room: Room, heartbeat_seconds: float) -> None:
        self.room = room
        self.heartbeat = heartbeat_seconds
        self.subscriptions = notify.Subscriptions()
        self.handlers: dict[str, Callable[[wire.McpRequest], Awaitable[Any]]] = {
            "server/discover": self.discover,
            "tools/list": self.tools_list,
            "tools/call": self.tools_call,
            "resources/list": self.resources_list,
            "resources/templates/list": self.templates_list,
            "resources/read": self.resources_read,
            "resources/subscribe": self.subscribe,
            "resources/unsubscribe": self.unsubscribe,
            "prompts/list": self.prompts_list,
            "prompts/get": self.prompts_get,
            "skills/list": self.skills_list,
            "skills/get": self.skills_get,
            "subscriptions/listen": self.listen,
            **{name: self.tasks_method for name in tasks.METHODS},
        }

    # -- the route ---------------------------------------------------------------

    async def view(self) -> Response:
        if request.method == "GET":
            return await self.get_stream()
        if request.method != "POST":
            return method_not_allowed()
        raw = await request.get_data(cache=False, as_text=False)
        try:
            req = wire.parse(raw if isinstance(raw, bytes) else raw.encode(), request.headers.getlist)
        except wire.McpError as error:
            return rpc_error(error)
        if req.notification:
            return Response("", status=202)
        handler = self.handlers.get(req.method)
        try:
            if handler is None:
                raise wire.method_not_found(req.method)
            answer = await handler(req)
        except wire.McpError as error:
            return rpc_error(error, req.id)
        except CommonroomError as error:
            return rpc_error(room_error(error), req.id)
        except Exception:
            log.exception("MCP %s failed", req.method)  # no traceback reaches the client
            return rpc_error(wire.McpError(wire.INTERNAL_ERROR, "Internal error"), req.id)
        if isinstance(answer, Response):
            return answer
        return rpc_response(wire.result_message(req.id, wire.complete(answer)))

    # -- sessions ----------------------------------------------------------------

    def bearer(self) -> str | None:
        return bearer_from_header()

    async def authorize_stream(self, bearer: str | None) -> StreamStart:
        """Authenticate and check `observe` (the table's rule for streams)."""
        outcome = await self.room.execute("workspace.observe", bearer, {})
        if outcome.error is not None:
            raise outcome.error
        start: StreamStart = outcome.result
        return start

    # -- GET /mcp ----------------------------------------------------------------

    async def get_stream(self) -> Response:
        accept = request.headers.get("Accept", "")
        versions = request.headers.getlist("MCP-Protocol-Version")
        try:
            bearer = self.bearer()
        except CommonroomError:
            bearer = None
        if ("text/event-stream" not in accept or bearer is None or len(versions) != 1
                or wire.decode_header_value(versions[0]) != wire.PROTOCOL_VERSION):
            return method_not_allowed()
        try:
            start = await self.authorize_stream(bearer)
        except CommonroomError as error:
            if error.code in ("unauthorized", "session_expired"):
                return method_not_allowed()  # not a valid bearer: "any other GET"
            return error_response(error)
        try:
            slot = self.room.stream_slots.acquire(start.actor)  # 8 streams per session
        except CommonroomError as error:
            return error_response(error)
        body = notify.session_stream(self.room, start, self.subscriptions, self.heartbeat)
        return held_until_sent(streaming_response(body, headers=SSE_HEADERS), slot)

    # -- methods -----------------------------------------------------------------

    async def discover(self, req: wire.McpRequest) -> dict[str, Any]:
        return discover_result()

    async def tools_list(self, req: wire.McpRequest) -> dict[str, Any]:
        return {"tools": list(tools.tool_list()), "ttlMs": resources.STATIC_TTL_MS,
                "cacheScope": "public"}

    async def tools_call(self, req: wire.McpRequest) -> dict[str, Any]:
        name = req.params.get("name")
        if not isinstance(name, str):
            raise wire.invalid_params("params.name must be a tool name")
        op = tools.TOOLS_BY_NAME.get(name)
        if op is None:
            raise wire.invalid_params(f"unknown tool {name!r}", {"name": name})
        arguments = req.params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise wire.invalid_params("params.arguments must be an object")
        try:
            bearer = self.bearer()
        except CommonroomError as error:
            return tools.error_result(error)
        return await tools.call_tool(self.room, op, bearer, arguments)

    async def resources_list(self, req: wire.McpRequest) -> dict[str, Any]:
        return {"resources": resources.resource_list(), "ttlMs": resources.STATIC_TTL_MS,
                "cacheScope": "public"}

    async def templates_list(self, req: wire.McpRequest) -> dict[str, Any]:
        return {"resourceTemplates": resources.template_list(),
                "ttlMs": resources.STATIC_TTL_MS, "cacheScope": "public"}

    def _target(self, req: wire.McpRequest) -> resources.Target:
        uri = req.params.get("uri")
        if not isinstance(uri, str):
            raise wire.invalid_params("params.uri must be a string")
        try:
            return resources.resolve(uri)
        except resources.NotFound:
            raise wire.invalid_params("Resource not found", {"uri": uri}) from None

    async def resources_read(self, req: wire.McpRequest) -> dict[str, Any]:
        target = self._target(req)
        bearer = self.bearer()
        try:
            entry = await resources.read(self.room, target, bearer)
        except CommonroomError as error:
            if error.code == "invalid_region":
                raise wire.invalid_params("Resource not found",
                                          {"uri": target.uri, "error": error.to_wire()}) from None
            raise
        if target.operation is None:
            return {"contents": [entry], "ttlMs": resources.STATIC_TTL_MS, "cacheScope": "public"}
        return {"contents": [entry], "ttlMs": resources.ROOM_STATE_TTL_MS, "cacheScope": "private"}

    def _subscribable(self, req: wire.McpRequest) -> str:
        uri = req.params.get("uri")
        if not isinstance(uri, str):
            raise wire.invalid_params("params.uri must be a string")
        if uri not in resources.BY_URI:
            raise wire.invalid_params(
                "not a subscribable resource", {"uri": uri, "subscribable": list(resources.BY_URI)})
        return uri

    async def _subscriber(self) -> StreamStart:
        """resources/subscribe needs `observe` (the stream) and `read` (the resource)."""
        start = await self.authorize_stream(self.bearer())
        if not allows(start.actor.capabilities, "read"):
            raise CommonroomError("permission_denied", "this session lacks the 'read' capability",
                                  {"required_capability": "read"})
        return start

    async def subscribe(self, req: wire.McpRequest) -> dict[str, Any]:
        uri = self._subscribable(req)
        start = await self._subscriber()
        self.subscriptions.add(start.actor.session_hash, uri)
        return {}

    async def unsubscribe(self, req: wire.McpRequest) -> dict[str, Any]:
        uri = self._subscribable(req)
        start = await self._subscriber()
        self.subscriptions.remove(start.actor.session_hash, uri)
        return {}

    async def prompts_list(self, req: wire.McpRequest) -> dict[str, Any]:
        return {"prompts": [_prompt()], "ttlMs": resources.STATIC_TTL_MS, "cacheScope": "public"}

    async def prompts_get(self, req: wire.McpRequest) -> dict[str, Any]:
        name = req.params.get("name")
        if name != PROMPT_NAME:
            raise wire.invalid_params(f"unknown prompt {name!r}", {"name": name})
        return {"description": _prompt()["description"],
                "messages": [{"role": "user", "content": {
                    "type": "text", "text": discovery.mcp_instructions()}}]}

    async def skills_list(self, req: wire.McpRequest) -> dict[str, Any]:
        return {"skills": [_skill_entry()], "ttlMs": resources.STATIC_TTL_MS,
                "cacheScope": "public"}

    async def skills_get(self, req: wire.McpRequest) -> dict[str, Any]:
        uri = req.params.get("uri")
        if uri not in (resources.SKILL_URI, "skill://commonroom"):
            raise wire.invalid_params("unknown skill", {"uri": uri})
        return {"skill": _skill_entry()}

    async def listen(self, req: wire.McpRequest) -> Response:
        if "text/event-stream" not in request.headers.get("Accept", ""):
            raise wire.McpError(wire.INVALID_REQUEST,
                                "subscriptions/listen needs Accept: text/event-stream")
        wanted = notify.listen_filter(req.params)
        start = await self.authorize_stream(self.bearer())
        try:
            slot = self.room.stream_slots.acquire(start.actor)  # 8 streams per session
        except CommonroomError as error:
            refused = rpc_error(room_error(error), req.id)
            refused.headers["Retry-After"] = str(error.recovery["retry_after_seconds"])
            return refused
        body = notify.listen_stream(self.room, start, wanted, req.id, self.heartbeat)
        return held_until_sent(streaming_response(body, headers=SSE_HEADERS), slot)

    async def tasks_method(self, req: wire.McpRequest) -> dict[str, Any]:
        bearer = self.bearer()
        return await tasks.handle(self.room, req, bearer, room_error)


def register(app: QuartTrio, room: Room, *, heartbeat_seconds: float) -> McpEndpoint:
    """Add `/mcp` to the ingress app (never to the owner app: there `/mcp` is 404)."""
    endpoint = McpEndpoint(room, heartbeat_seconds)

    async def mcp() -> Response:
        return await endpoint.view()

    app.add_url_rule("/mcp", endpoint="mcp", view_func=mcp,
                     methods=["GET", "POST", "DELETE", "PUT", "PATCH"])
    app.extensions["commonroom.mcp"] = endpoint
    return endpoint
