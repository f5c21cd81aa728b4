"""The official Python MCP SDK over streamable HTTP in its legacy (initialize) mode, doing the
room's whole loop; driven by tests/e2e/test_mcp_clients.py.

    python py_client.py URL BEARER REGION

Runs with `mcp` 1.x (its own venv: it cannot share one with 2.x) or `mcp` 2.x (mode="legacy").
Prints one JSON line per step on stdout; waits for a line on stdin where the loop needs a
person (the host's approval) or another agent (a commit in REGION). Imports nothing of
commonroom: it is a client like any other.
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anyio
import mcp

SDK_VERSION = version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])


def say(step: str, **fields: Any) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


async def wait_for(word: str) -> None:
    line = await anyio.to_thread.run_sync(sys.stdin.readline)
    if line.strip() != word:
        raise SystemExit(f"expected {word!r} on stdin, got {line!r}")


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


async def connect(stack: AsyncExitStack, url: str, bearer: str, handler: Any, session_ids: list[str]) -> Any:
    """A connected client of this SDK line, with its session id recorded from the answers."""

    async def record(response: Any) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id and session_id not in session_ids:
            session_ids.append(session_id)

    headers = {"Authorization": f"Bearer {bearer}"}
    if SDK_MAJOR >= 2:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=headers, event_hooks={"response": [record]})
        client = mcp.Client(streamable_http_client(url, http_client=http), mode="legacy",
                            message_handler=handler)
        await stack.enter_async_context(client)
        return client
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    http = await stack.enter_async_context(httpx.AsyncClient(headers=headers, event_hooks={"response": [record]}))
    read, write, _ = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(mcp.ClientSession(read, write, message_handler=handler))
    await session.initialize()
    return session


async def main(url: str, bearer: str, region: str) -> None:
    uri = f"commonroom://workspace/region/{region}"
    updated = anyio.Event()
    session_ids: list[str] = []

    async def handler(message: Any) -> None:
        if notified_uri(message) == uri:
            updated.set()

    async with AsyncExitStack() as stack:
        client = await connect(stack, url, bearer, handler, session_ids)
        negotiated = client.protocol_version if SDK_MAJOR >= 2 else None
        say("initialized", sdk=SDK_VERSION, protocolVersion=negotiated,
            sessionId=session_ids[0] if session_ids else None)
        tools = (await client.list_tools()).tools
        say("tools", count=len(tools), first=tools[0].name)
        read = structured(await client.call_tool("workspace_read", {"region": region}))
        say("read", version=read["version"])
        lease = structured(await client.call_tool("workspace_checkout", {"region": region}))
        proposal = structured(await client.call_tool("workspace_propose", {
            "region": region, "base_version": read["version"], "summary": "from the Python SDK",
            "content": read["content"].rstrip() + f"\n\nThe Python SDK {SDK_MAJOR}.x was here.\n"}))
        say("proposed", proposal_id=proposal["proposal_id"])
        await wait_for("approved")
        committed = structured(await client.call_tool("workspace_commit",
                                                      {"proposal_id": proposal["proposal_id"]}))
        structured(await client.call_tool("workspace_release", {"lease_id": lease["lease_id"]}))
        say("committed", version=committed["version"])
        await client.subscribe_resource(uri)
        say("subscribed", uri=uri)
        with anyio.fail_after(20):
            await updated.wait()
        say("notified", uri=uri)
    say("closed")  # leaving the context sent DELETE: the session is over


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
