"""Refusals are cheap and paced (docs/protocol.md "Refusals are cheap and paced").

A bearer past its windows is refused from its request's headers alone
(`Gate.early_refusal`, asked by the connection before quart builds the request), and
a client that asks again before its `Retry-After` ran out has its refusals held
(`RefusalPacer`): a flooder on one connection makes two requests a second instead of
a thousand. The host is never paced. Time is trio's MockClock (autojump): a hold is a
`trio.sleep` the clock jumps over, so the assertions are on the clock, not on waits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from commonroom.engine.facade import hash_secret
from commonroom.http.guards import PACE_FREE_REFUSALS, PACE_HOLD_SECONDS, PACE_MAX_HELD, Gate
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.ratelimit import RateLimiter, RefusalPacer

AGENT, HOST = "ses_agent", "ses_host"
PARTICIPANTS = {hash_secret(AGENT): "pt_agent", hash_secret(HOST): "pt_host"}
HEAVY = ("GET", "/workspace/proposal")


def _gate(per_minute: int = 2) -> Gate:
    return Gate(
        per_bearer_per_minute=per_minute, per_address_per_minute=3, clock=trio.current_time,
        session_participant=PARTICIPANTS.get, is_host=lambda participant: participant == "pt_host",
        heavy_reads=RateLimiter(1, 60.0, trio.current_time), heavy_routes=frozenset({HEAVY}),
        early_exempt=lambda method, path: path == "/protocol" or (
            method == "POST" and path == "/session/join"),
    )


def _scope(bearer: str | None, path: str = "/workspace/status", method: str = "GET",
           host: bytes = b"commonroom", authorization: bytes | None = None) -> dict[str, Any]:
    headers = [(b"host", host)]
    if bearer is not None:
        headers.append((b"authorization", f"Bearer {bearer}".encode()))
    if authorization is not None:
        headers.append((b"authorization", authorization))
    return {"type": "http", "method": method, "path": path, "headers": headers,
            "client": ("127.0.0.1", 40000)}


async def _answer(gate: Gate, scope: dict[str, Any]) -> tuple[float, CommonroomError]:
    """(seconds the refusal was held, its error) on the mock clock."""
    refused = gate.early(scope)
    assert refused is not None, "the windows should refuse this request"
    started = trio.current_time()
    error = await refused()
    return trio.current_time() - started, error


async def test_a_flooder_is_held_after_its_free_refusals_and_the_host_never_is(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = _gate()
    for bearer in (AGENT, HOST):
        gate.admit(bearer, "127.0.0.1")
        gate.admit(bearer, "127.0.0.1")
        assert gate.per_bearer.wait(hash_secret(bearer)) is not None  # past their 2 a minute
    started = trio.current_time()
    agent = [await _answer(gate, _scope(AGENT)) for _ in range(PACE_FREE_REFUSALS + 4)]
    held = [seconds for seconds, _ in agent]
    # Each connection hears its first refusals at once; asking again without waiting as
    # told, the agent's next are each held, one after the other: ~2 a second.
    assert held == [0.0] * PACE_FREE_REFUSALS + [pytest.approx(PACE_HOLD_SECONDS)] * 4
    assert trio.current_time() - started == pytest.approx(4 * PACE_HOLD_SECONDS)
    for _, error in agent:  # the protocol's 429: the error shape, Retry-After when it opens
        wire = error.to_wire()
        assert error.http_status == 429 and wire["error"] == "limit_exceeded"
        assert set(wire) == {"error", "message", "details", "retry_after_seconds"}
        assert wire["details"] == {"scope": "requests"} and wire["retry_after_seconds"] >= 1
    assert agent[-1][1].recovery["retry_after_seconds"] < agent[0][1].recovery["retry_after_seconds"]
    # The host past its own window is refused, never held.
    host = [await _answer(gate, _scope(HOST)) for _ in range(PACE_FREE_REFUSALS + 4)]
    assert [seconds for seconds, _ in host] == [0.0] * (PACE_FREE_REFUSALS + 4)


async def test_a_client_that_waits_as_told_is_never_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = _gate(per_minute=1)
    for _ in range(3):
        gate.admit(AGENT, "127.0.0.1")
        seconds, error = await _answer(gate, _scope(AGENT))
        assert seconds == 0.0
        await trio.sleep(error.recovery["retry_after_seconds"])  # honours Retry-After
        assert gate.early(_scope(AGENT)) is None  # its window opened: the guard admits it


async def test_a_heavy_read_past_its_window_is_refused_before_routing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = _gate(per_minute=100)
    assert gate.heavy_reads is not None
    assert gate.heavy_reads.acquire("pt_agent") is None  # the room charged its one heavy read
    assert gate.heavy_reads.acquire("pt_host") is None
    seconds, error = await _answer(gate, _scope(AGENT, HEAVY[1]))
    assert seconds == 0.0 and error.details == {"scope": "heavy_reads",
                                                "limit": limits.HEAVY_READS_PER_MINUTE}
    assert error.to_wire()["retry_after_seconds"] >= 1
    assert gate.early(_scope(AGENT)) is None  # a light read is not a heavy one
    assert gate.early(_scope(HOST, HEAVY[1])) is None  # the host is exempt from heavy reads


def test_what_the_early_check_leaves_to_the_guard() -> None:
    """Discovery and joins (windows of their own), a refused Host (403 first), a malformed
    `Authorization` (401): the app answers them as before."""
    gate = Gate(per_bearer_per_minute=1, per_address_per_minute=1, clock=lambda: 0.0,
                session_participant=PARTICIPANTS.get,
                early_exempt=lambda _method, path: path == "/protocol")
    gate.admit(AGENT, "127.0.0.1")
    gate.admit(None, "127.0.0.1")  # the address's one request
    assert gate.early(_scope(AGENT)) is not None
    assert gate.early(_scope(None)) is not None  # no bearer: the address's window
    assert gate.early(_scope(AGENT, "/protocol")) is None
    assert gate.early(_scope(AGENT, host=b"evil.example")) is None
    assert gate.early(_scope(None, authorization=b"Basic x")) is None


def test_the_pacer_holds_at_most_max_held_of_one_key() -> None:
    now = [0.0]
    pacer = RefusalPacer(free=1, hold_seconds=0.5, max_held=2, clock=lambda: now[0])
    assert pacer.hold_for("k", 30.0) == 0.0  # the episode's free one
    assert pacer.hold_for("other", 30.0) == 0.0  # keys are apart
    with pacer.holding("k"), pacer.holding("k"):
        assert pacer.hold_for("k", 30.0) == 0.0  # two held already: answered at once
    assert pacer.hold_for("k", 30.0) == 0.5
    assert pacer.hold_for("k", 0.2) == pytest.approx(0.2)  # never past the window's opening
    now[0] = 31.0  # past what it was told: a new episode, its first refusal free again
    assert pacer.hold_for("k", 30.0) == 0.0
    now[0] = 100.0
    assert pacer.sweep() == 0


def test_the_bounds_are_what_docs_protocol_says() -> None:
    assert (PACE_FREE_REFUSALS, PACE_HOLD_SECONDS, PACE_MAX_HELD) == (4, 0.5, 8)


async def test_the_ingress_refuses_and_paces_before_quart_builds_the_request(
    doc_path: Path, autojump_clock: trio.testing.MockClock,
) -> None:
    """Through the ingress app's own ASGI connection class (the one hypercorn calls), on
    the MockClock: past its window, the agent's requests never reach a view (a body
    that is not JSON is never read), the fifth refusal on is held; the host is not."""
    from commonroom.engine.facade import mint_host_session
    from commonroom.http.hardened_app import harden
    from commonroom.http.ingress import IngressSettings, create_ingress_app
    from commonroom.room.core import Room
    from tests.conftest import TransportHint, open_engine

    engine = open_engine(doc_path)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    try:
        room = Room(engine, watch_interval=10**7, max_sweep_sleep=10**7, inline_store=True)
        host = mint_host_session(engine)
        invite = await room.call("workspace.invite", host, {})
        agent = (await room.call("session.join", None, {"invite": invite["invitation"],
                                                        "name": "a"}))["session_id"]
        app = create_ingress_app(room, IngressSettings(requests_per_minute=2))
        harden(app, max_body_bytes=1024 * 1024)

        async def ask(bearer: str, body: bytes = b"") -> tuple[float, int, dict[str, str], bytes]:
            started = trio.current_time()
            sent: list[dict[str, Any]] = []
            messages = [{"type": "http.request", "body": body, "more_body": False}]

            async def receive() -> dict[str, Any]:
                if messages:
                    return messages.pop(0)
                await trio.sleep_forever()
                raise AssertionError

            async def send(message: dict[str, Any]) -> None:
                sent.append(dict(message))

            scope = {**_scope(bearer, "/workspace/propose", "POST"), "http_version": "1.1",
                     "scheme": "http", "root_path": "", "query_string": b"", "raw_path": b"",
                     "server": ("127.0.0.1", 9), "extensions": {}}
            scope["headers"] = [(b"host", b"commonroom"),
                                (b"authorization", f"Bearer {bearer}".encode()),
                                (b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]
            await app(scope, receive, send)
            start = next(m for m in sent if m["type"] == "http.response.start")
            headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
            answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
            return trio.current_time() - started, start["status"], headers, answer

        for bearer in (agent, host):  # two requests a minute each, both admitted: 400s
            for _ in range(2):
                assert (await ask(bearer, b"{not json"))[1] == 400
        agent_answers = [await ask(agent, b"{not json") for _ in range(PACE_FREE_REFUSALS + 2)]
        host_answers = [await ask(host, b"{not json") for _ in range(PACE_FREE_REFUSALS + 2)]
    finally:
        engine.close()
    for _, status, headers, body in agent_answers + host_answers:
        assert status == 429 and headers["connection"] == "close"
        assert headers["retry-after"] == str(json.loads(body)["retry_after_seconds"])
        assert json.loads(body)["error"] == "limit_exceeded"
    assert [held for held, *_ in agent_answers] == (
        [0.0] * PACE_FREE_REFUSALS + [pytest.approx(PACE_HOLD_SECONDS)] * 2)
    assert [held for held, *_ in host_answers] == [0.0] * (PACE_FREE_REFUSALS + 2)
