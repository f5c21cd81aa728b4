"""The session ingress: what a transport plugin exposes to agents.

Bearer sessions only, no cookies. Every operation route comes from the
operation table; the stream routes (observe, observe/ws, wait) call
`commonroom.streams`. Before any view: the Host allow-list (DNS rebinding),
the Origin check, and the rate limits -- 600 requests a minute per bearer,
60 a minute per client address for everything unauthenticated (discovery,
join, and a bearer the room has not yet accepted, so guessing secrets is slow).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

import attrs
import trio
from quart import Response, request, websocket
from quart_trio import QuartTrio

from commonroom import discovery, streams
from commonroom.engine.observe import StreamStart
from commonroom.engine.operations import CALLS
from commonroom.http.common import (
    bearer_from_header,
    error_response,
    json_response,
    operation_view,
    rate_limited,
)
from commonroom.http.serving import streaming_response
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.ratelimit import RateLimiter
from commonroom.room import Room

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
    """Rate limits keyed by the hash of a bearer (never the bearer) or the client address."""

    def __init__(self, settings: IngressSettings) -> None:
        self.per_bearer = RateLimiter(settings.requests_per_minute, 60.0, settings.clock)
        self.per_address = RateLimiter(settings.anonymous_per_minute, 60.0, settings.clock)
        self._known: set[bytes] = set()

    def admit(self, bearer: str | None, address: str) -> None:
        if bearer is not None:
            key = hashlib.sha256(bearer.encode()).digest()
            if key in self._known:
                wait = self.per_bearer.acquire(key)
                if wait is not None:
                    raise rate_limited(wait)
                return
        wait = self.per_address.acquire(address)
        if wait is not None:
            raise rate_limited(wait)

    def accepted(self, bearer: str) -> None:
        """A bearer the room accepted gets its own bucket from now on."""
        key = hashlib.sha256(bearer.encode()).digest()
        if key not in self._known:
            self._known.add(key)
            self.per_bearer.acquire(key)  # this request counted against the address

    def sweep(self) -> None:
        self.per_bearer.sweep()
        self.per_address.sweep()


def create_ingress_app(room: Room, settings: IngressSettings | None = None) -> QuartTrio:
    settings = settings or IngressSettings()
    app = QuartTrio("commonroom.ingress")
    app.config["RESPONSE_TIMEOUT"] = settings.response_timeout
    gate = Gate(settings)
    app.extensions["commonroom.gate"] = gate

    def client_address() -> str:
        return request.remote_addr or "unknown"

    @app.before_request
    async def guard() -> Response | None:
        if not host_allowed(request.headers.get("Host")):
            return error_response(CommonroomError("permission_denied", "Host not allowed"))
        if not origin_allowed(request.headers.get("Origin")):
            return error_response(CommonroomError("permission_denied", "Origin not allowed"))
        try:
            gate.admit(bearer_from_header(), client_address())
        except CommonroomError as error:
            return error_response(error)
        return None

    async def bearer_source() -> str | None:
        return bearer_from_header()

    for op in CALLS:
        view = operation_view(op, room, bearer_source)
        app.add_url_rule(op.path, endpoint=op.name, view_func=_accepting(view, gate),
                         methods=[op.method])

    # MCP 2026-07-28 (`commonroom.mcp`): the ingress only; on the owner port /mcp is 404.
    from commonroom.mcp.endpoint import register as register_mcp

    register_mcp(app, room, gate, heartbeat_seconds=settings.heartbeat_seconds)

    @app.get("/.well-known/agent-workspace")
    async def well_known() -> Response:
        return json_response(discovery.agent_workspace())

    @app.get("/protocol")
    async def protocol_doc() -> Response:
        return json_response(discovery.protocol_document())

    @app.get("/skills")
    async def skills() -> Response:
        return json_response(discovery.skills_index())

    @app.get("/skills/commonroom")
    async def skill() -> Response:
        return Response(discovery.skill_markdown(), content_type="text/markdown; charset=utf-8")

    async def open_stream(name: str, params: dict[str, Any], headers: Any = None) -> StreamStart:
        """Authorize and validate a stream operation of the table; where it starts."""
        bearer = bearer_from_header(headers)
        outcome = await room.execute(name, bearer, params, from_query=True)
        if outcome.error is not None:
            raise outcome.error
        assert bearer is not None
        gate.accepted(bearer)
        start: StreamStart = outcome.result
        return start

    def observe_for(start: StreamStart) -> AsyncGenerator[streams.StreamItem, None]:
        """One observe stream for an authorized session (SSE and WebSocket share it)."""
        return streams.observe(
            room, session_hash=start.actor.session_hash,
            participant_id=start.actor.participant_id, since_event_id=start.cursor,
            heartbeat_seconds=settings.heartbeat_seconds,
        )

    @app.get("/workspace/observe")
    async def observe() -> Response:
        try:
            params = dict(request.args.items())
            last_event_id = request.headers.get("Last-Event-ID")
            if last_event_id:
                params["since_event_id"] = last_event_id  # the header wins (PROTOCOL.md 8)
            start = await open_stream("workspace.observe", params)
        except CommonroomError as error:
            return error_response(error)

        async def body() -> Any:
            yield streams.SSE_PREAMBLE
            async with aclosing(observe_for(start)) as items:
                async for item in items:
                    chunk = streams.format_sse(item)
                    if chunk:
                        yield chunk
                    if item.kind == "end":
                        return

        return streaming_response(
            body(), headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )

    @app.get("/workspace/wait")
    async def wait() -> Response:
        try:
            start = await open_stream("workspace.wait", dict(request.args.items()))
            answer = await streams.wait_for_events(
                room, cursor=start.cursor or 0, timeout_seconds=start.timeout_seconds
            )
        except CommonroomError as error:
            return error_response(error)
        response = json_response(answer)
        response.timeout = None
        return response

    @app.websocket("/workspace/observe/ws")
    async def observe_ws() -> Any:
        try:
            if not host_allowed(websocket.headers.get("Host")) or not origin_allowed(
                websocket.headers.get("Origin")
            ):
                raise CommonroomError("permission_denied", "Host or Origin not allowed")
            gate.admit(bearer_from_header(websocket.headers), websocket.remote_addr or "unknown")
            start = await open_stream(
                "workspace.observe_ws", dict(websocket.args.items()), websocket.headers
            )
        except CommonroomError as error:
            return error_response(error)
        await websocket.accept()
        async with aclosing(observe_for(start)) as items:
            async for item in items:
                frame = streams.format_ws(item)
                if frame is not None:
                    await websocket.send(frame)
                if item.kind == "end":
                    break
        await websocket.close(1000)
        return None

    return app


def _accepting(view: Any, gate: Gate) -> Any:
    """After a successful authenticated call, give the bearer its own bucket."""

    async def wrapped() -> Response:
        response: Response = await view()
        if response.status_code < 400:
            header = request.headers.get("Authorization", "")
            if header.lower().startswith("bearer "):
                gate.accepted(header[7:].strip())
        return response

    wrapped.__name__ = view.__name__
    return wrapped


def _cursor(raw: str | None, field: str) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        value = int(raw, 10)
    except ValueError:
        raise invalid_request(f"{field} must be an event id", field) from None
    if value < 0:
        raise invalid_request(f"{field} must be an event id", field)
    return value


def _number(raw: str, field: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise invalid_request(f"{field} must be a number", field) from None
