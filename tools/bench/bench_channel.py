"""`ce mcp --channel`'s latency: room text addressed to the session until its
`notifications/claude/channel` reaches the MCP client (issue 35: within 300 ms).

Usage: ``python tools/bench/bench_channel.py [--messages 50]``

A real ``ce serve``; ``ce mcp --channel`` under the official MCP Python SDK's stdio transport
(``stdio_client``; the raw messages, as Claude Code reads them). Each message is posted by the
host (``POST /workspace/message``, addressed) after the previous notification arrived; the time
from just before the post until the notification is read, p50 and p95. The last line is one
JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

ROOT = Path(__file__).resolve().parents[2]
CE = str(Path(sys.executable).parent / "ce")


def http(port: int, method: str, path: str, bearer: str | None, body: Any = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers=headers)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


async def measure(port: int, host: str, invitation: str, session: str, pid: str, count: int,
                  errlog: Path) -> list[float]:
    params = StdioServerParameters(command=CE, args=["mcp", "--channel"], env={
        **os.environ, "CE_INVITATION": invitation, "CE_SESSION": session})
    samples: list[float] = []
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            await write.send(SessionMessage(t.JSONRPCRequest(
                jsonrpc="2.0", id=1, method="initialize", params={
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"}})))
            await read.receive()
            while "channel open" not in errlog.read_text():
                await anyio.sleep(0.05)
            for n in range(count):
                # alternate senders: the loop guard allows 20 addressed messages per pair in 5 min
                sent = time.perf_counter()
                await anyio.to_thread.run_sync(lambda n=n: http(
                    port, "POST", "/workspace/message", host[n % len(host)],
                    {"text": f"ping {n}", "to": [pid]}))
                while True:
                    item = await read.receive()
                    message = item.message.model_dump(by_alias=True, exclude_none=True)
                    if message.get("method") == "notifications/claude/channel":
                        samples.append((time.perf_counter() - sent) * 1000)
                        break
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=50)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-channel-"))
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp / "config")}
    doc = tmp / "idea.md"
    shutil.copyfile(ROOT / "samples" / "idea.md", doc)
    serve = subprocess.Popen([CE, "serve", str(doc), "--json", "--port-owner", "0",
                              "--port-ingress", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        assert serve.stdout is not None
        ready = json.loads(serve.stdout.readline())
        port = int(ready["ingress_port"])
        sys.path.insert(0, str(ROOT / "src"))
        from commonroom.credentials import read_credentials

        creds = read_credentials(doc)
        assert creds is not None
        senders = [str(creds.host_session)]
        for name in ("alice", "bob"):
            invite = http(port, "POST", "/workspace/invite", senders[0], {})["invitation"]
            senders.append(http(port, "POST", "/session/join", None,
                                {"invite": invite, "name": name})["session_id"])
        invite = http(port, "POST", "/workspace/invite", senders[0], {})["invitation"]
        joined = http(port, "POST", "/session/join", None, {"invite": invite, "name": "claude"})
        samples = anyio.run(measure, port, senders, invite, joined["session_id"],
                            joined["participant_id"], args.messages, tmp / "bridge.err")
        samples.sort()
        figures = {"channel_ms_p50": statistics.median(samples),
                   "channel_ms_p95": samples[max(0, int(len(samples) * 0.95) - 1)],
                   "channel_ms_max": samples[-1], "messages": len(samples)}
        for key, value in figures.items():
            print(f"  {key}: {value:.1f}" if isinstance(value, float) else f"  {key}: {value}")
        print(json.dumps(figures))
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(10)
        except subprocess.TimeoutExpired:
            serve.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
