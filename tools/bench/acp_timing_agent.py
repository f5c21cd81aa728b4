"""A minimal ACP agent on the official ACP SDK's agent side, for ``bench_resident.py``.

It writes a JSON line to $ACP_TIMING_LOG with the wall-clock time each ``session/prompt``
reaches it, then answers the turn with one room message through the MCP server
``session/new`` gave it (an action in the room, so the runtime's idle-turn guard never pauses
it), and logs that the turn is answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from contextlib import AsyncExitStack
from typing import Any

import acp
import mcp
from acp import schema
from mcp.client.stdio import StdioServerParameters

MESSAGE_TOOL = "workspace_message"  # the room's MCP tool name (one place)


def log(**fields: Any) -> None:
    with open(os.environ["ACP_TIMING_LOG"], "a") as out:
        out.write(json.dumps(fields) + "\n")


class TimingAgent:
    def __init__(self) -> None:
        self.stack = AsyncExitStack()
        self.room: Any = None
        self.turns = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=acp.PROTOCOL_VERSION,
                                         agent_capabilities=schema.AgentCapabilities())

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None,
                          **kwargs: Any) -> schema.NewSessionResponse:
        server = (mcp_servers or [])[0]
        params = StdioServerParameters(command=server.command, args=list(server.args),
                                       env={e.name: e.value for e in server.env})
        self.room = await self.stack.enter_async_context(mcp.Client(params, mode="legacy"))
        await self.room.list_tools()
        log(event="ready")
        return schema.NewSessionResponse(session_id="timing")

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> schema.PromptResponse:
        at = time.time()
        self.turns += 1
        log(event="prompt", at=at, n=self.turns)
        await self.room.call_tool(MESSAGE_TOOL, {"text": f"turn {self.turns} done"})
        log(event="answered", n=self.turns)
        return schema.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


async def main() -> None:
    agent = TimingAgent()
    try:
        await acp.run_agent(agent)
    finally:
        await agent.stack.aclose()


if __name__ == "__main__":
    asyncio.run(main())
