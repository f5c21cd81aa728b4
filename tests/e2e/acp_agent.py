"""A scripted ACP agent on the official ACP Python SDK's agent side (`agent-client-protocol`).

`ce agent ... -- python acp_agent.py` runs it; it acts in the room only through the MCP server
`session/new` gives it (the `ce mcp` bridge), with the official MCP Python SDK's stdio client.
What it does depends on the prompt:

- "tighten Risks": read Risks, check it out, propose a tighter one;
- "approved your proposal pr_…": commit that proposal;
- "ask permission": ask the client (`session/request_permission`), then say in the room what
  came back;
- "take your time": wait until cancelled (`session/cancel`);
- anything else: nothing in the room.

Every prompt, permission outcome and cancel is one JSON line in $ACP_AGENT_LOG. Imports nothing
of commonroom: it is an agent like any other.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from contextlib import AsyncExitStack
from typing import Any

import acp
import mcp
from acp import schema
from mcp.client.stdio import StdioServerParameters

# The room's MCP tool names (each operation's name with `.` written `_`), in one place.
TOOLS = {
    "read": "workspace_read",
    "checkout": "workspace_checkout",
    "propose": "workspace_propose",
    "commit": "workspace_commit",
    "message": "workspace_message",
}
TIGHT_RISKS = "## Risks\n\n- Scope creep: one page, no more.\n\n"


def log(**fields: Any) -> None:
    path = os.environ.get("ACP_AGENT_LOG")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(fields) + "\n")


class ScriptedAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.stack = AsyncExitStack()
        self.room: Any = None
        self.cancelled = asyncio.Event()
        self.mcp_servers: list[Any] = []

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> schema.InitializeResponse:
        log(event="initialize", pid=os.getpid(), protocol_version=protocol_version,
            client=client_info.name if client_info else None)
        return schema.InitializeResponse(protocol_version=acp.PROTOCOL_VERSION,
                                         agent_capabilities=schema.AgentCapabilities())

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None,
                          **kwargs: Any) -> schema.NewSessionResponse:
        self.mcp_servers = list(mcp_servers or [])
        server = self.mcp_servers[0]
        log(event="new_session", cwd=cwd, command=server.command, args=server.args,
            env_names=sorted(e.name for e in server.env))
        params = StdioServerParameters(command=server.command, args=list(server.args),
                                       env={e.name: e.value for e in server.env})
        self.room = await self.stack.enter_async_context(mcp.Client(params, mode="legacy"))
        tools = await self.room.list_tools()
        log(event="tools", names=sorted(t.name for t in tools.tools))
        return schema.NewSessionResponse(session_id="sess-1")

    async def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.room.call_tool(TOOLS[name], arguments)
        if result.is_error:
            raise RuntimeError(f"{name}: {result.content[0].text}")
        content = result.structured_content
        assert isinstance(content, dict)
        return content

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, acp.update_agent_message_text(text))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> schema.PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        log(event="prompt", text=text)
        if "tighten Risks" in text:
            await self.conn.session_update(session_id, acp.start_tool_call(
                "call-1", "Read Risks", kind="read"))
            read = await self.tool("read", region="Risks")
            await self.tool("checkout", region="Risks")
            proposal = await self.tool("propose", region="Risks", base_version=read["version"],
                                       summary="tighter Risks", content=TIGHT_RISKS)
            log(event="proposed", proposal_id=proposal["proposal_id"])
            await self.say(session_id, "proposed a tighter Risks")
        approved = re.search(r"approved your proposal (pr_[A-Za-z0-9_-]+)", text)
        if approved:
            committed = await self.tool("commit", proposal_id=approved.group(1))
            log(event="committed", version=committed["version"])
        if "ask permission" in text:
            answer = await self.conn.request_permission(
                session_id,
                schema.ToolCallUpdate(tool_call_id="call-2", title="Run the tests",
                                      kind="execute", raw_input={"command": "pytest -q"}),
                [schema.PermissionOption(option_id="allow-once", name="Allow once",
                                         kind="allow_once"),
                 schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once")])
            outcome = answer.outcome
            chosen = getattr(outcome, "option_id", None) or outcome.outcome
            log(event="permission", outcome=chosen)
            await self.tool("message", text=f"permission outcome: {chosen}")
        if "take your time" in text:
            self.cancelled.clear()
            await self.cancelled.wait()
            log(event="cancelled")
            return schema.PromptResponse(stop_reason="cancelled")
        return schema.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log(event="cancel")
        self.cancelled.set()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None


async def main() -> None:
    agent = ScriptedAgent()
    try:
        await acp.run_agent(agent)
    finally:
        await agent.stack.aclose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
