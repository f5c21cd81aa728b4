"""The session ingress: what a transport plugin exposes to agents.

Bearer sessions only, no cookies. Every route of an operation comes from
the operation table (`protocol/operations.py`): a call's view per `CALLS`, a
stream's per `STREAMS` with the view of its framing (SSE, WebSocket,
long-poll), which opens the room's stream. Before any view, the guards of `http/guards.py`: the Host allow-list
(DNS rebinding), the Origin check, and the rate limits -- 600 requests per
bearer (and per participant) in any 60 s; 60 per client address for a
bearer that is not a live session, so guessing secrets is slow; discovery
and joins have windows of their own (`Gate` says which). A request those windows
would refuse is refused from its headers alone, before quart builds it, and
paced when its client did not wait as told (`Gate.early`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
import trio
from quart import Response, request, websocket
from quart_trio import QuartTrio

from commonroom import discovery
from commonroom.engine.facade import StreamStart, hash_secret
from commonroom.http import stream_views
from commonroom.http.common import (
    bearer_from_header,
    error_response,
    json_response,
    operation_view,
    parse_json_object,
    stream_view,
)
from commonroom.http.guards import INGRESS_HEADERS, Gate
from commonroom.http.hardened_app import EARLY_REFUSAL, HEADER_CHECK
from commonroom.openapi import served_body as openapi_body
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import secret_from
from commonroom.protocol.operations import CALLS, OPERATIONS_BY_NAME, STREAMS
from commonroom.room.core import Room


@attrs.define
class IngressSettings:
    requests_per_minute: int = 600
    anonymous_per_minute: int = 60
    heartbeat_seconds: float = 15.0
    # Quart's per-response timeout for ordinary answers; streams set none (pitfall 2).
    response_timeout: float = 60.0
    # Monotonic seconds for the rate limiter; trio's clock (MockClock in tests) by default.
    clock: Callable[[], float] = trio.current_time


# The unauthenticated routes; each has its own rate windows (`Gate`).
DISCOVERY_PATHS: Final = frozenset({
    "/.well-known/agent-workspace", "/protocol", "/openapi.json", "/skills", "/skills/commonroom",
})
JOIN_PATH: Final = OPERATIONS_BY_NAME["session.join"].path
# The REST routes of the heavy reads: refused early past their participant's window.
HEAVY_ROUTES: Final = frozenset((op.method, op.path) for op in CALLS if op.name in limits.HEAVY_READS)


async def _join_secret() -> str | None:
    """The invitation secret a join body names, or None (no readable body, no `invite`).

    Read here, before the view, to charge the attempt to its invitation's
    window; the body stays cached for the view, which parses it again.
    """
    raw = await request.get_data(cache=True, as_text=False)
    try:
        invite = parse_json_object(raw if isinstance(raw, bytes) else raw.encode()).get("invite")
        return secret_from(invite) if isinstance(invite, str) else None
    except CommonroomError:
        return None


def create_ingress_app(room: Room, settings: IngressSettings | None = None) -> QuartTrio:
    settings = settings or IngressSettings()
    # No static route: Quart's default serves `<working folder>/static/**` (symlinks followed).
    app = QuartTrio("commonroom.ingress", static_folder=None)
    app.config["RESPONSE_TIMEOUT"] = settings.response_timeout
    gate = Gate(
        per_bearer_per_minute=settings.requests_per_minute,
        per_address_per_minute=settings.anonymous_per_minute,
        clock=settings.clock,
        session_participant=room.engine.session_participant,
        knows_invitation=room.engine.knows_invitation,
        is_host=lambda participant: participant == room.engine.host_participant_id,
        heavy_reads=room.heavy_reads,
        heavy_routes=HEAVY_ROUTES,
        early_exempt=lambda method, path: path in DISCOVERY_PATHS or (
            path == JOIN_PATH and method == "POST"),
    )
    app.extensions["commonroom.gate"] = gate
    # Refused before quart builds the request, and paced (docs/protocol.md "Refusals are
    # cheap and paced"): a client ignoring Retry-After cannot take the room's CPU.
    app.extensions[EARLY_REFUSAL] = gate.early
    # Also before a too-large body is refused (http/hardened_app.py): 403 beats 413.
    app.extensions[HEADER_CHECK] = INGRESS_HEADERS

    def client_address() -> str:
        return request.remote_addr or "unknown"

    @app.before_request
    async def guard() -> Response | None:
        refusal = INGRESS_HEADERS(request.scope)
        if refusal is not None:
            return error_response(refusal)
        try:
            if request.path in DISCOVERY_PATHS:
                gate.admit_discovery(client_address())
                return None
            if request.path == JOIN_PATH and request.method == "POST":
                gate.admit_join(await _join_secret(), client_address())
                return None
        except CommonroomError as error:
            return error_response(error)
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

    @app.get("/.well-known/agent-workspace")
    async def well_known() -> Response:
        return json_response(discovery.agent_workspace())

    @app.route("/.well-known/<path:name>", methods=["GET", "POST", "HEAD", "OPTIONS"])
    async def no_oauth(name: str) -> Response:
        # Never OAuth metadata: an MCP client that finds some drops the static bearer
        # it was given and tries to log in where there is nothing to log in to.
        return error_response(CommonroomError(
            "invalid_request", "no such document: this room has no OAuth; send the session from"
            " `ce join` as Authorization: Bearer <session_id>", http_status=404))

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
        """Authorize and validate a stream operation of the table; where it starts.

        A live session already holding its cap of streams is refused first,
        without the store call (a flood of them stays cheap); the slot itself
        is taken after authorization.
        """
        bearer = bearer_from_header(headers)
        if bearer is not None:
            session_hash = hash_secret(bearer)
            participant = room.engine.session_participant(session_hash)
            if participant is not None:
                refusal = room.stream_slots.refusal(session_hash, participant)
                if refusal is not None:
                    raise refusal
        return await stream_views.open_start(room, name, bearer, params)

    async def sse(name: str) -> Response:
        try:
            start = await open_stream(name, stream_views.observe_params())
            return stream_views.sse_response(room, start, heartbeat_seconds=settings.heartbeat_seconds)
        except CommonroomError as error:
            return error_response(error)

    async def long_poll(name: str) -> Response:
        try:
            params = dict(request.args.items())
            start = await open_stream(name, params)
            again = stream_views.reopener(room, name, bearer_from_header(), params)
            return await stream_views.wait_response(room, start, again)
        except CommonroomError as error:
            return error_response(error)

    async def over_websocket(name: str) -> Any:
        try:
            refusal = INGRESS_HEADERS(websocket.scope)
            if refusal is not None:
                raise refusal
            gate.admit(bearer_from_header(websocket.headers), websocket.remote_addr or "unknown")
            start = await open_stream(name, dict(websocket.args.items()), websocket.headers)
            slot = room.stream_slots.acquire(start.actor)
        except CommonroomError as error:
            return error_response(error)
        with slot:
            await stream_views.serve_websocket(room, start, heartbeat_seconds=settings.heartbeat_seconds)
        return None

    # Every stream operation of the table gets its route, framed as its spec says.
    framings: dict[str, Callable[[str], Awaitable[Any]]] = {
        "sse": sse, "long_poll": long_poll, "websocket": over_websocket,
    }
    for op in STREAMS:
        assert op.framing is not None
        view = stream_view(framings[op.framing], op.name)
        if op.framing == "websocket":
            app.add_websocket(op.path, endpoint=op.name, view_func=view)
        else:
            app.add_url_rule(op.path, endpoint=op.name, view_func=view, methods=[op.method])

    return app

