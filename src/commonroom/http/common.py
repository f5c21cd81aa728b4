"""What both listeners share: request parsing, the operation view, JSON answers.

A view only translates: HTTP request -> (operation name, bearer, params) ->
`Room.execute` -> JSON. Every rule lives in the engine.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, cast

from quart import Response, request

from commonroom.engine.operations import Operation
from commonroom.engine.params import json_int
from commonroom.engine.records import to_wire
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.ratelimit import retry_after
from commonroom.room import Room

JSON = "application/json"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    response = Response(json.dumps(body), status=status, content_type=JSON)
    response.headers["Cache-Control"] = "no-store"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def error_response(error: CommonroomError) -> Response:
    headers: dict[str, str] = {}
    seconds = error.recovery.get("retry_after_seconds")
    if error.http_status == 429 and seconds is not None:
        headers["Retry-After"] = str(seconds)
    return json_response(error.to_wire(), error.http_status, headers)


def rate_limited(seconds: float) -> CommonroomError:
    wait = retry_after(seconds)
    return CommonroomError(
        "limit_exceeded",
        f"too many requests; try again in {wait} s",
        {"scope": "requests"},
        retry_after_seconds=wait,
    )


async def read_params(op: Operation) -> tuple[dict[str, Any], bool]:
    """(params, from_query): the query string for GET, the JSON object body for POST."""
    if op.method == "GET":
        return {key: value for key, value in request.args.items()}, True
    raw = cast(bytes, await request.get_data(cache=False, as_text=False))
    if not raw or not raw.strip():
        return {}, False
    return parse_json_object(raw), False


# An operation's parameters are flat (strings, integers, booleans, lists of
# strings): deeper JSON is refused before it is parsed, so it can never reach
# the parser's recursion limit.
MAX_JSON_DEPTH: Final = 16


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or `invalid_request` saying what is wrong with it.

    Integers of more than 19 digits parse to a marker that the parameter
    record refuses naming its field (no 4,300-digit conversion limit hit).
    """
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise invalid_request(f"the body nests deeper than {MAX_JSON_DEPTH} levels", "body")
    try:
        body = json.loads(raw, parse_int=json_int)
    except (UnicodeDecodeError, ValueError) as exc:
        raise invalid_request(f"the body is not JSON: {exc}", "body") from None
    if not isinstance(body, dict):
        raise invalid_request("the body must be a JSON object", "body")
    return body


_STRUCTURE = re.compile(rb'[\[\]{}"\\]')
_QUOTE, _BACKSLASH, _OPENERS, _CLOSERS = ord('"'), ord("\\"), b"[{", b"]}"


def json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays/objects in `raw` (brackets inside strings do not count).

    Visits only bracket, quote and backslash bytes (one regex pass), so a
    large text field is cheap.
    """
    depth = deepest = 0
    in_string = False
    escaped_at = -1  # the byte a backslash escapes
    for match in _STRUCTURE.finditer(raw):
        pos = match.start()
        if pos == escaped_at:
            continue
        char = raw[pos]
        if in_string:
            if char == _BACKSLASH:
                escaped_at = pos + 1
            elif char == _QUOTE:
                in_string = False
        elif char == _QUOTE:
            in_string = True
        elif char in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif char in _CLOSERS:
            depth -= 1
    return deepest


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
    op: Operation, room: Room, bearer_source: BearerSource
) -> Callable[[], Awaitable[Response]]:
    async def view() -> Response:
        try:
            bearer = await bearer_source()
            params, from_query = await read_params(op)
            outcome = await room.execute(op.name, bearer, params, from_query=from_query)
        except CommonroomError as error:
            return error_response(error)
        if outcome.error is not None:
            return error_response(outcome.error)
        return json_response(to_wire(outcome.result))

    view.__name__ = op.name.replace(".", "_")
    return view
