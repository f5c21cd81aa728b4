"""Revert and restore (docs/spec/PROTOCOL.md section 18), the host's undo.

`revert {version, region?}` makes a new version that undoes what `version`
changed: a three-way line merge of (text at `version` -> text at `version - 1`)
onto the current text, in `region` only when given. When a later version
changed the same lines (or lines touching them) the merge is refused with the
`stale_version` shape and nothing is written. `restore {region, version}` sets
a region back to its text at `version`.

Both pass the lease rules on every region their new text changes (another
participant's lease there, or an ancestor's or descendant's: `lease_conflict`),
record the version with `source` "revert" / "restore" and `reverts` /
`restores`, and announce it in `change.committed`.
"""

from __future__ import annotations

import difflib
from typing import Final

from commonroom.engine.leases import edited_regions, raise_if_blocked
from commonroom.engine.proposals import check_outline, stale_error
from commonroom.engine.regions import WHOLE, Outline, region_text
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.tx import Tx
from commonroom.protocol.capabilities import require
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import Restored, Reverted
from commonroom.protocol.requests import RestoreParams, RevertParams

CONFLICT_REASON: Final = "later_changes"


def _lines(text: str) -> list[str]:
    """Lines with their newlines (only "\\n" ends one), so joining gives the text back."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def three_way_undo(changed: str, previous: str, current: str) -> str | None:
    """`current` with the change `previous -> changed` undone; None when later edits touch it."""
    base, undo, now = _lines(changed), _lines(previous), _lines(current)
    hunks = [op for op in difflib.SequenceMatcher(None, base, undo, autojunk=False).get_opcodes()
             if op[0] != "equal"]
    since = difflib.SequenceMatcher(None, base, now, autojunk=False).get_opcodes()
    later = [(i1, i2) for tag, i1, i2, _, _ in since if tag != "equal"]
    for _, a1, a2, _, _ in hunks:
        if any(a1 <= b2 and b1 <= a2 for b1, b2 in later):
            return None
    equal = [(i1, i2, j1) for tag, i1, i2, j1, _ in since if tag == "equal"]

    def place(i: int) -> int:
        for i1, i2, j1 in equal:
            if i1 <= i <= i2:
                return j1 + i - i1
        raise AssertionError("an untouched line is in an equal stretch")

    out = list(now)
    for _, a1, a2, b1, b2 in reversed(hunks):
        start = place(a1)
        out[start : start + (a2 - a1)] = undo[b1:b2]
    return "".join(out)


def _touched(before: Outline, after: Outline) -> list[str]:
    """The regions whose own text the new version changes, added or removed."""
    return sorted(set(edited_regions(before, after)) | set(edited_regions(after, before)))


def _check_leases(tx: Tx, current: Snapshot, new_text: str) -> None:
    after = current.outline.replaced(current.outline.resolve(WHOLE), new_text, text=new_text)
    regions = _touched(current.outline, after) or [WHOLE]
    for region in regions:
        raise_if_blocked(tx, region, tx.actor.participant_id)


def revert(tx: Tx, p: RevertParams) -> Reverted:
    require(tx.actor.capabilities, "admin")
    engine = tx.engine
    if p.version == 1:
        raise CommonroomError(
            "invalid_request",
            "version 1 is the document as the room found it: there is no earlier version to go"
            " back to (restore a region to a version instead)",
            {"field": "version", "version": 1},
        )
    changed = engine.snapshot(p.version)  # version_not_found past the current one
    previous = engine.snapshot(p.version - 1)
    current = engine.current()
    region = WHOLE if p.region is None else _region_at(changed, previous, p.region, p.version)
    old, new = region_text(changed, region), region_text(previous, region)
    if old == new:
        raise invalid_request(
            f"version {p.version} did not change {region!r}: there is nothing to revert",
            "version" if p.region is None else "region")
    gone = region != WHOLE and not current.outline.has_path(region)
    now = None if gone else region_text(current, region)
    merged = None if now is None else three_way_undo(old, new, now)
    if merged is None:
        error = stale_error(tx, region, p.version, None)
        error.message = (
            f"later versions changed the lines version {p.version} changed in {region!r}:"
            " nothing was reverted; read the current text and edit it, or restore the region")
        error.details.update(reason=CONFLICT_REASON, reverts=p.version)
        raise error
    summary = f"revert version {p.version}" + ("" if region == WHOLE else f" in {region}")
    snap = _write(tx, current, region, merged, summary, "revert", reverts=p.version)
    return Reverted(snap.version, snap.content_hash, summary, region, p.version)


def _region_at(changed: Snapshot, previous: Snapshot, region: str, version: int) -> str:
    """The canonical path of `region` at `version` (or before it, when the version removed it)."""
    for snap in (changed, previous):
        try:
            return snap.outline.resolve(region).region
        except CommonroomError:
            continue
    raise CommonroomError(
        "invalid_region", f"no region {region!r} at version {version} or the one before it",
        {"version": version}, region=region,
    )


def restore(tx: Tx, p: RestoreParams) -> Restored:
    require(tx.actor.capabilities, "admin")
    engine = tx.engine
    then = engine.snapshot(p.version)
    try:
        span = then.outline.resolve(p.region)
    except CommonroomError as exc:
        raise CommonroomError(
            "invalid_region", f"region {p.region!r} did not exist at version {p.version}: nothing"
            " to restore it from", {**exc.details, "version": p.version}, region=p.region,
        ) from None
    region = span.region
    current = engine.current()
    if region != WHOLE and not current.outline.has_path(region):
        raise CommonroomError(
            "invalid_region", f"region {region!r} is not in the current text: revert the version"
            " that removed it instead", {"version": current.version}, region=region,
        )
    text = then.outline.region_text(span)
    if text == region_text(current, region):
        raise invalid_request(f"{region!r} is already as it was at version {p.version}", "version")
    summary = f"restore {region} to version {p.version}"
    snap = _write(tx, current, region, text, summary, "restore", restores=p.version)
    return Restored(snap.version, snap.content_hash, summary, region, p.version)


def _write(tx: Tx, current: Snapshot, region: str, text: str, summary: str, source: str, *,
           reverts: int | None = None, restores: int | None = None) -> Snapshot:
    engine = tx.engine
    pid = tx.actor.participant_id
    if region == WHOLE:
        _check_leases(tx, current, text)
        snap = engine.versions.write_version(tx, text, summary=summary, participant_id=pid, region=region,
                                    source=source, reverts=reverts, restores=restores)
    else:
        replaced = check_outline(current, region, text)
        assert replaced is not None
        span = current.outline.resolve(region)
        _check_leases(tx, current, replaced.text)
        snap = engine.versions.write_replacement(tx, span, text, summary=summary, participant_id=pid,
                                        region=region, source=source, reverts=reverts,
                                        restores=restores, outline=replaced)
    return snap
