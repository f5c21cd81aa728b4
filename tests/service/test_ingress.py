"""The session ingress against real hypercorn: routes, errors, limits, guards."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from commonroom.protocol.invitation import decode
from tests.service.conftest import LiveRoom, start_room
from tests.service.test_serving import RawClient


async def test_status_read_and_join_shapes(live: LiveRoom) -> None:
    agent = await live.join()
    bearer = agent["session_id"]
    status = (await live.call("GET", "/workspace/status", bearer)).json()
    assert set(status) >= {"workspace_id", "version", "content_hash", "name", "substrate",
                           "lifecycle", "participants", "active_leases", "pending_proposals"}
    assert status["substrate"] == "markdown"
    read = await live.call("GET", "/workspace/read?region=Goals", bearer)
    assert read.status == 200 and read.json()["region"] == "Plan/Goals"
    regions = (await live.call("GET", "/workspace/regions", bearer)).json()
    assert {"region", "title", "level", "line"} <= set(regions["regions"][0])


async def test_anonymous_and_forged_bearers_are_401(live: LiveRoom) -> None:
    for headers in ({}, {"Authorization": "Bearer ses_forged"}, {"Authorization": "Basic x"}):
        response = await live.raw("GET", "/workspace/status", headers=headers)
        assert response.status == 401 and response.json()["error"] == "unauthorized"


async def test_host_and_origin_guards(live: LiveRoom) -> None:
    bad_host = await live.raw("GET", "/workspace/status", headers={"Host": "evil.example"})
    assert bad_host.status == 403 and bad_host.json()["error"] == "permission_denied"
    for host in ("localhost", f"127.0.0.1:{live.ready.ingress_port}", "localhost:1"):
        ok = await live.raw("GET", "/.well-known/agent-workspace", headers={"Host": host})
        assert ok.status == 200, host
    bad_origin = await live.raw("GET", "/protocol", headers={"Origin": "http://evil.example"})
    assert bad_origin.status == 403
    good_origin = await live.raw("GET", "/protocol", headers={"Origin": "http://localhost:3000"})
    assert good_origin.status == 200


async def test_one_header_rule_per_port_checks_every_value(live: LiveRoom) -> None:
    """A second Host or Origin cannot smuggle a foreign one past the first, on either
    port and on /mcp; each port keeps its own allow-list (`http/guards.py`)."""
    ingress, owner = live.ready.ingress_port, live.ready.owner_port

    async def status_of(port: int, path: str, headers: bytes) -> tuple[int, str]:
        client = await RawClient.connect(port)
        await client.send(f"GET {path} HTTP/1.1\r\n".encode() + headers + b"\r\n")
        reply = await client.read_response()
        await client.aclose()
        return reply.status, reply.json()["error"] if reply.status == 403 else ""

    refused = (403, "permission_denied")
    for port, path in ((ingress, "/protocol"), (ingress, "/mcp"), (owner, "/")):
        own = f"Host: 127.0.0.1:{port}\r\n".encode()
        for hosts in (own + b"Host: evil.example\r\n", b"Host: evil.example\r\n" + own):
            assert (await status_of(port, path, hosts))[0] == 400, port  # h11: one Host only
        origin = f"Origin: http://127.0.0.1:{port}\r\n".encode()
        assert await status_of(port, path, own + origin + b"Origin: http://evil.example\r\n") \
            == refused, port
        assert (await status_of(port, path, b"Host: LOCALHOST:" + str(port).encode() + b"\r\n"))[0] \
            != 403, port  # a host name is case-insensitive
    # `commonroom` names the ingress (a transport's Host), never the owner's page.
    assert (await status_of(ingress, "/protocol", b"Host: commonroom\r\n"))[0] == 200
    assert await status_of(owner, "/", b"Host: commonroom\r\n") == refused


async def test_errors_are_json_never_html(live: LiveRoom) -> None:
    agent = await live.join()
    bearer = agent["session_id"]
    unknown = await live.call("GET", "/nope", bearer)
    assert unknown.status == 404 and unknown.json()["error"] == "invalid_request"
    wrong = await live.call("GET", "/workspace/checkout", bearer)
    assert wrong.status == 405 and wrong.json()["error"] == "invalid_request"
    bad_json = await live.raw("POST", "/workspace/checkout", raw_body=b"{nope",
                              headers={"Authorization": f"Bearer {bearer}"})
    assert bad_json.status == 400 and bad_json.json()["error"] == "invalid_request"
    typed = await live.call("POST", "/workspace/checkout", bearer, {"region": 5})
    assert typed.status == 400 and typed.json()["details"]["field"] == "region"
    limit = await live.call("GET", "/workspace/proposals?limit=500", bearer)
    assert limit.status == 400
    region = await live.call("GET", "/workspace/read?region=Nowhere", bearer)
    assert region.status == 400 and region.json()["region"] == "Nowhere"
    for response in (unknown, wrong, bad_json, typed, limit, region):
        assert response.header("content-type").startswith("application/json")
        assert b"<html" not in response.body.lower() and b"Traceback" not in response.body


async def test_oversized_body_is_413(live: LiveRoom) -> None:
    agent = await live.join()
    response = await live.raw(
        "POST", "/workspace/propose", raw_body=b"x" * (1024 * 1024 + 1),
        headers={"Authorization": f"Bearer {agent['session_id']}"},
    )
    assert response.status == 413 and response.json()["error"] == "limit_exceeded"


async def test_agent_cannot_approve_or_raw_commit(live: LiveRoom) -> None:
    agent = await live.join()
    bearer = agent["session_id"]
    status = (await live.call("GET", "/workspace/status", bearer)).json()
    prop = (await live.call("POST", "/workspace/propose", bearer, {
        "region": "Goals", "base_version": status["version"], "summary": "s",
        "content": "## Goals\n\nnew\n"})).json()
    review = await live.call("POST", "/workspace/proposal/review", bearer,
                             {"proposal_id": prop["proposal_id"], "revision": prop["revision"], "decision": "approve"})
    assert review.status == 403 and review.json()["error"] == "permission_denied"
    raw = await live.call("POST", "/workspace/commit", bearer,
                          {"base_version": status["version"], "summary": "x", "content": "# X\n"})
    assert raw.status == 403


async def test_discovery_has_no_secrets(live: LiveRoom) -> None:
    invite = (await live.call("POST", "/workspace/invite", live.host_session, {})).json()
    secret = decode(invite["invitation"]).secret
    for path in ("/.well-known/agent-workspace", "/protocol", "/skills", "/skills/commonroom"):
        response = await live.raw("GET", path)
        assert response.status == 200, path
        text = response.body.decode()
        for leak in (secret, live.host_session, str(live.ready.ingress_port), "Intro text."):
            assert leak not in text, (path, leak)
    diag = (await live.call("GET", "/workspace/diagnostics", live.host_session)).json()
    assert diag["transport"]["type"] == "loopback" and "127.0.0.1" not in str(diag)


async def test_rate_limit_per_bearer(doc: Path) -> None:
    now = [0.0]
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, requests_per_minute=30, rate_clock=lambda: now[0])
        agent = await live.join()
        bearer = agent["session_id"]
        codes = [(await live.call("GET", "/workspace/status", bearer)).status for _ in range(30)]
        assert codes == [200] * 30
        refused = await live.call("GET", "/workspace/status", bearer)
        assert refused.status == 429
        assert refused.json()["error"] == "limit_exceeded"
        # A sliding window (issue 8 item 7): all 30 were admitted at t=0, so
        # the first can retry when they leave the window, 60 s later.
        assert refused.json()["retry_after_seconds"] == 60
        assert refused.header("retry-after") == str(refused.json()["retry_after_seconds"])
        # The host's own bearer has its own window.
        assert (await live.call("GET", "/workspace/status", live.host_session)).status == 200
        now[0] += 2.0  # a token bucket would have refilled one by now; a window has not
        still = await live.call("GET", "/workspace/status", bearer)
        assert still.status == 429 and still.json()["retry_after_seconds"] == 58
        now[0] = 60.0
        assert (await live.call("GET", "/workspace/status", bearer)).status == 200
        live.stop.set()


async def test_unauthenticated_limit_per_address(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, anonymous_per_minute=5, rate_clock=lambda: 0.0)
        codes = [(await live.raw("GET", "/workspace/status",
                                 headers={"Authorization": f"Bearer ses_guess{i}"})).status
                 for i in range(6)]
        assert codes == [401] * 5 + [429]
        live.stop.set()


async def test_external_edit_becomes_a_version_with_nobody_calling(live: LiveRoom) -> None:
    before = (await live.call("GET", "/workspace/status", live.host_session)).json()["version"]
    # Saved the way editors save (a temp file renamed over it): a truncate-then-write
    # could be seen half-way by the watcher, which would record the empty file too.
    temp = live.path.with_name(live.path.name + ".swp")
    temp.write_text("# Edited in an editor\n")
    os.replace(temp, live.path)
    with trio.fail_after(3):
        while True:
            history = (await live.call("GET", "/workspace/history?limit=5",
                                       live.host_session)).json()["events"]
            kinds = [e["type"] for e in history]
            if "change.committed" in kinds:
                break
            await trio.sleep(0.2)
    event = next(e for e in history if e["type"] == "change.committed")
    assert event["payload"]["source"] == "external" and event["payload"]["version"] == before + 1


async def test_restart_keeps_workspace_sessions_and_history(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        first = await start_room(nursery, doc)
        agent = await first.join()
        first.stop.set()
    async with trio.open_nursery() as nursery:
        second = await start_room(nursery, doc)
        assert second.ready.workspace_id == first.ready.workspace_id
        status = await second.call("GET", "/workspace/status", agent["session_id"])
        assert status.status == 200
        # The stopped room's host session stopped with it.
        old_host = await second.call("GET", "/workspace/status", first.host_session)
        assert old_host.status == 401
        kinds = [e["type"] for e in (await second.call(
            "GET", "/workspace/history?limit=200", agent["session_id"])).json()["events"]]
        assert "workspace.stopped" in kinds and "participant.joined" in kinds
        second.stop.set()


async def test_owner_login_header_and_no_mcp(live: LiveRoom) -> None:
    port = live.ready.owner_port
    host = {"Host": f"127.0.0.1:{port}"}
    page = await live.raw("GET", "/", port=port, headers=host)
    assert page.status == 200 and b"Participants" in page.body  # the page: no secret in it
    anon = await live.raw("GET", "/owner/api/workspace/status", port=port, headers=host)
    assert anon.status == 401
    owner = await live.owner_login()
    token = live.ready.human_url.split("#token=")[1]
    again = await live.raw("POST", "/owner/login", port=port, body={"token": token}, headers=host)
    assert again.status == 401  # one time
    status = await live.raw("GET", "/owner/api/workspace/status", port=port, headers=owner)
    assert status.status == 200 and status.json()["version"] >= 1
    invited = await live.raw("POST", "/owner/api/workspace/invite", port=port, body={}, headers=owner)
    assert invited.status == 200 and invited.json()["invitation"].startswith("commonroom://")
    mcp = await live.raw("POST", "/mcp", port=port, body={}, headers=owner)
    assert mcp.status == 404


async def test_a_second_room_on_the_same_file_is_refused(live: LiveRoom) -> None:
    from commonroom.protocol.errors import CommonroomError
    from commonroom.service import ServeOptions, serve_room

    try:
        await serve_room(ServeOptions(path=live.path, install_signal_handlers=False),
                         on_ready=lambda ready: None)
    except CommonroomError as error:
        assert error.code == "invalid_request"
    else:
        raise AssertionError("a second room started on the same file")
    # The first room's credentials are untouched.
    from commonroom.credentials import read_credentials

    assert read_credentials(live.path) is not None
