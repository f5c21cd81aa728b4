"""An operation call as bytes and back: request shaping and answer decoding, no I/O.

An operation (docs/spec/PROTOCOL.md section 11) is a GET with its parameters in the
query string, or a POST with them as a JSON object; the session goes in
`Authorization: Bearer`. A 2xx answer is the operation's JSON; any other is
the exception `wire.errors` maps its code to. Parameters that are None are
left out (the room applies its defaults).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from commonroom.protocol.errors import CommonroomError
from commonroom.wire import errors, http11

if TYPE_CHECKING:
    from commonroom.protocol.invitation import TransportHint

# The plugins whose dial is plain TCP to the hint's address (`_socket_io` dials them itself).
_TCP_TYPES: Final = frozenset({"loopback", "local"})


def hint_of(invitation: str) -> dict[str, Any]:
    """The transport hint of a `commonroom://join/...` invitation, as JSON."""
    from commonroom.protocol.invitation import decode

    try:
        return decode(invitation).transport.to_json()
    except CommonroomError as exc:
        raise errors.from_protocol(exc) from None


def loopback_hint(port: int) -> dict[str, Any]:
    """The hint of a listener on 127.0.0.1:`port` (the host's CLI reaching its own room)."""
    return {"type": "loopback", "encrypted": False, "mode": "private", "address": "127.0.0.1",
            "port": port}


def dials_loopback(hint: Mapping[str, Any]) -> bool:
    """True when the hint's plugin would dial plain TCP to a loopback address."""
    address, port = hint.get("address"), hint.get("port")
    if hint.get("type") not in _TCP_TYPES or not isinstance(address, str) \
            or not isinstance(port, int):
        return False
    # The loopback plugins' own rule: never send a bearer in the clear to another machine.
    return address in ("localhost", "::1") or address.startswith("127.")


def transport_hint(hint: Mapping[str, Any]) -> TransportHint:
    from commonroom.protocol.invitation import TransportHint

    return TransportHint(
        type=str(hint.get("type")), encrypted=bool(hint.get("encrypted")),
        mode=str(hint.get("mode", "")), address=hint.get("address"), port=hint.get("port"),
    )


def target(path: str, params: Mapping[str, Any] | None) -> str:
    """`path` with the non-None `params` as its query string."""
    query = {key: _query_value(value) for key, value in (params or {}).items() if value is not None}
    return path + ("?" + urllib.parse.urlencode(query) if query else "")


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def bearer_headers(bearer: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {bearer}"} if bearer else {}


def prepare(
    method: str, path: str, params: Mapping[str, Any] | None, bearer: str | None
) -> tuple[str, dict[str, str], bytes | None]:
    """(request target, headers, body) of one operation call."""
    headers = bearer_headers(bearer)
    if method == "GET":
        return target(path, params), headers, None
    headers["Content-Type"] = "application/json"
    body = {key: value for key, value in (params or {}).items() if value is not None}
    return path, headers, json.dumps(body).encode()


def answer_of(response: http11.Response) -> Any:
    """The parsed JSON of a 2xx answer; the mapped exception otherwise."""
    if not 200 <= response.status < 300:
        raise answer_error(response.status, response.body)
    return response.json()


def answer_error(status: int, raw: bytes) -> errors.CommonroomError:
    """The exception for a non-2xx answer whose body is `raw` (JSON or not)."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        body = None
    return errors.from_answer(status, body)
