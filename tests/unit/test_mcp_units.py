"""Pure parts of the MCP adapter: header values, the envelope order, the task mapping, tool names.

JSON-RPC error codes are asserted as the numbers of the MCP spec's error table
(shared/spec/MCP-2026-07-28.md), never as the code's own constants.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from commonroom.mcp import notify, tasks, tools, wire
from commonroom.protocol.events import EVENTS, RESOURCES, Event, LeaseAcquired
from commonroom.room.streams import StreamItem


def values(headers: dict[str, list[str]]) -> wire.HeaderValues:
    lowered = {k.lower(): v for k, v in headers.items()}
    return lambda name: lowered.get(name.lower(), [])


def test_header_values() -> None:
    assert wire.decode_header_value("  tools/call \t") == "tools/call"
    encoded = base64.b64encode("Plän/Zïel".encode()).decode()
    assert wire.decode_header_value(f" =?base64?{encoded}?= ") == "Plän/Zïel"
    assert wire.decode_header_value("=?base64??=") == ""
    with pytest.raises(wire.McpError) as bad:
        wire.decode_header_value("=?base64?not base64!?=")
    assert bad.value.code == -32020
    assert wire.decode_header_value("=?BASE64?abc?=") == "=?BASE64?abc?="  # literal: not the sentinel


def body(method: str, meta: dict[str, Any] | None = None, rid: Any = 1, **params: Any) -> bytes:
    p = dict(params)
    p["_meta"] = meta if meta is not None else {wire.META_VERSION: wire.PROTOCOL_VERSION,
                                                wire.META_CAPABILITIES: {}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": p}).encode()


GOOD = {"MCP-Protocol-Version": [wire.PROTOCOL_VERSION], "Mcp-Method": ["tools/list"]}


def code_of(raw: bytes, headers: dict[str, list[str]]) -> int:
    with pytest.raises(wire.McpError) as error:
        wire.parse(raw, values(headers))
    return error.value.code


def test_envelope_order() -> None:
    request = wire.parse(body("tools/list"), values(GOOD))
    assert request.method == "tools/list" and request.id == 1
    # The header says 2026-07-28, _meta another version: a mismatch before "unsupported".
    other = {wire.META_VERSION: "v999", wire.META_CAPABILITIES: {}}
    assert code_of(body("tools/list", other), GOOD) == -32020
    assert code_of(body("tools/list", other), {**GOOD, "MCP-Protocol-Version": ["v999"]}) == \
        -32022
    # Missing _meta keys come before header checks.
    assert code_of(body("tools/list", {}), {}) == -32602
    assert code_of(body("tools/list"), {"MCP-Protocol-Version": [wire.PROTOCOL_VERSION]}) == \
        -32020
    assert code_of(body("tools/list"), {**GOOD, "mcp-method": ["tools/list", "tools/list"]}) == \
        -32020
    assert code_of(b"[1]", {}) == -32600
    assert code_of(b"\xff", {}) == -32700
    assert code_of(json.dumps({"jsonrpc": "1.0", "id": 1, "method": "x"}).encode(), {}) == \
        -32600
    note = wire.parse(json.dumps({"jsonrpc": "2.0", "method": "notifications/x"}).encode(), values({}))
    assert note.notification and note.id is None


def test_errors_keep_the_request_id() -> None:
    with pytest.raises(wire.McpError) as error:
        wire.parse(body("tools/list", rid="abc"), values({}))
    assert error.value.to_wire()["id"] == "abc"


CLIENT_NAME_PATTERN = r"[a-zA-Z0-9_-]{1,64}"  # what Claude Desktop, the OpenAI API and Copilot enforce


def test_tool_names_are_valid_and_unique() -> None:
    names = [t["name"] for t in tools.tool_list()]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(CLIENT_NAME_PATTERN, name) for name in names), names
    assert all(t["inputSchema"]["type"] == "object" for t in tools.tool_list())


def test_every_mcp_name_matches_the_clients_pattern() -> None:
    """Tools, prompts and resource templates: one dotted name makes clients refuse the server."""
    from commonroom.mcp import endpoint, resources

    names = [t["name"] for t in tools.tool_list()]
    names.append(endpoint._prompt()["name"])
    names += [t["name"] for t in resources.template_list()]
    names += [r["name"] for r in resources.resource_list()]
    bad = [name for name in names if not re.fullmatch(CLIENT_NAME_PATTERN, name)]
    assert not bad
    # The tool is the operation's name with `.` written `_`; operation names stay dotted.
    assert {"workspace_read", "workspace_proposal_revise", "thread_open"} <= set(names)
    assert tools.TOOLS_BY_NAME["workspace_proposal_revise"].name == "workspace.proposal.revise"


def test_task_mapping() -> None:
    record = {"task_id": "tk_1", "handoff_id": "ho_1", "status": "completed",
              "status_message": "done", "created_at": "a", "updated_at": "b",
              "result": {"summary": "s", "details": None}}
    task = tasks.mcp_task(record)
    assert task["taskId"] == "tk_1" and task["lastUpdatedAt"] == "b" and task["ttlMs"] is None
    assert task["result"] == {"summary": "s", "details": None} and "error" not in task
    failed = tasks.mcp_task({**record, "status": "failed", "result": None})
    assert failed["error"]["message"] == "done" and "result" not in failed
    assert tasks.update_params("tk_1", {"inputResponses": {
        "status": "completed", "statusMessage": "ok", "result": {"summary": "s", "details": "d"}}}) == {
        "task_id": "tk_1", "status": "completed", "status_message": "ok",
        "result_summary": "s", "result_details": "d"}
    assert tasks.update_params("tk_1", {"inputResponses": {"result": "short"}}) == {
        "task_id": "tk_1", "result_summary": "short"}
    with pytest.raises(wire.McpError):
        tasks.update_params("tk_1", {})


def test_notifications_follow_the_event_catalogue() -> None:
    event = Event(7, LeaseAcquired.TYPE, "t", LeaseAcquired("ls_1", "pt_1", "Plan", "e"))
    watched = {"commonroom://workspace/leases", "commonroom://workspace/document"}
    assert notify.changed_uris(StreamItem("event", event), watched) == ["commonroom://workspace/leases"]
    assert notify.changed_uris(StreamItem("resync", data={}), watched) == [
        "commonroom://workspace/document", "commonroom://workspace/leases"]
    assert notify.changed_uris(StreamItem("heartbeat"), watched) == []
    # Every subscribable URI is a resource of the catalogue, and some event changes each one.
    touched = set().union(*(spec.resources for spec in EVENTS.values()))
    for name in ("status", "document", "proposals", "leases", "participants"):
        assert name in RESOURCES and name in touched


def _command_lines(snippet: Any) -> list[list[str]]:
    """Every command line a snippet makes: the shell command, or the server it starts."""
    import json as json_module
    import shlex
    import tomllib

    if snippet.format == "shell":
        return [shlex.split(snippet.text)]
    if snippet.format == "toml":
        server = tomllib.loads(snippet.text)["mcp_servers"]["commonroom"]
    else:
        block = json_module.loads(snippet.text)
        server = (block.get("mcpServers") or block.get("servers") or block["context_servers"])["commonroom"]
    return [[server["command"], *server["args"]]] if "command" in server else []


@pytest.mark.parametrize("legacy_room", [False, True])
def test_no_snippet_puts_a_secret_on_a_command_line(legacy_room: bool) -> None:
    from commonroom.mcp import configs

    session, invitation = "ses_SECRETSESSION", "commonroom://join/SECRETINVITE"
    for client, spec in configs.CLIENTS.items():
        forms = [dict(transport=None, profile="ws_profile"), dict(transport="stdio", profile=None)]
        forms += [dict(transport="http", profile=None)] if "http" in spec.transports else []
        for form in forms:
            try:
                snippet = configs.render(client, url="http://127.0.0.1:9/mcp", bearer=session,
                                         ce_command="/usr/bin/ce", invitation=invitation,
                                         legacy_room=legacy_room, **form)  # type: ignore[arg-type]
            except configs.ConfigError:
                # Only an older-era client asked for the URL of a room that refuses its era.
                assert form["transport"] == "http" and not (spec.speaks_2026 or legacy_room)
                continue
            for argv in _command_lines(snippet):
                assert not any("SECRET" in arg for arg in argv), (client, form, argv)
            if form["transport"] is None:  # the form follows what the client speaks and the room
                by_url = "http" in spec.transports and (spec.speaks_2026 or legacy_room)
                assert snippet.transport == ("http" if by_url else "stdio"), (client, legacy_room)
