"""The OpenAPI 3.1 document of the session ingress, generated from the operation table.

Served at `GET /openapi.json` (no auth) and committed as docs/openapi.json
(tools/gen_openapi.py rewrites it; a test keeps the two equal). Schemas are
the draft 2020-12 ones of `protocol.schema`, which OpenAPI 3.1 takes as they
are; a result record is named in `components.schemas` after its class.
Like the other discovery documents it holds no secret, session id or
transport address: `servers` is the relative "/".
"""

from __future__ import annotations

import functools
import json
from typing import Any

from commonroom import PROTOCOL_NAME, PROTOCOL_VERSION, __version__
from commonroom.protocol import records
from commonroom.protocol.errors import RECOVERY_FIELDS, STATUS
from commonroom.protocol.operations import OPERATIONS, OperationSpec
from commonroom.protocol.schema import EVENT_SCHEMA, json_schema

OPENAPI_VERSION = "3.1.0"
TAGS: tuple[tuple[str, str], ...] = (
    ("session", "Joining, revoking sessions."),
    ("workspace", "The document, its regions, leases, proposals, commits, events."),
    ("handoff", "Asking another participant to take something on."),
    ("task", "The task of an accepted handoff."),
    ("attachment", "Small files shared in the room."),
    ("surface", "A participant's published snapshot image."),
    ("discovery", "Unauthenticated documents describing the room's protocol."),
    ("mcp", "Model Context Protocol: 2026-07-28 and the legacy streamable-HTTP revisions"
            " 2025-11-25, 2025-06-18, 2025-03-26 (docs/spec/PROTOCOL.md section 12)."),
)

# Each recovery field's schema (errors.py RECOVERY_FIELDS; docs/spec/PROTOCOL.md 11 "Errors").
_RECOVERY_SCHEMAS: dict[str, dict[str, Any]] = {
    "base_version": {"type": "integer"},
    "current_version": {"type": "integer"},
    "expected_version": {"type": "integer"},
    "diff": {"type": "string", "description": "unified diff of the region, base to current"},
    "changes": {"type": "array", "items": json_schema(records.Change)},
    "retry_after_seconds": {"type": "integer", "minimum": 1},
    "lease_id": {"type": "string"},
    "proposal_id": {"type": "string"},
    "region": {"type": "string"},
}

_ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "Invalid request, region or protocol version.",
    401: "No bearer, an unknown one, or an ended session.",
    403: "Missing capability, or a refused Host or Origin; for join, a spent invitation.",
    404: "A proposal, version, handoff or attachment that does not exist.",
    409: "A lease, version, proposal or handoff conflict; see the recovery fields.",
    413: "The request body is too large (`limit_exceeded`).",
    429: "Rate limit or room limit (`limit_exceeded`, `retry_after_seconds`).",
    500: "A bug (`internal_error`); logged by the room, never detailed here.",
    503: "Storage or transport unavailable; nothing was committed.",
}
_ANY_ROUTE_STATUSES = (400, 403, 429, 500, 503)  # what any route can answer


# OpenAPI links (3.1 "Link Object"): how one answer feeds the next call, so a
# stateful client (schemathesis's stateful phase) can walk join -> read ->
# lease -> propose -> review -> commit with real ids instead of random ones.
# Source operation -> link name -> target operation and what to carry; a body
# field is carried by `requestBody` (merged into the generated body), a query
# or header parameter by `parameters`. Values are runtime expressions, never
# secrets: the session bearer is carried from the join answer as a template.
_BEARER_FROM_JOIN = {"header.Authorization": "Bearer {$response.body#/session_id}"}
LINKS: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "workspace.invite": {
        "JoinWithInvitation": ("session.join", {"body": {"invite": "$response.body#/invitation"}}),
        "RevokeInvitation": ("workspace.revoke_invitation",
                             {"body": {"invite_id": "$response.body#/invite_id"}}),
    },
    "session.join": {
        "StatusAsJoined": ("workspace.status", {"parameters": _BEARER_FROM_JOIN}),
        "RegionsAsJoined": ("workspace.regions", {"parameters": _BEARER_FROM_JOIN}),
        "LeaveAsJoined": ("workspace.leave", {"parameters": _BEARER_FROM_JOIN}),
    },
    "workspace.regions": {
        "ReadFirstRegion": ("workspace.read",
                            {"parameters": {"region": "$response.body#/regions/0/region"}}),
        "LeaseFirstRegion": ("workspace.checkout",
                             {"body": {"region": "$response.body#/regions/0/region"}}),
    },
    "workspace.read": {
        "ProposeOnRead": ("workspace.propose", {"body": {
            "region": "$response.body#/region", "base_version": "$response.body#/version",
            "content": "$response.body#/content"}}),
        "LeaseRead": ("workspace.checkout", {"body": {"region": "$response.body#/region"}}),
    },
    "workspace.checkout": {
        "RenewLease": ("workspace.renew", {"body": {"lease_id": "$response.body#/lease_id"}}),
        "ReleaseLease": ("workspace.release", {"body": {"lease_id": "$response.body#/lease_id"}}),
        "ReadLeased": ("workspace.read", {"parameters": {"region": "$response.body#/region"}}),
    },
    "workspace.propose": {
        "ReviewProposal": ("workspace.review",
                           {"body": {"proposal_id": "$response.body#/proposal_id"}}),
        "WithdrawProposal": ("workspace.withdraw",
                             {"body": {"proposal_id": "$response.body#/proposal_id"}}),
        "GetProposal": ("workspace.proposal",
                        {"parameters": {"proposal_id": "$response.body#/proposal_id"}}),
    },
    "workspace.review": {
        "CommitReviewed": ("workspace.commit",
                           {"body": {"proposal_id": "$response.body#/proposal_id"}}),
    },
    "workspace.participants": {
        "HandOffToFirst": ("handoff.request", {"body": {
            "to_participant_id": "$response.body#/participants/0/participant_id"}}),
        "SurfaceOfFirst": ("surface.read", {"parameters": {
            "participant_id": "$response.body#/participants/0/participant_id"}}),
    },
    "handoff.request": {
        "RespondToHandoff": ("handoff.respond",
                             {"body": {"handoff_id": "$response.body#/handoff_id"}}),
        "ReportHandoff": ("handoff.result", {"body": {"handoff_id": "$response.body#/handoff_id"}}),
        "CancelHandoff": ("handoff.cancel", {"body": {"handoff_id": "$response.body#/handoff_id"}}),
        "GetHandoff": ("workspace.handoff",
                       {"parameters": {"handoff_id": "$response.body#/handoff_id"}}),
    },
    "handoff.respond": {
        "GetTask": ("task.get", {"parameters": {"task_id": "$response.body#/task_id"}}),
        "UpdateTask": ("task.update", {"body": {"task_id": "$response.body#/task_id"}}),
        "CancelTask": ("task.cancel", {"body": {"task_id": "$response.body#/task_id"}}),
    },
    "attachment.add": {
        "GetAttachment": ("attachment.get",
                          {"parameters": {"attachment_id": "$response.body#/attachment_id"}}),
    },
}


def _links(op: OperationSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (target, carry) in LINKS.get(op.name, {}).items():
        link: dict[str, Any] = {"operationId": target}
        if "parameters" in carry:
            link["parameters"] = carry["parameters"]
        if "body" in carry:
            link["requestBody"] = carry["body"]
        out[name] = link
    return out


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def error_schema() -> dict[str, Any]:
    """`{"error", "message", "details"}` plus the optional recovery fields at the top level."""
    if set(_RECOVERY_SCHEMAS) != set(RECOVERY_FIELDS):
        raise RuntimeError("the OpenAPI recovery fields disagree with errors.RECOVERY_FIELDS")
    properties: dict[str, Any] = {
        "error": {"type": "string", "enum": list(STATUS),
                  "description": "Branch on this code, never on `message`."},
        "message": {"type": "string"},
        "details": {"type": "object"},
    }
    properties.update({name: _RECOVERY_SCHEMAS[name] for name in RECOVERY_FIELDS})
    return {"type": "object", "properties": properties,
            "required": ["error", "message", "details"]}


def _error_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": _ERROR_DESCRIPTIONS[status],
        "content": {"application/json": {"schema": _ref("Error")}},
    }
    if status == 429:
        response["headers"] = {"Retry-After": {"$ref": "#/components/headers/RetryAfter"}}
    return response


def _error_statuses(op: OperationSpec) -> list[int]:
    # Every operation may answer each of these (join too: an unknown invitation
    # is 401 `unauthorized`, a spent one 403); only a body can be too large.
    statuses = [400, 401, 403, 404, 409, 429, 500, 503]
    return sorted([*statuses, 413]) if op.method == "POST" else statuses


def _query_parameters(params_schema: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(params_schema.get("required", ()))
    out = []
    for name, schema in params_schema["properties"].items():
        parameter: dict[str, Any] = {"name": name, "in": "query",
                                     "required": name in required, "schema": schema}
        if "description" in schema:
            parameter["description"] = schema["description"]
        out.append(parameter)
    return out


def _success(op: OperationSpec, schemas: dict[str, Any]) -> dict[str, Any]:
    if op.name == "workspace.observe":
        return {"200": {
            "description": "Server-sent events: `id` is the event id, `data` one JSON event"
                           " (components.schemas.Event); replay first, then live, with"
                           " comment heartbeats.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }}
    if op.name == "workspace.observe_ws":
        return {"101": {"description": "Switching Protocols to a WebSocket: one JSON event"
                                       " (components.schemas.Event) per text frame."}}
    if op.result is None:
        raise RuntimeError(f"{op.name} has no result record and no stream description")
    name = op.result.__name__
    schema = json_schema(op.result)
    if schemas.setdefault(name, schema) != schema:
        raise RuntimeError(f"two result records are named {name!r}")
    ok: dict[str, Any] = {"description": f"A `{name}` record.",
                          "content": {"application/json": {"schema": _ref(name)}}}
    links = _links(op)
    if links:
        ok["links"] = links
    return {"200": ok}


def _operation(op: OperationSpec, schemas: dict[str, Any]) -> dict[str, Any]:
    params = json_schema(op.params, params=True)
    out: dict[str, Any] = {
        "operationId": op.name,
        "summary": op.summary,
        "tags": [op.name.split(".", 1)[0]],
        "security": [] if op.capability is None else [{"bearer": []}],
    }
    description = ("No authentication." if op.capability is None
                   else f"Needs the `{op.capability}` capability.")
    if op.body_bytes is not None:
        description += f" Request body up to {op.body_bytes} bytes."
    out["description"] = description
    if op.method == "GET":
        out["parameters"] = _query_parameters(params)
        if op.name == "workspace.observe":
            out["parameters"].append({
                "name": "Last-Event-ID", "in": "header", "required": False,
                "schema": {"type": "string"},
                "description": "resume after this event id (wins over since_event_id)",
            })
    else:
        out["requestBody"] = {
            "required": bool(params.get("required")),
            "content": {"application/json": {"schema": params}},
        }
    responses = _success(op, schemas)
    for status in _error_statuses(op):
        responses[str(status)] = _error_response(status)
    out["responses"] = responses
    out["x-commonroom"] = {"kind": op.kind, "capability": op.capability,
                           "read_only": op.read_only, "destructive": op.destructive,
                           "idempotent": op.idempotent}
    return out


def _discovery(summary: str, content_type: str, schema: dict[str, Any],
               operation_id: str) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": summary, "content": {content_type: {"schema": schema}}},
    }
    for status in _ANY_ROUTE_STATUSES:
        responses[str(status)] = _error_response(status)
    return {"get": {"operationId": operation_id, "summary": summary, "tags": ["discovery"],
                    "security": [], "responses": responses}}


def _discovery_paths() -> dict[str, Any]:
    obj = {"type": "object"}
    return {
        "/.well-known/agent-workspace": _discovery(
            "The well-known document: protocol, join route, auth, capabilities.",
            "application/json", obj, "discovery.agent_workspace"),
        "/protocol": _discovery(
            "Every operation with its parameters and result schemas; every error code.",
            "application/json", obj, "discovery.protocol"),
        "/skills": _discovery("The index of agent skills.", "application/json", obj,
                              "discovery.skills"),
        "/skills/commonroom": _discovery("The agent skill, as markdown.",
                                         "text/markdown", {"type": "string"},
                                         "discovery.skill"),
        "/openapi.json": _discovery("This document.", "application/json", obj,
                                    "discovery.openapi"),
    }


def _mcp_path() -> dict[str, Any]:
    jsonrpc = {"type": "object", "required": ["jsonrpc", "method"],
               "properties": {"jsonrpc": {"const": "2.0"},
                              "id": {"type": ["string", "integer", "null"]},
                              "method": {"type": "string"}, "params": {"type": "object"}}}
    headers = [
        {"name": "MCP-Protocol-Version", "in": "header", "required": False,
         "schema": {"enum": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]},
         "description": "2026-07-28: required, equals `_meta`'s version; in a legacy session:"
                        " the negotiated version"},
        {"name": "Mcp-Method", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "2026-07-28: equals the body's `method`"},
        {"name": "Mcp-Name", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "2026-07-28, for tools/call, prompts/get, resources/read: the body's"
                        " name or uri"},
        {"name": "Mcp-Session-Id", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "a legacy session's id (from its `initialize` answer)"},
    ]
    return {"post": {
        "operationId": "mcp",
        "summary": "MCP: one JSON-RPC request or notification; a tool per operation.",
        "description": "2026-07-28 (stateless) or, with an `initialize` without the 2026-07-28"
                       " `_meta`, a legacy streamable-HTTP session (`Mcp-Session-Id`). A commonroom"
                       " error in a tool is a 200 result with `isError: true` holding the error"
                       " object; no valid bearer on room state is 401 with WWW-Authenticate."
                       " See docs/spec/PROTOCOL.md section 12.",
        "tags": ["mcp"],
        "security": [{"bearer": []}],
        "parameters": headers,
        "requestBody": {"required": True,
                        "content": {"application/json": {"schema": jsonrpc}}},
        "responses": {
            "200": {"description": "The JSON-RPC response.",
                    "content": {"application/json": {"schema": {"type": "object"}},
                                "text/event-stream": {"schema": {"type": "string"}}}},
            "202": {"description": "A notification was accepted (empty body)."},
            "400": {"description": "A header mismatch (-32020) or unsupported version (-32022).",
                    "content": {"application/json": {"schema": {"type": "object"}}}},
            "401": _error_response(401),
            "403": _error_response(403),
            "404": {"description": "Unknown method (-32601); or an unknown legacy session (-32001).",
                    "content": {"application/json": {"schema": {"type": "object"}}}},
            "413": _error_response(413),
            "429": _error_response(429),
        },
    }}


def openapi_document() -> dict[str, Any]:
    """The whole document; the same for every room (nothing room-specific in it)."""
    schemas: dict[str, Any] = {"Error": error_schema(), "Event": dict(EVENT_SCHEMA)}
    names = {op.name for op in OPERATIONS}
    for source, links in LINKS.items():
        unknown = {source, *(target for target, _ in links.values())} - names
        if unknown:
            raise RuntimeError(f"OpenAPI links name unknown operations: {sorted(unknown)}")
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        item = paths.setdefault(op.path, {})
        method = "get" if op.method == "GET" else "post"
        if method in item:
            raise RuntimeError(f"two operations on {op.method} {op.path}")
        item[method] = _operation(op, schemas)
    paths.update(_discovery_paths())
    paths["/mcp"] = _mcp_path()
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "commonroom",
            "version": __version__,
            "description": (
                f"The session ingress of a commonroom ({PROTOCOL_NAME} protocol"
                f" {PROTOCOL_VERSION}): join with an invitation, then send the session id as"
                " `Authorization: Bearer <session_id>`. Generated from the operation table;"
                " every error is the `Error` object."
            ),
        },
        "servers": [{"url": "/"}],
        "tags": [{"name": name, "description": text} for name, text in TAGS],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": {"bearer": {
                "type": "http", "scheme": "bearer",
                "description": "The session_id that POST /session/join returned."}},
            "headers": {"RetryAfter": {
                "description": "Whole seconds to wait (also `retry_after_seconds`).",
                "schema": {"type": "integer", "minimum": 1}}},
        },
    }


def openapi_text() -> str:
    """The document as docs/openapi.json holds it (indented, one trailing newline)."""
    return json.dumps(openapi_document(), indent=2) + "\n"


@functools.cache
def served_body() -> str:
    """GET /openapi.json: built once per process (nothing in it depends on the room)."""
    return json.dumps(openapi_document())
