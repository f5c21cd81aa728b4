"""What both listeners share: request parsing, the operation view, JSON answers.

A view only translates: HTTP request -> (operation name, bearer, params) ->
`Room.execute` -> JSON. Every rule lives in the engine.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

import trio
from quart import Response, request

from commonroom.http.hardened_app import after_send
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.jsondepth import MAX_JSON_DEPTH, nests_deeper_than
from commonroom.protocol.operations import OperationSpec
from commonroom.protocol.params import json_int
from commonroom.protocol.records import to_wire
from commonroom.ratelimit import retry_after
from commonroom.room.core import Room

JSON = "application/json"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None,
                  *, encoded: str | None = None) -> Response:
    """`body` as JSON (or the text `encoded` already made of it, `encode_in_pieces`)."""
    response = Response(json.dumps(body) if encoded is None else encoded, status=status,
                        content_type=JSON)
    response.headers["Cache-Control"] = "no-store"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


async def encode_in_pieces(body: Any) -> str:
    """`json.dumps(body)`, the very same text, a top-level field at a time with a checkpoint
    between: a heavy read's answer (a 256 KiB proposal with its two diffs: 1.1 MB, 7 ms
    of one `dumps`) holds the event loop, and the host's status, for one field at most."""
    if not isinstance(body, dict) or len(body) < 2:
        return json.dumps(body)
    pieces: list[str] = []
    for key, value in body.items():
        pieces.append(f"{json.dumps(key)}: {json.dumps(value)}")
        await trio.lowlevel.checkpoint()
    return "{" + ", ".join(pieces) + "}"


def error_response(error: CommonroomError) -> Response:
    headers: dict[str, str] = {}
    seconds = error.recovery.get("retry_after_seconds")
    if error.http_status == 429 and seconds is not None:
        headers["Retry-After"] = str(seconds)
        # A refused stream or an over-rate client is told to come back later: its
        # connection is not kept alive meanwhile (a flood of them would hold
        # descriptors for the keep-alive timeout: the open-streams bound).
        headers["Connection"] = "close"
    return json_response(error.to_wire(), error.http_status, headers)


def rate_limited(seconds: float) -> CommonroomError:
    wait = retry_after(seconds)
    return CommonroomError(
        "limit_exceeded",
        f"too many requests; try again in {wait} s",
        {"scope": "requests"},
        retry_after_seconds=wait,
    )


async def read_params(op: OperationSpec) -> tuple[dict[str, Any], bool]:
    """(params, from_query): the query string for GET, the JSON object body for POST."""
    if op.method == "GET":
        return {key: value for key, value in request.args.items()}, True
    raw = cast(bytes, await request.get_data(cache=False, as_text=False))
    if not raw or not raw.strip():
        return {}, False
    return parse_json_object(raw), False


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or `invalid_request` saying what is wrong with it.

    Integers of more than 19 digits parse to a marker that the parameter
    record refuses naming its field (no 4,300-digit conversion limit hit).
    """
    if nests_deeper_than(raw, MAX_JSON_DEPTH):
        raise invalid_request(f"the body nests deeper than {MAX_JSON_DEPTH} levels", "body")
    try:
        body = json.loads(raw, parse_int=json_int)
    except (UnicodeDecodeError, ValueError) as exc:
        raise invalid_request(f"the body is not JSON: {exc}", "body") from None
    if not isinstance(body, dict):
        raise invalid_request("the body must be a JSON object", "body")
    return body


def bearer_from_header(headers: Any = None) -> str | None:
    """The bearer of `Authorization: Bearer ...` (of the current request unless `headers` given)."""
    header = (request.headers if headers is None else headers).get("Authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise CommonroomError("unauthorized", "Authorization must be 'Bearer <session_id>'")
    return value.strip()


BearerSource = Callable[[], Awaitable[str | None]]


def operation_view(
    op: OperationSpec, room: Room, bearer_source: BearerSource
) -> Callable[[], Awaitable[Response]]:
    async def view() -> Response:
        try:
            bearer = await bearer_source()
            params, from_query = await read_params(op)
            # The events wait until this answer is written (`Room.flush`).
            outcome = await room.execute(
                op.name, bearer, params, from_query=from_query, publish=False
            )
        except CommonroomError as error:
            return error_response(error)
        try:
            if outcome.error is not None:
                response = error_response(outcome.error)
            elif op.name in limits.HEAVY_READS:
                answer = to_wire(outcome.result)
                response = json_response(answer, encoded=await encode_in_pieces(answer))
            else:
                response = json_response(to_wire(outcome.result))
        except BaseException:
            room.flush()
            raise
        return after_send(response, room.flush)

    view.__name__ = op.name.replace(".", "_")
    return view


def stream_view(frame: Callable[[str], Awaitable[Any]], name: str) -> Callable[[], Awaitable[Any]]:
    """The view of one stream route of the table: `frame` (its framing's view) for operation `name`."""
    async def view() -> Any:
        return await frame(name)

    view.__name__ = name.replace(".", "_")
    return view
