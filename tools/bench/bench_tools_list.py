"""`tools_list_kb` (TARGETS.md "MCP and the page"): what `tools/list` costs an agent's context.

Usage: ``.venv/bin/python tools/bench/bench_tools_list.py``

A room in its own process (`loadgen.room_server`, started the default way) on a copy of
`samples/idea.md`; one `POST /mcp tools/list` (2026-07-28) each as a default agent session
(the capabilities an invitation gives unless the host asks for more), a read-only session,
the host, and without a bearer (the public view). The figure is the answer's body in KB
(1,024 bytes), as the client receives it; tool counts beside. Target: <= 40 KB for the
default agent. Size, not time: the figure does not depend on the machine's load.

The last line is one JSON object.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import loadgen

REPO = Path(__file__).resolve().parents[2]
VERSION = "2026-07-28"
TARGET_KB = 40.0


def tools_list(port: int, bearer: str | None) -> tuple[int, int, str]:
    """(body bytes, tool count, cacheScope) of one tools/list."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
    lines = ["POST /mcp HTTP/1.1", f"Host: {loadgen.HOST}", "Content-Type: application/json",
             "Accept: application/json, text/event-stream", f"MCP-Protocol-Version: {VERSION}",
             "Mcp-Method: tools/list", f"Content-Length: {len(body)}", "Connection: close"]
    if bearer is not None:
        lines.append(f"Authorization: Bearer {bearer}")
    http = loadgen.Http(port)
    try:
        status, answer = http.raw(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    finally:
        http.close()
    if status != 200:
        raise SystemExit(f"tools/list answered {status}: {answer[:200]!r}")
    result = json.loads(answer)["result"]
    return len(answer), len(result["tools"]), str(result["cacheScope"])


def main() -> None:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tools-list-") as folder:
        doc = Path(folder) / "idea.md"
        shutil.copyfile(REPO / "samples" / "idea.md", doc)
        with loadgen.room_server(doc, None) as room:
            http = loadgen.Http(room.port)
            try:
                invite = http.call("POST", "/workspace/invite", {"capabilities": ["read"]},
                                   bearer=room.host_session)
                reader = http.call("POST", "/session/join", {"invite": invite["invitation"],
                                                             "name": "reader"})["session_id"]
            finally:
                http.close()
            sessions = {"default_agent": room.join("agent"), "read_only": reader,
                        "host": room.host_session, "public": None}
            for who, bearer in sessions.items():
                size, count, scope = tools_list(room.port, bearer)
                kb = round(size / 1024, 1)
                figures[f"tools_list_kb_{who}"] = kb
                figures[f"tools_{who}"] = count
                print(f"tools/list as {who}: {kb} KB, {count} tools, cacheScope {scope}", flush=True)
    figures["tools_list_kb"] = figures["tools_list_kb_default_agent"]
    figures["target_kb"] = TARGET_KB
    figures["ok"] = figures["tools_list_kb"] <= TARGET_KB
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
