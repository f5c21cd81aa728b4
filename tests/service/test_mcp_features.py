"""MCP tools, resources, skills, prompts, subscriptions, streams and tasks against a real room."""

from __future__ import annotations

import hashlib
import json
from contextlib import aclosing
from typing import Any

import trio

from commonroom.cli.mcp_bridge import exchange
from commonroom.protocol.operations import OPERATIONS, tool_name
from commonroom.wire import aio, http11
from tests.service.conftest import LiveRoom, start_room
from tests.service.mcp_helpers import VERSION, envelope, headers_for, rpc, tool

DOCUMENT = "commonroom://workspace/document"


def result_of(response: aio.Response) -> dict[str, Any]:
    assert response.status == 200, response.body
    result: dict[str, Any] = response.json()["result"]
    assert result["resultType"] == "complete"
    return result


def tool_error(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True, result
    error: dict[str, Any] = json.loads(result["content"][0]["text"])
    return error


async def test_tools_are_the_table(live: LiveRoom) -> None:
    first = result_of(await rpc(live, "tools/list"))
    again = result_of(await rpc(live, "tools/list"))
    assert first["tools"] == again["tools"]
    assert first["cacheScope"] == "public" and isinstance(first["ttlMs"], int)
    names = [t["name"] for t in first["tools"]]
    expected = [tool_name(op.name) for op in OPERATIONS if op.tool]
    assert names == expected and names[0] == "workspace_status"
    assert {"workspace_wait", "workspace_proposal_wait", "workspace_thread_wait"} <= set(names)
    # Never a tool: the SSE stream, joining, a resident runtime's own reports (REST only).
    assert not set(names) & {"workspace_observe", "session_join", "workspace_runtime",
                             "permission_request", "permission_withdraw"}
    by_name = {t["name"]: t for t in first["tools"]}
    checkout = by_name["workspace_checkout"]
    assert checkout["inputSchema"]["type"] == "object"
    assert checkout["inputSchema"]["required"] == ["region"]
    assert "outputSchema" not in checkout  # the answers' shapes are in /openapi.json
    assert checkout["annotations"] == {"readOnlyHint": False, "destructiveHint": False,
                                       "idempotentHint": False, "openWorldHint": False}
    assert by_name["workspace_read"]["annotations"]["readOnlyHint"] is True
    assert by_name["session_revoke"]["annotations"]["destructiveHint"] is True
    assert all(t["description"] for t in first["tools"])


async def test_a_tool_answers_what_rest_answers(live: LiveRoom) -> None:
    agent = await live.join("reader")
    result = await tool(live, "workspace_read", agent["session_id"], region="Plan/Goals")
    rest = (await live.call("GET", "/workspace/read?region=Plan/Goals", agent["session_id"])).json()
    assert result["isError"] is False
    assert result["structuredContent"] == rest
    assert json.loads(result["content"][0]["text"]) == rest


async def test_commonroom_errors_are_tool_results_with_the_http_error_object(live: LiveRoom) -> None:
    reader = await live.join("reader", capabilities=["read"])
    listed = result_of(await rpc(live, "tools/list"))
    assert "workspace_checkout" in [t["name"] for t in listed["tools"]]  # the public view lists it
    error = tool_error(await tool(live, "workspace_checkout", reader["session_id"], region="Plan/Goals"))
    assert error["error"] == "permission_denied"
    assert error["details"] == {"required_capability": "checkout"}

    holder = await live.join("holder")
    other = await live.join("other")
    lease = await tool(live, "workspace_checkout", holder["session_id"], region="Plan/Goals")
    assert lease["isError"] is False
    conflict = tool_error(await tool(live, "workspace_checkout", other["session_id"], region="Plan/Goals"))
    rest = await live.call("POST", "/workspace/checkout", other["session_id"], {"region": "Plan/Goals"})
    assert conflict == rest.json() and conflict["error"] == "lease_conflict"

    # No bearer is a failed login, not a failed tool: HTTP 401 with the header clients act on.
    anonymous = await rpc(live, "tools/call", {"name": "workspace_status", "arguments": {}})
    assert anonymous.status == 401, anonymous.body
    assert anonymous.header("www-authenticate") == 'Bearer error="invalid_token"'
    assert anonymous.json()["error"]["data"]["error"] == "unauthorized"
    assert anonymous.json()["id"] == 1
    bad = tool_error(await tool(live, "workspace_read", holder["session_id"], version="x"))
    assert bad["error"] == "invalid_request" and bad["details"]["field"] == "version"


async def test_the_stale_version_recovery_fields_reach_the_agent(live: LiveRoom) -> None:
    agent = await live.join("writer")
    bearer = agent["session_id"]
    read = (await tool(live, "workspace_read", bearer, region="Plan/Goals"))["structuredContent"]
    proposal = (await tool(live, "workspace_propose", bearer, region="Plan/Goals",
                           base_version=read["version"], summary="more goals",
                           content="## Goals\n\n- ship it\n- test it\n"))["structuredContent"]
    await live.call("POST", "/workspace/proposal/review", live.host_session,
                    {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
    # The host changes the same region meanwhile: the approved proposal is stale.
    current = live.path.read_text().replace("- ship it", "- ship it soon")
    changed = await live.call("POST", "/workspace/commit", live.host_session,
                              {"content": current, "summary": "host edit",
                               "base_version": read["version"]})
    assert changed.status == 200, changed.body
    error = tool_error(await tool(live, "workspace_commit", bearer, proposal_id=proposal["proposal_id"]))
    assert error["error"] == "stale_version"
    assert error["base_version"] == read["version"]
    assert error["current_version"] == changed.json()["version"]
    assert error["proposal_id"] == proposal["proposal_id"]
    assert "ship it soon" in error["diff"]


async def test_tools_list_shows_a_session_what_it_can_use(live: LiveRoom) -> None:
    public = result_of(await rpc(live, "tools/list"))
    assert public["cacheScope"] == "public"
    everything = {t["name"] for t in public["tools"]}
    agent = await live.join("default-agent")  # the default agent capabilities
    mine = result_of(await rpc(live, "tools/list", bearer=agent["session_id"]))
    assert mine["cacheScope"] == "private"
    names = {t["name"] for t in mine["tools"]}
    assert names < everything
    assert {"workspace_read", "workspace_propose", "workspace_commit", "workspace_proposal_wait",
            "workspace_thread_wait", "thread_open", "handoff_request"} <= names
    assert not names & {"workspace_review", "workspace_invite", "workspace_policy_add",
                        "session_revoke", "workspace_invitations", "workspace_revert"}
    reader = await live.join("reader", capabilities=["read"])
    readable = {t["name"] for t in result_of(
        await rpc(live, "tools/list", bearer=reader["session_id"]))["tools"]}
    assert "workspace_read" in readable and "workspace_checkout" not in readable
    assert "workspace_wait" not in readable  # needs observe
    host = {t["name"] for t in result_of(await rpc(live, "tools/list", bearer=live.host_session))["tools"]}
    assert host == everything
    stranger = result_of(await rpc(live, "tools/list", bearer="ses_not_a_session"))
    assert stranger["cacheScope"] == "public" and {t["name"] for t in stranger["tools"]} == everything


async def test_wait_is_a_tool(live: LiveRoom) -> None:
    agent = await live.join("waiter")
    room = (await tool(live, "workspace_room", agent["session_id"]))["structuredContent"]
    await live.call("POST", "/workspace/checkout", live.host_session, {"region": "Plan/Risks"})
    waited = await tool(live, "workspace_wait", agent["session_id"],
                        cursor=room["latest_event_id"], timeout_seconds=5)
    types = [e["type"] for e in waited["structuredContent"]["events"]]
    assert "lease.acquired" in types


async def test_resources(live: LiveRoom) -> None:
    agent = await live.join("reader", capabilities=["read"])
    bearer = agent["session_id"]
    listed = result_of(await rpc(live, "resources/list"))
    uris = [r["uri"] for r in listed["resources"]]
    assert uris[:5] == [f"commonroom://workspace/{n}" for n in
                        ("status", "document", "proposals", "leases", "participants")]
    assert all(r["name"] and r["description"] and r["mimeType"] for r in listed["resources"])
    templates = result_of(await rpc(live, "resources/templates/list"))
    assert templates["resourceTemplates"][0]["uriTemplate"] == "commonroom://workspace/region/{path}"
    for uri in uris[:5]:
        read = result_of(await rpc(live, "resources/read", {"uri": uri}, bearer))
        assert read["cacheScope"] == "private" and read["ttlMs"] == 0
        assert read["contents"][0]["uri"] == uri and read["contents"][0]["text"]
    document = result_of(await rpc(live, "resources/read", {"uri": DOCUMENT}, bearer))
    assert document["contents"][0]["text"] == live.path.read_text()
    region = result_of(await rpc(live, "resources/read",
                                 {"uri": "commonroom://workspace/region/Plan%2FGoals"}, bearer))
    assert region["contents"][0]["text"].startswith("## Goals")
    status = json.loads(result_of(await rpc(live, "resources/read",
                                            {"uri": "commonroom://workspace/status"}, bearer))
                        ["contents"][0]["text"])
    assert status == (await live.call("GET", "/workspace/status", bearer)).json()
    denied = await rpc(live, "resources/read", {"uri": DOCUMENT})
    assert denied.status == 401 and denied.json()["error"]["data"]["error"] == "unauthorized"


async def test_skills_and_prompts(live: LiveRoom) -> None:
    skill_md = (await live.raw("GET", "/skills/commonroom")).body
    listed = result_of(await rpc(live, "skills/list"))
    entry = listed["skills"][0]
    assert entry["uri"] == "skill://commonroom/SKILL.md"
    assert entry["resources"][0]["digest"] == "sha256:" + hashlib.sha256(skill_md).hexdigest()
    assert entry["resources"][0]["size"] == len(skill_md)
    assert result_of(await rpc(live, "skills/get", {"uri": entry["uri"]}))["skill"] == entry
    assert (await rpc(live, "skills/get", {"uri": "skill://nope"})).json()["error"]["code"] == -32602
    read = result_of(await rpc(live, "resources/read", {"uri": entry["uri"]}))
    assert read["contents"][0]["text"].encode() == skill_md
    prompts = result_of(await rpc(live, "prompts/list"))
    name = prompts["prompts"][0]["name"]
    got = result_of(await rpc(live, "prompts/get", {"name": name}))
    assert "workspace_propose" in got["messages"][0]["content"]["text"]


async def test_subscribe_rules(live: LiveRoom) -> None:
    reader = await live.join("reader", capabilities=["read"])
    denied = await rpc(live, "resources/subscribe", {"uri": DOCUMENT}, reader["session_id"])
    assert denied.status == 403 and denied.json()["error"]["data"]["error"] == "permission_denied"
    observer = await live.join("observer")
    for nowhere in ("commonroom://workspace/region/Nowhere", "commonroom://workspace/elsewhere"):
        unknown = await rpc(live, "resources/subscribe", {"uri": nowhere}, observer["session_id"])
        assert unknown.json()["error"]["code"] == -32602
        assert unknown.json()["error"]["data"]["uri"] == nowhere
    region = result_of(await rpc(live, "resources/subscribe",
                                 {"uri": "commonroom://workspace/region/Goals"}, observer["session_id"]))
    assert region["resultType"] == "complete"  # a region URI (here a bare title) is subscribable
    ok = result_of(await rpc(live, "resources/subscribe", {"uri": DOCUMENT}, observer["session_id"]))
    assert ok["resultType"] == "complete"
    assert result_of(await rpc(live, "resources/unsubscribe", {"uri": DOCUMENT},
                               observer["session_id"]))["resultType"] == "complete"


async def open_get_stream(live: LiveRoom, bearer: str) -> aio.BodyChunks:
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    status, headers, chunks = await aio.open_stream(stream, "/mcp", headers={
        "Accept": "text/event-stream", "MCP-Protocol-Version": VERSION,
        "Authorization": f"Bearer {bearer}"})
    assert status == 200
    assert http11.header(headers, "content-type").startswith("text/event-stream")
    return chunks


async def test_the_session_stream_notifies_subscribed_changes_and_ends_on_revoke(live: LiveRoom) -> None:
    agent = await live.join("watcher")
    bearer = agent["session_id"]
    result_of(await rpc(live, "resources/subscribe", {"uri": DOCUMENT}, bearer))
    chunks = await open_get_stream(live, bearer)
    async with chunks, aclosing(aio.iter_sse(chunks)) as messages:
        first = await messages.__anext__()
        assert first.is_comment  # open: a ping
        await live.host_appends("one")
        with trio.fail_after(5):
            message = await messages.__anext__()
        note = json.loads(message.data)
        assert note == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                        "params": {"uri": DOCUMENT}}
        # Subscribing to status after the stream opened applies at once; the lease changes
        # status and leases only, and only status is watched.
        result_of(await rpc(live, "resources/subscribe", {"uri": "commonroom://workspace/status"},
                            bearer))
        await live.call("POST", "/workspace/checkout", live.host_session, {"region": "Plan/Risks"})
        with trio.fail_after(5):
            message = await messages.__anext__()
        assert json.loads(message.data)["params"] == {"uri": "commonroom://workspace/status"}
        revoked = await live.call("POST", "/workspace/session/revoke", live.host_session,
                                  {"participant_id": agent["participant_id"]})
        assert revoked.status == 200
        with trio.fail_after(1):
            rest = [m async for m in messages if not m.is_comment]
        assert rest == []


async def post_stream(live: LiveRoom, message: dict[str, Any], bearer: str) -> Any:
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    return exchange(stream, "POST", "/mcp", headers_for(message, bearer), json.dumps(message).encode())


async def test_listen_acknowledges_tags_filters_and_ends_with_a_result(doc: Any) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        agent = await live.join("listener")
        message = envelope("subscriptions/listen", {"notifications": {
            "resourceSubscriptions": [DOCUMENT, "commonroom://workspace/nope"],
            "toolsListChanged": True}}, rid="listen-1")
        async with await post_stream(live, message, agent["session_id"]) as (status, headers, chunks):
            assert status == 200 and "text/event-stream" in headers["content-type"]
            async with aclosing(aio.iter_sse(chunks)) as messages:
                frames = []
                async for sse in messages:
                    if sse.is_comment:
                        continue
                    frames.append(json.loads(sse.data))
                    if len(frames) == 1:
                        await live.call("POST", "/workspace/checkout", live.host_session,
                                        {"region": "Plan/Risks"})  # not the document: no frame
                        await live.host_appends("listened")
                    elif len(frames) == 2:
                        live.stop.set()
        ack, updated, final = frames
        tag = {"io.modelcontextprotocol/subscriptionId": "listen-1"}
        assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                       "params": {"notifications": {"resourceSubscriptions": [DOCUMENT]}, "_meta": tag}}
        assert updated["method"] == "notifications/resources/updated"
        assert updated["params"] == {"uri": DOCUMENT, "_meta": tag}
        assert final == {"jsonrpc": "2.0", "id": "listen-1",
                         "result": {"resultType": "complete", "_meta": tag}}


async def test_listen_needs_observe(live: LiveRoom) -> None:
    reader = await live.join("reader", capabilities=["read"])
    response = await rpc(live, "subscriptions/listen",
                         {"notifications": {"resourceSubscriptions": [DOCUMENT]}}, reader["session_id"])
    assert response.status == 403 and response.json()["id"] == 1


async def test_tasks_methods(live: LiveRoom) -> None:
    agent = await live.join("tasker")
    bearer = agent["session_id"]
    missing = await rpc(live, "tasks/get", {"taskId": "tk_unknown"}, bearer, rid=21)
    assert missing.status == 400
    error = missing.json()["error"]
    assert missing.json()["id"] == 21 and error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    meta = {"io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/tasks": {}}}}
    for method, params in [("tasks/get", {"taskId": "tk_unknown"}),
                           ("tasks/update", {"taskId": "tk_unknown",
                                             "inputResponses": {"status": "working"}}),
                           ("tasks/cancel", {"taskId": "tk_unknown"})]:
        unknown = await rpc(live, method, params, bearer, rid=22, meta=meta)
        assert unknown.status == 400, unknown.body
        assert unknown.json()["error"]["code"] == -32602
        assert unknown.json()["error"]["data"]["taskId"] == "tk_unknown"


async def test_stopping_the_room_ends_the_session_stream(doc: Any) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        agent = await live.join("watcher")
        chunks = await open_get_stream(live, agent["session_id"])
        async with chunks, aclosing(aio.iter_sse(chunks)) as messages:
            assert (await messages.__anext__()).is_comment
            live.stop.set()
            with trio.fail_after(5):
                rest = [m async for m in messages if not m.is_comment]
        assert rest == []


async def test_attachments_come_back_as_image_and_text_content(live: LiveRoom) -> None:
    """PROTOCOL 10.1 via MCP: an image attachment is image content, a text one is text."""
    import base64

    from tests.service.mcp_helpers import tool

    png = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
    agent = (await live.join("files"))["session_id"]
    image = await tool(live, "attachment_add", agent, file_name="shot.png", mime_type="image/png",
                       data_base64=base64.b64encode(png).decode())
    note = await tool(live, "attachment_add", agent, file_name="note.md", mime_type="text/markdown",
                      data_base64=base64.b64encode(b"# Notes\n\nhello\n").decode())
    got = await tool(live, "attachment_get", agent,
                     attachment_id=image["structuredContent"]["attachment_id"])
    assert got["isError"] is False
    assert got["content"][1] == {"type": "image", "data": base64.b64encode(png).decode(),
                                 "mimeType": "image/png"}
    got = await tool(live, "attachment_get", agent,
                     attachment_id=note["structuredContent"]["attachment_id"])
    assert got["content"][1] == {"type": "text", "text": "# Notes\n\nhello\n"}
    assert got["structuredContent"]["mime_type"] == "text/markdown"


async def test_a_region_subscription_hints_changes_in_that_region_only(live: LiveRoom) -> None:
    """A region URI is hinted when the document changed in it, an ancestor or a descendant."""
    agent = await live.join("region-watcher")
    bearer = agent["session_id"]
    goals = "commonroom://workspace/region/Plan/Goals"
    bare = "commonroom://workspace/region/Risks"  # a bare title, resolved once by the room
    for uri in (goals, bare):
        result_of(await rpc(live, "resources/subscribe", {"uri": uri}, bearer))
    writer = (await live.join("writer"))["session_id"]
    chunks = await open_get_stream(live, bearer)
    async with chunks, aclosing(aio.iter_sse(chunks)) as messages:
        assert (await messages.__anext__()).is_comment

        async def commit(region: str, content: str) -> None:
            read = (await live.call("GET", f"/workspace/read?region={region}", writer)).json()
            proposal = (await live.call("POST", "/workspace/propose", writer, {
                "region": region, "base_version": read["version"], "summary": region,
                "content": content})).json()
            await live.call("POST", "/workspace/proposal/review", live.host_session,
                            {"proposal_id": proposal["proposal_id"],
                                    "revision": proposal["revision"], "decision": "approve"})
            done = await live.call("POST", "/workspace/commit", writer,
                                   {"proposal_id": proposal["proposal_id"]})
            assert done.status == 200, done.body

        await commit("Appendix", "# Appendix\n\nThe very end.\n")  # neither region: no hint
        await commit("Plan/Risks", "## Risks\n\nSome.\n")
        with trio.fail_after(5):
            message = await messages.__anext__()
        assert json.loads(message.data)["params"] == {"uri": bare}
        await live.host_appends("whole document")  # a whole-document change: both
        with trio.fail_after(5):
            got = [json.loads((await messages.__anext__()).data)["params"]["uri"] for _ in range(2)]
        assert got == [goals, bare]
