"""The MCP request envelope of both eras: parsing, header rules, JSON-RPC errors.

One `POST /mcp` carries one JSON-RPC request or notification. The era is
chosen per request (`era_of`): a request carrying `Mcp-Session-Id` belongs to
a legacy session (streamable HTTP, revisions 2025-03-26 / 2025-06-18 /
2025-11-25; `mcp/legacy.py`); a body that is `initialize` without the
2026-07-28 `_meta` opens one; everything else is 2026-07-28. `parse_body`
reads the body; `parse_message` validates a 2026-07-28 request in this order
(MCP-2026-07-28.md, "Request envelope"; the conformance runner checks the
order where two rules could both apply):

1. the body is JSON (-32700, id null), one object (a batch or a posted
   response is -32600), `jsonrpc: "2.0"` and a string `method` (-32600);
2. a notification (no id, or id null) stops here: 202, empty body;
3. a request whose `MCP-Protocol-Version` header names a legacy version and
   whose `_meta` names none: where the legacy eras are served (`ce serve
   --mcp-legacy`) a legacy request without its session, 400, -32600
   (initialize first); by default (the seed's rule) an unsupported version,
   -32022; a header naming a version nobody serves: -32022 with
   `data.supported` / `data.requested`;
4. `_meta` must hold `protocolVersion` and a `clientCapabilities` object
   (-32602);
5. the routing headers must equal the body (-32020 `HeaderMismatch`):
   `MCP-Protocol-Version` = the `_meta` version, `Mcp-Method` = `method`,
   `Mcp-Name` = `params.name` / `params.uri` / `params.taskId` for the
   methods that route by name. A value may come as `=?base64?...?=`; spaces
   around it are trimmed; names are case-insensitive, values are not; a
   header sent twice is refused;
6. the `_meta` version must be 2026-07-28 (-32022).

Every error echoes the request id when the body had one.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from commonroom import __version__
from commonroom.protocol.jsondepth import MAX_JSON_DEPTH, nests_deeper_than
from commonroom.protocol.params import json_int

PROTOCOL_VERSION: Final = "2026-07-28"
"""The stateless revision: every request describes itself."""
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
"""The streamable-HTTP revisions with an `initialize` handshake and a session, newest first."""
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION, *LEGACY_VERSIONS)
"""Every revision served when the host opts in to the legacy eras (`ce serve --mcp-legacy`)."""
SEED_VERSIONS: Final = (PROTOCOL_VERSION,)
"""What the room serves by default: the seed accepts 2026-07-28 only."""


def served_versions(legacy_eras: bool) -> tuple[str, ...]:
    """The revisions a room serves (`supportedVersions`, and `data.supported` of -32022)."""
    return SUPPORTED_VERSIONS if legacy_eras else SEED_VERSIONS
SESSION_HEADER: Final = "Mcp-Session-Id"

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION: Final = "io.modelcontextprotocol/subscriptionId"
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_VERSION: Final = -32022

# The HTTP status of each JSON-RPC error code (MCP-2026-07-28.md's table).
_HTTP_STATUS: Final[dict[int, int]] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    METHOD_NOT_FOUND: 404,
    INVALID_PARAMS: 400,
    INTERNAL_ERROR: 500,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
}

# Methods whose `Mcp-Name` header routes by a body field.
NAME_FIELD: Final[dict[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

SERVER_INFO: Final[dict[str, str]] = {"name": "commonroom", "version": __version__}
RESULT_META: Final[dict[str, Any]] = {META_SERVER_INFO: SERVER_INFO}

_BASE64_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$", re.DOTALL)

RequestId = str | int | float | None


class McpError(Exception):
    """A JSON-RPC error answer: code, message, optional data, HTTP status."""

    def __init__(
        self, code: int, message: str, data: Any = None, *, http_status: int | None = None,
        request_id: RequestId = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status if http_status is not None else _HTTP_STATUS.get(code, 400)
        self.request_id = request_id

    def to_wire(self, request_id: RequestId = None) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        rid = request_id if request_id is not None else self.request_id
        return {"jsonrpc": "2.0", "id": rid, "error": error}


def header_mismatch(detail: str) -> McpError:
    return McpError(HEADER_MISMATCH, "HeaderMismatch", {"detail": detail})


def unsupported_version(requested: Any, *, legacy_eras: bool = False) -> McpError:
    return McpError(
        UNSUPPORTED_VERSION,
        "UnsupportedProtocolVersionError",
        {"supported": list(served_versions(legacy_eras)), "requested": requested},
    )


def invalid_params(message: str, data: Any = None) -> McpError:
    return McpError(INVALID_PARAMS, message, data)


def method_not_found(method: str) -> McpError:
    return McpError(METHOD_NOT_FOUND, "Method not found", {"method": method})


def session_required() -> McpError:
    """A legacy request without its session (the legacy spec's 400 Bad Request)."""
    return McpError(INVALID_REQUEST, f"Bad Request: no {SESSION_HEADER}; send initialize first")


@attrs.frozen
class McpRequest:
    """One validated request (or notification: `id` None and `notification` True).

    A legacy session's request carries that session's `resources/subscribe`
    set in `session_subscriptions` and its `initialize` capabilities as
    `_meta`'s client capabilities; a 2026-07-28 request has neither (its
    subscriptions are the bearer's).
    """

    id: RequestId
    method: str
    params: dict[str, Any]
    meta: dict[str, Any]
    notification: bool = False
    session_subscriptions: set[str] | None = attrs.field(default=None, eq=False)

    @property
    def legacy(self) -> bool:
        return self.session_subscriptions is not None

    @property
    def client_capabilities(self) -> dict[str, Any]:
        caps = self.meta.get(META_CAPABILITIES)
        return caps if isinstance(caps, dict) else {}

    def declares_extension(self, name: str) -> bool:
        extensions = self.client_capabilities.get("extensions")
        return isinstance(extensions, dict) and name in extensions


# A header lookup: every value a header name carries (names case-insensitive).
HeaderValues = Callable[[str], list[str]]


def decode_header_value(raw: str) -> str:
    """Trim surrounding spaces; decode the `=?base64?...?=` form (strictly)."""
    value = raw.strip(" \t")
    match = _BASE64_SENTINEL.match(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise header_mismatch("a base64 header value does not decode") from None


def single_header(values: HeaderValues, name: str) -> str | None:
    """The one decoded value of header `name`, None when absent; sent twice is a mismatch."""
    found = values(name)
    if not found:
        return None
    if len(found) > 1:
        raise header_mismatch(f"{name} sent more than once")
    return decode_header_value(found[0])


def parse_body(raw: bytes) -> dict[str, Any]:
    """Step 1: one JSON-RPC message object.

    The same edge checks as the REST bodies (http/common.py): a body that
    could nest deeper than `MAX_JSON_DEPTH` is refused before parsing (no
    RecursionError), and an integer of more than 19 digits parses to a marker
    the parameter record refuses, naming its field (no 4,300-digit ValueError).
    """
    if nests_deeper_than(raw, MAX_JSON_DEPTH):
        raise McpError(PARSE_ERROR, f"Parse error: the body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        message = json.loads(raw, parse_int=json_int)
    except (UnicodeDecodeError, ValueError):
        raise McpError(PARSE_ERROR, "Parse error: the body is not JSON") from None
    if isinstance(message, list):
        raise McpError(INVALID_REQUEST, "Invalid Request: batches are not accepted")
    if not isinstance(message, dict):
        raise McpError(INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC object")
    return message


def request_id_of(message: Mapping[str, Any]) -> RequestId:
    rid = message.get("id")
    if rid is None or isinstance(rid, bool) or not isinstance(rid, (str, int, float)):
        return None
    return rid


def parse(raw: bytes, headers: HeaderValues, *, legacy_eras: bool = False) -> McpRequest:
    """A 2026-07-28 request from the raw body (`parse_body`, then `parse_message`)."""
    return parse_message(parse_body(raw), headers, legacy_eras=legacy_eras)


def is_response(message: Mapping[str, Any]) -> bool:
    """A posted JSON-RPC response (the client answering a server request)."""
    return "method" not in message and ("result" in message or "error" in message)


def opens_legacy_session(message: Mapping[str, Any]) -> bool:
    """An `initialize` without the 2026-07-28 `_meta`: the legacy handshake."""
    if message.get("method") != "initialize":
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return not (isinstance(meta, dict) and META_VERSION in meta)


def parse_message(message: dict[str, Any], headers: HeaderValues, *,
                  legacy_eras: bool = False) -> McpRequest:
    """Validate a 2026-07-28 request (steps 2-6 of the module's list); raises McpError.

    `legacy_eras`: the room serves the legacy eras too (only the errors differ)."""
    rid = request_id_of(message)
    try:
        return _parse_message(message, rid, headers, legacy_eras)
    except McpError as error:
        error.request_id = rid
        raise


def parse_common(message: Mapping[str, Any], rid: RequestId) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """What both eras check first: (method, params, `_meta`); raises McpError."""
    method = message.get("method")
    if method is None and ("result" in message or "error" in message):
        raise McpError(INVALID_REQUEST, "Invalid Request: the server does not take responses")
    if message.get("jsonrpc") != "2.0" or not isinstance(method, str) or not method:
        raise McpError(INVALID_REQUEST, "Invalid Request: need jsonrpc \"2.0\" and a method")
    if "id" in message and message["id"] is not None and rid is None:
        raise McpError(INVALID_REQUEST, "Invalid Request: id must be a string or a number")
    params = message.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid_params("params must be an object")
    meta = params.get("_meta")
    return method, params, meta if isinstance(meta, dict) else {}


def _parse_message(message: dict[str, Any], rid: RequestId, headers: HeaderValues,
                   legacy_eras: bool) -> McpRequest:
    method, params, meta = parse_common(message, rid)
    if rid is None:
        return McpRequest(None, method, params, meta, notification=True)

    header_version = single_header(headers, "MCP-Protocol-Version")
    meta_version = meta.get(META_VERSION)
    if meta_version is None:
        if header_version in LEGACY_VERSIONS and legacy_eras:
            raise session_required()  # a legacy client that lost (or never had) its session
        if header_version is not None and header_version not in served_versions(legacy_eras):
            raise unsupported_version(header_version, legacy_eras=legacy_eras)
        raise invalid_params(f"params._meta must hold {META_VERSION!r}",
                             {"missing": META_VERSION})
    if not isinstance(meta_version, str):
        raise invalid_params(f"{META_VERSION} must be a string")
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        raise invalid_params(f"params._meta must hold an object {META_CAPABILITIES!r}",
                             {"missing": META_CAPABILITIES})

    if header_version is None:
        raise header_mismatch("MCP-Protocol-Version is missing")
    if header_version != meta_version:
        raise header_mismatch("MCP-Protocol-Version differs from _meta protocolVersion")
    header_method = single_header(headers, "Mcp-Method")
    if header_method is None:
        raise header_mismatch("Mcp-Method is missing")
    if header_method != method:
        raise header_mismatch("Mcp-Method differs from the body's method")
    field = NAME_FIELD.get(method)
    if field is not None:
        header_name = single_header(headers, "Mcp-Name")
        body_name = params.get(field)
        if header_name is None:
            raise header_mismatch("Mcp-Name is missing")
        if not isinstance(body_name, str) or header_name != body_name:
            raise header_mismatch(f"Mcp-Name differs from params.{field}")
    elif len(headers("Mcp-Name")) > 1:
        raise header_mismatch("Mcp-Name sent more than once")

    if meta_version != PROTOCOL_VERSION:  # a legacy version travels in a legacy session only
        raise unsupported_version(meta_version, legacy_eras=legacy_eras)
    return McpRequest(rid, method, params, meta)


def result_message(rid: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def complete(body: dict[str, Any] | None = None) -> dict[str, Any]:
    """A result with `resultType: "complete"` and the server's identity in `_meta`."""
    out: dict[str, Any] = {"resultType": "complete"}
    if body:
        out.update(body)
    extra = out.get("_meta")
    out["_meta"] = {**extra, **RESULT_META} if isinstance(extra, dict) else RESULT_META
    return out


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
