"""The session ingress: what a transport plugin exposes to agents.

Bearer sessions only, no cookies. Every operation route comes from the
operation table; the stream routes (observe, observe/ws, wait) call
`commonroom.streams`. Before any view: the Host allow-list (DNS rebinding),
the Origin check, and the rate limits -- 600 requests per bearer in any 60 s,
60 per client address for everything else (discovery, join, and a bearer
that is not a live session, so guessing secrets is slow). See `Gate`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable
from typing import Any

import attrs
import trio
from quart import Response, request, websocket
from quart_trio import QuartTrio

from commonroom import discovery
from commonroom.engine.core import hash_secret
from commonroom.engine.observe import StreamStart
from commonroom.engine.operations import CALLS
from commonroom.http import stream_views
from commonroom.http.common import (
    bearer_from_header,
    error_response,
    json_response,
    operation_view,
    rate_limited,
)
from commonroom.http.serving import HEADER_CHECK
from commonroom.mcp.endpoint import register as register_mcp
from commonroom.openapi import served_body as openapi_body
from commonroom.protocol.errors import CommonroomError
from commonroom.ratelimit import RateLimiter
from commonroom.room.core import Room

_HOST = re.compile(r"^(commonroom|localhost(:\d{1,5})?|127\.0\.0\.1(:\d{1,5})?)$", re.IGNORECASE)
_ORIGIN = re.compile(r"^https?://(localhost|127\.0\.0\.1)(:\d{1,5})?$", re.IGNORECASE)


@attrs.define
class IngressSettings:
    requests_per_minute: int = 600
    anonymous_per_minute: int = 60
    heartbeat_seconds: float = 15.0
    # Quart's per-response timeout for ordinary answers; streams set none (pitfall 2).
    response_timeout: float = 60.0
    # Monotonic seconds for the rate limiter; trio's clock (MockClock in tests) by default.
    clock: Callable[[], float] = trio.current_time


def host_allowed(host: str | None) -> bool:
    return host is not None and bool(_HOST.match(host))


def origin_allowed(origin: str | None) -> bool:
    return origin is None or bool(_ORIGIN.match(origin))


class Gate:
    """Rate limits keyed by the hash of a bearer (never the bearer) or the client address.

    A bearer the engine knows as a live session is charged to its own
    window from its first request; anything else (no bearer, an unknown or
    ended one) is charged to the client address, so guessing bearers runs at
    the anonymous rate. `live_sessions` is the engine's set of live session
    hashes: a set lookup, no store call, on the hot path.
    """

    def __init__(self, settings: IngressSettings, live_sessions: Container[bytes]) -> None:
        self.per_bearer = RateLimiter(settings.requests_per_minute, 60.0, settings.clock)
        self.per_address = RateLimiter(settings.anonymous_per_minute, 60.0, settings.clock)
        self.live_sessions = live_sessions

    def admit(self, bearer: str | None, address: str) -> None:
        if bearer is not None:
            key = hash_secret(bearer)  # the engine's one hash: what `live_sessions` holds
            if key in self.live_sessions:
                wait = self.per_bearer.acquire(key)
                if wait is not None:
                    raise rate_limited(wait)
                return
        wait = self.per_address.acquire(address)
        if wait is not None:
            raise rate_limited(wait)

    def sweep(self) -> None:
        self.per_bearer.sweep()
        self.per_address.sweep()


def request_refusal(host: str | None, origin: str | None) -> CommonroomError | None:
    """The Host allow-list (DNS rebinding) and the Origin check, before anything else."""
    if not host_allowed(host):
        return CommonroomError("permission_denied", "Host not allowed")
    if not origin_allowed(origin):
        return CommonroomError("permission_denied", "Origin not allowed")
    return None


def host_and_origin(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str | None, str | None]:
    """The Host and Origin of raw ASGI headers (for checks that run before the app)."""
    found: dict[bytes, str] = {}
    for name, value in headers:
        lowered = name.lower()
        if lowered in (b"host", b"origin"):
            found[lowered] = value.decode("latin-1")
    return found.get(b"host"), found.get(b"origin")


def _scope_header_check(headers: Iterable[tuple[bytes, bytes]]) -> CommonroomError | None:
    return request_refusal(*host_and_origin(headers))


def create_ingress_app(room: Room, settings: IngressSettings | None = None) -> QuartTrio:
    settings = settings or IngressSettings()
    app = QuartTrio("commonroom.ingress")
    app.config["RESPONSE_TIMEOUT"] = settings.response_timeout
    gate = Gate(settings, room.engine.live_sessions)
    app.extensions["commonroom.gate"] = gate
    # Also before a too-large body is refused (http/serving.py): 403 beats 413.
    app.extensions[HEADER_CHECK] = _scope_header_check

    def client_address() -> str:
        return request.remote_addr or "unknown"

    @app.before_request
    async def guard() -> Response | None:
        refusal = request_refusal(request.headers.get("Host"), request.headers.get("Origin"))
        if refusal is not None:
            return error_response(refusal)
        malformed: CommonroomError | None = None
        try:
            bearer = bearer_from_header()
        except CommonroomError as error:
            bearer, malformed = None, error  # charged to the address, then refused
        try:
            gate.admit(bearer, client_address())
        except CommonroomError as error:
            return error_response(error)
        return None if malformed is None else error_response(malformed)

    async def bearer_source() -> str | None:
        return bearer_from_header()

    for op in CALLS:
        view = operation_view(op, room, bearer_source)
        app.add_url_rule(op.path, endpoint=op.name, view_func=view, methods=[op.method])

    # MCP 2026-07-28 (`commonroom.mcp`): the ingress only; on the owner port /mcp is 404.
    register_mcp(app, room, heartbeat_seconds=settings.heartbeat_seconds)

    @app.get("/.well-known/agent-workspace")
    async def well_known() -> Response:
        return json_response(discovery.agent_workspace())

    @app.get("/protocol")
    async def protocol_doc() -> Response:
        return json_response(discovery.protocol_document())

    @app.get("/openapi.json")
    async def openapi_json() -> Response:
        return Response(openapi_body(), content_type="application/json")

    @app.get("/skills")
    async def skills() -> Response:
        return json_response(discovery.skills_index())

    @app.get("/skills/commonroom")
    async def skill() -> Response:
        return Response(discovery.skill_markdown(), content_type="text/markdown; charset=utf-8")

    async def open_stream(name: str, params: dict[str, Any], headers: Any = None) -> StreamStart:
        """Authorize and validate a stream operation of the table; where it starts."""
        bearer = bearer_from_header(headers)
        return await stream_views.open_start(room, name, bearer, params)

    @app.get("/workspace/observe")
    async def observe() -> Response:
        try:
            start = await open_stream("workspace.observe", stream_views.observe_params())
        except CommonroomError as error:
            return error_response(error)
        return stream_views.sse_response(room, start, heartbeat_seconds=settings.heartbeat_seconds)

    @app.get("/workspace/wait")
    async def wait() -> Response:
        try:
            start = await open_stream("workspace.wait", dict(request.args.items()))
        except CommonroomError as error:
            return error_response(error)
        return await stream_views.wait_response(room, start)

    @app.websocket("/workspace/observe/ws")
    async def observe_ws() -> Any:
        try:
            refusal = request_refusal(websocket.headers.get("Host"), websocket.headers.get("Origin"))
            if refusal is not None:
                raise refusal
            gate.admit(bearer_from_header(websocket.headers), websocket.remote_addr or "unknown")
            start = await open_stream(
                "workspace.observe_ws", dict(websocket.args.items()), websocket.headers
            )
        except CommonroomError as error:
            return error_response(error)
        await stream_views.serve_websocket(room, start, heartbeat_seconds=settings.heartbeat_seconds)
        return None

    return app

