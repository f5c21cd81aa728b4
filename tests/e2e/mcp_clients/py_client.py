"""The official Python MCP SDK doing the room's whole loop; driven by tests/e2e/test_mcp_clients.py.

    python py_client.py MODE REGION

MODE: `modern` (SDK 2.x, MCP 2026-07-28 by URL: discover, no initialize), `url` (the SDK's
legacy initialize mode by URL: 2.x with mode="legacy", or 1.x) or `stdio` (the same older
mode through the `ce mcp` bridge). The URL and the bearer come in MCP_TEST_URL and
MCP_TEST_BEARER; for `stdio`, MCP_TEST_CE is the `ce` to start, which reads the room from
CE_INVITATION and CE_SESSION (an env block, as `ce mcp config` prints it: no secret on a
command line). Runs with `mcp` 1.x (its own venv: it cannot share one with 2.x) or 2.x.

The loop: list tools, read REGION, check it out, propose, hold `workspace_proposal_wait`
until a person approves (the host's `ce review`), commit, release, subscribe to the region
and see another agent's commit there. Prints one JSON line per step on stdout. Imports
nothing of commonroom: it is a client like any other.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anyio
import mcp

SDK_VERSION = version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])
BRIDGE_ENV = ("CE_INVITATION", "CE_SESSION", "PATH", "HOME", "XDG_CONFIG_HOME")


def say(step: str, **fields: Any) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


def structured(result: Any) -> dict[str, Any]:
    if result.isError if hasattr(result, "isError") else result.is_error:
        raise SystemExit(f"tool error: {result.content[0].text}")
    content = result.structuredContent if hasattr(result, "structuredContent") else result.structured_content
    assert isinstance(content, dict)
    return content


def notified_uri(message: Any) -> str | None:
    """The URI of a notifications/resources/updated (either SDK line's types), else None."""
    root = getattr(message, "root", message)
    if getattr(root, "method", None) != "notifications/resources/updated":
        return None
    return str(root.params.uri)


async def connect(stack: AsyncExitStack, mode: str, handler: Any, session_ids: list[str]) -> Any:
    """A connected client of this SDK line in `mode`, its session id recorded from the answers."""

    async def record(response: Any) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id and session_id not in session_ids:
            session_ids.append(session_id)

    if mode == "stdio":
        bridge = mcp.StdioServerParameters(
            command=os.environ["MCP_TEST_CE"], args=["mcp", "--name", f"py-sdk-{SDK_MAJOR}"],
            env={key: os.environ[key] for key in BRIDGE_ENV if key in os.environ})
        if SDK_MAJOR >= 2:
            client = mcp.Client(bridge, mode="legacy", message_handler=handler)
            await stack.enter_async_context(client)
            return client
        from mcp.client.stdio import stdio_client

        read, write = await stack.enter_async_context(stdio_client(bridge))
        session = await stack.enter_async_context(mcp.ClientSession(read, write, message_handler=handler))
        await session.initialize()
        return session
    url, headers = os.environ["MCP_TEST_URL"], {"Authorization": f"Bearer {os.environ['MCP_TEST_BEARER']}"}
    if SDK_MAJOR >= 2:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=headers, event_hooks={"response": [record]})
        client = mcp.Client(streamable_http_client(url, http_client=http),
                            mode="auto" if mode == "modern" else "legacy", message_handler=handler)
        await stack.enter_async_context(client)
        return client
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    http = await stack.enter_async_context(httpx.AsyncClient(headers=headers, event_hooks={"response": [record]}))
    read, write, _ = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(mcp.ClientSession(read, write, message_handler=handler))
    await session.initialize()
    return session


async def wait_for_review(client: Any, proposal_id: str) -> tuple[dict[str, Any], int]:
    """Hold the wait tool until the proposal left pending: (the proposal, how many calls)."""
    calls = 0
    while True:
        calls += 1
        waited = structured(await client.call_tool("workspace_proposal_wait",
                                                   {"proposal_id": proposal_id, "timeout_seconds": 25}))
        if not waited["waiting"]:
            return waited["proposal"], calls


async def main(mode: str, region: str) -> None:
    uri = f"commonroom://workspace/region/{region}"
    updated = anyio.Event()
    session_ids: list[str] = []

    async def handler(message: Any) -> None:
        if notified_uri(message) == uri:
            updated.set()

    async with AsyncExitStack() as stack:
        client = await connect(stack, mode, handler, session_ids)
        negotiated = client.protocol_version if SDK_MAJOR >= 2 else None
        discovered = None
        if mode == "modern":
            discovered = (await client.session.discover()).supported_versions
        say("initialized", sdk=SDK_VERSION, protocolVersion=negotiated, supported=discovered,
            sessionId=session_ids[0] if session_ids else None)
        tools = (await client.list_tools()).tools
        say("tools", count=len(tools), names=[tool.name for tool in tools])
        read = structured(await client.call_tool("workspace_read", {"region": region}))
        say("read", version=read["version"])
        lease = structured(await client.call_tool("workspace_checkout", {"region": region}))
        proposal = structured(await client.call_tool("workspace_propose", {
            "region": region, "base_version": read["version"], "summary": "from the Python SDK",
            "content": read["content"].rstrip() + f"\n\nThe Python SDK {SDK_MAJOR}.x was here.\n"}))
        say("proposed", proposal_id=proposal["proposal_id"])
        decided, calls = await wait_for_review(client, proposal["proposal_id"])
        say("reviewed", status=decided["status"], calls=calls)
        committed = structured(await client.call_tool("workspace_commit",
                                                      {"proposal_id": proposal["proposal_id"]}))
        structured(await client.call_tool("workspace_release", {"lease_id": lease["lease_id"]}))
        say("committed", version=committed["version"])
        if mode == "modern":  # 2026-07-28: the opt-in stream, no session
            async with client.listen(resource_subscriptions=[uri]) as listening:
                say("subscribed", uri=uri)
                with anyio.fail_after(20):
                    async for event in listening:
                        if uri in repr(event):
                            break
        else:
            await client.subscribe_resource(uri)
            say("subscribed", uri=uri)
            with anyio.fail_after(20):
                await updated.wait()
        say("notified", uri=uri)
    say("closed")  # leaving the context ended the session (DELETE by URL, EOF to the bridge)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
