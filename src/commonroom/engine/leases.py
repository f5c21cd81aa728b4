"""Leases: time-boxed reservations of a region (docs/spec/PROTOCOL.md section 6).

A lease conflicts with another participant's active lease on the same region,
an ancestor or a descendant (`workspace` relates to everything). Renewal never
reaches past `acquired_at + 120 min`.

Everything that ends a lease goes through `end_lease` (one UPDATE, one event):
release, leave, expiry (the `expire` hook, run by the engine's sweep before
every operation and by the room's sweeper at the due time, so an expired lease
never blocks anyone) and a document change that removed the region
(`on_document_change`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from commonroom.engine.ids import new_id
from commonroom.engine.regions import WHOLE, Outline, Span, related
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.capabilities import allows
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import Lease, Leases, Released
from commonroom.protocol.requests import CheckoutParams, LeaseIdParams, RenewParams
from commonroom.protocol.timefmt import format_ts

_COLUMNS = "lease_id, participant_id, region, acquired_at, expires_at, reason"
HUMAN_EDITING: Final = "human_editing"


def end_lease(tx: Tx, lease: Lease, reason: str) -> None:
    """End an active lease: `expired` emits `lease.expired`, any other reason `lease.released`."""
    tx.conn.execute(
        "UPDATE leases SET ended_at = ?, end_reason = ? WHERE lease_id = ? AND ended_at IS NULL",
        (tx.now_s, reason, lease.lease_id),
    )
    if reason == "expired":
        tx.emit(ev.LeaseExpired(lease.lease_id, lease.participant_id, lease.region))
    else:
        tx.emit(ev.LeaseReleased(lease.lease_id, lease.participant_id, lease.region, reason))


def expire(tx: Tx) -> None:
    """The `on_expiry` hook: end every lease whose `expires_at` has passed, and every lease
    whose region vanished `TORN_SAVE_SECONDS` ago and has not come back."""
    for row in tx.conn.execute(
        f"SELECT {_COLUMNS} FROM leases WHERE ended_at IS NULL AND expires_at <= ?"
        " ORDER BY expires_at",
        (tx.now_s,),
    ).fetchall():
        end_lease(tx, Lease(*row), "expired")
    gone_before = format_ts(tx.now - _VANISHED_GRACE)
    for row in tx.conn.execute(
        f"SELECT {_COLUMNS} FROM leases WHERE ended_at IS NULL AND vanished_at IS NOT NULL"
        " AND vanished_at <= ? ORDER BY vanished_at", (gone_before,),
    ).fetchall():
        end_lease(tx, Lease(*row), "region_removed")


_VANISHED_GRACE: Final = timedelta(seconds=limits.TORN_SAVE_SECONDS)


def next_expiry(tx: Tx) -> datetime | None:
    expires, vanished = tx.conn.execute(
        "SELECT min(expires_at), min(vanished_at) FROM leases WHERE ended_at IS NULL").fetchone()
    due = [datetime.fromisoformat(expires)] if expires is not None else []
    if vanished is not None:
        due.append(datetime.fromisoformat(vanished) + _VANISHED_GRACE)
    return min(due, default=None)


def on_document_change(tx: Tx, before: Snapshot, after: Snapshot, committed: str | None) -> None:
    """A lease whose region no longer exists ends (`region_removed`); after a host's save,
    only if the region is not back within `TORN_SAVE_SECONDS`: a save seen half-way cuts
    sections off, and the next version brings them back (PROTOCOL.md 16, wave 4). Until
    then the lease is kept, marked `vanished_at`; the expiry hook ends it when the time is
    up."""
    vanished = dict(tx.conn.execute(
        "SELECT lease_id, vanished_at FROM leases WHERE ended_at IS NULL AND vanished_at IS NOT NULL"
    ).fetchall())
    row = tx.conn.execute("SELECT source FROM versions WHERE version = ?", (after.version,)).fetchone()
    saved = row is not None and row[0] == "external"
    for lease in open_leases(tx):
        if lease.region == WHOLE:
            continue
        gone = not after.outline.has_path(lease.region)
        if gone and not saved:  # a commit, revert or restore removed it: that is no cut
            end_lease(tx, lease, "region_removed")
        elif gone and lease.lease_id not in vanished:
            tx.conn.execute("UPDATE leases SET vanished_at = ? WHERE lease_id = ?",
                            (tx.now_s, lease.lease_id))
        elif not gone and lease.lease_id in vanished:
            tx.conn.execute("UPDATE leases SET vanished_at = NULL WHERE lease_id = ?",
                            (lease.lease_id,))


def open_leases(tx: Tx) -> list[Lease]:
    """Leases not ended yet (an expired one may still be here until the sweep ends it)."""
    return [
        Lease(*row)
        for row in tx.conn.execute(
            f"SELECT {_COLUMNS} FROM leases WHERE ended_at IS NULL ORDER BY acquired_at, lease_id"
        )
    ]


def end_leases_of(tx: Tx, participant_id: str, reason: str) -> None:
    """End every active lease a participant holds (it left)."""
    for lease in open_leases(tx):
        if lease.participant_id == participant_id:
            end_lease(tx, lease, reason)


def active_leases(tx: Tx) -> list[Lease]:
    return [
        Lease(*row)
        for row in tx.conn.execute(
            f"SELECT {_COLUMNS} FROM leases WHERE ended_at IS NULL AND expires_at > ?"
            " ORDER BY acquired_at, lease_id",
            (tx.now_s,),
        )
    ]


def _stored(lease: Lease) -> tuple[Any, ...]:
    """The lease's `_COLUMNS` values (`wide` is computed where leases are listed)."""
    return attrs.astuple(lease, filter=lambda field, _: field.name != "wide")


def listed_leases(tx: Tx) -> list[Lease]:
    """The active leases as listed to people: each says whether it is wide (the WIDE mark)."""
    outline = tx.engine.current().outline
    out = []
    for lease in active_leases(tx):
        if lease.region == WHOLE or outline.has_path(lease.region):
            wide = is_wide(outline, outline.resolve(lease.region))
            lease = attrs.evolve(lease, wide=wide)
        out.append(lease)
    return out


def is_wide(outline: Outline, span: Span) -> bool:
    """A lease on `span` would lock most of the document (it needs `wide_lease`)."""
    return outline.is_root(span) or outline.subsections(span) > limits.WIDE_LEASE_SUBSECTIONS


def blocking_lease(
    tx: Tx, region: str, participant_id: str, leases: list[Lease] | None = None
) -> Lease | None:
    """Another participant's active lease on `region`, an ancestor or a descendant
    (among `leases`, the active leases read once by a caller that needs them again)."""
    for lease in active_leases(tx) if leases is None else leases:
        if lease.participant_id != participant_id and related(lease.region, region):
            return lease
    return None


def raise_if_blocked(
    tx: Tx, region: str, participant_id: str, leases: list[Lease] | None = None
) -> None:
    lease = blocking_lease(tx, region, participant_id, leases)
    if lease is not None:
        details: dict[str, Any] = {
            "participant_id": lease.participant_id, "expires_at": lease.expires_at,
        }
        if lease.reason == HUMAN_EDITING:
            details["reason"] = HUMAN_EDITING
            message = (f"{lease.region!r} is held: the host is editing it in their editor"
                       f" (until {lease.expires_at})")
        else:
            message = f"{lease.region!r} is leased by another participant until {lease.expires_at}"
        raise CommonroomError(
            "lease_conflict", message, details, lease_id=lease.lease_id, region=lease.region,
        )


# -- the human-editing hold (docs/spec/PROTOCOL.md 10.1) ---------------------------------------


def _own_texts(outline: Outline) -> dict[str, str]:
    """Each region's own text: its heading line up to its first sub-heading (or its end)."""
    # Taken once: a stored version's outline builds its text from the blocks at each ask
    # (a host's save of a 1 MB document cost ~2 s with one ask per heading).
    text = outline.text
    heads = outline.headings
    own: dict[str, str] = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start if i + 1 < len(heads) and heads[i + 1].start < head.end else head.end
        own[head.path] = text[head.start:end]
    return own


def edited_regions(before: Outline, after: Outline) -> list[str]:
    """The regions of `after` whose own text differs from (or is missing in) `before`.

    Ancestors whose own text is untouched are not named, so an edit inside
    `Plan/Goals` names `Plan/Goals` and leaves `Plan/Risks` free. Text before
    the first heading belongs to no region and holds nothing.
    """
    old = _own_texts(before)
    return [path for path, text in _own_texts(after).items() if old.get(path) != text]


def hold_human_edits(tx: Tx, before: Snapshot, after: Snapshot, committed: str | None) -> None:
    """The `on_document_change` hook: an external edit holds the regions it changed.

    The hold is a lease of the host's with `reason: human_editing` for
    `engine.human_hold_minutes` (none for an edit found when the room opened:
    `Tx.edit_found_at_open`); a second edit of a held region extends it.
    Other participants' leases stay (their pending proposals there are
    superseded by the proposals hook as usual).
    """
    minutes = tx.engine.human_hold_minutes
    if minutes <= 0 or tx.edit_found_at_open:
        return
    row = tx.conn.execute("SELECT source FROM versions WHERE version = ?", (after.version,)).fetchone()
    if row is None or row[0] != "external":
        return
    host = tx.engine.host_participant_id
    until = format_ts(tx.now + timedelta(minutes=minutes))
    holds = {lease.region: lease for lease in active_leases(tx) if lease.reason == HUMAN_EDITING}
    base, began = _before_the_save(tx, before)
    edited = edited_regions(base.outline, after.outline)
    if began is not None:
        # Versions of one save seen in pieces: a hold the cut-off piece put on a section
        # the whole save leaves as it was falls again.
        for region, piece_hold in holds.items():
            if region not in edited and piece_hold.acquired_at >= began:
                end_lease(tx, piece_hold, "released")
    for region in edited:
        held = holds.get(region)
        if held is not None:
            tx.conn.execute("UPDATE leases SET expires_at = ? WHERE lease_id = ?", (until, held.lease_id))
            tx.emit(ev.LeaseRenewed(held.lease_id, host, region, until))
            continue
        lease = Lease(new_id("ls_"), host, region, tx.now_s, until, HUMAN_EDITING)
        tx.conn.execute(f"INSERT INTO leases ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", _stored(lease))
        tx.emit(ev.LeaseAcquired(lease.lease_id, host, region, until))


def _before_the_save(tx: Tx, before: Snapshot) -> tuple[Snapshot, str | None]:
    """The version before the save that `after` ends began, and when its first piece was
    recorded (None: `before` is that version).

    A save that pauses longer than the settle period is recorded in two steps: the
    external versions recorded within `TORN_SAVE_SECONDS` of now may be its first
    pieces, so holds are computed against the version before them (PROTOCOL.md 16).
    Two quick saves of different sections still hold both: their changes from that
    version are both there.
    """
    since = format_ts(tx.now - _VANISHED_GRACE)
    version, began = before.version, None
    for _ in range(_TORN_PIECES_MAX):
        row = tx.conn.execute("SELECT source, created_at FROM versions WHERE version = ?",
                              (version,)).fetchone()
        if version <= 1 or row is None or row[0] != "external" or row[1] < since:
            break
        version, began = version - 1, str(row[1])
    if began is None:
        return before, None
    return tx.engine.snapshot(version), began


# At most this many quick external versions are looked through for the save's start.
_TORN_PIECES_MAX: Final = 8


def _expiry(now: datetime, acquired_at: str, minutes: int) -> str:
    cap = datetime.fromisoformat(acquired_at) + timedelta(minutes=limits.LEASE_MAX_MINUTES)
    return format_ts(min(now + timedelta(minutes=minutes), cap))


def require_wide_lease(tx: Tx, snap: Snapshot, span: Span) -> None:
    """A lease that would lock most of the document needs the host's grant (the wide-lease rule).

    One agent with a lease on the root heading blocked everyone, and took it
    again as soon as it lapsed. The whole document, the root heading and any
    region with more than `WIDE_LEASE_SUBSECTIONS` sub-sections need the
    `wide_lease` capability (the host holds it; it travels in an invitation
    the host makes).
    """
    if allows(tx.actor.capabilities, "wide_lease"):
        return
    outline = snap.outline
    subsections = outline.subsections(span)
    if is_wide(outline, span):
        raise CommonroomError(
            "permission_denied",
            f"a lease on {span.region!r} would hold {subsections} sub-sections or the whole"
            f" document; leases wider than {limits.WIDE_LEASE_SUBSECTIONS} sub-sections need the"
            " wide_lease capability (ask the host), or lease the sections you change",
            {"required_capability": "wide_lease", "reason": "wide_lease",
             "subsections": subsections, "limit": limits.WIDE_LEASE_SUBSECTIONS},
            region=span.region,
        )


def checkout(tx: Tx, p: CheckoutParams) -> Lease:
    snap, span = tx.engine.resolve(p.region)
    pid = tx.actor.participant_id
    leases = active_leases(tx)
    raise_if_blocked(tx, span.region, pid, leases)
    require_wide_lease(tx, snap, span)
    for lease in leases:
        if lease.participant_id == pid and lease.region == span.region and lease.reason is None:
            return _renew(tx, lease, p.minutes)
    held = sum(1 for lease in leases if lease.participant_id == pid and lease.reason is None)
    if held >= limits.MAX_OPEN_LEASES:
        raise CommonroomError(
            "limit_exceeded",
            f"a participant holds at most {limits.MAX_OPEN_LEASES} leases",
            {"limit": limits.MAX_OPEN_LEASES},
            retry_after_seconds=60,
        )
    lease = Lease(
        new_id("ls_"), pid, span.region, tx.now_s, _expiry(tx.now, tx.now_s, p.minutes)
    )
    tx.conn.execute(
        f"INSERT INTO leases ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", _stored(lease)
    )
    tx.emit(ev.LeaseAcquired(lease.lease_id, pid, lease.region, lease.expires_at))
    return lease


def _get_active(tx: Tx, lease_id: str) -> Lease:
    row = tx.conn.execute(
        f"SELECT {_COLUMNS} FROM leases WHERE lease_id = ? AND ended_at IS NULL AND expires_at > ?",
        (lease_id, tx.now_s),
    ).fetchone()
    if row is None:
        raise invalid_request(f"no active lease {lease_id!r}", "lease_id")
    return Lease(*row)


def _renew(tx: Tx, lease: Lease, minutes: int) -> Lease:
    expires_at = _expiry(tx.now, lease.acquired_at, minutes)
    if expires_at <= lease.expires_at:
        left = (datetime.fromisoformat(lease.expires_at) - tx.now).total_seconds()
        raise CommonroomError(
            "limit_exceeded",
            f"a lease lasts at most {limits.LEASE_MAX_MINUTES} minutes from its acquisition",
            {"lease_id": lease.lease_id, "expires_at": lease.expires_at},
            lease_id=lease.lease_id,
            retry_after_seconds=max(1, int(left) + 1),
        )
    tx.conn.execute("UPDATE leases SET expires_at = ? WHERE lease_id = ?", (expires_at, lease.lease_id))
    renewed = attrs.evolve(lease, expires_at=expires_at)
    tx.emit(ev.LeaseRenewed(lease.lease_id, lease.participant_id, lease.region, expires_at))
    return renewed


def renew(tx: Tx, p: RenewParams) -> Lease:
    lease = _get_active(tx, p.lease_id)
    if lease.participant_id != tx.actor.participant_id:
        raise CommonroomError("permission_denied", "only the holder renews a lease")
    return _renew(tx, lease, p.minutes)


def release(tx: Tx, p: LeaseIdParams) -> Released:
    lease = _get_active(tx, p.lease_id)
    if lease.participant_id != tx.actor.participant_id and not allows(
        tx.actor.capabilities, "approve"
    ):
        raise CommonroomError(
            "permission_denied", "only the holder, or a session with approve, releases a lease"
        )
    end_lease(tx, lease, "released")
    return Released(lease.lease_id, True)


def leases(tx: Tx, p: Any) -> Leases:
    return Leases(listed_leases(tx))
