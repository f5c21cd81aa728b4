"""The wire core: the generated blocking driver, the plans (driven by hand, no I/O), timeouts,
the blocking driver on real sockets, and what the library may import."""

from __future__ import annotations

import ast
import importlib.util
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import commonroom
from commonroom.client import errors
from commonroom.wire import http11, plans, sync
from commonroom.wire.http11 import SSEMessage
from commonroom.wire.timeouts import DEFAULT, Timeouts
from tests.silent_room import SilentRoom

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(commonroom.__file__).resolve().parent


def load_tool(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_blocking_driver_is_generated_from_the_trio_driver() -> None:
    tool = load_tool("unasync_wire")
    generated = tool.generate(tool.SOURCE.read_text())
    assert generated == tool.TARGET.read_text(), "run: python tools/unasync_wire.py"
    assert "await " not in generated and "async " not in generated
    assert "_trio_io" not in generated and "import trio" not in generated


def test_the_library_imports_neither_the_cli_nor_the_engine() -> None:
    for package in ("client", "wire"):
        for path in sorted((PACKAGE / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                for name in names:
                    top = ".".join(name.split(".")[:2])
                    assert top not in ("commonroom.cli", "commonroom.engine", "commonroom.room",
                                       "commonroom.http", "commonroom.service"), (path, name)
                    if package == "wire" and name.startswith("commonroom.client"):
                        # The wire raises the library's errors and knows nothing else above it.
                        assert name == "commonroom.client.errors" or (
                            name == "commonroom.client" and _imported(node) == {"errors"}), (path, name)


def _imported(node: ast.AST) -> set[str]:
    return {alias.name for alias in node.names} if isinstance(node, ast.ImportFrom) else set()


# -- timeouts -----------------------------------------------------------------------------


def test_timeouts_parse_names_and_refuse_the_rest() -> None:
    assert Timeouts.parse("") == DEFAULT
    assert Timeouts.parse(" silence=2, call=7.5 ") == Timeouts(connect=DEFAULT.connect, call=7.5,
                                                               silence=2.0, retry=DEFAULT.retry)
    for bad in ("silence", "silent=3", "call=soon", "connect=0", "retry=-1", "call=inf"):
        with pytest.raises(ValueError):
            Timeouts.parse(bad)


# -- plans, driven by hand ------------------------------------------------------------------


class Script:
    """Steps a plan through `send`/`throw`, recording what it asked for."""

    def __init__(self, plan: plans.Plan[Any]) -> None:
        self.plan = plan
        self.step: Any = next(plan)

    def reply(self, value: Any = None) -> Any:
        self.step = self.plan.send(value)
        return self.step

    def fail(self, error: BaseException) -> Any:
        self.step = self.plan.throw(error)
        return self.step

    def emitted(self) -> Any:
        assert isinstance(self.step, plans.Emit), self.step
        item = self.step.item
        self.reply()
        return item


def lost() -> http11.ConnectionLost:
    return http11.ConnectionLost("the connection to the room failed: Connection reset by peer")


def test_a_stream_resumes_after_a_drop_from_the_last_event_with_the_rooms_delay() -> None:
    script = Script(plans.events("/workspace/observe", since=3))
    assert script.step == plans.Open("/workspace/observe", {"Last-Event-ID": "3"})
    script.reply()
    assert script.emitted() == plans.Connected(again=False)
    assert script.step == plans.Next()
    first = SSEMessage(data="{}", id="4", retry=1500)
    script.reply(first)
    assert script.emitted() is first
    script.fail(http11.TimedOut("the room sent nothing for 45 seconds"))
    assert script.emitted() == plans.Reconnecting(1.5, "the room sent nothing for 45 seconds", "4")
    assert script.step == plans.Sleep(1.5)
    script.reply()
    assert script.step == plans.Open("/workspace/observe", {"Last-Event-ID": "4"})
    script.reply()
    assert script.emitted() == plans.Connected(again=True)
    script.reply(None)  # the room ended the stream: open it again, nothing lost
    assert script.emitted() == plans.Reconnecting(1.5, "the room ended the stream", "4")


def test_a_stream_that_never_opened_or_is_refused_ends_with_the_error() -> None:
    with pytest.raises(http11.ConnectionLost):
        Script(plans.events("/workspace/observe")).fail(lost())
    script = Script(plans.events("/workspace/observe", retry=0.1))
    script.reply()
    script.emitted()
    with pytest.raises(errors.Unauthorized):
        script.fail(errors.Unauthorized("unauthorized", "unknown or ended session"))


def test_a_persistent_stream_backs_off_and_resets_once_open() -> None:
    script = Script(plans.events("/mcp", headers={"MCP-Protocol-Version": "v"}, resume=False,
                                 persistent=True, backoff=(0.25, 1.0)))
    delays = []
    for _ in range(4):
        script.fail(lost())
        assert isinstance(script.emitted(), plans.Reconnecting)
        delays.append(script.step.seconds)
        assert script.reply() == plans.Open("/mcp", {"MCP-Protocol-Version": "v"})
    assert delays == [0.25, 0.5, 1.0, 1.0]
    script.reply()
    script.emitted()
    script.reply(SSEMessage(data="{}", id="9"))
    script.emitted()
    script.fail(lost())
    script.emitted()
    assert script.step == plans.Sleep(0.25)
    assert script.reply() == plans.Open("/mcp", {"MCP-Protocol-Version": "v"})  # resume=False


def test_a_review_wait_asks_the_room_again_while_it_says_waiting() -> None:
    """No cursor and no event filtering: the proposal's wait answers `waiting` or the decision."""
    script = Script(plans.review("pr_1", timeout=30))
    assert script.step == plans.Now()
    assert script.reply(100.0) == plans.Now()
    assert script.reply(101.0) == plans.Call(
        "workspace.proposal.wait", {"proposal_id": "pr_1", "timeout_seconds": 25.0}, 25.0)
    script.reply({"proposal": {"proposal_id": "pr_1", "status": "pending"}, "waiting": True})
    assert script.reply(120.0) == plans.Call(
        "workspace.proposal.wait", {"proposal_id": "pr_1", "timeout_seconds": 10.0},
        10.0)  # the deadline, not the hold, is nearer
    with pytest.raises(StopIteration) as done:
        script.reply({"proposal": {"proposal_id": "pr_1", "status": "approved"}, "waiting": False})
    assert done.value.value["status"] == "approved"


def test_a_review_wait_gives_up_at_its_deadline() -> None:
    script = Script(plans.review("pr_1", timeout=1))
    script.reply(0.0)
    script.reply(0.0)
    script.reply({"proposal": {"status": "pending"}, "waiting": True})
    with pytest.raises(errors.Timeout) as caught:
        script.reply(1.5)
    assert caught.value.code == "timeout" and caught.value.details["status"] == "pending"


def test_a_wait_outlives_the_room_saying_it_reconnects() -> None:
    """A room that restarts mid-wait: the wait says so, pauses (backing off), and asks again."""
    script = Script(plans.reply("th_1"))
    asked = plans.Call("workspace.thread.wait", {"thread_id": "th_1", "timeout_seconds": 25.0}, 25.0)
    assert script.step == asked
    down = errors.TransportUnavailable("transport_unavailable", "the room is unreachable")
    notice = script.fail(down)
    assert isinstance(notice, plans.Emit) and isinstance(notice.item, plans.Reconnecting)
    assert notice.item.reason == "the room is unreachable"
    assert script.reply() == plans.Sleep(plans.RECONNECT_BACKOFF[0])
    assert script.reply() == asked
    script.fail(down)
    assert script.reply() == plans.Sleep(plans.RECONNECT_BACKOFF[0] * 2)  # backing off
    assert script.reply() == asked
    with pytest.raises(StopIteration) as done:
        script.reply({"thread": {"thread_id": "th_1", "status": "open"}, "waiting": False})
    assert done.value.value["thread_id"] == "th_1"
    refused = Script(plans.review("pr_gone"))
    with pytest.raises(errors.CommonroomError):
        refused.fail(errors.CommonroomError("proposal_not_found", "no proposal"))


def test_a_hold_keeps_trying_says_so_once_and_falls_back_to_status() -> None:
    script = Script(plans.presence())
    assert script.step == plans.Call("workspace.room")
    wait = script.reply({"latest_event_id": 3})
    assert wait == plans.Call("workspace.wait", {"cursor": 3, "timeout_seconds": 25}, 25)
    assert script.reply({"events": [], "cursor": 5, "resync": False}).params["cursor"] == 5
    script.fail(lost())
    assert isinstance(script.emitted(), plans.Unreachable)
    assert script.step == plans.Sleep(plans.RETRY_SECONDS)
    script.reply()
    script.fail(lost())  # still down: not said again
    assert script.step == plans.Sleep(plans.RETRY_SECONDS)
    script.reply()
    limited = errors.RateLimited("limit_exceeded", "slow down", http_status=429,
                                 retry_after_seconds=7)
    assert script.fail(limited) == plans.Sleep(7.0)
    script.reply()
    refused = errors.PermissionDenied("permission_denied", "no observe")
    assert script.fail(refused) == plans.Call("workspace.status")  # no `observe`: poll status
    assert script.reply({}) == plans.Sleep(plans.STATUS_POLL_SECONDS)
    script.reply()
    with pytest.raises(errors.Unauthorized):
        script.fail(errors.Unauthorized("unauthorized", "ended"))


# -- the blocking driver on real sockets ------------------------------------------------------


@pytest.fixture
def raw_server() -> Iterator[tuple[int, list[bytes], list[bytes]]]:
    """A listener answering each connection with the next reply, then leaving it open."""
    listener = socket.create_server(("127.0.0.1", 0))
    replies: list[bytes] = []
    seen: list[bytes] = []
    conns: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            seen.append(data)
            if replies:
                conn.sendall(replies.pop(0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], replies, seen
    listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close alone does not)
    listener.close()
    for conn in conns:
        conn.close()
    thread.join(5)


def test_blocking_request_reads_to_content_length_and_closes(raw_server: Any) -> None:
    port, replies, seen = raw_server
    replies.append(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world")
    response = sync.request(socket.create_connection(("127.0.0.1", port)), "GET", "/x",
                            timeout=5)
    assert (response.status, response.body) == (200, b"hello world")
    head = seen[0].lower().split(b"\r\n")
    assert b"host: commonroom" in head and b"connection: close" in head


def test_a_kept_connection_the_room_closed_while_idle_is_replaced_once() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = 0  # counted before the answer is sent: the client sees it once answered
    closed = threading.Event()  # the first connection was closed (FIN sent) after its answer

    def serve() -> None:
        nonlocal accepted
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                body = b'{"version":%d}' % (accepted - 1)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    hint = {"type": "loopback", "address": "127.0.0.1", "port": listener.getsockname()[1]}
    connection = sync.Connection(hint, timeouts=Timeouts(call=5), keep_alive=True)
    try:
        assert connection.call("GET", "/workspace/status") == {"version": 0}
        assert closed.wait(5)
        # The kept connection is closed now: the call goes again on a fresh one, once.
        assert connection.call("GET", "/workspace/status") == {"version": 1}
        assert accepted == 2
    finally:
        connection.close()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(5)


def test_a_call_the_room_never_answers_ends_at_the_call_bound(raw_server: Any) -> None:
    port, _, _ = raw_server
    hint = {"type": "loopback", "address": "127.0.0.1", "port": port}
    started = time.monotonic()
    with pytest.raises(http11.TimedOut) as caught:
        sync.Connection(hint, timeouts=Timeouts(call=0.3)).call("GET", "/workspace/status")
    assert 0.25 < time.monotonic() - started < 5
    assert caught.value.code == "transport_unavailable" and str(port) not in caught.value.message


def test_a_blocking_stream_that_goes_silent_fails_at_the_silence_bound() -> None:
    room = SilentRoom([[1]])
    try:
        events = sync.Connection(room.hint(), timeouts=Timeouts(silence=0.3)).open_events(
            "/workspace/observe")
        first = events.next()
        assert first is not None and first.id == "1" and first.retry == 50
        started = time.monotonic()
        with pytest.raises(http11.TimedOut, match=r"sent nothing for 0\.3 seconds"):
            events.next()
        assert time.monotonic() - started < 5
    finally:
        room.close()
