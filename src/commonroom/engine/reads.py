"""Read operations: status, summary, regions, read, diff, changes, history, room.

Reads work on the cached `Snapshot` of a version (text + parsed outline), so
reading a region costs a dict lookup and a slice, not a re-read or re-parse.
"""

from __future__ import annotations

from typing import Any

from commonroom.engine import linediff
from commonroom.engine.access import list_participants
from commonroom.engine.core import Engine
from commonroom.engine.handoffs import open_handoffs
from commonroom.engine.leases import listed_leases
from commonroom.engine.proposals import open_proposals
from commonroom.engine.regions import WHOLE, region_text
from commonroom.engine.text import encode_text
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.events import Event
from commonroom.protocol.records import (
    Change,
    Changes,
    Diagnostics,
    DiffAnswer,
    History,
    LimitsInfo,
    OutlineEntry,
    Pong,
    ReadAnswer,
    RegionInfo,
    Regions,
    RingInfo,
    RoomSnapshot,
    Status,
    Summary,
    TransportInfo,
)
from commonroom.protocol.requests import ChangesParams, DiffParams, HistoryParams, ReadParams


def status(tx: Tx, p: Any = None) -> Status:
    engine = tx.engine
    snap = engine.current()
    conn = tx.conn
    return Status(
        workspace_id=engine.workspace_id,
        version=snap.version,
        content_hash=snap.content_hash,
        name=engine.name,
        substrate="markdown",
        lifecycle=engine.lifecycle,
        participants=conn.execute(
            "SELECT count(*) FROM participants WHERE left_at IS NULL"
        ).fetchone()[0],
        active_leases=conn.execute(
            "SELECT count(*) FROM leases WHERE ended_at IS NULL AND expires_at > ?", (tx.now_s,)
        ).fetchone()[0],
        pending_proposals=conn.execute(
            "SELECT count(*) FROM proposals WHERE status = 'pending'"
        ).fetchone()[0],
        file=engine.file_state,
    )


def regions(tx: Tx, p: Any = None) -> Regions:
    snap = tx.engine.current()
    return Regions(
        snap.version,
        [RegionInfo(h.path, h.title, h.level, h.line) for h in snap.outline.headings],
    )


def summary(tx: Tx, p: Any = None) -> Summary:
    snap = tx.engine.current()
    outline = [OutlineEntry(h.path, h.title, h.level) for h in snap.outline.headings]
    return Summary(snap.version, outline, snap.outline.window(0, 400), len(snap.data))


def read(tx: Tx, p: ReadParams) -> ReadAnswer:
    snap, span = tx.engine.resolve(p.region, p.version)
    content = snap.outline.region_text(span)
    truncated = False
    if p.max_lines is not None:
        lines = content.splitlines(keepends=True)
        if len(lines) > p.max_lines:
            content = "".join(lines[: p.max_lines])
            truncated = True
    if p.max_bytes is not None:
        raw = encode_text(content)
        if len(raw) > p.max_bytes:
            content = raw[: p.max_bytes].decode("utf-8", "ignore")
            truncated = True
    return ReadAnswer(snap.version, span.region, content, truncated)


def diff(tx: Tx, p: DiffParams) -> DiffAnswer:
    engine = tx.engine
    to_version = p.to_version if p.to_version is not None else engine.current_version
    base, target = engine.snapshot(p.base_version), engine.snapshot(to_version)
    region = WHOLE
    if p.region is not None:
        # The region must exist on one side at least; its canonical path names both.
        try:
            region = base.outline.resolve(p.region).region
        except CommonroomError:
            region = target.outline.resolve(p.region).region
    return DiffAnswer(
        base_version=base.version,
        current_version=target.version,
        to_version=target.version,
        region=region,
        diff=linediff.later(
            region_text(base, region), region_text(target, region),
            f"{region}@{base.version}", f"{region}@{target.version}",
        ),
    )


def changes_since(tx: Tx, p: ChangesParams) -> Changes:
    rows = tx.conn.execute(
        "SELECT version, summary, participant_id, created_at, region, source FROM versions"
        " WHERE version > ? ORDER BY version LIMIT ?",
        (p.version, p.limit),
    ).fetchall()
    changes = [Change(*row) for row in rows]
    return Changes(
        from_version=p.version,
        to_version=changes[-1].version if changes else tx.engine.current_version,
        current_version=tx.engine.current_version,
        changes=changes,
    )


def events_after(tx: Tx, cursor: int, limit: int) -> list[Event]:
    return [
        ev.load(*row)
        for row in tx.conn.execute(
            "SELECT event_id, type, created_at, payload FROM events WHERE event_id > ?"
            " ORDER BY event_id LIMIT ?",
            (cursor, limit),
        )
    ]


def history(tx: Tx, p: HistoryParams) -> History:
    bound = p.before_event_id if p.before_event_id is not None else 2**62
    rows = tx.conn.execute(
        "SELECT event_id, type, created_at, payload FROM events WHERE event_id < ?"
        " ORDER BY event_id DESC LIMIT ?",
        (bound, p.limit),
    ).fetchall()
    return History([ev.load(*row) for row in rows])


def latest_event_id(tx: Tx) -> int:
    row = tx.conn.execute("SELECT max(event_id) FROM events").fetchone()
    return int(row[0] or 0)


def newest_event_id(engine: Engine) -> int:
    """The id of the newest recorded event (0: none), for the room's hub as it opens."""
    with engine.transaction(engine.clock(), write=False) as tx:
        return latest_event_id(tx)


def ring_window(engine: Engine, cursor: int, limit: int) -> tuple[int, int, list[Event]]:
    """One consistent look at the event ring for a stream: (oldest id, newest id, up to
    `limit` events after `cursor`); 0 for an empty ring. Store thread only."""
    with engine.transaction(engine.clock(), write=False) as tx:
        oldest = tx.conn.execute("SELECT min(event_id) FROM events").fetchone()[0]
        latest = latest_event_id(tx)
        events = events_after(tx, cursor, limit) if limit > 0 else []
    return int(oldest or 0), latest, events


def room(tx: Tx, p: Any = None) -> RoomSnapshot:
    """One consistent snapshot (one transaction) plus the event id it is current to."""
    return RoomSnapshot(
        status=status(tx),
        participants=list_participants(tx),
        leases=listed_leases(tx),
        proposals=open_proposals(tx),
        handoffs=open_handoffs(tx),
        latest_event_id=latest_event_id(tx),
    )


def diagnostics(tx: Tx, p: Any = None) -> Diagnostics:
    """What is running, never where: the transport is named, its address is not.

    The serving limits are the room's actual ones (`engine.serving`, set by
    the service from its options), not the protocol's defaults.
    """
    engine = tx.engine
    hint = engine.ports.transport_hint
    serving = engine.serving
    oldest = tx.conn.execute("SELECT min(event_id) FROM events").fetchone()[0]
    return Diagnostics(
        workspace_id=engine.workspace_id,
        protocol="commonroom",
        protocol_version="1",
        transport=TransportInfo(
            type=hint.type if hint else engine.ports.transport_name,
            encrypted=hint.encrypted if hint else False,
            mode=hint.mode if hint else None,
        ),
        version=engine.current_version,
        events=RingInfo(oldest or 0, latest_event_id(tx), limits.EVENT_RING),
        limits=LimitsInfo(
            requests_per_minute=serving.requests_per_minute,
            anonymous_requests_per_minute=serving.anonymous_per_minute,
            body_bytes=serving.body_bytes,
            proposal_bytes=limits.PROPOSAL_MAX_BYTES,
            list_max=limits.LIST_MAX,
            max_sessions=serving.max_sessions,
            max_participants=serving.max_participants,
        ),
    )


def ping(tx: Tx, p: Any = None) -> Pong:
    """`workspace.ping`: the caller's participant id, the current version, the room's time."""
    return Pong(tx.actor.participant_id, tx.engine.current_version, tx.now_s)
