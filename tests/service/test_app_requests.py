"""App requests in the room service (room/app_hosts.py; docs/spec/PROTOCOL.md 20), on trio's
MockClock: routed to the newest page hosting the app, answered, timed out at 15 s, refused at
once with nobody hosting, failed at once when the hosting page goes; nothing kept. The owner
listener's routes for the page's line are checked over real HTTP at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from commonroom.engine import sessions
from commonroom.engine.dispatch import open_engine
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.room.app_hosts import AppHostLine, AppRequestItem
from commonroom.room.core import Room
from tests.service.conftest import LiveRoom
from tests.service.test_room import mock_wall_clock

BUNDLE = {"version": 1, "manifest": {"title": "Chooser", "networkOrigins": []},
          "html": "<button>A</button>", "css": "", "js": "", "initialState": None}


class TaskRoom:
    """A room on the MockClock with a task (alice asked bob) whose app bob published."""

    def __init__(self, room: Room, host: str, alice: str, bob: str, task_id: str) -> None:
        self.room, self.host, self.alice, self.bob, self.task_id = room, host, alice, bob, task_id

    async def ask(self, payload: Any = None, bearer: str | None = None) -> Any:
        return await self.room.call("task.app_request", bearer or self.bob,
                                    {"task_id": self.task_id, "payload": payload or {"q": "which"}})

    async def refused(self, **kwargs: Any) -> CommonroomError:
        with pytest.raises(CommonroomError) as caught:
            await self.ask(**kwargs)
        return caught.value

    def page(self) -> AppHostLine:
        """A page that opened its line and runs this task's app."""
        line = self.room.app_hosts.open()
        self.room.app_hosts.host(line.host_id, [self.task_id])
        return line


async def task_room(doc_path: Path, clock: trio.testing.MockClock) -> TaskRoom:
    engine = open_engine(doc_path, clock=mock_wall_clock(clock))  # type: ignore[arg-type]
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    room = Room(engine, watch_interval=10**7, max_sweep_sleep=10**7, inline_store=True)
    host = sessions.mint_host_session(engine)
    bearers = []
    for name in ("alice", "bob"):
        invite = await room.call("workspace.invite", host, {})
        bearers.append(await room.call("session.join", None, {"invite": invite["invitation"], "name": name}))
    alice, bob = bearers
    handoff = await room.call("handoff.request", alice["session_id"],
                              {"to_participant_id": bob["participant_id"], "summary": "pick a draft"})
    task = await room.call("handoff.respond", bob["session_id"],
                           {"handoff_id": handoff["handoff_id"], "decision": "accept"})
    await room.call("task.app", bob["session_id"], {"task_id": task["task_id"], "bundle": BUNDLE})
    return TaskRoom(room, host, alice["session_id"], bob["session_id"], task["task_id"])


async def answer_next(line: AppHostLine, tr: TaskRoom, reply: Any = None, error: str | None = None,
                      ) -> AppRequestItem:
    item = await line.receive.receive()
    tr.room.app_hosts.answer(line.host_id, item.request_id, reply, error)
    return item


async def test_no_page_hosting_the_app_is_refused_at_once(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    tr = await task_room(doc_path, autojump_clock)
    started = trio.current_time()
    error = await tr.refused()
    assert (error.code, error.http_status, error.details["reason"]) == (
        "transport_unavailable", 503, "no_app_host")
    assert trio.current_time() == started  # at once, not after a wait
    # A page that runs other apps does not host this one.
    line = tr.room.app_hosts.open()
    tr.room.app_hosts.host(line.host_id, ["tk_other"])
    assert (await tr.refused()).details["reason"] == "no_app_host"


async def test_the_request_reaches_the_page_and_its_reply_the_agent(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    tr = await task_room(doc_path, autojump_clock)
    line = tr.page()
    async with trio.open_nursery() as nursery:
        got: list[AppRequestItem] = []

        async def page() -> None:
            got.append(await answer_next(line, tr, reply={"choice": "B"}))

        nursery.start_soon(page)
        answer = await tr.ask({"question": "A or B?"}, bearer=tr.alice)  # the requester asks too
    assert answer == {"task_id": tr.task_id, "app_revision": 1, "reply": {"choice": "B"}}
    assert got[0].payload == {"question": "A or B?"} and got[0].task_id == tr.task_id
    assert got[0].request_id.startswith("apr_")
    assert line.pending == {}  # nothing kept once answered
    with pytest.raises(CommonroomError) as late:  # an answer to a request no longer waiting
        tr.room.app_hosts.answer(line.host_id, got[0].request_id, "again")
    assert late.value.code == "invalid_request"


async def test_no_reply_in_15_seconds_is_app_timeout(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    tr = await task_room(doc_path, autojump_clock)
    line = tr.page()
    started = trio.current_time()
    error = await tr.refused()
    assert error.code == "transport_unavailable" and error.details["reason"] == "app_timeout"
    assert trio.current_time() - started == pytest.approx(limits.APP_REQUEST_TIMEOUT_SECONDS)
    item = line.receive.receive_nowait()  # it was delivered, and nobody answered
    with pytest.raises(CommonroomError):
        tr.room.app_hosts.answer(line.host_id, item.request_id, "too late")  # nothing queued


async def test_the_newest_page_gets_it_and_a_page_that_goes_fails_it_at_once(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    tr = await task_room(doc_path, autojump_clock)
    older, newer = tr.page(), tr.page()
    # Hosting again what it hosts already keeps a page's place: the newer stays newest.
    tr.room.app_hosts.host(older.host_id, [tr.task_id, "tk_other"])
    async with trio.open_nursery() as nursery:
        async def page() -> None:
            await answer_next(newer, tr, reply="from the newer page")

        nursery.start_soon(page)
        assert (await tr.ask())["reply"] == "from the newer page"
    with pytest.raises(trio.WouldBlock):
        older.receive.receive_nowait()
    # The newer page closes while a request waits on it: the request fails at once.
    async with trio.open_nursery() as nursery:
        async def closes() -> None:
            await newer.receive.receive()
            tr.room.app_hosts.close(newer.host_id)

        nursery.start_soon(closes)
        started = trio.current_time()
        error = await tr.refused()
    assert error.details["reason"] == "no_app_host" and trio.current_time() == started
    # The older one still hosts it.
    async with trio.open_nursery() as nursery:
        async def page() -> None:
            await answer_next(older, tr, reply="older")

        nursery.start_soon(page)
        assert (await tr.ask())["reply"] == "older"


async def test_an_app_that_cannot_answer_is_app_error(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    tr = await task_room(doc_path, autojump_clock)
    line = tr.page()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_next, line, tr, None, "no onRequest\x1b[2J handler")
        error = await tr.refused()
    assert error.details["reason"] == "app_error" and "\x1b" not in error.message

    async def too_big() -> None:
        item = await line.receive.receive()
        with pytest.raises(CommonroomError) as refused:
            tr.room.app_hosts.answer(line.host_id, item.request_id, "x" * limits.APP_REPLY_MAX_BYTES)
        assert refused.value.details["field"] == "reply"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(too_big)
        assert (await tr.refused()).details["reason"] == "app_error"


async def test_who_may_ask_and_what(doc_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    tr = await task_room(doc_path, autojump_clock)
    tr.page()
    invite = await tr.room.call("workspace.invite", tr.host, {})
    carol = await tr.room.call("session.join", None, {"invite": invite["invitation"], "name": "carol"})
    assert (await tr.refused(bearer=carol["session_id"])).code == "permission_denied"
    big = await tr.refused(payload={"x": "y" * limits.APP_REQUEST_MAX_BYTES})
    assert big.code == "invalid_request" and big.details["field"] == "payload"


async def test_the_owner_line_routes_refuse_what_they_do_not_know(live: LiveRoom) -> None:
    headers = await live.owner_login()
    port = live.ready.owner_port
    unknown = await live.raw("POST", "/owner/app-host/reply", port=port,
                             body={"host_id": "aph_nope", "request_id": "apr_x", "reply": 1},
                             headers={**headers, "Content-Type": "application/json"})
    assert unknown.status == 400 and unknown.json()["details"]["field"] == "host_id"
    shape = await live.raw("POST", "/owner/app-host/apps", port=port,
                           body={"host_id": "aph_nope", "task_ids": "tk_1"},
                           headers={**headers, "Content-Type": "application/json"})
    assert shape.status == 400 and shape.json()["details"]["field"] == "task_ids"
    anonymous = await live.raw("GET", "/owner/app-host", port=port,
                               headers={"Host": f"127.0.0.1:{port}"})
    assert anonymous.status == 401
    ingress = await live.call("GET", "/owner/app-host", live.host_session)
    assert ingress.status == 404  # the page's line exists only on the owner listener


async def test_a_page_has_at_most_32_requests_waiting(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    tr = await task_room(doc_path, autojump_clock)
    tr.page()
    outcomes: list[str] = []

    async def ask() -> None:
        try:
            await tr.ask()
        except CommonroomError as error:
            outcomes.append(error.details.get("reason") or error.details.get("scope") or error.code)

    async with trio.open_nursery() as nursery:
        for _ in range(33):
            nursery.start_soon(ask)
    assert sorted(outcomes) == ["app_requests"] + ["app_timeout"] * 32
