"""Rate limits charged to the right window, through a real room (issue 8, item 7)."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.service.conftest import start_room
from tests.service.test_serving import RawClient


async def test_a_live_session_is_charged_to_its_bearer_from_its_first_request(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, anonymous_per_minute=5, rate_clock=lambda: 0.0)
        # Joins are charged to their invitations' windows, not the address (issue 24 item 5).
        first = (await live.join("first"))["session_id"]
        second = (await live.join("second"))["session_id"]
        # Many refused calls of a live session do not use up the address.
        for _ in range(10):
            bad = await live.call("GET", "/workspace/read?version=zero", first)
            assert bad.status == 400
        assert (await live.call("GET", "/workspace/status", second)).status == 200
        # Unknown bearers are the address's: 5, then 429.
        codes = [(await live.call("GET", "/workspace/status", f"ses_guess{i}")).status
                 for i in range(6)]
        assert codes == [401] * 5 + [429]
        # The address is spent; live sessions are not held up by it.
        assert (await live.call("GET", "/workspace/status", first)).status == 200
        # A session that ended is unknown again: charged to the (spent) address.
        await live.call("POST", "/workspace/leave", first)
        assert (await live.call("GET", "/workspace/status", first)).status == 429
        live.stop.set()


async def test_a_stream_counts_once(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, requests_per_minute=3, rate_clock=lambda: 0.0)
        observer = await RawClient.connect(live.ready.ingress_port)
        await observer.send(
            b"GET /workspace/observe HTTP/1.1\r\nHost: commonroom\r\n"
            b"Authorization: Bearer " + live.host_session.encode() + b"\r\n\r\n")
        status, _ = await observer.read_head()
        assert status == 200
        # Events flow on the stream, charged nothing more.
        codes = [(await live.call("POST", "/workspace/invite", live.host_session, {})).status
                 for _ in range(3)]
        assert codes == [200, 200, 429]
        await observer.aclose()
        live.stop.set()


async def test_host_and_origin_are_checked_before_the_body_size(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        for header in (b"Host: evil.example\r\n", b"Host: commonroom\r\nOrigin: http://evil.example\r\n"):
            client = await RawClient.connect(live.ready.ingress_port)
            await client.send(b"POST /workspace/propose HTTP/1.1\r\n" + header
                              + b"Content-Type: application/json\r\nContent-Length: 5000000\r\n\r\n")
            status, _ = await client.read_head()
            assert status == 403
            await client.aclose()
        client = await RawClient.connect(live.ready.ingress_port)
        await client.send(b"POST /workspace/propose HTTP/1.1\r\nHost: commonroom\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 5000000\r\n\r\n")
        status, _ = await client.read_head()
        assert status == 413
        await client.aclose()
        live.stop.set()


async def test_the_owner_port_checks_host_and_origin_before_the_body_size_too(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        port = live.ready.owner_port
        for header in (b"Host: evil.example\r\n", b"Host: 127.0.0.1\r\nOrigin: http://evil.example\r\n"):
            client = await RawClient.connect(port)
            await client.send(b"POST /owner/api/workspace/propose HTTP/1.1\r\n" + header
                              + b"Content-Type: application/json\r\nContent-Length: 5000000\r\n\r\n")
            status, _ = await client.read_head()
            assert status == 403, header
            await client.aclose()
        client = await RawClient.connect(port)
        await client.send(b"POST /owner/api/workspace/propose HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 5000000\r\n\r\n")
        status, _ = await client.read_head()
        assert status == 413
        await client.aclose()
        live.stop.set()
