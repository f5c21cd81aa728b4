"""`commonroom.AsyncClient`: the trio Python client, method for method the same as `Client`.

    async with await commonroom.AsyncClient.join(invitation, name="bot") as room:
        text = await room.read("Problem")
        async with await room.checkout("Problem"):
            proposal = await room.propose("Problem", new_text, base_version=text.version)
            if (await room.wait_for_review(proposal.proposal_id)).status == "approved":
                await room.commit(proposal.proposal_id)

The operation methods are `operations.Operations`, the same as `Client`'s; as
coroutines here. Every call dials the hint's transport plugin for a connection
of its own (`wire.aio.Connection`), so one client can serve many tasks at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar

import attrs

from commonroom.client import common, errors
from commonroom.client.common import ClientBase, Resync
from commonroom.client.operations import AsyncShell, Call, Operations
from commonroom.client.routes import ROUTES
from commonroom.protocol import records as r
from commonroom.protocol.events import Event
from commonroom.wire import aio, plans
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

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            await self.release()
        except errors.CommonroomError as error:
            if not common.release_failure_ignored(error, exc):
                raise


class AsyncClient(ClientBase, Operations, AsyncShell):
    """A session in a room, under trio: `await AsyncClient.join(...)`, or `AsyncClient(inv, session=...)`."""

    def __init__(self, invitation: str, *, session: str, timeout: float | None = None,
                 hint: dict[str, Any] | None = None, timeouts: Timeouts | None = None) -> None:
        super().__init__(invitation, session=session, timeout=timeout, hint=hint,
                         timeouts=timeouts)
        self._connection = aio.Connection(self.hint, timeouts=self.timeouts)

    @classmethod
    async def join(cls, invitation: str, *, name: str, kind: str = "agent",
                   timeout: float | None = None, timeouts: Timeouts | None = None) -> AsyncClient:
        """Redeem `invitation` as participant `name`; the new session is `client.session`."""
        client = cls(invitation, session="", timeout=timeout, timeouts=timeouts)
        client._adopt(await client._run(common.join_call(invitation, name, kind, client.hint)))
        return client

    async def close(self) -> None:
        """Refuse further calls; the session stays valid (use `leave()` to end it)."""
        await self._connection.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _run(self, call: Call[T]) -> T:
        method, path = common.route(call)
        answer = await self._connection.call(method, path, call.params, bearer=self.session,
                                             hold=call.hold)
        return common.record(answer, call.result)

    async def checkout(self, region: str, *, minutes: int | None = None) -> AsyncLease:
        """Lease `region` now; the returned lease releases it when its `async with` block ends."""
        taken = await self._run(common.checkout_call(region, minutes))
        return AsyncLease(**common.lease_fields(taken), client=self)

    async def leave(self) -> r.Left:
        """End this session (its leases are released); the client is closed afterwards."""
        left = await self._run(common.LEAVE)
        await self.close()
        return left

    async def wait_for_review(self, proposal_id: str, timeout: float | None = None) -> r.Proposal:
        """As `Client.wait_for_review`, under trio (its clock: `trio.testing.MockClock` works)."""
        runner = aio.Runner(self._connection, bearer=self.session, routes=ROUTES)
        return common.proposal_of(await runner.run(plans.review(proposal_id, timeout)))

    async def observe(self, since: int | None = None, *, retry: float | None = None
                      ) -> AsyncIterator[Event | Resync]:
        """As `Client.observe`: events for ever, re-opened after drops and silences."""
        runner = aio.Runner(self._connection, bearer=self.session, routes=ROUTES)
        plan = plans.events(common.OBSERVE_PATH, since=since, retry=retry)
        async with contextlib.aclosing(runner.iterate(plan)) as items:
            async for item in items:
                event = common.stream_item(item)
                if event is not None:
                    yield event
