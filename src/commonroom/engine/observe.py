"""The stream operations' rules: who may open a stream and from where (docs/spec/PROTOCOL.md sections 8, 10).

`workspace.observe` (SSE), `workspace.observe_ws` (WebSocket) and
`workspace.wait` (long-poll) are operations of the table like any other: a
parameter record holds their bounds, the table their capability. Their
handlers run in one read transaction and answer a `StreamStart`: the
authenticated caller and the cursor the stream starts after. The room service
then runs the stream (`commonroom.room.streams`); the adapters only frame it.
"""

from __future__ import annotations

import attrs

from commonroom.engine.tx import Actor, Tx
from commonroom.protocol.errors import invalid_request
from commonroom.protocol.requests import ObserveParams, WaitParams


@attrs.frozen
class StreamStart:
    """Where a stream starts, for whom. Never on the wire (it holds the session hash)."""

    actor: Actor
    cursor: int | None  # None: live from `latest_event_id`
    latest_event_id: int
    timeout_seconds: float = 0.0


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
