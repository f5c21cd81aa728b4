"""The owner listener without a browser: the page login, the observe adapter, the page's files."""

from __future__ import annotations

import json
from contextlib import aclosing

import trio

from commonroom.wire import aio
from tests.service.conftest import LiveRoom


async def _owner(live: LiveRoom, method: str, path: str, headers: dict[str, str] | None = None,
                 body: bytes | None = None) -> aio.Response:
    port = live.ready.owner_port
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    return await aio.request(stream, method, path, headers={"Host": f"127.0.0.1:{port}", **(headers or {})},
                                    body=body)


async def _ticket(live: LiveRoom, login: dict[str, str]) -> str:
    answer = await _owner(live, "POST", "/owner/stream-ticket", headers=login)
    assert answer.status == 200 and answer.json()["expires_in_seconds"] == 30
    ticket: str = answer.json()["ticket"]
    return ticket


async def test_owner_observe_streams_the_rooms_events_with_the_host_session(live: LiveRoom) -> None:
    login = await live.owner_login()
    ticket = await _ticket(live, login)
    port = live.ready.owner_port
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    status, head, chunks = await aio.open_stream(
        stream, f"/owner/api/workspace/observe?since_event_id=0&ticket={ticket}",
        headers={"Host": f"127.0.0.1:{port}"})
    assert status == 200 and dict(head)["content-type"].startswith("text/event-stream")
    agent = await live.join("drafter")
    types: list[str] = []
    async with aclosing(aio.iter_sse(chunks)) as messages:
        await live.call("POST", "/workspace/checkout", agent["session_id"], {"region": "Goals"})
        with trio.fail_after(5):
            async for message in messages:
                if message.comment is not None or not message.id:
                    continue
                event = json.loads(message.data)
                types.append(event["type"])
                if event["type"] == "lease.acquired":
                    break
    assert types[0] == "workspace.created" and "participant.joined" in types  # replay, then live


async def test_owner_observe_and_api_need_the_login(live: LiveRoom) -> None:
    for path in ("/owner/api/workspace/observe", "/owner/api/workspace/room"):
        answer = await _owner(live, "GET", path)
        assert answer.status == 401 and answer.json()["error"] == "unauthorized"
    # A ticket is spent by its stream: the browser's own retry with it is refused.
    login = await live.owner_login()
    ticket = await _ticket(live, login)
    path = f"/owner/api/workspace/observe?ticket={ticket}"
    first = await trio.open_tcp_stream("127.0.0.1", live.ready.owner_port)
    status, _, _ = await aio.open_stream(
        first, path, headers={"Host": f"127.0.0.1:{live.ready.owner_port}"})
    assert status == 200
    await first.aclose()
    again = await _owner(live, "GET", path)
    assert again.status == 401
    # The page itself holds the login help (its script shows it): `ce open FILE`.
    answer = await _owner(live, "GET", "/", headers={"Accept": "text/html"})
    assert answer.status == 200 and "ce open idea.md" in answer.body.decode()


async def test_the_page_and_its_files_are_served_with_a_strict_policy(live: LiveRoom) -> None:
    page = await _owner(live, "GET", "/", headers={"Accept": "text/html"})
    assert page.status == 200
    text = page.body.decode()
    assert 'name="commonroom-file" content="idea.md"' in text and "{{FILE}}" not in text
    headers = dict(page.headers)
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css"),
                       ("vendor/markdown-it.min.js", "text/javascript"), ("vendor/diff.min.js", "text/javascript")):
        answer = await _owner(live, "GET", f"/static/{name}", headers={"Accept": "*/*"})
        assert answer.status == 200 and dict(answer.headers)["content-type"].startswith(kind), name
    for name in ("index.html", "vendor/diff.LICENSE.txt", "nope.js"):
        assert (await _owner(live, "GET", f"/static/{name}")).status == 404, name
