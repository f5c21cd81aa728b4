"""A real room in the test's trio nursery: real hypercorn on ephemeral 127.0.0.1 ports."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from commonroom.protocol.events import Event
from commonroom.service import Ready, ServeOptions, serve_room
from commonroom.wire import aio
from tests.conftest import SAMPLE


@attrs.define
class LiveRoom:
    ready: Ready
    path: Path
    stop: trio.Event
    host_session: str

    async def raw(self, method: str, path: str, *, body: Any = None,
                  headers: Mapping[str, str] | None = None, port: int | None = None,
                  raw_body: bytes | None = None) -> aio.Response:
        stream = await trio.open_tcp_stream("127.0.0.1", port or self.ready.ingress_port)
        data = raw_body if raw_body is not None else (
            None if body is None else json.dumps(body).encode())
        return await aio.request(stream, method, path, headers=headers, body=data)

    async def call(self, method: str, path: str, bearer: str | None = None, body: Any = None,
                   headers: Mapping[str, str] | None = None) -> aio.Response:
        all_headers = dict(headers or {})
        if bearer is not None:
            all_headers["Authorization"] = f"Bearer {bearer}"
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        return await self.raw(method, path, body=body, headers=all_headers)

    async def owner_login(self) -> dict[str, str]:
        """Log in to the owner page as its script does (the printed link's fragment token,
        exchanged once): the headers of an owner API call."""
        port = self.ready.owner_port
        token = self.ready.human_url.split("#token=", 1)[1]
        login = await self.raw("POST", "/owner/login", body={"token": token}, port=port,
                               headers={"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"})
        assert login.status == 200, login.body
        return {"Host": f"127.0.0.1:{port}", "X-Commonroom-Owner": login.json()["credential"]}

    async def join(self, name: str = "agent", capabilities: list[str] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if capabilities is not None:
            params["capabilities"] = capabilities
        invite = (await self.call("POST", "/workspace/invite", self.host_session, params)).json()
        joined = await self.call("POST", "/session/join", None,
                                 {"invite": invite["invitation"], "name": name})
        assert joined.status == 200, joined.body
        result: dict[str, Any] = joined.json()
        return result

    async def host_appends(self, marker: str) -> int:
        """The host commits the whole document with `marker` appended; the new version."""
        text = self.path.read_text() + f"\n{marker}\n"
        version = (await self.call("GET", "/workspace/status", self.host_session)).json()["version"]
        answer = await self.call("POST", "/workspace/commit", self.host_session,
                                 {"content": text, "summary": marker, "base_version": version})
        assert answer.status == 200, answer.body
        return int(answer.json()["version"])


def count_direct(monkeypatch: pytest.MonkeyPatch, writer: type[Any]) -> list[int]:
    """The ids of the events `writer`'s direct lane took (written, or nothing to write for
    that stream), in order: `writer.write_event_nowait` counted for the test."""
    taken: list[int] = []
    real = writer.write_event_nowait

    def counting(self: Any, event: Event, owe: Any) -> bool:
        took: bool = real(self, event, owe)
        if took:
            taken.append(event.event_id)
        return took

    monkeypatch.setattr(writer, "write_event_nowait", counting)
    return taken


async def start_room(nursery: trio.Nursery, path: Path, **options: Any) -> LiveRoom:
    from commonroom.service import read_credentials

    stop = trio.Event()
    ready_box: list[Ready] = []
    got = trio.Event()

    def on_ready(ready: Ready) -> None:
        ready_box.append(ready)
        got.set()

    opts = ServeOptions(path=path, owner_port=0, ingress_port=0,
                        install_signal_handlers=False, **options)
    nursery.start_soon(lambda: serve_room(opts, on_ready=on_ready, stop=stop))
    with trio.fail_after(10):
        await got.wait()
    creds = read_credentials(path)
    assert creds is not None
    return LiveRoom(ready_box[0], path, stop, creds.host_session)


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE)
    return path


@pytest.fixture
async def live(doc: Path) -> AsyncIterator[LiveRoom]:
    async with trio.open_nursery() as nursery:
        room = await start_room(nursery, doc)
        yield room
        room.stop.set()


@pytest.fixture
async def legacy_live(doc: Path) -> AsyncIterator[LiveRoom]:
    """A room started with `ce serve --mcp-legacy`: /mcp serves the initialize eras too."""
    async with trio.open_nursery() as nursery:
        room = await start_room(nursery, doc, mcp_legacy=True)
        yield room
        room.stop.set()
