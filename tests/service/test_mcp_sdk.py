"""The official MCP Python SDK (`mcp` 2.3, revision 2026-07-28) as a real client of the room."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import mcp
import pytest
import trio
from mcp.client.streamable_http import streamable_http_client

from tests.service.conftest import LiveRoom

DOCUMENT = "commonroom://workspace/document"


def sdk_client(live: LiveRoom, bearer: str, mode: str = "2026-07-28") -> mcp.Client:
    url = f"http://127.0.0.1:{live.ready.ingress_port}/mcp"
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"})
    return mcp.Client(streamable_http_client(url, http_client=http), mode=mode)


async def test_discover_list_and_call_tools_read_a_resource(live: LiveRoom) -> None:
    agent = await live.join("sdk-agent")
    async with sdk_client(live, agent["session_id"], mode="auto") as client:
        discovered = await client.session.discover()
        assert discovered.supported_versions == ["2026-07-28"]  # the seed's rule, by default
        assert client.protocol_version == "2026-07-28"
        assert client.instructions and "workspace_commit" in client.instructions
        tools = await client.list_tools()
        assert tools.tools[0].name == "workspace_status"
        assert {"workspace_read", "workspace_propose", "workspace_commit"} <= {t.name for t in tools.tools}
        status = await client.call_tool("workspace_status", {})
        assert not status.is_error
        assert status.structured_content is not None and status.structured_content["version"] >= 1
        read = await client.call_tool("workspace_read", {"region": "Plan/Goals"})
        assert read.structured_content is not None
        assert read.structured_content["content"].startswith("## Goals")
        denied = await client.call_tool("workspace_review", {"proposal_id": "pr_x", "decision": "approve"})
        assert denied.is_error
        assert json.loads(denied.content[0].text)["error"] == "permission_denied"  # type: ignore[union-attr]
        document = await client.read_resource(DOCUMENT)
        assert document.contents[0].text == live.path.read_text()  # type: ignore[union-attr]


async def test_listen_sees_another_participants_commit(live: LiveRoom) -> None:
    agent = await live.join("sdk-listener")
    writer = await live.join("writer")
    received: list[Any] = []
    async with sdk_client(live, agent["session_id"]) as client:
        async with client.listen(resource_subscriptions=[DOCUMENT]) as sub:
            assert sub.honored.resource_subscriptions == [DOCUMENT]
            bearer = writer["session_id"]
            read = (await live.call("GET", "/workspace/read?region=Plan/Risks", bearer)).json()
            proposal = (await live.call("POST", "/workspace/propose", bearer, {
                "region": "Plan/Risks", "base_version": read["version"], "summary": "a risk",
                "content": "## Risks\n\nThe SDK might disagree.\n"})).json()
            await live.call("POST", "/workspace/proposal/review", live.host_session,
                            {"proposal_id": proposal["proposal_id"],
                                    "revision": proposal["revision"], "decision": "approve"})
            committed = await live.call("POST", "/workspace/commit", bearer,
                                        {"proposal_id": proposal["proposal_id"]})
            assert committed.status == 200, committed.body
            with trio.fail_after(5):
                async for event in sub:
                    received.append(event)
                    break
        reread = await client.read_resource(DOCUMENT)
    assert DOCUMENT in repr(received[0])
    assert "The SDK might disagree." in reread.contents[0].text  # type: ignore[union-attr]


async def test_the_sdks_legacy_initialize_is_refused_with_32022_by_default(live: LiveRoom) -> None:
    """A room started the default way speaks 2026-07-28 only: the SDK's legacy mode (initialize)
    is refused with UnsupportedProtocolVersionError; older clients use the `ce mcp` bridge."""
    agent = await live.join("sdk-legacy")
    with pytest.raises(BaseException) as refused:
        async with sdk_client(live, agent["session_id"], mode="legacy") as client:
            await client.list_tools()
    errors = _leaves(refused.value)
    assert any(getattr(getattr(e, "error", None), "code", None) == -32022 for e in errors), errors


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]
