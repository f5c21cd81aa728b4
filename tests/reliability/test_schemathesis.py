"""schemathesis fuzzes a real room's ingress from the room's own GET /openapi.json (issue 14).

The CI-sized form of tools/fuzz/openapi_fuzz.py: a real room (real hypercorn
on 127.0.0.1), the document it serves, a session bearer from a real join,
schemathesis's stateless phase (positive and negative cases for every
operation) and its stateful phase (the document's OpenAPI links). Asserted:
no answer >= 500; every error JSON in the protocol's shape; status, content
type, headers and every 2xx body conform to the document; schema-violating
input refused. Then the secrets audit of the run: no session id, invitation
secret or owner token handed out during the run appears in any answer (but
the one that hands it out), event or log record.

The last test proves the checks bite: a room serving a document that
promises a field its answers lack is reported.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from tools.fuzz.openapi_fuzz import FuzzReport, not_http, protocol_error_problem, run_fuzz

from commonroom import openapi
from commonroom.engine.core import SIDECAR_SUFFIX
from commonroom.http import ingress
from tests.conftest import SAMPLE
from tests.service.conftest import LiveRoom, start_room

# CI-sized: ~15 s of fuzzing on 2 shared cores; the tool's defaults are the long run.
EXAMPLES_PER_OPERATION = 30
STATEFUL_SCENARIOS = 60
UNLIMITED = {"requests_per_minute": 10**9, "anonymous_per_minute": 10**9}


@pytest.fixture
def fuzz_doc(tmp_path: Path) -> Path:
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE, encoding="utf-8")
    return path


def _room_secrets(live: LiveRoom) -> set[str]:
    owner_token = live.ready.human_url.split("#token=", 1)[1]
    invitation = live.ready.invitation
    return {live.host_session, owner_token, invitation, invitation.rsplit("/", 1)[-1]}


def _events(doc: Path) -> list[str]:
    sidecar = doc.with_name(doc.name + SIDECAR_SUFFIX)
    with sqlite3.connect(sidecar) as conn:
        rows = conn.execute("SELECT type, created_at, payload FROM events ORDER BY event_id").fetchall()
    return [json.dumps(row) for row in rows]


async def _fuzz(live: LiveRoom, **counts: Any) -> FuzzReport:
    base = f"http://127.0.0.1:{live.ready.ingress_port}"
    return await trio.to_thread.run_sync(partial(run_fuzz, base, live.host_session, **counts))


@pytest.mark.slow
async def test_schemathesis_finds_nothing_and_no_secret_leaks(
        fuzz_doc: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, fuzz_doc, **UNLIMITED)
        report = await _fuzz(live, examples=EXAMPLES_PER_OPERATION, scenarios=STATEFUL_SCENARIOS)
        secrets = report.secrets | _room_secrets(live)
        live.stop.set()
    print(f"\n{report.summary()}")  # the figures docs/reliability.md records (pytest -s)

    assert report.server_errors == []
    assert report.failures == []
    # It really ran: every phase sent requests, real answers came back, links were followed.
    assert report.requests > 1500
    assert report.statuses[200] > 300
    assert {400, 401, 404} <= set(report.statuses)
    assert report.stateful_scenarios >= STATEFUL_SCENARIOS
    assert report.stateful_steps > STATEFUL_SCENARIOS
    assert sum(report.linked_steps.values()) > 20
    assert sum(n for key, n in report.linked_steps.items() if key.endswith(" 200")) > 10
    # More sessions than the first were handed out (joins through the invite -> join link,
    # re-joins after the fuzzer left), and each one is audited.
    assert len(report.secrets) > 5

    events = _events(fuzz_doc)
    assert len(events) > 50
    logs = [f"{record.name} {record.getMessage()} {record.exc_text or ''}" for record in caplog.records]
    leaks = [(where, secret[:8]) for secret in secrets
             for where, texts in (("answer", [body.decode("utf-8", "replace")
                                              for body in report.audited_bodies()]),
                                  ("event", events), ("log", logs))
             if any(secret in text for text in texts)]
    print(f"secrets audit: {len(secrets)} secrets x ({len(report.audited_bodies())} answers,"
          f" {len(events)} events, {len(logs)} log records): {len(leaks)} found")
    assert leaks == []
    # The scan can find a secret: the answers that hand them out hold them.
    handed_out = [body.decode() for label, status, body in report.answers
                  if status == 200 and label == "POST /workspace/invite"]
    assert handed_out and all(any(secret in body for secret in secrets) for body in handed_out)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_the_audit_and_the_checks_can_fail(
        fuzz_doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An error answer that is not the protocol's shape is named, whatever the reason.
    assert protocol_error_problem(500, "text/html", b"<h1>oops</h1>") is not None
    assert protocol_error_problem(400, "application/json", b"not json") is not None
    assert protocol_error_problem(404, "application/json", b'{"error": "nope", "message": "m",'
                                  b' "details": {}}') is not None
    assert protocol_error_problem(409, "application/json", b'{"error": "stale_version"}') is not None
    assert protocol_error_problem(404, "application/json", b'{"error": "proposal_not_found",'
                                  b' "message": "m", "details": {}}') is None
    # Generated headers that are not HTTP are told apart (hypercorn answers those, below).
    assert not_http({"content-length": "le;"}) is not None
    assert not_http({"h^7S.LBx;": ""}) is not None and not_http({"x y": "1"}) is not None
    assert not_http({"x": "a\x00b"}) is not None
    assert not_http({"h^7S.LBx": "", "lO": "s6&[{P5a$", "Content-Length": "0"}) is None
    # A document promising a field the status answer lacks: schemathesis reports the 2xx body.
    document = openapi.openapi_document()
    status = document["components"]["schemas"]["Status"]
    status["properties"]["promised"] = {"type": "string"}
    status["required"].append("promised")
    monkeypatch.setattr(ingress, "openapi_body", lambda: json.dumps(document))
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, fuzz_doc, **UNLIMITED)
        report = await _fuzz(live, examples=2, scenarios=1, only={"workspace.status"})
        # What the fuzzer exempts is what the room's HTTP parser does: an empty 400.
        stream = await trio.open_tcp_stream("127.0.0.1", live.ready.ingress_port)
        async with stream:
            await stream.send_all(b"GET /workspace/status HTTP/1.1\r\nHost: x\r\n"
                                  b"Content-Length: le;\r\n\r\n")
            refused = b""
            with trio.fail_after(10):
                while chunk := await stream.receive_some(65536):
                    refused += chunk
        live.stop.set()
    head, _, body = refused.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and body == b"", refused
    assert report.requests >= 2
    assert any("GET /workspace/status -> 200" in failure and "promised" in failure
               for failure in report.failures), report.failures
