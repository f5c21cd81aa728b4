"""Task surfaces over MCP and the Python client (docs/spec/PROTOCOL.md 20): the tools come from
the table, an agent publishes its task's live view and app with them, a refusal is the same
error object with its path, and an app request with no page hosting the app is refused at once."""

from __future__ import annotations

import json
from typing import Any

import pytest

import commonroom
from commonroom.mcp.tools import tool as tool_of
from commonroom.protocol.operations import OPERATIONS_BY_NAME
from tests.service.conftest import LiveRoom
from tests.service.mcp_helpers import rpc, tool

OPERATIONS = ("task.live_view", "task.app", "task.app_state", "task.app_request", "task.surfaces")


def tool_name(operation: str) -> str:
    """The MCP tool of an operation, as the room names it (the one place a test asks)."""
    name: str = tool_of(OPERATIONS_BY_NAME[operation])["name"]
    return name


async def accepted_task(live: LiveRoom) -> tuple[str, str]:
    """(the agent's bearer, its task id): the host handed it a task and it accepted."""
    agent = await live.join("drafter")
    handoff = await live.call("POST", "/workspace/handoff", live.host_session,
                              {"to_participant_id": agent["participant_id"], "summary": "Goals"})
    task = await live.call("POST", "/workspace/handoff/respond", agent["session_id"],
                           {"handoff_id": handoff.json()["handoff_id"], "decision": "accept"})
    return agent["session_id"], task.json()["task_id"]


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True, result
    error: dict[str, Any] = json.loads(result["content"][0]["text"])
    return error


async def test_the_agent_publishes_and_asks_with_the_tools(live: LiveRoom) -> None:
    bearer, task_id = await accepted_task(live)
    listed = (await rpc(live, "tools/list", bearer=bearer)).json()["result"]["tools"]
    tools = {t["name"]: t for t in listed}
    for operation in OPERATIONS:
        assert tool_name(operation) in tools, operation
    schema = tools[tool_name("task.live_view")]["inputSchema"]
    assert schema["required"] == ["task_id"] and "clear" in schema["properties"]
    assert "surface_id" in schema["properties"]["surface"]["description"]

    view = {"surface_id": "steps", "revision": 1, "data": {"done": 2},
            "root": {"type": "Column", "children": [{"type": "Value", "path": "done"}]}}
    published = await tool(live, tool_name("task.live_view"), bearer, task_id=task_id, surface=view)
    assert published["structuredContent"]["live_view"]["revision"] == 1
    refused = await tool(live, tool_name("task.live_view"), bearer, task_id=task_id,
                         surface={**view, "revision": 2, "root": {"type": "Marquee", "children": []}})
    error = error_of(refused)
    assert error["error"] == "invalid_request" and error["details"]["path"] == "root.type"

    bundle = {"version": 1, "manifest": {"title": "Chooser", "networkOrigins": []},
              "html": "<button>A</button>", "css": "", "js": "", "initialState": 0}
    app = await tool(live, tool_name("task.app"), bearer, task_id=task_id, bundle=bundle)
    assert app["structuredContent"]["revision"] == 1
    state = await tool(live, tool_name("task.app_state"), bearer, task_id=task_id, revision=0, state=1)
    assert state["structuredContent"]["revision"] == 1
    stale = error_of(await tool(live, tool_name("task.app_state"), bearer, task_id=task_id,
                                revision=0, state=2))
    assert stale["error"] == "stale_version" and stale["details"]["current_revision"] == 1

    asked = error_of(await tool(live, tool_name("task.app_request"), bearer, task_id=task_id,
                                payload={"question": "A?"}))
    assert asked["error"] == "transport_unavailable" and asked["details"]["reason"] == "no_app_host"
    read = await tool(live, tool_name("task.surfaces"), bearer, task_id=task_id)
    [surfaces] = read["structuredContent"]["surfaces"]
    assert surfaces["live_view"]["data"] == {"done": 2} and surfaces["app_state"]["state"] == 1


async def test_the_python_client_publishes_sets_and_asks(live: LiveRoom) -> None:
    invitation = live.ready.invitation
    host = commonroom.AsyncClient(invitation, session=live.host_session)
    async with await commonroom.AsyncClient.join(invitation, name="bot") as bot:
        assert bot.joined is not None
        handoff = await host.request_handoff(bot.joined.participant_id, "Goals")
        task_id = (await bot.respond_handoff(handoff.handoff_id, "accept")).task_id
        view = {"surface_id": "steps", "revision": 1, "data": {"done": 0},
                "root": {"type": "Value", "path": "done"}}
        published = await bot.publish_live_view(task_id, view)
        assert published.live_view is not None and published.live_view.revision == 1
        with pytest.raises(commonroom.InvalidRequest) as refused:
            await bot.publish_live_view(task_id, view)
        assert refused.value.details["path"] == "revision"
        assert (await bot.publish_live_view(task_id, clear=True)).cleared is True
        app = await bot.publish_app(task_id, {"version": 1, "manifest": {"title": "A", "networkOrigins": []},
                                              "html": "", "css": "", "js": "", "initialState": [1]})
        assert app.revision == 1 and app.state_revision == 0
        state = await host.set_app_state(task_id, 0, {"picked": "A"})
        assert state.revision == 1 and state.state == {"picked": "A"}
        with pytest.raises(commonroom.StaleVersion):
            await bot.set_app_state(task_id, 0, {"picked": "B"})
        with pytest.raises(commonroom.TransportUnavailable) as asked:
            await bot.ask_app(task_id, {"question": "A?"})
        assert asked.value.details["reason"] == "no_app_host"
        [surfaces] = (await bot.task_surfaces(task_id)).surfaces
        assert surfaces.live_view is None and surfaces.app_state is not None
        assert surfaces.app_state.state == {"picked": "A"}
