"""The stream operations' rules: who may open a stream and from where (docs/spec/PROTOCOL.md sections 8, 10).

`workspace.observe` (SSE), `workspace.observe_ws` (WebSocket) and
`workspace.wait` (long-poll) are operations of the table like any other: a
parameter record holds their bounds, the table their capability. Their
handlers run in one read transaction and answer a `StreamStart`: the
authenticated caller and the cursor the stream starts after. The room service
then runs the stream (`commonroom.room.streams`); the adapters only frame it.

The waits for a person (`workspace.proposal.wait`, `workspace.thread.wait`)
are long-polls without a cursor: their `StreamStart` carries what is watched
(`Watch`): the answer as of now and whether it is still waiting. The room
holds the request while it waits and runs the operation again when an event
names the watched record, so the rule of when a wait is over lives here.
"""

from __future__ import annotations

from typing import Any

import attrs

from commonroom.engine import proposals, threads
from commonroom.engine.tx import Actor, Tx
from commonroom.protocol.errors import invalid_request
from commonroom.protocol.records import Proposal, ProposalWaited, ThreadWaited
from commonroom.protocol.requests import (
    ObserveParams,
    ProposalDetailParams,
    ProposalWaitParams,
    ThreadWaitParams,
    WaitParams,
)


@attrs.frozen
class Watch:
    """A wait for a person: the payload field and id that name the watched record in an event,
    and the wait's answer as of the start (`answer.waiting`: not over yet)."""

    key: str
    id: str
    answer: ProposalWaited | ThreadWaited


@attrs.frozen
class StreamStart:
    """Where a stream starts, for whom. Never on the wire (it holds the session hash)."""

    actor: Actor
    cursor: int | None  # None: live from `latest_event_id`
    latest_event_id: int
    timeout_seconds: float = 0.0
    watch: Watch | None = None


def _latest(tx: Tx) -> int:
    row = tx.conn.execute("SELECT max(event_id) FROM events").fetchone()
    return int(row[0] or 0)


def _check_cursor(tx: Tx, cursor: int, field: str) -> int:
    latest = _latest(tx)
    if cursor > latest:
        # A cursor ahead of the room is a client error, not a lost cursor:
        # event ids never repeat, so it never came from this room.
        raise invalid_request(
            f"{field} {cursor} is after the room's latest event ({latest})", field
        )
    return latest


def open_observe(tx: Tx, p: ObserveParams) -> StreamStart:
    if p.since_event_id is None:
        return StreamStart(tx.actor, None, _latest(tx))
    latest = _check_cursor(tx, p.since_event_id, "since_event_id")
    return StreamStart(tx.actor, p.since_event_id, latest)


def open_wait(tx: Tx, p: WaitParams) -> StreamStart:
    latest = _check_cursor(tx, p.cursor, "cursor")
    return StreamStart(tx.actor, p.cursor, latest, p.timeout_seconds)


def open_proposal_wait(tx: Tx, p: ProposalWaitParams) -> StreamStart:
    """Over once the proposal left `pending` (reviewed, or ended instead of a review)."""
    detail = proposals.proposal_detail(tx, ProposalDetailParams(p.proposal_id))
    names = {field.name for field in attrs.fields(Proposal)}
    fields: dict[str, Any] = {name: getattr(detail, name) for name in names}
    answer = ProposalWaited(Proposal(**fields), waiting=detail.status == "pending")
    return StreamStart(tx.actor, None, _latest(tx), p.timeout_seconds,
                       Watch("proposal_id", p.proposal_id, answer))


def open_thread_wait(tx: Tx, p: ThreadWaitParams) -> StreamStart:
    """Over once someone other than the caller has the last word, or the thread is not open."""
    thread = threads.get(tx, p.thread_id)
    last = thread.comments[-1].participant_id if thread.comments else None
    waiting = thread.status == "open" and last in (None, tx.actor.participant_id)
    return StreamStart(tx.actor, None, _latest(tx), p.timeout_seconds,
                       Watch("thread_id", p.thread_id, ThreadWaited(thread, waiting)))
