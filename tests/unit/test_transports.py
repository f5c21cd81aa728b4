"""Transport plugins: the registry, loopback, local, and tailcat against a real fake program."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.transport import TransportPlugin, registry
from commonroom.transport.base import is_loopback
from commonroom.transport.local import LocalTransport
from commonroom.transport.loopback import LoopbackTransport
from commonroom.transport.tailcat import ProcessStream, TailcatTransport, parse_ready
from commonroom.wire import aio

FAKE_TAILCAT = Path(__file__).resolve().parent.parent / "fixtures" / "fake_tailcat.py"
FAKE_KNOBS = (
    "FAKE_TAILCAT_FAIL",
    "FAKE_TAILCAT_EXIT_AFTER",
    "FAKE_TAILCAT_NO_READY",
    "FAKE_TAILCAT_BAD_READY",
    "FAKE_TAILCAT_IGNORE_TERM",
)
LIMIT = 10.0  # a generous per-test bound; each takes well under a second


# -- helpers ----------------------------------------------------------------------


async def start_echo(nursery: trio.Nursery) -> int:
    """An "ingress" that echoes bytes and closes after the client's EOF."""

    async def handler(stream: trio.SocketStream) -> None:
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError):
                while data := await stream.receive_some(65536):
                    await stream.send_all(data)

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port: int = listeners[0].socket.getsockname()[1]
    return port


async def start_http(nursery: trio.Nursery) -> int:
    """An "ingress" answering one HTTP request and then never closing (like quart-trio)."""

    async def handler(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            body = b'{"host": "%s"}' % data.split(b"\r\n")[1].split(b": ")[1]
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
            await stream.send_all(body)
            with contextlib.suppress(trio.BrokenResourceError):
                while await stream.receive_some(65536):
                    pass

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port: int = listeners[0].socket.getsockname()[1]
    return port


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def receive_exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await stream.receive_some(65536)
        assert chunk, "unexpected EOF"
        data += chunk
    return data


def assert_no_address(exc: CommonroomError, *ports: int | None) -> None:
    assert exc.code == "transport_unavailable"
    assert "127.0.0.1" not in exc.message
    for port in ports:
        assert str(port) not in exc.message


@pytest.fixture
def fake_tailcat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`tailcat` on PATH: the fake, run by this interpreter."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "tailcat"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_TAILCAT}" "$@"\n')
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for knob in FAKE_KNOBS:
        monkeypatch.delenv(knob, raising=False)
    yield program


@pytest.fixture
def no_tailcat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


# -- registry -----------------------------------------------------------------------


def test_registry_finds_the_three_plugins_by_entry_point() -> None:
    assert {"loopback", "local", "tailcat"} <= set(registry.available())
    for name, cls in [
        ("loopback", LoopbackTransport),
        ("local", LocalTransport),
        ("tailcat", TailcatTransport),
    ]:
        plugin = registry.load(name)
        assert plugin is cls
        assert issubclass(plugin, TransportPlugin)
        assert plugin.name == name
        assert plugin.mode in ("private", "local")


def test_unknown_plugin_is_transport_unavailable() -> None:
    with pytest.raises(CommonroomError) as caught:
        registry.load("carrier-pigeon")
    assert caught.value.code == "transport_unavailable"
    assert caught.value.details["transport"] == "carrier-pigeon"


async def test_dial_dispatches_on_hint_type() -> None:
    with pytest.raises(CommonroomError) as caught:
        await registry.dial(TransportHint(type="carrier-pigeon", encrypted=False, mode="private"))
    assert caught.value.code == "transport_unavailable"


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("127.1.2.3")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("192.0.2.1")
    assert not is_loopback("example.com")


# -- loopback -----------------------------------------------------------------------


async def test_loopback_hint_and_dial() -> None:
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            port = await start_echo(nursery)
            hint = await nursery.start(LoopbackTransport().run, "127.0.0.1", port)
            assert hint == TransportHint(
                type="loopback", encrypted=False, mode="private", address="127.0.0.1", port=port
            )
            stream = await registry.dial(hint)
            async with stream:
                await stream.send_all(b"ping")
                assert await receive_exactly(stream, 4) == b"ping"
            nursery.cancel_scope.cancel()


async def test_loopback_dial_refused_is_transport_unavailable() -> None:
    port = closed_port()
    hint = TransportHint(
        type="loopback", encrypted=False, mode="private", address="127.0.0.1", port=port
    )
    with pytest.raises(CommonroomError) as caught:
        await LoopbackTransport.dial(hint)
    assert_no_address(caught.value, port)


async def test_loopback_refuses_non_loopback_addresses() -> None:
    hint = TransportHint(
        type="loopback", encrypted=False, mode="private", address="192.0.2.1", port=80
    )
    with trio.fail_after(1), pytest.raises(CommonroomError) as caught:
        await LoopbackTransport.dial(hint)
    assert caught.value.code == "transport_unavailable"
    assert "192.0.2.1" not in caught.value.message


# -- local --------------------------------------------------------------------------


async def test_local_hint_has_no_address_and_cannot_be_dialed() -> None:
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            hint = await nursery.start(LocalTransport().run, "127.0.0.1", 1234)
            nursery.cancel_scope.cancel()
    assert hint.to_json() == {"type": "local", "encrypted": False, "mode": "local"}
    with pytest.raises(CommonroomError) as caught:
        await registry.dial(hint)
    assert caught.value.code == "transport_unavailable"


async def test_local_hint_with_an_address_dials_loopback_tcp() -> None:
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            port = await start_echo(nursery)
            hint = TransportHint(
                type="local", encrypted=False, mode="local", address="127.0.0.1", port=port
            )
            async with await LocalTransport.dial(hint) as stream:
                await stream.send_all(b"x")
                assert await receive_exactly(stream, 1) == b"x"
            nursery.cancel_scope.cancel()


# -- tailcat ------------------------------------------------------------------------


def test_parse_ready() -> None:
    assert parse_ready(b"READY 100.64.0.7 4711 true") == TransportHint(
        type="tailcat", encrypted=True, mode="private", address="100.64.0.7", port=4711
    )
    assert parse_ready(b"READY host.example 1 false\r").encrypted is False
    for bad in [
        b"",
        b"READY",
        b"READY 1.2.3.4 4711",
        b"READY 1.2.3.4 4711 yes",
        b"READY 1.2.3.4 0 true",
        b"READY 1.2.3.4 65536 true",
        b"READY 1.2.3.4 -1 true",
        b"READY  4711 true",
        b"ready 1.2.3.4 4711 true",
        b"READY 1.2.3.4 4711 true extra",
        b"READY \xff 4711 true",
    ]:
        with pytest.raises(CommonroomError) as caught:
            parse_ready(bad)
        assert caught.value.code == "transport_unavailable"
        assert "1.2.3.4" not in caught.value.message


async def test_tailcat_forwards_bytes_end_to_end(fake_tailcat: Path) -> None:
    transport = TailcatTransport()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            ingress = await start_echo(nursery)
            hint = await nursery.start(transport.run, "127.0.0.1", ingress)
            assert (hint.type, hint.encrypted, hint.mode) == ("tailcat", True, "private")
            assert hint.address == "127.0.0.1"
            assert hint.port not in (None, ingress)
            serve_pid = transport.pid
            assert serve_pid is not None and alive(serve_pid)

            stream = await registry.dial(hint)
            assert isinstance(stream, ProcessStream)
            async with stream:
                await stream.send_all(b"hello through tailcat")
                assert await receive_exactly(stream, 21) == b"hello through tailcat"
                # A megabyte both ways at once, then a half-close: the echo server
                # sees EOF, closes, and the EOF travels back through both forwarders.
                payload = bytes(range(256)) * 4096
                async with trio.open_nursery() as pump:
                    pump.start_soon(stream.send_all, payload)
                    assert await receive_exactly(stream, len(payload)) == payload
                await stream.send_eof()
                assert await stream.receive_some(65536) == b""
            assert stream.returncode is not None
            assert not alive(stream.pid)
            nursery.cancel_scope.cancel()
    assert not alive(serve_pid)
    assert transport.pid is None


async def test_tailcat_carries_the_byte_client(fake_tailcat: Path) -> None:
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            ingress = await start_http(nursery)
            hint = await nursery.start(TailcatTransport().run, "127.0.0.1", ingress)
            stream = await registry.dial(hint)
            assert isinstance(stream, ProcessStream)
            # The server never closes; the client reads to Content-Length, closes the
            # stream, and that ends the `tailcat forward` process.
            response = await aio.request(stream, "GET", "/hello")
            assert response.json() == {"host": "commonroom"}
            assert not alive(stream.pid)
            nursery.cancel_scope.cancel()


async def test_tailcat_dial_to_a_dead_endpoint_is_transport_unavailable(
    fake_tailcat: Path,
) -> None:
    port = closed_port()
    hint = TransportHint(
        type="tailcat", encrypted=True, mode="private", address="127.0.0.1", port=port
    )
    with trio.fail_after(LIMIT):
        stream = await TailcatTransport.dial(hint)
        with pytest.raises(CommonroomError) as caught:
            await aio.request(stream, "GET", "/hello")
    assert_no_address(caught.value, port)


async def test_tailcat_missing_program(no_tailcat: None) -> None:
    with pytest.raises(CommonroomError) as caught:
        await TailcatTransport().run("127.0.0.1", 1234)
    assert caught.value.code == "transport_unavailable"
    assert "not found on PATH" in caught.value.message
    hint = TransportHint(
        type="tailcat", encrypted=True, mode="private", address="127.0.0.1", port=1234
    )
    with pytest.raises(CommonroomError) as caught:
        await registry.dial(hint)
    assert caught.value.code == "transport_unavailable"


async def test_tailcat_failing_to_start(
    fake_tailcat: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TAILCAT_FAIL", "1")
    with trio.fail_after(LIMIT), pytest.raises(CommonroomError) as caught:
        await TailcatTransport().run("127.0.0.1", 1234)
    assert_no_address(caught.value, 1234)
    assert "exited with status 3" in caught.value.message


async def test_tailcat_exiting_after_ready(
    fake_tailcat: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TAILCAT_EXIT_AFTER", "0.3")
    transport = TailcatTransport()
    with trio.fail_after(LIMIT), pytest.RaisesGroup(CommonroomError) as caught:
        async with trio.open_nursery() as nursery:
            hint = await nursery.start(transport.run, "127.0.0.1", 1234)
            assert hint.port is not None
    error = caught.value.exceptions[0]
    assert isinstance(error, CommonroomError)
    assert_no_address(error, 1234, hint.port)
    assert error.message == "tailcat exited with status 4"
    assert transport.pid is None


async def test_tailcat_never_ready(fake_tailcat: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_TAILCAT_NO_READY", "1")
    with trio.fail_after(LIMIT), pytest.raises(CommonroomError) as caught:
        await TailcatTransport(ready_timeout=0.5).run("127.0.0.1", 1234)
    assert caught.value.code == "transport_unavailable"
    assert "not ready within 0.5 s" in caught.value.message


async def test_tailcat_bad_ready_line(fake_tailcat: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_TAILCAT_BAD_READY", "1")
    with trio.fail_after(LIMIT), pytest.raises(CommonroomError) as caught:
        await TailcatTransport().run("127.0.0.1", 1234)
    assert_no_address(caught.value, 1234)
    assert "unexpected first line" in caught.value.message


async def test_cancelling_run_kills_the_child(fake_tailcat: Path) -> None:
    transport = TailcatTransport()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(transport.run, "127.0.0.1", 1234)
            pid = transport.pid
            assert pid is not None and alive(pid)
            nursery.cancel_scope.cancel()
    assert not alive(pid)
    assert transport.pid is None


async def test_a_child_ignoring_sigterm_is_killed_after_the_grace(
    fake_tailcat: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TAILCAT_IGNORE_TERM", "1")
    transport = TailcatTransport(grace=0.3)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(transport.run, "127.0.0.1", 1234)
            pid = transport.pid
            assert pid is not None
            nursery.cancel_scope.cancel()
            started = trio.current_time()
    assert trio.current_time() - started >= 0.3
    assert not alive(pid)
