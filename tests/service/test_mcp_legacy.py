"""The legacy streamable-HTTP eras on /mcp (2025-03-26, 2025-06-18, 2025-11-25), raw on the wire.

A real room in the test's nursery: initialize and version negotiation, the session rules
(Mcp-Session-Id bound to its bearer, 404 otherwise, DELETE, the bearer's end, a room restart),
auth (401 with WWW-Authenticate), the resumable GET stream and its headers.
"""

from __future__ import annotations

import json
import re
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from commonroom.mcp import legacy
from commonroom.wire import aio
from tests.service.conftest import LiveRoom, start_room
from tests.service.mcp_helpers import LEGACY, initialize, legacy_headers, legacy_rpc, post

DOCUMENT = "commonroom://workspace/document"


@pytest.fixture
def live(legacy_live: LiveRoom) -> LiveRoom:
    """Every room here is started with `--mcp-legacy` (by default /mcp refuses initialize)."""
    return legacy_live
WWW_AUTHENTICATE = 'Bearer error="invalid_token"'


def result_of(response: aio.Response) -> dict[str, Any]:
    assert response.status == 200, response.body
    body = response.json()
    assert "error" not in body, body
    result: dict[str, Any] = body["result"]
    return result


def error_of(response: aio.Response, status: int, code: int, rid: Any = 1) -> dict[str, Any]:
    assert response.status == status, (response.status, response.body)
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == rid, body
    assert body["error"]["code"] == code, body
    error: dict[str, Any] = body["error"]
    return error


class Frames:
    """The raw SSE frames of a stream body (up to and with their blank line), in order."""

    def __init__(self, chunks: aio.BodyChunks) -> None:
        self.chunks = chunks
        self.buffer = b""

    async def __aenter__(self) -> Frames:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.chunks.aclose()

    async def next(self) -> bytes:
        """The next frame; b"" once the stream ended."""
        while b"\n\n" not in self.buffer:
            try:
                self.buffer += await self.chunks.__anext__()
            except StopAsyncIteration:
                rest, self.buffer = self.buffer, b""
                return rest
        frame, _, self.buffer = self.buffer.partition(b"\n\n")
        return frame + b"\n\n"

    async def rest(self) -> list[bytes]:
        frames = []
        while frame := await self.next():
            frames.append(frame)
        return frames


async def open_legacy_stream(live: LiveRoom, session_id: str, bearer: str | None,
                             version: str = LEGACY, last_event_id: str | None = None
                             ) -> tuple[int, dict[str, str], Frames]:
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    headers = legacy_headers(session_id, bearer, version)
    headers["Accept"] = "text/event-stream"
    del headers["Content-Type"]
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    status, head, chunks = await aio.open_stream(stream, "/mcp", headers=headers)
    return status, {k.lower(): v for k, v in head}, Frames(chunks)


@pytest.mark.parametrize(("offered", "negotiated"), [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2025-11-25"), ("2099-01-01", "2025-11-25"),
])
async def test_initialize_negotiates_the_newest_legacy_revision(
    live: LiveRoom, offered: str, negotiated: str
) -> None:
    agent = await live.join("old-client")
    session_id, result = await initialize(live, agent["session_id"], offered)
    assert re.fullmatch(r"[\x21-\x7e]{16,}", session_id)  # visible ASCII, unguessable
    assert result["protocolVersion"] == negotiated
    assert result["capabilities"]["resources"] == {"subscribe": True}
    assert result["capabilities"]["tools"] == {} and result["capabilities"]["prompts"] == {}
    assert "listChanged" not in json.dumps(result)
    assert result["serverInfo"]["name"] == "commonroom"
    assert "workspace_propose" in result["instructions"]
    assert "resultType" not in result  # the 2026-07-28 framing stays in its era
    for secret in (agent["session_id"], live.ready.workspace_id):
        assert secret not in json.dumps(result)


async def test_a_session_serves_the_same_table_without_the_2026_framing(live: LiveRoom) -> None:
    agent = await live.join("legacy-agent")
    bearer = agent["session_id"]
    session_id, _ = await initialize(live, bearer)
    listed = result_of(await legacy_rpc(live, session_id, "tools/list", {}, bearer))
    modern = (await live.call("GET", "/protocol")).json()["operations"]
    assert listed["tools"][0]["name"] == "workspace_status"
    assert {t["title"] for t in listed["tools"]} <= {op["name"] for op in modern}
    assert not {"ttlMs", "cacheScope", "resultType", "_meta"} & set(listed)
    status = result_of(await legacy_rpc(live, session_id, "tools/call",
                                        {"name": "workspace_status", "arguments": {}}, bearer, rid=2))
    rest = (await live.call("GET", "/workspace/status", bearer)).json()
    assert status["isError"] is False and status["structuredContent"] == rest
    region = result_of(await legacy_rpc(live, session_id, "resources/read",
                                        {"uri": "commonroom://workspace/region/Plan/Goals"}, bearer))
    assert region["contents"][0]["text"].startswith("## Goals")
    assert result_of(await legacy_rpc(live, session_id, "ping", None, bearer, rid="p")) == {}
    prompts = result_of(await legacy_rpc(live, session_id, "prompts/list", {}, bearer))
    assert prompts["prompts"][0]["name"] == "commonroom-workflow"
    # A posted response and any notification are accepted and dropped.
    answered = await post(live, {"jsonrpc": "2.0", "id": 9, "result": {}},
                          legacy_headers(session_id, bearer))
    assert answered.status == 202 and answered.body == b""
    cancelled = await post(live, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                  "params": {"requestId": 2}}, legacy_headers(session_id, bearer))
    assert cancelled.status == 202


async def test_json_rpc_errors_in_a_session_are_http_200(live: LiveRoom) -> None:
    """Legacy clients read a JSON-RPC error only from a 2xx answer (a 4xx is a transport error)."""
    reader = await live.join("reader", capabilities=["read"])
    bearer = reader["session_id"]
    session_id, _ = await initialize(live, bearer)
    error_of(await legacy_rpc(live, session_id, "server/discover", {}, bearer), 200, -32601)
    error_of(await legacy_rpc(live, session_id, "subscriptions/listen", {}, bearer), 200, -32601)
    error_of(await legacy_rpc(live, session_id, "logging/setLevel", {"level": "info"}, bearer),
             200, -32601)
    missing = error_of(await legacy_rpc(live, session_id, "resources/read",
                                        {"uri": "commonroom://workspace/region/Nope"}, bearer), 200, -32602)
    assert missing["data"]["uri"] == "commonroom://workspace/region/Nope"
    denied = error_of(await legacy_rpc(live, session_id, "resources/subscribe", {"uri": DOCUMENT},
                                       bearer), 200, -32000)
    assert denied["data"]["error"] == "permission_denied"  # no `observe`
    tool = result_of(await legacy_rpc(live, session_id, "tools/call", {
        "name": "workspace_checkout", "arguments": {"region": "Plan/Goals"}}, bearer))
    assert tool["isError"] is True and json.loads(tool["content"][0]["text"])["error"] == "permission_denied"
    tasks = error_of(await legacy_rpc(live, session_id, "tasks/get", {"taskId": "tk_x"}, bearer), 200, -32021)
    assert tasks["data"]["requiredCapabilities"] == {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    # A second initialize on a live session, and a body that is not JSON: transport errors.
    again = await post(live, {"jsonrpc": "2.0", "id": 5, "method": "initialize",
                              "params": {"protocolVersion": LEGACY, "capabilities": {}}},
                       legacy_headers(session_id, bearer))
    error_of(again, 400, -32600, 5)
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    garbage = await aio.request(stream, "POST", "/mcp", headers=legacy_headers(session_id, bearer),
                                       body=b"{not json")
    error_of(garbage, 400, -32700, None)


async def test_the_tasks_extension_is_declared_once_at_initialize(live: LiveRoom) -> None:
    agent = await live.join("tasker")
    bearer = agent["session_id"]
    session_id, _ = await initialize(
        live, bearer, capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}})
    unknown = error_of(await legacy_rpc(live, session_id, "tasks/get", {"taskId": "tk_unknown"}, bearer),
                       200, -32602)
    assert unknown["data"]["taskId"] == "tk_unknown"


async def test_the_protocol_version_header_must_be_the_sessions(live: LiveRoom) -> None:
    agent = await live.join("versions")
    bearer = agent["session_id"]
    session_id, _ = await initialize(live, bearer, "2025-06-18")
    result_of(await legacy_rpc(live, session_id, "tools/list", {}, bearer, version="2025-06-18"))
    result_of(await legacy_rpc(live, session_id, "tools/list", {}, bearer, version=None))  # the session's
    for wrong in ("2025-11-25", "2026-07-28", "garbage"):
        error_of(await legacy_rpc(live, session_id, "tools/list", {}, bearer, rid=3, version=wrong),
                 400, -32600, 3)


async def test_a_session_is_its_bearers_alone(live: LiveRoom) -> None:
    owner = await live.join("owner")
    other = await live.join("other")
    session_id, _ = await initialize(live, owner["session_id"])
    for bearer in (other["session_id"], None, live.host_session):
        wrong = await legacy_rpc(live, session_id, "tools/list", {}, bearer, rid=7)
        error_of(wrong, 404, -32001, 7)  # the same answer as an unknown session
        status, _, frames = await open_legacy_stream(live, session_id, bearer)
        await frames.chunks.aclose()
        assert status == 404
    error_of(await legacy_rpc(live, "not-a-session", "tools/list", {}, owner["session_id"], rid=8),
             404, -32001, 8)
    deleted = await live.raw("DELETE", "/mcp", headers=legacy_headers(session_id, other["session_id"]))
    assert deleted.status == 404
    result_of(await legacy_rpc(live, session_id, "tools/list", {}, owner["session_id"]))  # still alive


async def test_delete_ends_the_session_and_its_stream(live: LiveRoom) -> None:
    agent = await live.join("leaver")
    bearer = agent["session_id"]
    session_id, _ = await initialize(live, bearer)
    status, _, frames = await open_legacy_stream(live, session_id, bearer)
    assert status == 200
    async with frames:
        deleted = await live.raw("DELETE", "/mcp", headers=legacy_headers(session_id, bearer))
        assert deleted.status == 204 and deleted.body == b""
        with trio.fail_after(5):
            rest = await frames.rest()  # the stream ends
        assert b"notifications/" not in b"".join(rest)
    error_of(await legacy_rpc(live, session_id, "tools/list", {}, bearer), 404, -32001)
    again = await live.raw("DELETE", "/mcp", headers=legacy_headers(session_id, bearer))
    assert again.status == 404


async def test_the_session_ends_when_its_bearer_leaves(live: LiveRoom) -> None:
    agent = await live.join("goes")
    bearer = agent["session_id"]
    session_id, _ = await initialize(live, bearer)
    result_of(await legacy_rpc(live, session_id, "resources/subscribe", {"uri": DOCUMENT}, bearer))
    status, _, frames = await open_legacy_stream(live, session_id, bearer)
    assert status == 200
    async with frames:
        left = await live.call("POST", "/workspace/leave", bearer)
        assert left.status == 200, left.body
        with trio.fail_after(5):
            rest = await frames.rest()  # the leave ends the stream
        assert b"notifications/" not in b"".join(rest)
    error_of(await legacy_rpc(live, session_id, "tools/list", {}, bearer, rid=4), 404, -32001, 4)
    # A bearer that ended cannot open another session: the client is told its login is bad.
    refused = await post(live, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                "params": {"protocolVersion": LEGACY, "capabilities": {}}},
                         legacy_headers(None, bearer, None))
    assert refused.status == 401 and refused.header("www-authenticate") == WWW_AUTHENTICATE
    assert refused.json()["error"]["data"]["error"] == "unauthorized"


async def test_a_room_restart_forgets_the_sessions(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, mcp_legacy=True)
        agent = await live.join("survivor")
        bearer = agent["session_id"]
        session_id, _ = await initialize(live, bearer)
        live.stop.set()
    async with trio.open_nursery() as nursery:
        again = await start_room(nursery, doc, mcp_legacy=True)
        error_of(await legacy_rpc(again, session_id, "tools/list", {}, bearer, rid=6), 404, -32001, 6)
        fresh, _ = await initialize(again, bearer)  # the client initializes again
        result_of(await legacy_rpc(again, fresh, "tools/list", {}, bearer))
        again.stop.set()


async def test_without_a_bearer_only_public_metadata(live: LiveRoom) -> None:
    session_id, _ = await initialize(live, None)
    listed = result_of(await legacy_rpc(live, session_id, "tools/list", {}))
    assert listed["tools"]
    skill = result_of(await legacy_rpc(live, session_id, "resources/read",
                                       {"uri": "skill://commonroom/SKILL.md"}))
    assert skill["contents"][0]["text"].startswith("---")
    for rid, (method, params) in enumerate([
        ("tools/call", {"name": "workspace_status", "arguments": {}}),
        ("resources/read", {"uri": "commonroom://workspace/status"}),
        ("resources/subscribe", {"uri": DOCUMENT}),
    ], start=10):
        refused = await legacy_rpc(live, session_id, method, params, rid=rid)
        error = error_of(refused, 401, -32000, rid)
        assert refused.header("www-authenticate") == WWW_AUTHENTICATE
        assert error["data"]["error"] == "unauthorized"
    status, _, frames = await open_legacy_stream(live, session_id, None)
    await frames.chunks.aclose()
    assert status == 405  # nothing to stream without a session's observe
    bad = await post(live, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                            "params": {"protocolVersion": LEGACY, "capabilities": {}}},
                     legacy_headers(None, "ses_not_a_session", None))
    assert bad.status == 401 and bad.header("www-authenticate") == WWW_AUTHENTICATE


async def test_the_2026_era_answers_401_too(live: LiveRoom) -> None:
    from tests.service.mcp_helpers import rpc

    for bearer in (None, "ses_not_a_session"):
        refused = await rpc(live, "tools/call", {"name": "workspace_status", "arguments": {}}, bearer)
        assert refused.status == 401, refused.body
        assert refused.header("www-authenticate") == WWW_AUTHENTICATE
        assert refused.json()["error"]["data"]["error"] == "unauthorized"
    read = await rpc(live, "resources/read", {"uri": DOCUMENT})
    assert read.status == 401 and read.header("www-authenticate") == WWW_AUTHENTICATE
    assert (await rpc(live, "tools/list")).status == 200  # public


@pytest.mark.parametrize("name", [
    "oauth-protected-resource", "oauth-authorization-server", "oauth-protected-resource/mcp",
    "openid-configuration"])
async def test_no_oauth_metadata(live: LiveRoom, name: str) -> None:
    response = await live.raw("GET", f"/.well-known/{name}")
    assert response.status == 404 and response.json()["error"] == "invalid_request"
    assert (await live.raw("GET", "/.well-known/agent-workspace")).status == 200


async def test_the_stream_notifies_resumes_and_primes(live: LiveRoom) -> None:
    agent = await live.join("watcher")
    bearer = agent["session_id"]
    session_id, _ = await initialize(live, bearer)
    result_of(await legacy_rpc(live, session_id, "resources/subscribe", {"uri": DOCUMENT}, bearer))
    status, head, frames = await open_legacy_stream(live, session_id, bearer)
    assert status == 200 and head["content-type"].startswith("text/event-stream")
    assert head["cache-control"] == "no-cache" and head["x-accel-buffering"] == "no"
    async with frames:
        first = await frames.next()
        primed = re.fullmatch(rb"retry: 5000\nid: (\d+)\ndata: \n\n", first)
        assert primed is not None, first  # 2025-11-25: an id and empty data first
        version = await live.host_appends("one")
        with trio.fail_after(5):
            frame = await frames.next()
        event_id = re.fullmatch(rb"id: (\d+)\ndata: (.*)\n\n", frame)
        assert event_id is not None, frame
        assert json.loads(event_id.group(2)) == {
            "jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": DOCUMENT}}
        seen = event_id.group(1).decode()
    assert int(seen) > int(primed.group(1))
    # Away: two commits while no stream is open; resuming replays them, nothing else.
    await live.host_appends("two")
    await live.host_appends("three")
    status, _, frames = await open_legacy_stream(live, session_id, bearer, last_event_id=seen)
    assert status == 200
    async with frames, aclosing(aio.iter_sse(frames.chunks)) as messages:
        replayed = []
        with trio.fail_after(5):
            async for message in messages:
                if not message.is_comment and message.data:  # not the priming event
                    replayed.append(message)
                if len(replayed) == 2:
                    break
    assert [json.loads(m.data)["params"]["uri"] for m in replayed] == [DOCUMENT, DOCUMENT]
    assert int(replayed[0].id) > int(seen) and int(replayed[1].id) > int(replayed[0].id)
    assert version >= 2


async def test_an_older_session_streams_without_priming_and_a_new_get_replaces_the_old(
    live: LiveRoom,
) -> None:
    agent = await live.join("two-windows")
    bearer = agent["session_id"]
    session_id, _ = await initialize(live, bearer, "2025-06-18")
    status, _, old = await open_legacy_stream(live, session_id, bearer, "2025-06-18")
    assert status == 200
    async with old:
        assert await old.next() == b"retry: 5000\n: ping\n\n"  # no priming before 2025-11-25
        status, _, new = await open_legacy_stream(live, session_id, bearer, "2025-06-18")
        assert status == 200
        async with new:
            with trio.fail_after(5):
                assert await old.rest() == []  # the old one ended
            assert await new.next() == b"retry: 5000\n: ping\n\n"


async def test_each_session_has_its_own_subscriptions(live: LiveRoom) -> None:
    agent = await live.join("two-clients")
    bearer = agent["session_id"]
    watching, _ = await initialize(live, bearer)
    idle, _ = await initialize(live, bearer)
    result_of(await legacy_rpc(live, watching, "resources/subscribe", {"uri": DOCUMENT}, bearer))
    streams = [await open_legacy_stream(live, sid, bearer) for sid in (watching, idle)]
    (_, _, watched), (_, _, quiet) = streams
    async with watched, quiet:
        await watched.next()
        await quiet.next()
        await live.host_appends("for one")
        with trio.fail_after(5):
            assert b"notifications/resources/updated" in await watched.next()
        with trio.move_on_after(0.5):
            got = await quiet.next()
            raise AssertionError(f"the unsubscribed session got {got!r}")
        result_of(await legacy_rpc(live, watching, "resources/unsubscribe", {"uri": DOCUMENT}, bearer))


async def test_keepalives_and_the_per_bearer_cap(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, mcp_legacy=True, heartbeat_seconds=0.2)
        agent = await live.join("many")
        bearer = agent["session_id"]
        sessions = [(await initialize(live, bearer))[0] for _ in range(legacy.SESSIONS_PER_BEARER + 1)]
        # One more than the cap ended the oldest; the newest still works.
        error_of(await legacy_rpc(live, sessions[0], "tools/list", {}, bearer), 404, -32001)
        result_of(await legacy_rpc(live, sessions[1], "tools/list", {}, bearer))
        status, _, frames = await open_legacy_stream(live, sessions[-1], bearer)
        assert status == 200
        async with frames:
            await frames.next()
            with trio.fail_after(5):
                assert await frames.next() == b": ping\n\n"  # the heartbeat comment
        live.stop.set()


async def test_legacy_requests_count_against_the_bearers_rate_limit(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, mcp_legacy=True, requests_per_minute=8)
        agent = await live.join("busy")
        bearer = agent["session_id"]
        session_id, _ = await initialize(live, bearer)  # initialize + initialized: 2 requests
        statuses = [(await legacy_rpc(live, session_id, "ping", None, bearer)).status for _ in range(8)]
        assert statuses.count(200) == 6 and statuses[-1] == 429
        live.stop.set()


async def test_every_mcp_stream_is_uncached_unbuffered_and_kept_alive_by_default(live: LiveRoom) -> None:
    """Proxies must neither cache nor buffer an MCP stream; the keep-alive is at most 15 s apart."""
    from commonroom.http.ingress import IngressSettings
    from commonroom.service import ServeOptions
    from tests.service.mcp_helpers import VERSION, envelope, headers_for

    assert ServeOptions(path=live.path).heartbeat_seconds <= 15
    assert IngressSettings().heartbeat_seconds <= 15
    agent = (await live.join("streams"))["session_id"]
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    status, head, chunks = await aio.open_stream(stream, "/mcp", headers={
        "Accept": "text/event-stream", "MCP-Protocol-Version": VERSION, "Authorization": f"Bearer {agent}"})
    await chunks.aclose()
    modern = {k.lower(): v for k, v in head}
    assert status == 200 and modern["cache-control"] == "no-cache" and modern["x-accel-buffering"] == "no"
    from commonroom.cli.mcp_bridge import exchange

    message = envelope("subscriptions/listen", {"notifications": {"resourceSubscriptions": [DOCUMENT]}})
    stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
    async with exchange(stream, "POST", "/mcp", headers_for(message, agent),
                        json.dumps(message).encode()) as (status, listen, _):
        assert status == 200 and listen["cache-control"] == "no-cache"
        assert listen["x-accel-buffering"] == "no"


async def test_with_mcp_legacy_discovery_lists_every_served_revision(live: LiveRoom) -> None:
    from tests.service.mcp_helpers import rpc

    response = await rpc(live, "server/discover")
    assert response.status == 200, response.body
    assert response.json()["result"]["supportedVersions"] == [
        "2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
    message = {"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": {}}
    headers = {"Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25"}
    refused = await post(live, message, headers)  # a legacy request without its session
    assert refused.status == 400 and refused.json()["error"]["code"] == -32600
