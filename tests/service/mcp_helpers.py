"""Raw MCP 2026-07-28 requests against a live room (the byte client, no SDK)."""

from __future__ import annotations

import json
from typing import Any

import trio

from commonroom.wire import aio
from tests.service.conftest import LiveRoom

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
}
NAME_FIELD = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
              "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


def envelope(method: str, params: dict[str, Any] | None = None, rid: Any = 1,
             meta: dict[str, Any] | None = None) -> dict[str, Any]:
    body = dict(params or {})
    body["_meta"] = dict(META if meta is None else meta)
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}


def headers_for(message: dict[str, Any], bearer: str | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": VERSION, "Mcp-Method": message["method"]}
    field = NAME_FIELD.get(message["method"])
    if field is not None:
        headers["Mcp-Name"] = message["params"][field]
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return headers


async def post(live: LiveRoom, message: Any, headers: dict[str, str] | list[tuple[str, str]],
               raw: bytes | None = None) -> aio.Response:
    body = raw if raw is not None else json.dumps(message).encode()
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    return await aio.request(stream, "POST", "/mcp", headers=headers, body=body)  # type: ignore[arg-type]


async def rpc(live: LiveRoom, method: str, params: dict[str, Any] | None = None,
              bearer: str | None = None, rid: Any = 1, **kw: Any) -> aio.Response:
    message = envelope(method, params, rid, **kw)
    return await post(live, message, headers_for(message, bearer))


async def tool(live: LiveRoom, name: str, bearer: str, **arguments: Any) -> dict[str, Any]:
    response = await rpc(live, "tools/call", {"name": name, "arguments": arguments}, bearer)
    assert response.status == 200, response.body
    result: dict[str, Any] = response.json()["result"]
    return result


async def post_header_list(live: LiveRoom, message: Any, headers: list[tuple[str, str]]
                           ) -> aio.Response:
    """POST /mcp with an exact header list (duplicates kept), read with the byte client's reader."""
    import h11

    body = json.dumps(message).encode()
    conn = h11.Connection(h11.CLIENT)
    all_headers = [("Host", "commonroom"), ("Content-Length", str(len(body))),
                   ("Connection", "close"), *headers]
    # Written by hand: h11 would refuse the spaces around a value that the test sends on purpose.
    head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in all_headers) + "\r\n"
    data = head.encode() + body
    conn.send(h11.Request(method="POST", target="/mcp", headers=[("Host", "commonroom"),
                                                                   ("Content-Length", str(len(body)))]))
    conn.send(h11.Data(data=body))
    conn.send(h11.EndOfMessage())
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    async with stream:
        await stream.send_all(data)
        return await aio.read_response(stream, conn)


# -- the legacy eras (streamable HTTP 2025-03-26 / 2025-06-18 / 2025-11-25) ------------------

LEGACY = "2025-11-25"


def legacy_headers(session_id: str | None, bearer: str | None, version: str | None = LEGACY
                   ) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return headers


async def initialize(live: LiveRoom, bearer: str | None, version: str = LEGACY,
                     capabilities: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """Open a legacy session: (its Mcp-Session-Id, the initialize result)."""
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": version, "capabilities": capabilities or {},
                          "clientInfo": {"name": "legacy-test", "version": "1"}}}
    response = await post(live, message, legacy_headers(None, bearer, None))
    assert response.status == 200, response.body
    session_id = response.header("mcp-session-id")
    assert session_id is not None
    result: dict[str, Any] = response.json()["result"]
    negotiated = result["protocolVersion"]
    done = await post(live, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                      legacy_headers(session_id, bearer, negotiated))
    assert done.status == 202, done.body
    return session_id, result


async def legacy_rpc(live: LiveRoom, session_id: str, method: str, params: dict[str, Any] | None = None,
                     bearer: str | None = None, rid: Any = 1, version: str | None = LEGACY
                     ) -> aio.Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return await post(live, message, legacy_headers(session_id, bearer, version))


# -- the host's review ------------------------------------------------------------------------


async def host_reviews(live: LiveRoom, proposal_id: str, decision: str = "approve",
                       comment: str | None = None) -> dict[str, Any]:
    """The host reviews a proposal over REST: the one place these tests call the review.

    It reads the proposal first and binds the review to the revision it read, as a reviewer
    must (docs/spec/PROTOCOL.md section 7)."""
    shown = await live.call("GET", f"/workspace/proposal?proposal_id={proposal_id}",
                            live.host_session)
    assert shown.status == 200, shown.body
    body: dict[str, Any] = {"proposal_id": proposal_id, "decision": decision,
                            "revision": shown.json()["revision"]}
    if comment is not None:
        body["comment"] = comment
    answer = await live.call("POST", "/workspace/proposal/review", live.host_session, body)
    assert answer.status == 200, answer.body
    reviewed: dict[str, Any] = answer.json()
    return reviewed
