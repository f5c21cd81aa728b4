"""`commonroom.AsyncClient`: the trio Python client, method for method the same as `Client`.

    async with await commonroom.AsyncClient.join(invitation, name="bot") as room:
        text = await room.read("Problem")
        async with await room.checkout("Problem"):
            proposal = await room.propose("Problem", new_text, base_version=text.version)
            if (await room.wait_for_review(proposal.proposal_id)).status == "approved":
                await room.commit(proposal.proposal_id)

The operation methods are `Client`'s, as coroutines (`generated.AsyncOperations`).
Every call dials the hint's transport plugin for a connection of its own
(`wire.aio.Connection`), so one client serves many tasks at once. Waits run on
trio's clock, so `trio.testing.MockClock` drives them in tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TypeVar

import attrs

from commonroom.client import common
from commonroom.client.common import ClientBase, Resync
from commonroom.client.generated import AsyncOperations
from commonroom.client.operations import Call
from commonroom.protocol import records as r
from commonroom.protocol.events import Event
from commonroom.wire import aio
from commonroom.wire.plans import reply, review
from commonroom.wire.timeouts import Timeouts

T = TypeVar("T")


@attrs.frozen
class AsyncLease(r.Lease):
    """The lease `AsyncClient.checkout` took; `async with` releases it on exit (if still held)."""

    client: AsyncClient = attrs.field(kw_only=True, eq=False, repr=False)

    async def renew(self, minutes: int | None = None) -> r.Lease:
        return await self.client.renew(self.lease_id, minutes=minutes)

    async def release(self) -> r.Released:
        return await self.client.release(self.lease_id)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with common.releasing(exc_info[1]):
            await self.release()


class AsyncClient(ClientBase, AsyncOperations):
    """A session in a room, under trio: `await AsyncClient.join(...)`, or `AsyncClient(inv, session=...)`."""

    _connection: aio.Connection

    def _open_connection(self) -> aio.Connection:
        return aio.Connection(self.hint, timeouts=self.timeouts)

    @classmethod
    async def join(cls, invitation: str, *, name: str, kind: str = "agent",
                   timeout: float | None = None, timeouts: Timeouts | None = None) -> AsyncClient:
        """As `Client.join`: redeem `invitation`; the new session is `client.session`."""
        client = cls(invitation, session="", timeout=timeout, timeouts=timeouts)
        client._adopt(await client._run(client._join_call(name, kind)))
        return client

    async def close(self) -> None:
        """Refuse further calls; the session stays valid (use `leave()` to end it)."""
        await self._connection.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _run(self, call: Call[T]) -> T:
        method, path, params, keywords = self._wire_call(call)
        answer = await self._connection.call(method, path, params, **keywords)
        return common.record(answer, call.result)

    def _runner(self) -> aio.Runner:
        return aio.Runner(self._connection, bearer=self.session, routes=common.ROUTES)

    # -- written by hand (with `join` above): what does more than carry one call, built on the
    # methods generated from the table into `generated.py` and on `wire.plans`

    async def checkout(self, region: str, *, minutes: int | None = None) -> AsyncLease:
        """Lease `region` now; the lease is released when its `async with` block ends."""
        taken = await self._run(common.checkout_call(region, minutes))
        return AsyncLease(**common.lease_fields(taken), client=self)

    async def leave(self) -> r.Left:
        """As `Client.leave`: end the session, then close this client."""
        answer = await self._run(common.LEAVE)
        await self.close()
        return answer

    async def wait_for_review(self, proposal_id: str, timeout: float | None = None
                              ) -> r.Proposal:
        """As `Client.wait_for_review`, under trio."""
        detail = await self._runner().run(review(proposal_id, timeout))
        return common.proposal_of(detail)

    async def wait_for_reply(self, thread_id: str, timeout: float | None = None) -> r.Thread:
        """As `Client.wait_for_reply`, under trio."""
        return common.thread_of(await self._runner().run(reply(thread_id, timeout)))

    async def observe(self, since: int | None = None, *, retry: float | None = None
                      ) -> AsyncIterator[Event | Resync]:
        """As `Client.observe`: events for ever, re-opened after drops and silences."""
        async with contextlib.aclosing(self._runner().iterate(common.observe_plan(since, retry))
                                       ) as items:
            async for item in items:
                if (event := common.stream_item(item)) is not None:
                    yield event
