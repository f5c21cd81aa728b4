"""`AsyncClient` and `Client` against a real room (hypercorn on 127.0.0.1), in one trio run.

The blocking `Client` runs in a worker thread (`trio.to_thread.run_sync`)
while the room serves in the test's trio loop.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any

import pytest
import trio

import commonroom
from commonroom.protocol.events import Event
from tests.service.conftest import LiveRoom

GOALS = "Plan/Goals"


async def test_async_client_loop_errors_and_review_wait(live: LiveRoom, doc: Path) -> None:
    invitation = live.ready.invitation
    host = commonroom.AsyncClient(invitation, session=live.host_session)
    async with await commonroom.AsyncClient.join(invitation, name="bot") as bot:
        assert bot.joined is not None and bot.joined.name == "bot"
        text = await bot.read("Goals")
        assert text.region == GOALS and text.version == 1
        other = await commonroom.AsyncClient.join((await host.invite()).invitation, name="other")
        async with await bot.checkout("Goals") as lease:
            assert isinstance(lease, commonroom.AsyncLease) and lease.region == GOALS
            with pytest.raises(commonroom.LeaseConflict) as conflict:
                await other.checkout("Goals")
            assert conflict.value.lease_id == lease.lease_id
            assert conflict.value.holder == bot.joined.participant_id
            assert conflict.value.region == GOALS
            proposal = await bot.propose("Goals", "## Goals\n\n- ship it soon\n\n",
                                         base_version=text.version, summary="sooner")
            assert proposal.status == "pending"
            with pytest.raises(commonroom.Timeout):
                await bot.wait_for_review(proposal.proposal_id, timeout=0.2)
            decided: list[Any] = []

            async def wait() -> None:
                decided.append(await bot.wait_for_review(proposal.proposal_id, timeout=20))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait)
                await trio.sleep(0)  # let the waiter start its long-poll first
                await host.review(proposal.proposal_id, "approve", revision=proposal.revision)
            assert decided[0].status == "approved"
            committed = await bot.commit(proposal.proposal_id)
            assert committed.version == 2 and "ship it soon" in doc.read_text()
        assert (await bot.leases()).leases == []  # the lease was released on exit
        with pytest.raises(commonroom.ProposalNotFound):
            await bot.commit("pr_missing")
        with pytest.raises(commonroom.InvalidRegion):
            await bot.read("No/Such")

        # Two approved proposals on one region: the second one's commit is stale.
        current = await bot.read("Risks")
        ids = []
        for word in ("one", "two"):
            made = await bot.propose("Risks", f"## Risks\n\n{word}\n\n",
                                     base_version=current.version)
            await host.review(made.proposal_id, "approve", revision=made.revision)
            ids.append(made.proposal_id)
        await bot.commit(ids[0])
        with pytest.raises(commonroom.StaleVersion) as stale:
            await bot.commit(ids[1])
        assert stale.value.current_version == 3 and stale.value.base_version == 2
        assert "+one" in (stale.value.diff or "") and stale.value.changes
        left = await other.leave()
        assert left.left
        with pytest.raises(commonroom.TransportUnavailable, match="closed"):
            await other.status()  # a client that left is closed
        resumed = commonroom.AsyncClient(invitation, session=other.session)
        with pytest.raises(commonroom.Unauthorized):
            await resumed.status()  # and its session is over


async def test_observe_resumes_after_a_drop_without_gap(live: LiveRoom) -> None:
    """A proxy between client and room cuts the stream; the client reconnects from its cursor."""
    room_port = live.ready.ingress_port
    cuts: list[trio.CancelScope] = []

    async def pipe(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
        async for chunk in source:
            await sink.send_all(chunk)

    async def handle(client: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            cuts.append(scope)
            upstream = await trio.open_tcp_stream("127.0.0.1", room_port)
            async with client, upstream, trio.open_nursery() as nursery:
                nursery.start_soon(pipe, client, upstream)
                nursery.start_soon(pipe, upstream, client)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        proxy_port = listeners[0].socket.getsockname()[1]
        joined = await live.join("watcher")
        hint = {"type": "loopback", "encrypted": False, "mode": "private",
                "address": "127.0.0.1", "port": proxy_port}
        watcher = commonroom.AsyncClient(live.ready.invitation, session=joined["session_id"],
                                         hint=hint)
        host = commonroom.AsyncClient(live.ready.invitation, session=live.host_session)
        start = (await host.room()).latest_event_id
        send, receive = trio.open_memory_channel[Event](100)

        async def collect() -> None:
            async with contextlib.aclosing(watcher.observe(since=start, retry=0.05)) as items:
                async for item in items:
                    if isinstance(item, Event):
                        await send.send(item)

        nursery.start_soon(collect)

        async def next_invitation() -> Event:
            with trio.fail_after(10):
                while True:
                    event = await receive.receive()
                    seen.append(event.event_id)
                    if event.type == "invitation.created":
                        return event

        seen: list[int] = []
        await host.invite(label="before")
        await next_invitation()
        assert len(cuts) == 1
        for scope in cuts:
            scope.cancel()  # the stream drops mid-body
        await host.invite(label="during")
        await host.invite(label="after")
        during, after = await next_invitation(), await next_invitation()
        assert len(cuts) >= 2  # it came back through the proxy
        assert getattr(during.payload, "label", "during") == "during"
        assert seen == sorted(set(seen)) and after.event_id > during.event_id  # no gap, no dup
        nursery.cancel_scope.cancel()


async def test_sync_client_in_a_thread(live: LiveRoom, doc: Path) -> None:
    invitation = live.ready.invitation

    def script() -> list[str]:
        out = []
        with commonroom.Client.join(invitation, name="sync-bot") as bot:
            text = bot.read("Goals")
            with bot.checkout("Risks") as released_by_hand:
                released_by_hand.release()  # leaving the block must not fail on it
            with bot.checkout("Goals") as lease:
                out.append(lease.lease_id)
                made = bot.propose("Goals", "## Goals\n\n- sync\n\n", base_version=text.version)
                out.append(made.proposal_id)
            assert bot.leases().leases == []
            events = bot.observe(since=0)
            first = next(events)
            assert isinstance(first, Event) and first.event_id == 1
            out.append(first.type)
            bot.leave()
        return out

    lease_id, proposal_id, first_type = await trio.to_thread.run_sync(script)
    assert lease_id.startswith("ls_") and proposal_id.startswith("pr_")
    assert first_type == "workspace.created"


async def test_sync_client_keeps_one_connection_and_survives_its_close(live: LiveRoom) -> None:
    room_port = live.ready.ingress_port
    cuts: list[trio.CancelScope] = []

    async def pipe(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
        async for chunk in source:
            await sink.send_all(chunk)

    async def handle(client: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            cuts.append(scope)
            upstream = await trio.open_tcp_stream("127.0.0.1", room_port)
            async with client, upstream, trio.open_nursery() as nursery:
                nursery.start_soon(pipe, client, upstream)
                nursery.start_soon(pipe, upstream, client)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, handle, 0,
                                                          host="127.0.0.1"))
        proxy_port = listeners[0].socket.getsockname()[1]
        joined = await live.join("keeper")
        hint = {"type": "loopback", "encrypted": False, "mode": "private",
                "address": "127.0.0.1", "port": proxy_port}
        bot = commonroom.Client(live.ready.invitation, session=joined["session_id"], hint=hint)
        versions = [await trio.to_thread.run_sync(lambda: bot.status().version) for _ in range(3)]
        assert versions == [1, 1, 1] and len(cuts) == 1  # one connection for three calls
        for scope in cuts:
            scope.cancel()  # the connection closes while idle
        lease = await trio.to_thread.run_sync(lambda: bot.checkout("Goals"))
        assert lease.region == GOALS and len(cuts) == 2  # sent once more, on a new one
        await trio.to_thread.run_sync(bot.close)
        nursery.cancel_scope.cancel()
