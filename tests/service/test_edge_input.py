"""Edge input is `invalid_request` naming the field, never a 500 (issue 8, item 5).

Integers beyond SQLite's 64 bits, lone surrogates, deep nesting and
4,300-digit numbers are refused at the edge (the parameter records and the
body parser); the room logs nothing for them.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.service.conftest import LiveRoom

HUGE = "99999999999999999999"
SURROGATE_BODY = '"\\ud800"'


PROPOSE_INT = '{"region": "Goals", "base_version": @, "summary": "s", "content": "x"}'
PROPOSE_SUMMARY = '{"region": "Goals", "base_version": 1, "summary": @, "content": "x"}'


def fill(template: str, value: str) -> str:
    return template.replace("@", value)


async def assert_refused(response: Any, field: str) -> None:
    assert response.status == 400, (response.status, response.body)
    error = response.json()
    assert error["error"] == "invalid_request", error
    assert error["details"].get("field") == field, error
    assert set(error) >= {"error", "message", "details"}


@pytest.mark.parametrize(("path", "field"), [
    (f"/workspace/read?version={HUGE}", "version"),
    (f"/workspace/read?version=-{HUGE}", "version"),
    ("/workspace/read?version=9223372036854775808", "version"),
    ("/workspace/read?version=1_0", "version"),
    (f"/workspace/history?before_event_id={HUGE}", "before_event_id"),
    (f"/workspace/changes_since?version={HUGE}", "version"),
    (f"/workspace/diff?base_version={HUGE}", "base_version"),
    (f"/workspace/proposals?limit={'9' * 5000}", "limit"),
    (f"/workspace/wait?cursor={HUGE}", "cursor"),
    (f"/workspace/observe?since_event_id={HUGE}", "since_event_id"),
])
async def test_huge_integers_in_queries(live: LiveRoom, path: str, field: str,
                                        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        await assert_refused(await live.call("GET", path, live.host_session), field)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/workspace/propose", fill(PROPOSE_INT, HUGE), "base_version"),
    ("/workspace/propose", fill(PROPOSE_INT, "9" * 5000), "base_version"),
    ("/workspace/commit", fill('{"base_version": -@, "summary": "s", "content": "x"}', HUGE),
     "base_version"),
    ("/workspace/propose", fill(PROPOSE_SUMMARY, SURROGATE_BODY), "summary"),
    ("/workspace/release", fill('{"lease_id": @}', SURROGATE_BODY), "lease_id"),
    ("/workspace/proposal/withdraw", fill('{"proposal_id": @}', SURROGATE_BODY), "proposal_id"),
    ("/workspace/invite/revoke", fill('{"invite_id": @}', SURROGATE_BODY), "invite_id"),
    ("/workspace/invite", fill('{"capabilities": ["read", @]}', SURROGATE_BODY), "capabilities"),
    ("/session/join", fill('{"invite": @, "name": "x"}', SURROGATE_BODY), "invite"),
    ("/session/join", "[" * 5000, "body"),
    ("/session/join", '{"invite": ' + "[" * 5000, "body"),
    ("/workspace/propose", '{"content": ' + "{\"a\": " * 3000 + "1" + "}" * 3001, "body"),
    ("/workspace/propose", '{"\\udc80": 1}', "\\udc80"),
])
async def test_bad_bodies(live: LiveRoom, path: str, body: str, field: str,
                          caplog: pytest.LogCaptureFixture) -> None:
    headers = {"Authorization": f"Bearer {live.host_session}", "Content-Type": "application/json"}
    with caplog.at_level(logging.WARNING):
        response = await live.raw("POST", path, raw_body=body.encode(), headers=headers)
        await assert_refused(response, field)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_brackets_inside_strings_are_text_not_nesting(live: LiveRoom) -> None:
    agent = await live.join()
    content = "## Goals\n\n" + "[" * 5000 + ' \\" {{{ ' + "]" * 10 + "\n"
    response = await live.call("POST", "/workspace/propose", agent["session_id"], {
        "region": "Goals", "base_version": 1, "summary": "brackets", "content": content})
    assert response.status == 200, response.body
