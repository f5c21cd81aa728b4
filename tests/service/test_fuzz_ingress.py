"""A seeded fuzz run of the session ingress (issue 8): malformed requests never get a 500.

A few thousand requests against a real room (real hypercorn on 127.0.0.1),
each on its own connection, drawn from a seeded generator:

- every operation route of the table, with parameters of the wrong type,
  integers beyond 64 bits and of 5,000 digits, floats, lone surrogates, long
  strings, deep nesting, unknown fields, bodies that are not objects;
- bad framing: random bytes, short and long ``Content-Length``, broken
  chunked encoding, bad or missing Host, hostile Origin, odd methods;
- no bearer, a made-up one, a malformed ``Authorization``, live agent ones.

Asserted: no answer >= 500; every error body is the protocol's error object
(hypercorn's own answers to unparseable HTTP have empty bodies); nothing is
logged at ERROR and no traceback reaches stderr; the room still answers and
stops promptly. The seed is fixed so a failure replays; set
``COMMONROOM_FUZZ_SEED`` to explore others.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import trio

from commonroom.protocol.errors import STATUS
from commonroom.protocol.operations import OPERATIONS
from commonroom.protocol.schema import hints as _hints
from tests.service.conftest import start_room

SEED = int(os.environ.get("COMMONROOM_FUZZ_SEED", "8"))
REQUESTS = 3000
WORKERS = 4
STREAM_PATHS = ["/workspace/wait", "/workspace/observe", "/workspace/observe/ws"]
WS_UPGRADE = ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]


PLAUSIBLE: dict[str, Any] = {
    "region": "Goals", "base_version": 1, "version": 1, "to_version": 1, "summary": "s",
    "content": "## Goals\n\nfuzzed\n", "minutes": 5, "limit": 5, "decision": "approve",
    "capabilities": ["read"], "name": "fuzz", "kind": "agent", "max_uses": 2,
    "expires_in_minutes": 10, "label": "fuzz", "status": "pending",
}
_HUGE = re.compile(r'"@@(\d+)@@"')


def dumps(value: Any) -> str:
    """JSON (ASCII: lone surrogates become \\ud800 escapes) with the huge-integer markers as digits."""
    text = json.dumps(value, allow_nan=True)
    return _HUGE.sub(lambda m: "9" * int(m.group(1)), text)


class Fuzzer:
    def __init__(self, rng: random.Random, bearers: list[str]) -> None:
        self.rng = rng
        self.bearers = bearers

    # ------------------------------------------------------------------ values

    def value(self) -> Any:
        r = self.rng
        choice = r.randrange(16)
        if choice == 0:
            return r.choice([0, -1, 1, 2**63, -(2**63) - 1, 2**64, 10**30])
        if choice == 1:
            # Rendered as digits by `dumps` (Python itself refuses str() of 4,300+ digits).
            return f"@@{r.choice([20, 400, 4400, 5000])}@@"
        if choice == 2:
            return r.choice([1.5, -0.0, 1e308, float("inf"), float("nan")])
        if choice == 3:
            return r.choice([True, False, None])
        if choice == 4:
            return "\ud800" + r.choice(["", "x", "\udfff"])
        if choice == 5:
            return "x" * r.choice([0, 1, 65, 501, 5000, 300_000])
        if choice == 6:
            return [self.value() for _ in range(r.randrange(4))]
        if choice == 7:
            return {"k": self.value()}
        if choice == 8:
            return r.choice(["workspace", "*", "Goals", "Plan/Goals", "Plan/Goals#2", "section:",
                             "../../etc/passwd", "\x00", "a" * 300])
        if choice == 9:
            return r.choice(["pr_nope", "ls_nope", "inv_nope", "pt_nope", "", " "])
        if choice == 10:
            return r.choice(["approve", "reject", "APPROVE", "agent", "human"])
        if choice == 11:
            return r.choice(["commonroom://join/", "commonroom://join/e30", "%%%", "ses_x"])
        if choice == 12:
            points = [r.randrange(1, 0x110000) for _ in range(r.randrange(1, 12))]
            return "".join(chr(p) for p in points if not 0xD800 <= p <= 0xDFFF)
        return r.randrange(-5, 300)

    def params(self, op_params: type[Any]) -> dict[str, Any]:
        """Mostly plausible parameters with a few bad ones, so requests get past the first check."""
        fields = list(_hints(op_params))
        r = self.rng
        out: dict[str, Any] = {}
        for name in fields:
            if name in PLAUSIBLE and r.random() < 0.7:
                out[name] = PLAUSIBLE[name]
            elif r.random() < 0.6:
                out[name] = self.value()
        if r.random() < 0.15:
            out[r.choice(["extra", "\udc80", "", "__proto__"])] = self.value()
        return out

    def query_value(self) -> str:
        r = self.rng
        raw = r.choice([
            "99999999999999999999", "-1", "1e5", "0x10", " 7", "7 ", "1_000", "", "%ff",
            "%00", "9" * 5000, "true", "NaN", "-9223372036854775809", "\u00e9",
            "1" * 19, "3",
        ])
        if raw.startswith("%"):
            return raw  # already encoded (invalid UTF-8 / NUL)
        return urllib.parse.quote(raw, safe="")

    # ---------------------------------------------------------------- requests

    def headers(self, bearer: str | None) -> list[str]:
        r = self.rng
        lines = []
        host = r.choices(["commonroom", "localhost:1", "127.0.0.1", "evil.example", None],
                         [8, 1, 1, 1, 1])[0]
        if host is not None:
            lines.append(f"Host: {host}")
        if r.random() < 0.08:
            lines.append("Origin: " + r.choice(["http://evil.example", "null", "http://localhost"]))
        if bearer is not None:
            lines.append(f"Authorization: Bearer {bearer}")
        elif r.random() < 0.1:
            lines.append("Authorization: " + r.choice(["Basic abc", "Bearer", "Bearer  ", "x"]))
        lines.append("Connection: close")
        return lines

    def body_bytes(self, params: dict[str, Any]) -> bytes:
        r = self.rng
        kind = r.randrange(12)
        if kind == 0:
            return b"[" * 5000
        if kind == 1:
            return b'{"a": ' + b"[" * r.choice([17, 900, 5000]) + b"1" + b"]" * 10
        if kind == 2:
            return bytes(r.randrange(256) for _ in range(r.randrange(1, 64)))
        if kind == 3:
            return json.dumps(r.choice([[], 1, "s", None])).encode()
        if kind == 4:
            return b'{"base_version": ' + b"9" * 5000 + b"}"
        return dumps(params).encode("ascii")

    def operation_request(self) -> bytes:
        r = self.rng
        op = r.choice(OPERATIONS)
        bearer = r.choice([None, "ses_unknown", *self.bearers])
        params = self.params(op.params)
        if op.method == "GET":
            query = "&".join(
                f"{urllib.parse.quote(k, safe='', errors='surrogatepass')}={self.query_value()}"
                for k in params
            )
            target = op.path + ("?" + query if query else "")
            target = re.sub(r"%40%40(\d+)%40%40", lambda m: "9" * int(m.group(1)), target)
            return self.raw("GET", target, self.headers(bearer), None)
        return self.raw("POST", op.path, [*self.headers(bearer), "Content-Type: application/json"],
                        self.body_bytes(params))

    def stream_request(self) -> bytes:
        # Streams are fuzzed with input that must be refused before streaming
        # starts (a bad cursor or a bad bearer), so every request ends.
        r = self.rng
        path = r.choice(STREAM_PATHS)
        field = "cursor" if path.endswith("wait") else "since_event_id"
        if r.random() < 0.5:
            bearer: str | None = r.choice(self.bearers)
            value = r.choice(["99999999999999999999", "-1", "x", "9" * 5000, "1.5"])
        else:
            bearer = r.choice([None, "ses_unknown"])
            value = self.query_value()
        headers = self.headers(bearer)
        if path.endswith("/ws"):
            headers = [h for h in headers if not h.startswith("Connection:")] + WS_UPGRADE
        return self.raw("GET", f"{path}?{field}={value}", headers, None)

    def framing_request(self) -> tuple[bytes, bool]:
        """(bytes, half_close): broken HTTP framing."""
        r = self.rng
        kind = r.randrange(9)
        path = r.choice([op.path for op in OPERATIONS])
        body = b'{"region": "Goals", "base_version": 1, "summary": "s", "content": "x"}'
        base = [f"POST {path} HTTP/1.1", "Host: commonroom", "Content-Type: application/json"]
        if kind == 0:
            return bytes(r.randrange(256) for _ in range(r.randrange(1, 200))), True
        if kind == 1:  # shorter Content-Length than the body, then more bytes
            return self.raw_lines([*base, "Content-Length: 5", "Connection: close"], body), False
        if kind == 2:  # longer Content-Length than what is sent, then EOF
            return self.raw_lines([*base, "Content-Length: 5000", "Connection: close"], body), True
        if kind == 3:
            return self.raw_lines([*base, "Transfer-Encoding: chunked", "Connection: close"],
                                  b"zz\r\nxx\r\n0\r\n\r\n"), True
        if kind == 4:
            return self.raw_lines([*base, "Content-Length: -1", "Connection: close"], body), True
        if kind == 5:
            return self.raw_lines([*base, "Content-Length: 99999999999999999999999"], body), True
        if kind == 6:
            return (r.choice([b"GET", b"PUT", b"DELETE", b"BREW", b"G\x00T"]) + b" " + path.encode()
                    + b" HTTP/1.1\r\nHost: commonroom\r\nConnection: close\r\n\r\n"), False
        if kind == 7:
            return (b"GET /" + b"a" * r.choice([10, 20000]) + b" HTTP/1.1\r\nHost: commonroom\r\n"
                    b"X: " + b"y" * r.choice([10, 20000]) + b"\r\nConnection: close\r\n\r\n"), False
        return (b"GET /workspace/status HTTP/1.0\r\nHost: commonroom\r\n"
                b"Authorization: Bearer \xff\xfe\r\n\r\n"), False

    def raw(self, method: str, target: str, headers: list[str], body: bytes | None) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", *headers]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        return self.raw_lines(lines, body or b"")

    @staticmethod
    def raw_lines(lines: list[str], body: bytes) -> bytes:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body

    def next(self) -> tuple[bytes, bool]:
        pick = self.rng.random()
        if pick < 0.7:
            return self.operation_request(), False
        if pick < 0.8:
            return self.stream_request(), False
        return self.framing_request()


async def exchange(port: int, data: bytes, half_close: bool) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    received = bytearray()
    try:
        with trio.move_on_after(5):
            try:
                await stream.send_all(data)
                if half_close:
                    await stream.send_eof()
            except trio.BrokenResourceError:
                pass  # the server may answer and close before it read everything
            while True:
                try:
                    chunk = await stream.receive_some(65536)
                except trio.BrokenResourceError:
                    break
                if not chunk:
                    break
                received += chunk
                if _complete(received):
                    break
    finally:
        await stream.aclose()
    return bytes(received)


def _complete(received: bytearray) -> bool:
    """A whole response with a Content-Length has arrived (do not wait for the close)."""
    head, sep, body = bytes(received).partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def check_answer(request: bytes, answer: bytes) -> None:
    if not answer:
        return  # a connection closed without an answer (unparseable input) is allowed
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ")[1])
    where = f"request {request[:300]!r} -> {answer[:400]!r}"
    assert status < 500, where
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if status >= 400 and body:
        assert headers.get("content-type", "").startswith("application/json"), where
        error = json.loads(body)
        assert set(error) >= {"error", "message", "details"}, where
        assert error["error"] in STATUS and isinstance(error["details"], dict), where
        assert b"Traceback" not in body, where


@pytest.mark.slow
@pytest.mark.parametrize("seed", [SEED])
async def test_fuzzed_requests_never_get_a_500(
    doc: Path, seed: int, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(seed)
    caplog.set_level(logging.WARNING)
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, requests_per_minute=10**9,
                                anonymous_per_minute=10**9)
        bearers = [(await live.join(f"fuzz{i}"))["session_id"] for i in range(3)]
        fuzzer = Fuzzer(rng, bearers)
        work = [fuzzer.next() for _ in range(REQUESTS)]
        port = live.ready.ingress_port

        async def worker(items: list[tuple[bytes, bool]]) -> None:
            for data, half_close in items:
                check_answer(data, await exchange(port, data, half_close))

        async with trio.open_nursery() as workers:
            for index in range(WORKERS):
                workers.start_soon(worker, work[index::WORKERS])
        alive = await live.call("GET", "/workspace/status", live.host_session)
        assert alive.status == 200
        live.stop.set()
        stopped = trio.current_time()
    assert trio.current_time() - stopped < 5
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not errors, [r.getMessage() for r in errors[:5]]
    assert "Traceback" not in capfd.readouterr().err
