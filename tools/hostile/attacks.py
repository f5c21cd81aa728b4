"""Hostile clients against a room's ingress, byte for byte (issue 14).

Each attack is an async function of the ingress port (and a bearer where it
needs one) and a size; it runs the attack and returns what the attacker saw,
so a caller can check the room's side of the contract: it refuses with the
protocol's JSON error shape (or hypercorn's empty 400 for bytes that are not
HTTP), never a 5xx, never a traceback, and closes what it must. `probe` is
the well-behaved client whose latency the tool reports during each attack.

Used by tests/reliability/test_hostile.py (small sizes, short room timeouts)
and tools/hostile/hostile.py (full sizes against a real `ce serve`).
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
from collections.abc import Iterable
from typing import Any, Final

import attrs
import trio

from commonroom.protocol.operations import OPERATIONS
from commonroom.wire import aio

MIB: Final = 1024 * 1024
HEAD_END: Final = b"\r\n\r\n"


@attrs.frozen
class Answer:
    """One raw HTTP answer as the attacker read it (status 0: the room closed without one)."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def shape_problem(answer: Answer) -> str | None:
    """Why `answer` breaks the error contract, or None when it keeps it."""
    if answer.status >= 500:
        return f"status {answer.status}"
    if b"Traceback" in answer.body or b"<html" in answer.body.lower():
        return "a traceback or HTML in the body"
    if answer.status < 400:
        return None
    if not answer.body:
        # hypercorn's own answer to bytes h11 cannot parse: an empty 400.
        return None if answer.status in (400, 408, 431) else f"empty {answer.status}"
    try:
        wire = answer.json()
    except ValueError:
        return "an error body that is not JSON"
    if "jsonrpc" in wire:  # /mcp answers JSON-RPC errors
        return None if isinstance(wire.get("error"), dict) else "a JSON-RPC answer without error"
    if not (isinstance(wire.get("error"), str) and isinstance(wire.get("message"), str)
            and isinstance(wire.get("details"), dict)):
        return f"not the protocol's error shape: {wire}"
    return None


async def connect(port: int, *, receive_buffer: int | None = None) -> trio.SocketStream:
    if receive_buffer is None:
        return await trio.open_tcp_stream("127.0.0.1", port)
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)  # before connect: the window
    await sock.connect(("127.0.0.1", port))
    return trio.SocketStream(sock)


async def read_answer(stream: trio.abc.ReceiveStream, *, max_body: int = MIB) -> Answer:
    """Read one answer framed by Content-Length (of a stream, the head); status 0: no answer."""
    data = b""
    try:
        while HEAD_END not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return Answer(0, {}, data)
            data += chunk
        head, _, body = data.partition(HEAD_END)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            return Answer(status, headers, body)  # a stream (SSE, WebSocket): the head says enough
        length = min(int(headers["content-length"]), max_body)
        while len(body) < length:
            chunk = await stream.receive_some(65536)
            if not chunk:
                break
            body += chunk
        return Answer(status, headers, body[:length])
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return Answer(0, {}, data)


async def send_quietly(stream: trio.abc.SendStream, data: bytes, *, piece: int = 65536) -> None:
    """Send `data`; a room that answered early and closed is not an error."""
    try:
        for start in range(0, len(data), piece):
            await stream.send_all(data[start:start + piece])
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def exchange(port: int, request: bytes, *, timeout: float = 10.0) -> Answer:
    """Send raw request bytes on a fresh connection while reading the one answer."""
    with trio.fail_after(timeout):
        stream = await connect(port)
        async with stream:
            answer: list[Answer] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_quietly, stream, request)

                async def read() -> None:
                    answer.append(await read_answer(stream))
                    nursery.cancel_scope.cancel()

                nursery.start_soon(read)
            return answer[0]


def raw_request(method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]],
                body: bytes = b"") -> bytes:
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: commonroom", b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    if body:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + HEAD_END + body


def bearer_header(bearer: str) -> tuple[bytes, bytes]:
    return b"Authorization", b"Bearer " + bearer.encode()


JSON_TYPE: Final = (b"Content-Type", b"application/json")


# -- the well-behaved client ------------------------------------------------------------


async def probe(port: int, bearer: str, until: trio.Event, *, interval: float) -> list[float]:
    """GET /workspace/status every `interval` s until `until`: each latency (inf: it failed)."""
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {bearer}"}
    while not until.is_set():
        started = trio.current_time()
        try:
            with trio.fail_after(10):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                answer = await aio.request(stream, "GET", "/workspace/status", headers=headers)
            latencies.append(trio.current_time() - started if answer.status == 200 else math.inf)
        except (trio.TooSlowError, OSError, Exception):
            latencies.append(math.inf)
        with trio.move_on_after(interval):
            await until.wait()
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


# -- the attacks -------------------------------------------------------------------------


async def slowloris(port: int, *, connections: int, byte_every: float,
                    give_up_after: float) -> list[float | None]:
    """Request heads sent a byte every `byte_every` s: when the room cut each (None: never)."""
    head = raw_request(b"GET", b"/workspace/status", [(b"X-Padding", b"p" * 4096)])
    cut_after: list[float | None] = []

    async def one() -> None:
        started = trio.current_time()
        stream = await connect(port)
        async with stream:
            with trio.move_on_after(give_up_after):
                async with trio.open_nursery() as nursery:

                    async def watch() -> None:
                        try:
                            while await stream.receive_some(4096):
                                pass
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            pass
                        cut_after.append(trio.current_time() - started)
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(watch)
                    for byte in head:
                        try:
                            await stream.send_all(bytes([byte]))
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            await trio.sleep_forever()  # the watcher reports the cut
                        await trio.sleep(byte_every)
                    await trio.sleep_forever()
                return
            cut_after.append(None)

    async with trio.open_nursery() as nursery:
        for _ in range(connections):
            nursery.start_soon(one)
    return cut_after


async def half_open(port: int, *, connections: int, hold: float) -> tuple[int, int]:
    """Open `connections` that never finish a request; (opened, closed by the room within `hold`).

    A third send nothing, a third a partial head, a third a partial head and
    then FIN (half-closed: they still read).
    """
    streams: list[trio.SocketStream] = []
    opened = 0
    try:
        for n in range(connections):
            try:
                stream = await connect(port)
            except OSError:
                break  # out of ports or descriptors on this side: report what was opened
            streams.append(stream)
            opened += 1
            if n % 3:
                await send_quietly(stream, b"POST /workspace/propose HTTP/1.1\r\nHost: comm")
            if n % 3 == 2:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_eof()
        closed = 0

        async def wait_closed(stream: trio.SocketStream) -> None:
            nonlocal closed
            try:
                while await stream.receive_some(4096):
                    pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            closed += 1

        with trio.move_on_after(hold):
            async with trio.open_nursery() as nursery:
                for stream in streams:
                    nursery.start_soon(wait_closed, stream)
        return opened, closed
    finally:
        for stream in streams:
            await stream.aclose()


async def chunked_overflow(port: int, bearer: str, *, size: int = MIB + 1) -> Answer:
    """A chunked body of `size` bytes (a valid-looking JSON string) to /workspace/propose."""
    head = (b"POST /workspace/propose HTTP/1.1\r\nHost: commonroom\r\nConnection: close\r\n"
            b"Authorization: Bearer " + bearer.encode() + b"\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    prefix = b'{"region": "Goals", "base_version": 1, "summary": "s", "content": "'
    payload = prefix + b"x" * (size - len(prefix) - 2) + b'"}'  # JSON, `size` bytes
    piece = 64 * 1024
    chunks = b"".join(
        f"{len(payload[i:i + piece]):x}\r\n".encode() + payload[i:i + piece] + b"\r\n"
        for i in range(0, len(payload), piece))
    return await exchange(port, head + chunks + b"0\r\n\r\n")


def nested_bodies(size: int) -> dict[str, bytes]:
    """Bodies of about `size` bytes that nest as deep as that allows."""
    half = size // 2
    return {
        "arrays": b"[" * half + b"]" * half,
        "objects in a field": b'{"region": ' + b'{"a": ' * (size // 7) + b"1" + b"}" * (size // 7 + 1),
        "unclosed": b'{"region": "Goals", "summary": ' + b"[" * (size - 40),
    }


async def deep_json(port: int, bearer: str, *, size: int) -> dict[str, Answer]:
    answers = {}
    for name, body in nested_bodies(size).items():
        answers[name] = await exchange(port, raw_request(
            b"POST", b"/workspace/propose", [bearer_header(bearer), JSON_TYPE], body))
    return answers


async def huge_arrays(port: int, bearer: str, *, items: int) -> dict[str, Answer]:
    many = b"[" + b",".join([b'"read"'] * items) + b"]"
    numbers = b"[" + b",".join([b"1"] * items) + b"]"
    bodies = {
        "top level": (b"/workspace/propose", numbers),
        "capabilities": (b"/workspace/invite", b'{"capabilities": ' + many + b"}"),
        "content": (b"/workspace/propose",
                    b'{"region": "Goals", "base_version": 1, "summary": "s", "content": ' + many + b"}"),
        "join capabilities": (b"/session/join", b'{"invite": "x", "name": "n", "capabilities": ' + many + b"}"),
        "mcp arguments": (b"/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
                          b'{"name": "workspace_status", "arguments": {"a": ' + numbers + b"}}}"),
    }
    answers = {}
    for name, (path, body) in bodies.items():
        headers = [bearer_header(bearer), JSON_TYPE]
        if path == b"/mcp":
            headers.append((b"Accept", b"application/json, text/event-stream"))
        answers[name] = await exchange(port, raw_request(b"POST", path, headers, body))
    return answers


BAD: Final = b"\xff\xfe\xc3\x28"
"""Bytes that are no UTF-8 (a lone continuation pair, then a broken two-byte sequence)."""


def _fields(params: type[Any]) -> list[str]:
    return [field.name for field in attrs.fields(params)] if attrs.has(params) else []


def invalid_utf8_requests(bearer: str) -> dict[str, bytes]:
    """Every operation's every field, then every header the room reads, holding non-UTF-8 bytes."""
    requests: dict[str, bytes] = {}
    auth = bearer_header(bearer)
    for op in OPERATIONS:
        path = op.path.encode()
        fields = _fields(op.params) or ["unknown"]
        for field in fields:
            name = field.encode()
            if op.method == "GET":
                requests[f"{op.name} ?{field}=%FF"] = raw_request(
                    b"GET", path + b"?" + name + b"=%FF%FE%C3%28", [auth])
                requests[f"{op.name} ?{field}=<raw>"] = raw_request(
                    b"GET", path + b"?" + name + b"=" + BAD, [auth])
            else:
                requests[f"{op.name} {field} value"] = raw_request(
                    b"POST", path, [auth, JSON_TYPE], b'{"' + name + b'": "' + BAD + b'"}')
                requests[f"{op.name} {field} in a list"] = raw_request(
                    b"POST", path, [auth, JSON_TYPE], b'{"' + name + b'": ["' + BAD + b'"]}')
        if op.method == "POST":
            requests[f"{op.name} key"] = raw_request(
                b"POST", path, [auth, JSON_TYPE], b'{"' + BAD + b'": 1}')
    targets = [(b"GET", b"/workspace/status"), (b"POST", b"/workspace/propose"),
               (b"POST", b"/session/join"), (b"POST", b"/mcp"), (b"GET", b"/workspace/observe"),
               (b"GET", b"/workspace/wait"), (b"GET", b"/workspace/observe/ws")]
    header_cases: list[tuple[str, list[tuple[bytes, bytes]]]] = [
        ("Authorization", [(b"Authorization", b"Bearer " + BAD)]),
        ("Authorization scheme", [(b"Authorization", BAD + b" " + bearer.encode())]),
        ("Origin", [auth, (b"Origin", b"http://" + BAD)]),
        ("Content-Type", [auth, (b"Content-Type", b"application/json; charset=" + BAD)]),
        ("Accept", [auth, (b"Accept", BAD)]),
        ("Last-Event-ID", [auth, (b"Last-Event-ID", BAD)]),
        ("Cookie", [auth, (b"Cookie", b"commonroom=" + BAD)]),
        ("Mcp-Session-Id", [auth, (b"Mcp-Session-Id", BAD)]),
        ("MCP-Protocol-Version", [auth, (b"MCP-Protocol-Version", BAD)]),
        ("Upgrade", [auth, (b"Connection", b"Upgrade"), (b"Upgrade", BAD)]),
        ("Sec-WebSocket-Key", [auth, (b"Connection", b"Upgrade"), (b"Upgrade", b"websocket"),
                               (b"Sec-WebSocket-Version", b"13"), (b"Sec-WebSocket-Key", BAD)]),
        ("X-Forwarded-For", [auth, (b"X-Forwarded-For", BAD)]),
        ("a header name", [auth, (b"X-" + BAD, b"1")]),
        ("Content-Length", [auth, (b"Content-Length", BAD)]),
    ]
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    for method, path in targets:
        for label, headers in header_cases:
            data = body if method == b"POST" and label != "Content-Length" else b""
            requests[f"{method.decode()} {path.decode()} {label}"] = raw_request(method, path, headers, data)
        # The Host header itself, and the request target.
        requests[f"{method.decode()} {path.decode()} Host"] = (
            method + b" " + path + b" HTTP/1.1\r\nHost: " + BAD + b"\r\nConnection: close\r\n"
            + auth[0] + b": " + auth[1] + HEAD_END)
        requests[f"{method.decode()} {path.decode()}<raw> target"] = raw_request(method, path + BAD, [auth])
        requests[f"{method.decode()} {path.decode()}%FF target"] = raw_request(method, path + b"%FF", [auth])
    return requests


async def invalid_utf8(port: int, bearer: str) -> dict[str, Answer]:
    answers = {}
    for name, request in invalid_utf8_requests(bearer).items():
        answers[name] = await exchange(port, request)
    return answers


async def never_reading_streams(port: int, bearer: str, *, streams: int) -> list[trio.SocketStream]:
    """Open SSE and WebSocket observers with tiny receive windows that never read past the head.

    The caller keeps them open while events flow, then closes them.
    """
    opened = []
    for n in range(streams):
        stream = await connect(port, receive_buffer=4096)
        if n % 2:
            extra = (b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
            path = b"/workspace/observe/ws?since_event_id=0"
        else:
            extra, path = b"", b"/workspace/observe?since_event_id=0"
        await stream.send_all(b"GET " + path + b" HTTP/1.1\r\nHost: commonroom\r\nAuthorization: Bearer "
                              + bearer.encode() + b"\r\n" + extra + b"\r\n")
        with trio.fail_after(10):
            head = await stream.receive_some(512)
        if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.1 101")):
            raise AssertionError(f"the stream did not open: {head[:80]!r}")
        opened.append(stream)
    return opened


WS_UPGRADE: Final = (b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")


async def websocket_message(port: int, bearer: str, *, size: int, offer_deflate: bool = True) -> bytes:
    """Open the observe WebSocket (offering permessage-deflate) and send one `size`-byte message.

    The frame is streamed a MiB at a time (masked with a zero key, so the
    payload goes as is); a room that closes early is not an error. Returns the
    handshake's response head.
    """
    stream = await connect(port)
    async with stream:
        offer = b"Sec-WebSocket-Extensions: permessage-deflate\r\n" if offer_deflate else b""
        await stream.send_all(b"GET /workspace/observe/ws HTTP/1.1\r\nHost: commonroom\r\nAuthorization: Bearer "
                              + bearer.encode() + b"\r\n" + WS_UPGRADE + offer + b"\r\n")
        data = b""
        with trio.fail_after(10):
            while HEAD_END not in data:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
        head = data.partition(HEAD_END)[0]
        if not head.startswith(b"HTTP/1.1 101"):
            return head

        async def drain() -> None:  # what the room sends (events, its close) must not block it
            try:
                while await stream.receive_some(65536):
                    pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            frame_head = bytes([0x82, 0x80 | 127]) + size.to_bytes(8, "big") + b"\0\0\0\0"
            piece = b"\0" * MIB
            await send_quietly(stream, frame_head)
            sent = 0
            try:
                while sent < size:
                    await stream.send_all(piece[: min(MIB, size - sent)])
                    sent += MIB
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.cancel_scope.cancel()
        return head
