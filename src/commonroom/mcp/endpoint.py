"""`/mcp` on the session ingress: MCP 2026-07-28 and the legacy streamable-HTTP eras.

By default the seed's rule holds exactly: only 2026-07-28 is served; a legacy
`initialize` (and any other revision) is HTTP 400 with -32022, `GET /mcp`
without `MCP-Protocol-Version: 2026-07-28` and `DELETE` are 405, discovery
lists `["2026-07-28"]`. Older clients use the stdio bridge `ce mcp`.

When the host opts in (`ce serve --mcp-legacy`, `legacy_eras`), the era is
chosen per request:

- a request with `Mcp-Session-Id` belongs to a legacy session (`mcp/legacy.py`):
  `POST` is one of its messages, `GET` its notification stream (resumable with
  `Last-Event-ID`), `DELETE` ends it; an unknown session, or one that is not
  the caller's bearer's, is 404;
- a `POST` whose body is `initialize` without the 2026-07-28 `_meta` opens a
  legacy session (`Mcp-Session-Id` in the answer);
- everything else is 2026-07-28, as by default: stateless, `wire.parse_message`
  validates the envelope and headers; `GET /mcp` is the bearer's notification
  stream only with `Accept: text/event-stream`, a valid bearer and
  `MCP-Protocol-Version: 2026-07-28`; every other GET, and DELETE (and any
  other method), is 405 with `Allow: POST`.

Both eras run the same handlers (one table feeds both); a legacy answer drops
the 2026-07-28 framing (`resultType`, `ttlMs`, `cacheScope`) and reports a
JSON-RPC error with HTTP 200, as legacy clients expect. The caller's
identity always comes from the bearer.

Auth: public metadata (discovery, the lists, prompts, skills, `initialize`,
`ping`) needs no bearer. Anything that touches room state without a valid
bearer is HTTP 401 with `WWW-Authenticate: Bearer error="invalid_token"` and
a JSON-RPC error whose `data` is the HTTP API's error object, in both eras
and in `tools/call` too. Any other commonroom error inside a tool is a
`CallToolResult` with `isError: true`; outside a tool (reading a resource,
opening a stream) a 2026-07-28 answer is a JSON-RPC error with that error's
HTTP status.

The ingress's guard runs first (Host allow-list, Origin, rate limits: an
MCP request counts like any other, a stream once).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from quart import Response, request
from quart_trio import QuartTrio

from commonroom import discovery
from commonroom.engine.facade import StreamStart, capabilities_of, hash_secret
from commonroom.http.common import bearer_from_header, error_response
from commonroom.http.connection import current_connection
from commonroom.http.hardened_app import streaming_response
from commonroom.http.stream_views import held_until_sent
from commonroom.mcp import legacy, notify, resources, tasks, tools, wire
from commonroom.protocol.capabilities import allows
from commonroom.protocol.errors import CommonroomError
from commonroom.room.core import Room

log = logging.getLogger("commonroom.mcp")

JSON = "application/json"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_COMMONROOM_ERROR = -32000  # implementation-defined server error: data is the error object
_SESSION_NOT_FOUND = -32001  # what the TypeScript SDK's servers answer with the legacy 404
_BAD_PARAMS_CODES = frozenset({"invalid_request", "invalid_region"})
AUTH_CODES = tools.AUTH_CODES
WWW_AUTHENTICATE = 'Bearer error="invalid_token"'

PROMPT_NAME = "commonroom-workflow"

# What a legacy session may call besides `initialize` and `ping`: the 2026-07-28
# handlers minus what only that revision has (discovery, subscriptions/listen).
LEGACY_METHODS: frozenset[str] = frozenset({
    "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
    "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
    "skills/list", "skills/get", *tasks.METHODS,
})


def room_error(error: CommonroomError) -> wire.McpError:
    """A commonroom error outside a tool: JSON-RPC error, the error object in `data`."""
    code = wire.INVALID_PARAMS if error.code in _BAD_PARAMS_CODES else _COMMONROOM_ERROR
    return wire.McpError(code, error.message, error.to_wire(), http_status=error.http_status)


def rpc_response(message: dict[str, Any], status: int = 200) -> Response:
    response = Response(wire.dumps(message), status=status, content_type=JSON)
    response.headers["Cache-Control"] = "no-store"
    if status == 401:
        # What an MCP client reads as "your token is bad" (never OAuth: the room has none).
        response.headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    return response


def rpc_error(error: wire.McpError, rid: wire.RequestId = None, *, legacy_era: bool = False) -> Response:
    """The error's answer; a legacy session hears JSON-RPC errors with HTTP 200 (but a 401)."""
    status = error.http_status
    if legacy_era and status != 401:
        status = 200
    return rpc_response(error.to_wire(rid), status)


def session_not_found(rid: wire.RequestId) -> Response:
    """The legacy spec's 404: unknown, ended, or another bearer's session (the same answer)."""
    error = wire.McpError(_SESSION_NOT_FOUND, "Session not found: initialize a new session",
                          http_status=404)
    return rpc_error(error, rid)


def server_capabilities() -> dict[str, Any]:
    """What the room serves, in both eras (no listChanged anywhere)."""
    return {
        "tools": {},
        "resources": {"subscribe": True},
        "prompts": {},
        "extensions": {wire.TASKS_EXTENSION: {}, wire.SKILLS_EXTENSION: {}},
    }


def method_not_allowed() -> Response:
    response = error_response(CommonroomError(
        "invalid_request", "/mcp takes POST (and GET with Accept: text/event-stream, a bearer"
        " and MCP-Protocol-Version: 2026-07-28)"))
    response.status_code = 405
    response.headers["Allow"] = "POST"
    return response


def discover_result(legacy_eras: bool = False) -> dict[str, Any]:
    return {
        "supportedVersions": list(wire.served_versions(legacy_eras)),
        "capabilities": server_capabilities(),
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

    def __init__(self, room: Room, heartbeat_seconds: float, *, legacy_eras: bool = False) -> None:
        self.room = room
        self.heartbeat = heartbeat_seconds
        self.legacy_eras = legacy_eras  # `ce serve --mcp-legacy`: the initialize eras too
        self.subscriptions = notify.Subscriptions()
        self.regions = notify.RegionPaths()
        self.sessions = legacy.LegacySessions(room.engine.session_participant)
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
        try:
            session_id = wire.single_header(request.headers.getlist, wire.SESSION_HEADER)
        except wire.McpError as error:
            return rpc_error(error)
        if session_id is not None and self.legacy_eras:
            return await self.legacy_view(session_id)
        if request.method == "GET":
            return await self.get_stream()
        if request.method != "POST":
            return method_not_allowed()
        try:
            message = wire.parse_body(await self._body())
        except wire.McpError as error:
            return rpc_error(error)
        if wire.opens_legacy_session(message):
            if self.legacy_eras:
                return await self.legacy_initialize(message)
            return rpc_error(wire.unsupported_version(_offered_version(message)),
                             wire.request_id_of(message))
        try:
            req = wire.parse_message(message, request.headers.getlist, legacy_eras=self.legacy_eras)
        except wire.McpError as error:
            return rpc_error(error)
        if req.notification:
            return Response("", status=202)
        try:
            answer = await self.run(req)
        except wire.McpError as error:
            return rpc_error(error, req.id)
        if isinstance(answer, Response):
            return answer
        return rpc_response(wire.result_message(req.id, wire.complete(answer)))

    async def _body(self) -> bytes:
        raw = await request.get_data(cache=False, as_text=False)
        return raw if isinstance(raw, bytes) else raw.encode()

    async def run(self, req: wire.McpRequest) -> Any:
        """One method's result (a dict, or a streaming Response); raises McpError."""
        handler = self.handlers.get(req.method)
        if handler is None:
            raise wire.method_not_found(req.method)
        try:
            return await handler(req)
        except wire.McpError:
            raise
        except CommonroomError as error:
            raise room_error(error) from None
        except Exception:
            log.exception("MCP %s failed", req.method)  # no traceback reaches the client
            raise wire.McpError(wire.INTERNAL_ERROR, "Internal error") from None

    # -- sessions ----------------------------------------------------------------

    def bearer(self) -> str | None:
        return bearer_from_header()

    def bearer_hash(self) -> bytes | None:
        try:
            bearer = self.bearer()
        except CommonroomError:
            return None  # the guard refused a malformed Authorization already
        return None if bearer is None else hash_secret(bearer)

    async def authorize_stream(self, bearer: str | None,
                               params: dict[str, Any] | None = None) -> StreamStart:
        """Authenticate and check `observe` (the table's rule for streams)."""
        outcome = await self.room.execute("workspace.observe", bearer, params or {})
        if outcome.error is not None:
            raise outcome.error
        start: StreamStart = outcome.result
        return start

    # -- the legacy eras ---------------------------------------------------------

    async def legacy_initialize(self, message: dict[str, Any]) -> Response:
        """`initialize` without the 2026-07-28 envelope: open a legacy session."""
        rid = wire.request_id_of(message)
        try:
            _, params, _ = wire.parse_common(message, rid)
            if rid is None:
                return Response("", status=202)  # a notification: nothing to answer
            requested, capabilities = legacy.initialize_params(params)
        except wire.McpError as error:
            return rpc_error(error, rid)
        bearer_hash = self.bearer_hash()
        if not self.sessions.bearer_alive(bearer_hash):
            # A bearer it cannot use: tell the client now, not at its first tool call.
            refused = CommonroomError("unauthorized", "the bearer is not a live session of this room")
            return rpc_error(room_error(refused), rid)
        version = legacy.negotiate(requested)
        session = self.sessions.open(bearer_hash, version, capabilities)
        result = {"protocolVersion": version, "capabilities": server_capabilities(),
                  "serverInfo": wire.SERVER_INFO, "instructions": discovery.mcp_instructions()}
        response = rpc_response(wire.result_message(rid, result))
        response.headers[wire.SESSION_HEADER] = session.session_id
        return response

    async def legacy_view(self, session_id: str) -> Response:
        session = self.sessions.find(session_id, self.bearer_hash())
        if request.method == "POST":
            body = await self._body()
            if session is None:
                return session_not_found(_request_id_of_raw(body))
            return await self.legacy_post(session, body)
        if session is None:
            return session_not_found(None)
        try:
            legacy.check_version_header(
                session, wire.single_header(request.headers.getlist, "MCP-Protocol-Version"))
        except wire.McpError as error:
            return rpc_error(error)
        if request.method == "GET":
            return await self.legacy_stream(session)
        if request.method == "DELETE":
            self.sessions.end(session)
            return Response("", status=204)
        return method_not_allowed()

    async def legacy_post(self, session: legacy.LegacySession, body: bytes) -> Response:
        try:
            message = wire.parse_body(body)
        except wire.McpError as error:
            return rpc_error(error)
        if wire.is_response(message):
            return Response("", status=202)  # the room never asks, so nothing waits for it
        rid = wire.request_id_of(message)
        try:
            method, params, _ = wire.parse_common(message, rid)
            legacy.check_version_header(
                session, wire.single_header(request.headers.getlist, "MCP-Protocol-Version"))
        except wire.McpError as error:
            return rpc_error(error, rid)
        if rid is None:
            if method == "notifications/initialized":
                session.initialized = True
            return Response("", status=202)  # cancelled, progress...: nothing to do
        if method == "initialize":
            return rpc_error(wire.McpError(wire.INVALID_REQUEST,
                                           "Bad Request: this session is initialized already"), rid)
        if method == "ping":
            return rpc_response(wire.result_message(rid, {}))
        try:
            if method not in LEGACY_METHODS:
                raise wire.method_not_found(method)
            req = wire.McpRequest(rid, method, params, session.meta(),
                                  session_subscriptions=session.subscriptions)
            answer = await self.run(req)
        except wire.McpError as error:
            return rpc_error(error, rid, legacy_era=True)
        return rpc_response(wire.result_message(rid, legacy.legacy_result(answer)))

    async def legacy_stream(self, session: legacy.LegacySession) -> Response:
        """The session's `GET /mcp`; 405 when it can have none (no bearer, no `observe`)."""
        if "text/event-stream" not in request.headers.get("Accept", "") or session.bearer_hash is None:
            return method_not_allowed()
        params: dict[str, Any] = {}
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id is not None:
            if not last_event_id.strip().isdigit():
                return error_response(CommonroomError(
                    "invalid_request", "Last-Event-ID must be an event id this stream sent",
                    {"field": "Last-Event-ID"}))
            params["since_event_id"] = int(last_event_id.strip())
        try:
            start = await self.authorize_stream(self.bearer(), params)
        except CommonroomError as error:
            if error.code == "permission_denied":
                return method_not_allowed()  # no `observe`: this session has no stream to offer
            if error.code in AUTH_CODES:
                return session_not_found(None)  # its bearer ended just now
            return error_response(error)
        resume = start.cursor is not None
        primed = session.protocol_version == "2025-11-25"  # older clients may not skip empty data
        framer = notify.LegacyFramer(
            self.heartbeat, session.subscriptions, self.regions,
            priming_cursor=(start.cursor if resume else start.latest_event_id) if primed else None)
        try:
            return self.stream_response(start, framer, resume=resume, on_open=session.attach_stream,
                                        on_close=session.detach_stream)
        except CommonroomError as error:
            return error_response(error)  # past the stream caps: 429 with Retry-After

    # -- the streams -------------------------------------------------------------

    def stream_response(
        self, start: StreamStart, framer: notify.Framer, *, resume: bool = False,
        on_open: Callable[[legacy.Stoppable], None] | None = None,
        on_close: Callable[[legacy.Stoppable], None] | None = None,
    ) -> Response:
        """Every MCP stream's answer (`GET /mcp` of both eras, `subscriptions/listen`).

        On our own HTTP/1.1 connection the stream writes its own chunks and takes the hub's
        direct lane (`notify.NotificationWriter`); elsewhere its frames go through a channel
        (`notify.framed`). `on_open` / `on_close` learn the stream (a legacy session keeps it).

        Every MCP stream is opened here, so here it takes its stream slot (room/slots.py),
        held until the answer's sending is over: past the caps this raises `limit_exceeded`
        (429) and opens nothing. A legacy session itself is bounded per bearer
        (`legacy.SESSIONS_PER_BEARER`); its GET stream takes a slot here like any other.
        """
        slot = self.room.stream_slots.acquire(start.actor)
        try:
            connection = current_connection()
            if connection is None or request.http_version != "1.1":
                body = notify.framed(self.room, start, framer, resume=resume,
                                     on_open=on_open, on_close=on_close)
                return held_until_sent(streaming_response(body, headers=SSE_HEADERS), slot)
            writer = notify.NotificationWriter(connection, framer)
            self.room.open_writing_stream(notify.stream_start(start, resume), writer,
                                          heartbeat_seconds=framer.keepalive)
        except BaseException:
            slot.release()
            raise
        if on_open is not None:
            on_open(writer)

        async def written() -> AsyncGenerator[bytes, None]:
            try:
                yield framer.preamble()
                # Resumed: quart has written the head and the preamble (h11 chose chunked).
                writer.head_sent()
                await writer.done.wait()
            finally:
                writer.close()
                if on_close is not None:
                    on_close(writer)

        return held_until_sent(streaming_response(written(), headers=SSE_HEADERS), slot)

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
            if error.code in AUTH_CODES:
                return method_not_allowed()  # not a valid bearer: "any other GET"
            return error_response(error)
        framer = notify.SessionFramer(self.heartbeat, self.subscriptions, start.actor.session_hash,
                                      self.regions)
        try:
            return self.stream_response(start, framer)
        except CommonroomError as error:
            return error_response(error)  # past the stream caps: 429 with Retry-After

    # -- methods -----------------------------------------------------------------

    async def discover(self, req: wire.McpRequest) -> dict[str, Any]:
        return discover_result(self.legacy_eras)

    async def tools_list(self, req: wire.McpRequest) -> dict[str, Any]:
        """A valid bearer sees the tools its capabilities allow (`cacheScope: private`: the
        list is that session's); no bearer, or one that is not a live session, the public view."""
        try:
            bearer = self.bearer()
        except CommonroomError:
            bearer = None
        capabilities = None if bearer is None else await self.room.run_sync(
            capabilities_of, self.room.engine, bearer)
        if capabilities is None:
            return {"tools": list(tools.tool_list()), "ttlMs": resources.STATIC_TTL_MS,
                    "cacheScope": "public"}
        return {"tools": list(tools.tool_list(tuple(sorted(capabilities)))),
                "ttlMs": resources.STATIC_TTL_MS, "cacheScope": "private"}

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
        bearer = self.bearer()
        if bearer is None:
            raise CommonroomError("unauthorized", "tools/call needs Authorization: Bearer <session_id>")
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
        if uri not in resources.BY_URI and not resources.is_region_uri(uri):
            raise wire.invalid_params(
                "not a subscribable resource",
                {"uri": uri, "subscribable": [*resources.BY_URI, resources.REGION_TEMPLATE]})
        return uri

    async def _subscriber(self) -> StreamStart:
        """resources/subscribe needs `observe` (the stream) and `read` (the resource)."""
        start = await self.authorize_stream(self.bearer())
        if not allows(start.actor.capabilities, "read"):
            raise CommonroomError("permission_denied", "this session lacks the 'read' capability",
                                  {"required_capability": "read"})
        return start

    async def _resolve_region(self, uri: str, bearer: str | None) -> bool:
        """Learn the canonical path a region URI names now; False when it names none."""
        try:
            entry = await resources.read(self.room, resources.resolve(uri), bearer)
        except CommonroomError as error:
            if error.code == "invalid_region":
                return False
            raise
        self.regions.add(uri, entry["_meta"]["commonroom/region"])
        return True

    async def subscribe(self, req: wire.McpRequest) -> dict[str, Any]:
        uri = self._subscribable(req)
        start = await self._subscriber()
        if resources.is_region_uri(uri) and not await self._resolve_region(uri, self.bearer()):
            raise wire.invalid_params("Resource not found", {"uri": uri})
        watched = (req.session_subscriptions if req.session_subscriptions is not None
                   else self.subscriptions.of(start.actor.session_hash))
        if uri not in watched and len(watched) >= notify.SUBSCRIPTIONS_PER_SESSION:
            raise CommonroomError(
                "invalid_request", f"at most {notify.SUBSCRIPTIONS_PER_SESSION} subscriptions per"
                " session; unsubscribe from one first", {"field": "uri"})
        if req.session_subscriptions is not None:
            req.session_subscriptions.add(uri)  # a legacy session's own set
        else:
            self.subscriptions.add(start.actor.session_hash, uri)
        return {}

    async def unsubscribe(self, req: wire.McpRequest) -> dict[str, Any]:
        uri = self._subscribable(req)
        start = await self._subscriber()
        if req.session_subscriptions is not None:
            req.session_subscriptions.discard(uri)
        else:
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
        bearer = self.bearer()
        start = await self.authorize_stream(bearer)
        asked = [uri for uri in notify.requested_uris(req.params) if resources.is_region_uri(uri)]
        regions = [uri for uri in dict.fromkeys(asked[:notify.SUBSCRIPTIONS_PER_SESSION])
                   if await self._resolve_region(uri, bearer)]
        wanted = notify.listen_filter(req.params, regions)
        try:
            return self.stream_response(
                start, notify.ListenFramer(self.heartbeat, wanted, req.id, self.regions))
        except CommonroomError as error:
            refused = rpc_error(room_error(error), req.id)
            refused.headers["Retry-After"] = str(error.recovery["retry_after_seconds"])
            return refused

    async def tasks_method(self, req: wire.McpRequest) -> dict[str, Any]:
        bearer = self.bearer()
        return await tasks.handle(self.room, req, bearer, room_error)


def _offered_version(message: dict[str, Any]) -> Any:
    """The revision a legacy `initialize` asks for (what -32022's `data.requested` echoes)."""
    params = message.get("params")
    return params.get("protocolVersion") if isinstance(params, dict) else None


def _request_id_of_raw(body: bytes) -> wire.RequestId:
    """The request id of a body, if it is readable (for an answer that must echo it)."""
    try:
        return wire.request_id_of(wire.parse_body(body))
    except wire.McpError:
        return None


def register(app: QuartTrio, room: Room, *, heartbeat_seconds: float,
             legacy_eras: bool = False) -> McpEndpoint:
    """Add `/mcp` to the ingress app (never to the owner app: there `/mcp` is 404);
    `legacy_eras` serves the initialize eras too (`ce serve --mcp-legacy`)."""
    endpoint = McpEndpoint(room, heartbeat_seconds, legacy_eras=legacy_eras)

    async def mcp() -> Response:
        return await endpoint.view()

    app.add_url_rule("/mcp", endpoint="mcp", view_func=mcp,
                     methods=["GET", "POST", "DELETE", "PUT", "PATCH"])
    app.extensions["commonroom.mcp"] = endpoint
    return endpoint


OWNER_CONFIGS_PATH = "/owner/api/mcp/configs"


def register_owner_configs(app: QuartTrio, room: Room) -> None:
    """`POST /owner/api/mcp/configs {invitation, name?}` on the owner app (cookie and CSRF, as
    every owner API): the MCP URL and every client's stdio snippet for an invitation the page
    just made, for the page's invitation panel (an HTTP snippet needs a joined session, which
    only the agent has: `ce mcp config CLIENT` prints those)."""
    from commonroom.mcp import configs
    from commonroom.protocol.invitation import decode

    async def owner_configs() -> Response:
        body = await request.get_json(silent=True)
        invitation = body.get("invitation") if isinstance(body, dict) else None
        name = body.get("name", "mcp-agent") if isinstance(body, dict) else None
        if not isinstance(invitation, str) or not isinstance(name, str) or not 0 < len(name) <= 64:
            return error_response(CommonroomError(
                "invalid_request", "give {invitation: the commonroom:// URI, name?: 1-64 characters}",
                {"field": "invitation" if not isinstance(invitation, str) else "name"}))
        try:
            decode(invitation)
            ce_command = configs.running_ce()
        except configs.ConfigError as error:
            return error_response(CommonroomError("invalid_request", str(error)))
        hint = room.engine.ports.transport_hint
        url = configs.mcp_url(hint.to_json()) if hint is not None else None
        snippets = [configs.render(client, transport="stdio", url=url, bearer=None,
                                   ce_command=ce_command, invitation=invitation.strip(), name=name)
                    for client in configs.CLIENTS]
        return Response(wire.dumps({"mcp_url": url, "configs": [s.to_json() for s in snippets]}),
                        content_type=JSON)

    app.add_url_rule(OWNER_CONFIGS_PATH, endpoint="mcp_configs", view_func=owner_configs,
                     methods=["POST"])
