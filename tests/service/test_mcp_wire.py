"""MCP 2026-07-28 on the wire: every row of MCP-2026-07-28.md's error table, the header rules,
GET/DELETE and the owner port, Origin and Host. Raw HTTP against a real room."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.service.conftest import LiveRoom
from tests.service.mcp_helpers import META, VERSION, envelope, headers_for, post, post_header_list, rpc


def error_of(response: Any, status: int, code: int, rid: Any = 1) -> dict[str, Any]:
    assert response.status == status, (response.status, response.body)
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] == rid, body
    assert body["error"]["code"] == code, body
    error: dict[str, Any] = body["error"]
    return error


async def test_discover_needs_no_session_and_holds_no_secret(live: LiveRoom) -> None:
    response = await rpc(live, "server/discover")
    assert response.status == 200
    assert response.header("mcp-session-id") is None
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == [VERSION]  # the seed's rule, by default
    assert result["cacheScope"] == "public" and result["ttlMs"] == 0
    caps = result["capabilities"]
    assert caps["resources"] == {"subscribe": True}
    assert set(caps["extensions"]) == {"io.modelcontextprotocol/tasks", "io.modelcontextprotocol/skills"}
    assert "listChanged" not in response.body.decode()
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "commonroom"
    assert "workspace_propose" in result["instructions"]
    text = response.body.decode()
    for secret in (live.host_session, str(live.ready.ingress_port), live.ready.workspace_id):
        assert secret not in text


@pytest.mark.parametrize("drop", ["_meta", "io.modelcontextprotocol/protocolVersion",
                                  "io.modelcontextprotocol/clientCapabilities"])
async def test_meta_missing_a_required_key_is_invalid_params(live: LiveRoom, drop: str) -> None:
    message = envelope("server/discover", rid=7)
    if drop == "_meta":
        del message["params"]["_meta"]
    else:
        del message["params"]["_meta"][drop]
    error_of(await post(live, message, headers_for(message)), 400, -32602, 7)


async def test_client_info_is_optional(live: LiveRoom) -> None:
    meta = {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientInfo"}
    response = await rpc(live, "server/discover", meta=meta)
    assert response.status == 200 and "result" in response.json()


@pytest.mark.parametrize("change", [
    {"MCP-Protocol-Version": None}, {"MCP-Protocol-Version": "2025-11-25"},
    {"Mcp-Method": None}, {"Mcp-Method": "prompts/list"}, {"Mcp-Method": "TOOLS/LIST"},
    {"Mcp-Method": "=?base64?!!!?="},
])
async def test_header_missing_or_different_is_header_mismatch(
    live: LiveRoom, change: dict[str, str | None]
) -> None:
    message = envelope("tools/list", rid="a-1")
    headers: dict[str, str] = headers_for(message)
    for name, value in change.items():
        headers.pop(name)
        if value is not None:
            headers[name] = value
    error = error_of(await post(live, message, headers), 400, -32020, "a-1")
    assert error["message"] == "HeaderMismatch"


async def test_mcp_name_is_checked_for_tools_resources_prompts_and_tasks(live: LiveRoom) -> None:
    for method, params in [("tools/call", {"name": "workspace_status", "arguments": {}}),
                           ("resources/read", {"uri": "commonroom://workspace/status"}),
                           ("prompts/get", {"name": "commonroom-workflow"}),
                           ("tasks/get", {"taskId": "tk_x"})]:
        message = envelope(method, params, rid=3)
        headers = headers_for(message, live.host_session)
        headers["Mcp-Name"] = "something-else"
        error_of(await post(live, message, headers), 400, -32020, 3)
        del headers["Mcp-Name"]
        error_of(await post(live, message, headers), 400, -32020, 3)


async def test_header_names_are_case_insensitive_values_trimmed_and_base64_decoded(live: LiveRoom) -> None:
    message = envelope("tools/call", {"name": "workspace_status", "arguments": {}}, rid=4)
    encoded = base64.b64encode(b"workspace_status").decode()
    headers = {"content-type": "application/json", "mcp-protocol-version": f"  {VERSION} ",
               "MCP-METHOD": " tools/call", "mcp-name": f"=?base64?{encoded}?=",
               "Authorization": f"Bearer {live.host_session}"}
    response = await post_header_list(live, message, list(headers.items()))
    assert response.status == 200, response.body
    result = response.json()["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["version"] >= 1


async def test_a_name_with_non_ascii_travels_base64(live: LiveRoom) -> None:
    uri = "commonroom://workspace/region/Plän"
    message = envelope("resources/read", {"uri": uri}, rid=5)
    headers = headers_for(message, live.host_session)
    headers["Mcp-Name"] = "=?base64?" + base64.b64encode(uri.encode()).decode() + "?="
    error = error_of(await post(live, message, headers), 400, -32602, 5)
    assert error["data"]["uri"] == uri  # decoded and compared, then: no such region


async def test_a_duplicated_header_is_refused(live: LiveRoom) -> None:
    message = envelope("tools/list", rid=9)
    headers = [*list(headers_for(message).items()), ("Mcp-Method", "tools/list")]
    error_of(await post_header_list(live, message, headers), 400, -32020, 9)


@pytest.mark.parametrize("version", ["2025-11-25", "v999.0.0"])
async def test_other_versions_are_unsupported(live: LiveRoom, version: str) -> None:
    # A legacy version is served in a legacy session only (--mcp-legacy), never in the
    # 2026-07-28 envelope; by default 2026-07-28 is the one supported revision.
    meta = {**META, "io.modelcontextprotocol/protocolVersion": version}
    message = envelope("server/discover", rid=11, meta=meta)
    headers = headers_for(message)
    headers["MCP-Protocol-Version"] = version
    error = error_of(await post(live, message, headers), 400, -32022, 11)
    assert error["message"] == "UnsupportedProtocolVersionError"
    assert error["data"] == {"supported": [VERSION], "requested": version}


async def test_by_default_a_2025_request_is_an_unsupported_version(live: LiveRoom) -> None:
    message = {"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": {}}
    headers = {"Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25"}
    error = error_of(await post(live, message, headers), 400, -32022, 12)
    assert error["data"] == {"supported": [VERSION], "requested": "2025-11-25"}
    headers["MCP-Protocol-Version"] = "1999-01-01"  # a version nobody serves: named as such
    error = error_of(await post(live, message, headers), 400, -32022, 12)
    assert error["data"]["requested"] == "1999-01-01"


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
async def test_by_default_initialize_is_refused_with_32022_and_opens_no_session(
        live: LiveRoom, version: str) -> None:
    """The seed's rule: no initialize handshake; older clients use the `ce mcp` bridge."""
    agent = await live.join("old-client")
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": version, "capabilities": {},
                          "clientInfo": {"name": "old", "version": "1"}}}
    response = await post(live, message, {"Content-Type": "application/json",
                                           "Accept": "application/json, text/event-stream",
                                           "Authorization": f"Bearer {agent['session_id']}"})
    error = error_of(response, 400, -32022, 0)
    assert error["message"] == "UnsupportedProtocolVersionError"
    assert error["data"] == {"supported": [VERSION], "requested": version}
    assert response.header("mcp-session-id") is None


async def test_by_default_a_session_header_opens_nothing(live: LiveRoom) -> None:
    """GET with a legacy session's headers is "any other GET", DELETE is 405: no session era."""
    headers = {"Accept": "text/event-stream", "MCP-Protocol-Version": "2025-11-25",
               "Mcp-Session-Id": "0123456789abcdef", "Authorization": f"Bearer {live.host_session}"}
    for method in ("GET", "DELETE"):
        response = await live.raw(method, "/mcp", headers=headers)
        assert response.status == 405, (method, response.body)
        assert response.header("allow") == "POST"


async def test_initialize_with_the_2026_envelope_is_an_unknown_method(live: LiveRoom) -> None:
    # Only an initialize *without* the modern _meta opens a legacy session (tests/service/
    # test_mcp_legacy.py); with it, initialize is a method 2026-07-28 removed.
    message = envelope("initialize", {"protocolVersion": VERSION, "capabilities": {},
                                      "clientInfo": {"name": "x", "version": "1"}}, rid=0)
    error_of(await post(live, message, headers_for(message)), 404, -32601, 0)


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "tasks/list",
                                    "tasks/result", "unknown/method"])
async def test_unknown_methods_are_404(live: LiveRoom, method: str) -> None:
    error_of(await rpc(live, method, rid=13), 404, -32601, 13)


@pytest.mark.parametrize("rid", ["absent", None])
async def test_notifications_are_202_with_an_empty_body(live: LiveRoom, rid: Any) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    if rid != "absent":
        message["id"] = rid
    response = await post(live, message, {"Content-Type": "application/json"})
    assert response.status == 202 and response.body == b""


async def test_a_body_that_is_not_json_is_a_parse_error(live: LiveRoom) -> None:
    response = await post(live, None, {"Content-Type": "application/json"}, raw=b"{nope")
    error_of(response, 400, -32700, None)


async def test_deep_nesting_and_huge_numbers_are_client_errors_not_500s(live: LiveRoom) -> None:
    """The REST bodies' edge checks hold for /mcp too (issue 8, item 5)."""
    deep = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    error_of(await post(live, None, {"Content-Type": "application/json"}, raw=deep), 400, -32700, None)
    agent = await live.join("numbers")
    message = envelope("tools/call", {"name": "workspace_read",
                                      "arguments": {"region": "Goals", "version": 1}})
    raw = json.dumps(message).replace('"version": 1', '"version": ' + "9" * 5000).encode()
    response = await post(live, None, headers_for(message, agent["session_id"]), raw=raw)
    assert response.status == 200, response.body
    result = response.json()["result"]
    assert result["isError"] is True
    error = json.loads(result["content"][0]["text"])
    assert error["error"] == "invalid_request" and error["details"]["field"] == "version"


async def test_batches_and_posted_responses_are_invalid_requests(live: LiveRoom) -> None:
    batch = [envelope("tools/list", rid=1), envelope("tools/list", rid=2)]
    error_of(await post(live, batch, {"Content-Type": "application/json"}), 400, -32600, None)
    answer = {"jsonrpc": "2.0", "id": 5, "result": {}}
    error_of(await post(live, answer, {"Content-Type": "application/json"}), 400, -32600, 5)


async def test_unknown_tool_unknown_prompt_bad_params(live: LiveRoom) -> None:
    error_of(await rpc(live, "tools/call", {"name": "nope", "arguments": {}}, live.host_session),
             400, -32602)
    error_of(await rpc(live, "tools/call", {"name": "session_join", "arguments": {}},
                       live.host_session), 400, -32602)
    error_of(await rpc(live, "prompts/get", {"name": "nope"}), 400, -32602)
    error_of(await rpc(live, "tools/call", {"name": "workspace_status", "arguments": [1]},
                       live.host_session), 400, -32602)


async def test_resource_not_found_names_the_uri(live: LiveRoom) -> None:
    for uri in ["test://nonexistent", "commonroom://workspace/nope",
                "commonroom://workspace/region/No/Such/Heading"]:
        error = error_of(await rpc(live, "resources/read", {"uri": uri}, live.host_session),
                         400, -32602)
        assert error["data"]["uri"] == uri


@pytest.mark.parametrize("origin,status", [("http://evil.example.com", 403),
                                           ("http://localhost:1234", 200),
                                           ("http://127.0.0.1", 200)])
async def test_origin_rule(live: LiveRoom, origin: str, status: int) -> None:
    message = envelope("server/discover")
    headers = headers_for(message)
    headers["Origin"] = origin
    assert (await post(live, message, headers)).status == status


async def test_host_rule_against_dns_rebinding(live: LiveRoom) -> None:
    message = envelope("server/discover")
    headers = headers_for(message)
    headers["Host"] = "evil.example.com"
    assert (await post(live, message, headers)).status == 403
    headers["Host"] = f"localhost:{live.ready.ingress_port}"
    assert (await post(live, message, headers)).status == 200


async def test_get_and_delete_are_405_except_the_valid_stream(live: LiveRoom) -> None:
    good = {"Accept": "text/event-stream", "MCP-Protocol-Version": VERSION,
            "Authorization": f"Bearer {live.host_session}"}
    for headers in [{}, {**good, "Accept": "application/json"},
                    {k: v for k, v in good.items() if k != "Authorization"},
                    {**good, "Authorization": "Bearer ses_not_a_session"},
                    {**good, "MCP-Protocol-Version": "2025-11-25"},
                    {k: v for k, v in good.items() if k != "MCP-Protocol-Version"}]:
        response = await live.raw("GET", "/mcp", headers=headers)
        assert response.status == 405, (headers, response.body)
        assert response.header("allow") == "POST"
        assert response.json()["error"] == "invalid_request"
    for method in ("DELETE", "PUT"):
        response = await live.raw(method, "/mcp", headers=good)
        assert response.status == 405 and response.header("allow") == "POST"


async def test_the_owner_port_has_no_mcp(live: LiveRoom) -> None:
    port = live.ready.owner_port
    message = envelope("server/discover")
    headers = {**headers_for(message, live.host_session), **await live.owner_login()}
    posted = await live.raw("POST", "/mcp", port=port, headers=headers, body=message)
    assert posted.status == 404 and posted.json()["error"] == "invalid_request"
    stream = await live.raw("GET", "/mcp", port=port, headers={**headers, "Accept": "text/event-stream"})
    assert stream.status == 404


async def test_mcp_requests_count_against_the_rate_limit(doc: Any) -> None:
    import trio

    from tests.service.conftest import start_room

    async with trio.open_nursery() as nursery:
        room = await start_room(nursery, doc, requests_per_minute=3)
        try:
            statuses = [(await rpc(room, "tools/call", {"name": "workspace_status", "arguments": {}},
                                   room.host_session)).status for _ in range(5)]
        finally:
            room.stop.set()
    assert statuses[-1] == 429, statuses
