"""A host's save that takes back someone else's recent change says so (docs/spec/PROTOCOL.md 16).

The host's editor held the file from before an agent's commit (v7), and the
host saved an edit elsewhere: v8 removed the agent's line, and nothing said
so. The file is the host's, so the save is recorded as it is; but the version
carries `undoes: [{version, participant_id}]` (in `change.committed` and on
its row), the page says "your save undid NAME's change (vN)" and offers
Re-apply and Keep mine, and `ce history` shows it. Nothing happens without the
host's choice (`workspace.reapply`).

What counts as taking a change back: a hunk of one of the last `RECENT`
versions written by someone other than the host's editor since the host's
previous save (that save wrote the editor's buffer: what came before was in it)
(`X -> Y`, by lines)
is undone when one hunk of the save removes every non-blank line of `Y` and
brings back every non-blank line of `X`, and adds nothing that is a line of `Y`
edited further. Editing an agent's line into something new is the host's edit,
not an undo, and is not flagged.

Re-apply is a three-way revert of the undo: each undone version's change
(`text(v - 1) -> text(v)`) is merged again onto the current text
(`restore.three_way_undo`), as one new version by the host (`source: revert`,
`reverts` the save). Lines a later version changed again make it refuse with
`stale_version`, and nothing is written.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from typing import Final

from commonroom.engine.proposals import stale_error
from commonroom.engine.regions import WHOLE
from commonroom.engine.restore import CONFLICT_REASON, _write, three_way_undo
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.tx import Tx
from commonroom.protocol.capabilities import require
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.events import UndoneChange
from commonroom.protocol.records import Reapplied, UndoneSave, UndoneSaves
from commonroom.protocol.requests import NoParams, ReapplyParams

RECENT: Final = 5
"""How many of the latest versions by others a save is compared with."""
STRETCH_MAX_LINES: Final = 20_000
"""A changed stretch longer than this is not looked through (its diff would cost too much)."""
KEPT: Final = "kept"
REAPPLIED: Final = "reapplied"


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _hunks(old: list[str], new: list[str]) -> list[tuple[list[str], list[str]]]:
    """The changed hunks `old -> new` as (removed lines, added lines), over the changed stretch."""
    start = 0
    while start < len(old) and start < len(new) and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old, end_new = end_old - 1, end_new - 1
    a, b = old[start:end_old], new[start:end_new]
    if max(len(a), len(b)) > STRETCH_MAX_LINES:
        return []
    return [(a[i1:i2], b[j1:j2])
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if tag != "equal"]


def _meaningful(lines: list[str]) -> Counter[str]:
    return Counter(line.strip() for line in lines if line.strip())


def _takes_back(change: tuple[list[str], list[str]], save: list[tuple[list[str], list[str]]]) -> bool:
    before, after = _meaningful(change[0]), _meaningful(change[1])
    if not before and not after:
        return False
    for removed, added in save:
        brought = _meaningful(added)
        if not (after <= _meaningful(removed) and before <= brought):
            continue
        # What the save adds besides the old lines must not be the changed lines
        # edited further: that is the host's own edit of them, not an undo.
        if not any(_similar(new, line) for new in brought - before for line in after):
            return True
    return False


def _similar(a: str, b: str) -> bool:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= SIMILAR


SIMILAR: Final = 0.6
"""Lines at least this alike (difflib's ratio) are one line edited, not two."""


def find_undone(tx: Tx, before: Snapshot, saved_text: str) -> list[UndoneChange]:
    """The recent versions by others whose change the save of `saved_text` takes back."""
    engine = tx.engine
    # Only versions after the host's last save: that save wrote the editor's buffer, so
    # what came before it was in the buffer (taking it back now is the host's own edit).
    last_save = tx.conn.execute(
        "SELECT coalesce(max(version), 1) FROM versions WHERE source = 'external' AND version <= ?",
        (before.version,)).fetchone()[0]
    rows = tx.conn.execute(
        "SELECT version, participant_id FROM versions WHERE version <= ? AND version > ?"
        " AND source != 'external' AND participant_id IS NOT NULL AND participant_id != ?"
        " ORDER BY version DESC LIMIT ?",
        (before.version, last_save, engine.host_participant_id, RECENT),
    ).fetchall()
    if not rows:
        return []
    save = _hunks(_lines(before.text), _lines(saved_text))
    if not save:
        return []
    undone = []
    for version, participant_id in rows:
        change = _hunks(_lines(engine.snapshot(version - 1).text),
                        _lines(engine.snapshot(version).text))
        if any(_takes_back(hunk, save) for hunk in change):
            undone.append(UndoneChange(int(version), str(participant_id)))
    return sorted(undone, key=lambda u: u.version)


def _undone_of(tx: Tx, version: int) -> tuple[list[UndoneChange], str | None]:
    row = tx.conn.execute("SELECT undoes, undoes_settled FROM versions WHERE version = ?",
                          (version,)).fetchone()
    if row is None or not row[0]:
        return [], None
    return [UndoneChange(int(u["version"]), str(u["participant_id"]))
            for u in json.loads(row[0])], row[1]


def undone_saves(tx: Tx, p: NoParams) -> UndoneSaves:
    """The host's saves that took back someone's change, and what the host chose (newest first)."""
    saves = []
    for version, undoes, settled, created_at in tx.conn.execute(
        "SELECT version, undoes, undoes_settled, created_at FROM versions"
        " WHERE undoes IS NOT NULL ORDER BY version DESC LIMIT 50"
    ).fetchall():
        changes = [UndoneChange(int(u["version"]), str(u["participant_id"]))
                   for u in json.loads(undoes)]
        saves.append(UndoneSave(int(version), changes, settled, str(created_at)))
    return UndoneSaves(saves)


def reapply(tx: Tx, p: ReapplyParams) -> Reapplied:
    """Host: Re-apply what the save `version` undid (a new version), or keep the save as it is."""
    require(tx.actor.capabilities, "admin")
    undone, settled = _undone_of(tx, p.version)
    if not undone:
        raise invalid_request(f"version {p.version} undid nobody's change: nothing to re-apply",
                              "version")
    if settled is not None:
        raise CommonroomError(
            "invalid_request", f"the host already chose for version {p.version}: {settled}",
            {"field": "version", "settled": settled},
        )
    if p.keep:
        tx.conn.execute("UPDATE versions SET undoes_settled = ? WHERE version = ?",
                        (KEPT, p.version))
        return Reapplied(p.version, KEPT, None, None)
    engine = tx.engine
    current = engine.current()
    text = current.text
    for change in undone:
        merged = three_way_undo(engine.snapshot(change.version - 1).text,
                                engine.snapshot(change.version).text, text)
        if merged is None:
            error = stale_error(tx, WHOLE, change.version, None)
            error.message = (
                f"later versions changed the lines version {change.version} changed: nothing was"
                " re-applied; read the current text and edit it, or keep your save")
            error.details.update(reason=CONFLICT_REASON, reapplies=change.version)
            raise error
        text = merged
    if text == current.text:
        raise invalid_request("the undone changes are all back in the text already", "version")
    names = ", ".join(f"v{change.version}" for change in undone)
    summary = f"re-apply {names} (undone by version {p.version})"
    snap = _write(tx, current, WHOLE, text, summary, "revert", reverts=p.version)
    tx.conn.execute("UPDATE versions SET undoes_settled = ? WHERE version = ?",
                    (REAPPLIED, p.version))
    return Reapplied(p.version, REAPPLIED, snap.version, snap.content_hash)


__all__ = ["find_undone", "reapply", "undone_saves"]
