"""Raw-socket stream openers for the stream-cap attack (the suite's test and tools/hostile).

Each opener sends one request on its own TCP connection and reads the answer's
head: a stream that opened stays open on its socket (the caller closes it),
a refused one has its status and JSON body read. Plain blocking sockets, so
the attacker is a different thing than the room's trio loop.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any, Final

MCP_VERSION: Final = "2026-07-28"
WS_HEADERS: Final = ("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")


class Opened:
    """One attempt: its status, headers and (for a refusal) JSON body; `sock` while open."""

    def __init__(self, sock: socket.socket, status: int, headers: dict[str, str], body: Any) -> None:
        self.sock = sock
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def open(self) -> bool:
        """The stream is being served: its head is in, or (a long-poll) it is still held."""
        return self.status in (HELD, 101, 200)

    def close(self) -> None:
        self.sock.close()


def _request(kind: str, bearer: str, cursor: int) -> bytes:
    auth = f"Authorization: Bearer {bearer}\r\n"
    if kind == "sse":
        return f"GET /workspace/observe HTTP/1.1\r\nHost: commonroom\r\n{auth}\r\n".encode()
    if kind == "ws":
        return f"GET /workspace/observe/ws HTTP/1.1\r\nHost: commonroom\r\n{auth}{WS_HEADERS}\r\n".encode()
    if kind == "wait":
        return (f"GET /workspace/wait?cursor={cursor}&timeout_seconds=25 HTTP/1.1\r\n"
                f"Host: commonroom\r\n{auth}\r\n").encode()
    if kind == "mcp":
        return (f"GET /mcp HTTP/1.1\r\nHost: commonroom\r\n{auth}Accept: text/event-stream\r\n"
                f"MCP-Protocol-Version: {MCP_VERSION}\r\n\r\n").encode()
    if kind == "listen":
        meta = {"io.modelcontextprotocol/protocolVersion": MCP_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "attack", "version": "0"}}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
            "notifications": {"resourceSubscriptions": ["workspace://status"]}, "_meta": meta}}).encode()
        return (f"POST /mcp HTTP/1.1\r\nHost: commonroom\r\n{auth}Content-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MCP_VERSION}\r\n"
                f"Mcp-Method: subscriptions/listen\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    raise ValueError(kind)


KINDS: Final = ("sse", "ws", "wait", "mcp", "listen")
HELD: Final = 0
"""The status of a long-poll still held: it answers only when something happens (or at 25 s)."""


def attempt(port: int, kind: str, bearer: str, *, cursor: int = 0, timeout: float = 10.0) -> Opened:
    """Open one stream of `kind`; returns once its answer's head (and a refusal's body) is in."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(_request(kind, bearer, cursor))
        data = b""
        if kind == "wait":  # a held long-poll sends nothing; a refused one answers at once
            sock.settimeout(0.5)
            try:
                data = sock.recv(4096)
            except TimeoutError:
                sock.settimeout(timeout)
                return Opened(sock, HELD, {}, None)
            sock.settimeout(timeout)
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"{kind}: closed before an answer ({data[:80]!r})")
            data += chunk
    except BaseException:
        sock.close()
        raise
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    body: Any = None
    if status not in (101, 200):
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(4096)
            if not chunk:
                break
            rest += chunk
        body = json.loads(rest[:length]) if length else None
    return Opened(sock, status, headers, body)


def status_latency(call: Callable[[], int]) -> float:
    """Seconds one call took (it must answer 200)."""
    import time

    started = time.perf_counter()
    assert call() == 200
    return time.perf_counter() - started
