"""Issue 24 items 1 and 15, issue 21 item 5: the owner's authority over HTTP, attacked directly.

A real room (hypercorn on ephemeral 127.0.0.1 ports, a real sidecar) in the
test's nursery, with an injected wall clock where time matters. What an
attacker on this machine's loopback can try without the browser:

- a cookie, any cookie, by itself -> 401 on every owner route;
- an `Origin` other than the owner listener's own -> 403, even with a valid login;
- the printed link's token in the query (`/?token=`, the old shape) -> no login, not spent;
- an unspent link after 10 minutes -> refused (item 15);
- a stream ticket twice, late, or as a login header -> refused;
- the sidecar read as a file -> no credential in it, only its hash;

and what the host relies on: the login survives a restart, lasts 12 h from its
last use, and `POST /owner/logout-all` ends it and its open streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import trio
from tools.hostile.owner_listener import owner_routes

from commonroom.engine.core import SIDECAR_SUFFIX
from commonroom.protocol.timefmt import ManualClock
from commonroom.wire import aio
from commonroom.wire.http11 import Response
from tests.service.conftest import SAMPLE, LiveRoom, start_room


def _doc(tmp_path: Path) -> Path:
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE)
    return path


def _clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


async def owner(live: LiveRoom, method: str, path: str, headers: Mapping[str, str] | None = None,
                body: Any = None) -> Response:
    port = live.ready.owner_port
    all_headers = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    if body is not None:
        all_headers["Content-Type"] = "application/json"
    return await live.raw(method, path, port=port, body=body, headers=all_headers)


def _token(live: LiveRoom) -> str:
    return live.ready.human_url.split("#token=", 1)[1]


async def _login(live: LiveRoom, token: str | None = None) -> dict[str, str]:
    answer = await owner(live, "POST", "/owner/login", body={"token": token or _token(live)})
    assert answer.status == 200, answer.body
    return {"X-Commonroom-Owner": answer.json()["credential"]}


async def test_a_cookie_alone_authorizes_nothing(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, _doc(tmp_path))
        login = await _login(live)
        credential = login["X-Commonroom-Owner"]
        for cookie in (f"commonroom_owner={credential}", "commonroom_owner=anything",
                       f"X-Commonroom-Owner={credential}"):
            for method, path in owner_routes():
                answer = await owner(live, method, path, {"Cookie": cookie},
                                     body={} if method == "POST" else None)
                assert answer.status == 401, (cookie, method, path, answer.status)
                assert answer.json()["error"] == "unauthorized"
                assert answer.header("set-cookie") is None and answer.header("www-authenticate") is None
        # The page is served to anyone and holds no secret of the room.
        page = await owner(live, "GET", "/", {"Cookie": f"commonroom_owner={credential}"})
        text = page.body.decode()
        assert page.status == 200 and credential not in text and _token(live) not in text
        assert live.host_session not in text
        live.stop.set()


async def test_only_the_listeners_own_origin_passes(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, _doc(tmp_path))
        login = await _login(live)
        port = live.ready.owner_port
        for origin in ("http://localhost:9999", f"http://127.0.0.1:{live.ready.ingress_port}",
                       f"http://localhost:{port}", "http://127.0.0.1", "null",
                       f"https://127.0.0.1:{port}", f"http://127.0.0.2:{port}"):
            for method, path in (("GET", "/owner/api/workspace/status"),
                                 ("POST", "/owner/api/workspace/invite")):
                answer = await owner(live, method, path, {**login, "Origin": origin},
                                     body={} if method == "POST" else None)
                assert answer.status == 403 and answer.json()["error"] == "permission_denied", origin
        ok = await owner(live, "POST", "/owner/api/workspace/invite",
                         {**login, "Origin": f"http://127.0.0.1:{port}"}, body={})
        assert ok.status == 200
        live.stop.set()


async def test_the_token_works_only_from_the_fragment_and_once(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, _doc(tmp_path))
        token = _token(live)
        assert live.ready.human_url == f"http://127.0.0.1:{live.ready.owner_port}/#token={token}"
        old_shape = await owner(live, "GET", f"/?token={token}")
        assert old_shape.status == 200 and old_shape.header("set-cookie") is None  # just the page
        await _login(live, token)  # ...so the token was not spent by it
        again = await owner(live, "POST", "/owner/login", body={"token": token})
        assert again.status == 401 and again.json()["details"]["reason"] == "login_link"
        for bad in ({}, {"token": 7}, {"token": ""}, {"token": "\ud800"}):
            answer = await owner(live, "POST", "/owner/login", body=bad)
            assert answer.status in (400, 401), bad
        live.stop.set()


async def test_an_unspent_link_expires_after_ten_minutes(tmp_path: Path) -> None:
    clock = _clock()
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, _doc(tmp_path), clock=clock)
        minted = await owner(live, "POST", "/owner/login-link",
                             {"Authorization": f"Bearer {live.host_session}"})
        fresh = minted.json()["url"].split("#token=", 1)[1]
        clock.advance(minutes=9, seconds=59)
        await _login(live, fresh)  # within 10 minutes: fine
        clock.advance(seconds=2)  # the printed link is now 10 min 1 s old
        late = await owner(live, "POST", "/owner/login", body={"token": _token(live)})
        assert late.status == 401 and "10 minutes" in late.json()["message"]
        live.stop.set()


async def test_a_login_lasts_12_hours_from_its_last_use_and_survives_a_restart(tmp_path: Path) -> None:
    doc = _doc(tmp_path)
    clock = _clock()
    async with trio.open_nursery() as nursery:
        first = await start_room(nursery, doc, clock=clock)
        login = await _login(first)
        first.stop.set()
    sidecar = doc.with_name(doc.name + SIDECAR_SUFFIX).read_bytes()
    assert login["X-Commonroom-Owner"].encode() not in sidecar  # the hash is kept, never the login
    clock.advance(hours=11)
    async with trio.open_nursery() as nursery:
        second = await start_room(nursery, doc, clock=clock)
        status = await owner(second, "GET", "/owner/api/workspace/status", login)
        assert status.status == 200  # a restart later, the same tab's login still works
        second.stop.set()
    clock.advance(hours=11)  # 22 h after the login, 11 h after its last use
    async with trio.open_nursery() as nursery:
        third = await start_room(nursery, doc, clock=clock)
        assert (await owner(third, "GET", "/owner/api/workspace/status", login)).status == 200
        clock.advance(hours=12, seconds=1)
        assert (await owner(third, "GET", "/owner/api/workspace/status", login)).status == 401
        third.stop.set()


async def test_stream_tickets_are_single_use_short_and_not_logins(tmp_path: Path) -> None:
    clock = _clock()
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, _doc(tmp_path), clock=clock)
        login = await _login(live)
        ticket = (await owner(live, "POST", "/owner/stream-ticket", login)).json()["ticket"]
        as_login = await owner(live, "GET", "/owner/api/workspace/status", {"X-Commonroom-Owner": ticket})
        assert as_login.status == 401
        as_ticket = await owner(live, "GET", "/owner/api/workspace/observe?ticket="
                                + login["X-Commonroom-Owner"])
        assert as_ticket.status == 401
        clock.advance(seconds=31)
        late = await owner(live, "GET", f"/owner/api/workspace/observe?ticket={ticket}")
        assert late.status == 401  # 30 s, and it was not spent by the refusals above either
        live.stop.set()


async def test_logout_all_ends_logins_tickets_and_open_streams(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, _doc(tmp_path))
        login = await _login(live)
        ticket = (await owner(live, "POST", "/owner/stream-ticket", login)).json()["ticket"]
        spare = (await owner(live, "POST", "/owner/stream-ticket", login)).json()["ticket"]
        port = live.ready.owner_port
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        status, _, chunks = await aio.open_stream(
            stream, f"/owner/api/workspace/observe?ticket={ticket}", headers={"Host": f"127.0.0.1:{port}"})
        assert status == 200
        refused = await owner(live, "POST", "/owner/logout-all", login)
        assert refused.status == 401  # the page's login cannot do this; the host bearer can
        ended = await owner(live, "POST", "/owner/logout-all",
                            {"Authorization": f"Bearer {live.host_session}"})
        assert ended.status == 200 and ended.json() == {"ended": 1}
        with trio.fail_after(5):  # the open stream ends now, not at its next event
            async with chunks:
                async for _ in chunks:
                    pass
        assert (await owner(live, "GET", "/owner/api/workspace/status", login)).status == 401
        assert (await owner(live, "GET", f"/owner/api/workspace/observe?ticket={spare}")).status == 401
        live.stop.set()


def test_a_login_kept_by_the_sidecar_is_one_row_per_login(tmp_path: Path) -> None:
    """The migration's table holds hashes and times only (checked on the sidecar itself)."""
    import sqlite3

    from commonroom.engine import owner_logins
    from commonroom.engine.dispatch import open_engine

    clock = _clock()
    engine = open_engine(_doc(tmp_path), clock=clock)
    try:
        owner_logins.save(engine, b"h" * 32, clock() + timedelta(hours=12))
        owner_logins.save(engine, b"h" * 32, clock() + timedelta(hours=13))
        owner_logins.save(engine, b"o" * 32, clock() + timedelta(seconds=1))
        clock.advance(seconds=2)
        assert owner_logins.load(engine) == {b"h" * 32: clock() - timedelta(seconds=2) + timedelta(hours=13)}
        columns = [row[1] for row in engine.conn.execute("PRAGMA table_info(owner_logins)")]
        assert columns == ["login_hash", "created_at", "expires_at"]
        assert owner_logins.end_all(engine) == 1 and owner_logins.load(engine) == {}
    finally:
        engine.close()
    assert sqlite3.connect(tmp_path / ("idea.md" + SIDECAR_SUFFIX)).execute(
        "SELECT count(*) FROM owner_logins").fetchone() == (0,)
