"""`commonroom.Client`: the synchronous Python client.

One method per operation of the table (`generated.BlockingOperations`, generated
from the table with `AsyncClient`'s twin), with typed parameters, returning the
operation's result record from `commonroom.protocol.records`. Refusals raise the `commonroom.CommonroomError`
subclass of their code. Calls over a loopback transport share one kept-alive
connection; other transports dial a connection per call (`wire.sync.Connection`).

    with commonroom.Client.join(invitation, name="bot") as room:
        text = room.read("Problem")
        with room.checkout("Problem") as lease:
            proposal = room.propose("Problem", new_text, base_version=text.version,
                                    summary="sharper")
            if room.wait_for_review(proposal.proposal_id).status == "approved":
                room.commit(proposal.proposal_id)

This file and `aio.py` hold only the methods written by hand (joining, leases as
context managers, leaving, observing, waiting for a person) and what blocking and
trio code cannot share.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TypeVar

import attrs

from commonroom.client import common
from commonroom.client.common import ClientBase, Resync
from commonroom.client.generated import OPERATION_METHODS, BlockingOperations
from commonroom.client.operations import Call
from commonroom.protocol import records as r
from commonroom.protocol.events import Event
from commonroom.wire import calls, plans, sync
from commonroom.wire.timeouts import Timeouts

T = TypeVar("T")

__all__ = ["OPERATION_METHODS", "Client", "Lease"]


@attrs.frozen
class Lease(r.Lease):
    """The lease `Client.checkout` took; `with` releases it on exit (if still held)."""

    client: Client = attrs.field(kw_only=True, eq=False, repr=False)

    def renew(self, minutes: int | None = None) -> r.Lease:
        return self.client.renew(self.lease_id, minutes=minutes)

    def release(self) -> r.Released:
        return self.client.release(self.lease_id)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        with common.releasing(exc_info[1]):
            self.release()


class Client(ClientBase, BlockingOperations):
    """A session in a room. `Client.join(...)` joins; `Client(invitation, session=...)` resumes.

    `timeout` bounds one call; `timeouts` (`commonroom.wire.timeouts.Timeouts`) all of them.
    """

    _connection: sync.Connection

    def _open_connection(self) -> sync.Connection:
        # A plugin other than loopback TCP runs a trio loop per connection: not kept.
        return sync.Connection(self.hint, timeouts=self.timeouts,
                               keep_alive=calls.dials_loopback(self.hint))

    @classmethod
    def join(cls, invitation: str, *, name: str, kind: str = "agent",
             timeout: float | None = None, timeouts: Timeouts | None = None) -> Client:
        """Redeem `invitation` as participant `name`; the new session is `client.session`."""
        joining = cls(invitation, session="", timeout=timeout, timeouts=timeouts)
        joining._adopt(joining._run(joining._join_call(name, kind)))
        return joining

    def close(self) -> None:
        """Close the connection; the session stays valid (use `leave()` to end it)."""
        self._connection.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, call: Call[T]) -> T:
        method, path, params, keywords = self._wire_call(call)
        return common.record(self._connection.call(method, path, params, **keywords), call.result)

    def _runner(self) -> sync.Runner:
        return sync.Runner(self._connection, bearer=self.session, routes=common.ROUTES)

    # -- written by hand (with `join` above): what does more than carry one call, built on the
    # methods generated from the table into `generated.py` and on `wire.plans`

    def checkout(self, region: str, *, minutes: int | None = None) -> Lease:
        """Lease `region` now; the returned `Lease` releases it when its `with` block ends."""
        return Lease(**common.lease_fields(self._run(common.checkout_call(region, minutes))),
                     client=self)

    def leave(self) -> r.Left:
        """End this session (its leases are released); the client is closed afterwards."""
        left = self._run(common.LEAVE)
        self.close()
        return left

    def wait_for_review(self, proposal_id: str, timeout: float | None = None) -> r.Proposal:
        """Block until the proposal is decided (approved, rejected, superseded, ...); return it.

        Holds `workspace.proposal.wait` (`GET /workspace/proposal/wait`: the room
        answers once the proposal left pending), again while it answers `waiting`;
        waits out a room that restarts meanwhile. Raises `commonroom.Timeout` after
        `timeout` seconds (None: no limit).
        """
        return common.proposal_of(self._runner().run(plans.review(proposal_id, timeout)))

    def wait_for_reply(self, thread_id: str, timeout: float | None = None) -> r.Thread:
        """Block until someone other than its author answers the thread (or it is resolved or
        outdated); return it. Only the caller waits: the room holds nobody."""
        return common.thread_of(self._runner().run(plans.reply(thread_id, timeout)))

    def observe(self, since: int | None = None, *, retry: float | None = None
                ) -> Iterator[Event | Resync]:
        """The room's events for ever: replays after `since`, then live; resumes after drops.

        A dropped connection (room restarting, network, or silence past
        `timeouts.silence`: a half-open link) is re-opened after the room's
        `retry` delay with `Last-Event-ID`, so no event is skipped; a `Resync`
        is yielded when the room could not replay (read `room()` again). A
        session that ended raises `Unauthorized`. `retry` (seconds) overrides
        the room's reconnection delay.
        """
        with contextlib.closing(self._runner().iterate(common.observe_plan(since, retry))) as items:
            yield from common.events_of(items)
