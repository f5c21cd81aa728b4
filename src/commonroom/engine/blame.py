"""Blame (docs/spec/PROTOCOL.md section 18): who last changed each line, from the stored versions.

Line history is kept per *section*: the lines from one heading to the next
heading of any level, and the preamble before the first heading (path
`PREAMBLE`). A section's row holds the origin of each of its lines, an array
of `version * 2 + amended` (`amended`: a reviewer changed that line in edit
before approve). Each new version writes a row for every section whose text
or path it changed, and only those (`record_version`, the `on_document_change`
hook): the changed lines are found by comparing the two texts (common head and
tail at C speed, then a line diff of the window between), lines the window
kept carry their old origin, the others get the new version's.

The invariant: for a version V and a section path P of V, the newest row of P
at or before V describes P's lines at V. (A row is written whenever P's text
or place changed, or P appeared again.) So the blame of a region at any
version reads one indexed row per section of the region: its cost follows the
region, not the document or the length of the history (TARGETS.md
`blame_cost`).

A sidecar from before this feature has no rows: the first document change
replays the history so far (`_catch_up`), and a blame asked before that
computes the missing rows in memory.
"""

from __future__ import annotations

import sqlite3
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Final

from commonroom.engine import linediff
from commonroom.engine.document_text import DocumentText
from commonroom.engine.history import StoredOutline
from commonroom.engine.regions import WHOLE, Outline, Span
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.tx import Tx
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.records import BlameAnswer, BlameLine
from commonroom.protocol.requests import BlameParams
from commonroom.store import blobs

PREAMBLE: Final = "\n"
"""The key of the text before the first heading (no heading path holds a newline)."""
_DONE_KEY: Final = "blame_version"
HOST_EDITOR: Final = "host_editor"

# -- sections of one text ------------------------------------------------------------


def line_count(text: str, start: int, end: int) -> int:
    """Lines of ``text[start:end]`` (a last line without its newline counts)."""
    if start >= end:
        return 0
    newlines = text.count("\n", start, end)
    return newlines if text[end - 1] == "\n" else newlines + 1


def split_lines(text: str) -> list[str]:
    """The lines of `text`, newline-terminated ones without their newline (only "\\n" ends one)."""
    if not text:
        return []
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return parts


def line_start(text: str, position: int) -> int:
    """Where the line holding `position` starts (only "\\n" ends a line here)."""
    return text.rfind("\n", 0, position) + 1


def _lines_in(text: DocumentText, start: int, end: int) -> int:
    """`line_count` of a stretch of a `DocumentText`."""
    if start >= end:
        return 0
    newlines = text.count("\n", start, end)
    return newlines if text.window(end - 1, end) == "\n" else newlines + 1


_MARGIN: Final = 1 << 16
"""Of the text after a known change, what `_changed_range` compares before it joins both texts."""


def _changed_range(old: DocumentText, new: DocumentText,
                   within: tuple[int, int, int] | None) -> tuple[int, int, int]:
    """`blobs.changed_range` of two texts, on windows around `within` when that is known.

    The windows start at `within` and take `_MARGIN` of the equal tail after it: the
    comparisons inside are the ones the whole texts would get. Only when the common
    head runs out of both windows (a change equal to what it replaced) are the whole
    texts compared.
    """
    if within is not None:
        low, old_end, new_end = within
        margin = min(_MARGIN, len(old) - old_end)  # the tails after `within` are equal
        old_part = old.window(low, old_end + margin)
        new_part = new.window(low, new_end + margin)
        start, old_stop, new_stop = blobs.changed_range(old_part, new_part, (0, old_end - low, new_end - low))
        if start < min(len(old_part), len(new_part)) or old_end + margin >= len(old):
            return start + low, old_stop + low, new_stop + low
    return blobs.changed_range(old.joined(), new.joined(), within)


class Sections:
    """The sections of a full outline: section 0 is the preamble, section k the (k-1)-th heading's.

    A section starts at the start of the line of its heading. The scanner also ends lines
    at a lone carriage return, so a heading may start inside one of our lines: that line
    is the heading's section's (and two headings on one line leave the first one empty).
    """

    __slots__ = ("paths", "starts", "text")

    def __init__(self, outline: Outline) -> None:
        # Read a stretch at a time: a commit's blame never joins a 10 MB text (`document_text`).
        self.text = outline.document_text
        self.starts: list[int] = outline._starts
        self.paths: list[str] = outline._paths

    def __len__(self) -> int:
        return len(self.starts) + 1

    def path(self, k: int) -> str:
        return PREAMBLE if k == 0 else self.paths[k - 1]

    def start(self, k: int) -> int:
        return 0 if k == 0 else self.text.rfind("\n", self.starts[k - 1]) + 1

    def end(self, k: int) -> int:
        return self.start(k + 1) if k < len(self.starts) else len(self.text)

    def at(self, position: int) -> int:
        """The section holding character `position` (the last one for the end of the text)."""
        k = bisect_right(self.starts, position)
        while k < len(self.starts) and self.start(k + 1) <= position:
            k += 1  # a heading later on the same line takes the line
        return k

    def lines(self, k: int) -> int:
        return _lines_in(self.text, self.start(k), self.end(k))


# -- the rows --------------------------------------------------------------------------


class _Rows:
    """Section rows: read from the sidecar, written there (or, for a read, kept in memory)."""

    def __init__(self, conn: sqlite3.Connection, *, write: bool) -> None:
        self.conn = conn
        self.write = write
        self.pending: dict[str, list[tuple[int, array[int]]]] = {}

    def load(self, path: str, version: int) -> array[int]:
        for at, origins in reversed(self.pending.get(path, ())):
            if at <= version:
                return origins
        row = self.conn.execute(
            "SELECT origins FROM blame_sections WHERE path = ? AND version <= ?"
            " ORDER BY version DESC LIMIT 1", (path, version),
        ).fetchone()
        if row is None:
            raise RuntimeError(f"no blame row for section {path!r} at version {version}")
        origins = array("I")
        origins.frombytes(row[0])
        return origins

    def save(self, version: int, path: str, origins: array[int]) -> None:
        if self.write:
            self.conn.execute(
                "INSERT INTO blame_sections (version, path, origins) VALUES (?, ?, ?)",
                (version, path, origins.tobytes()),
            )
        else:
            self.pending.setdefault(path, []).append((version, origins))


def _gather(rows: _Rows, old: Sections, version: int, start: int, end: int) -> list[int]:
    """The origins of the lines of ``old.text[start:end]`` (whole lines) at `version`."""
    if start >= end:
        return []
    first, last = old.at(start), old.at(end - 1)
    origins: list[int] = []
    for k in range(first, last + 1):
        section = rows.load(old.path(k), version)
        if len(section) != old.lines(k):
            raise RuntimeError(f"blame row of {old.path(k)!r} at version {version} does not fit")
        origins.extend(section)
    skip = _lines_in(old.text, old.start(first), start)
    return origins[skip : skip + _lines_in(old.text, start, end)]


def _seed(rows: _Rows, outline: Outline, version: int) -> None:
    """The first version: every line is its own."""
    sections = Sections(outline)
    for k in range(len(sections)):
        rows.save(version, sections.path(k), array("I", [version * 2] * sections.lines(k)))


def _advance(rows: _Rows, before: Outline, after: Outline, version: int, amended: set[int],
             within: tuple[int, int, int] | None = None) -> None:
    """Write the rows of the sections `version` changed (`before` is version - 1's outline).

    `amended`: 0-based document lines of `after` a reviewer wrote (edit before approve).
    `within`: a stretch known to hold the change (`Snapshot.edit`), so the texts are
    compared around it only (a 10 MB document is not compared end to end).
    """
    old, new = Sections(before), Sections(after)
    old_text, new_text = old.text, new.text
    start, old_end, new_end = _changed_range(old_text, new_text, within)
    line_start = old_text.rfind("\n", start) + 1
    if not (_at_line_end(old_text, line_start, old_end) and _at_line_end(new_text, line_start, new_end)):
        # take the rest of the line: the tail after both ends is common, so the same length
        newline = old_text.find("\n", old_end)
        stretch = (len(old_text) if newline < 0 else newline + 1) - old_end
        old_end += stretch
        new_end += stretch
    # The sections around the window too: the one ending where it starts may have lost
    # or gained lines at its end, the one starting where it ends at its start.
    first = new.at(max(line_start - 1, 0))
    last = new.at(min(new_end, len(new_text) - 1)) if len(new_text) else 0
    low, high = new.start(first), new.end(last)
    shift = new_end - old_end
    origins = _gather(rows, old, version - 1, low, high - shift)
    head = old_text.count("\n", low, line_start)
    old_lines = split_lines(old_text.window(line_start, old_end))
    new_lines = split_lines(new_text.window(line_start, new_end))
    kept = origins[head : head + len(old_lines)]
    first_line = new_text.count("\n", 0, line_start) if amended else 0
    window = [version * 2 + (first_line + i in amended) for i in range(len(new_lines))]
    # Past the diff bound the window is all new: blame stays cheap at a commit.
    for a, b, size in linediff.matching_blocks(old_lines, new_lines, autojunk=False) or ():
        window[b : b + size] = kept[a : a + size]
    merged = origins[:head] + window + origins[head + len(old_lines):]
    at = 0
    for k in range(first, last + 1):
        count = new.lines(k)
        rows.save(version, new.path(k), array("I", merged[at : at + count]))
        at += count
    if at != len(merged):
        raise RuntimeError(f"blame of version {version}: {len(merged)} lines for {at}")
    if new.paths is not old.paths:
        _moved_sections(rows, old, new, version, first, last, shift)


def _at_line_end(text: DocumentText, line_start: int, end: int) -> bool:
    return end == line_start or text.window(end - 1, end) == "\n" or end == len(text)


def _moved_sections(rows: _Rows, old: Sections, new: Sections, version: int, first: int, last: int,
                    shift: int) -> None:
    """Sections outside the change whose path or bounds differ now: their rows again."""
    extra = len(new) - len(old)
    for k in (*range(first), *range(last + 1, len(new))):
        start, end = new.start(k), new.end(k)
        before = k if k < first else k - extra
        move = 0 if k < first else shift
        if (0 <= before < len(old) and old.path(before) == new.path(k)
                and old.start(before) + move == start and old.end(before) + move == end):
            continue
        rows.save(version, new.path(k),
                  array("I", _gather(rows, old, version - 1, start - move, end - move)))


# -- the hook ------------------------------------------------------------------------


def _done(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_DONE_KEY,)).fetchone()
    return int(row[0]) if row is not None else 0


def _amended_lines(conn: sqlite3.Connection, before: Outline, after: Outline, version: int
                   ) -> tuple[set[int], str | None]:
    """The document lines of `version` a reviewer wrote in edit before approve, and the reviewer."""
    row = conn.execute(
        "SELECT p.region, p.content, p.original_content, p.reviewer_id FROM versions v"
        " JOIN proposals p ON p.proposal_id = v.proposal_id WHERE v.version = ?", (version,),
    ).fetchone()
    if row is None or row[2] is None or row[3] is None:
        return set(), None
    region, content, original, reviewer = row
    start = 0 if region == WHOLE else before.resolve(region).start
    first = after.document_text.count("\n", 0, start)
    theirs, ours = split_lines(original), split_lines(content)
    written = set(range(len(ours)))
    for _, b, size in linediff.matching_blocks(theirs, ours, autojunk=False) or ():
        written.difference_update(range(b, b + size))
    return {first + i for i in written}, reviewer


def _full(tx: Tx, version: int, known: Iterable[Snapshot]) -> Outline:
    for snap in known:
        if snap.version == version and snap.in_memory:
            return snap.outline
    return Outline(tx.engine.snapshot(version).text)


def _catch_up(tx: Tx, rows: _Rows, done: int, upto: int, known: tuple[Snapshot, ...]) -> None:
    """Rows for versions done+1..upto (a sidecar older than blame, or a read ahead of the rows)."""
    previous: Outline | None = _full(tx, done, known) if done else None
    for version in range(done + 1, upto + 1):
        outline = _full(tx, version, known)
        if previous is None:
            _seed(rows, outline, version)
        else:
            amended, _ = _amended_lines(tx.conn, previous, outline, version)
            _advance(rows, previous, outline, version, amended)
        previous = outline


def record_version(tx: Tx, before: Snapshot, after: Snapshot, committed: str | None) -> None:
    """The `on_document_change` hook: the rows of the sections `after` changed."""
    rows = _Rows(tx.conn, write=True)
    done = _done(tx.conn)
    if done < before.version:
        _catch_up(tx, rows, done, before.version, (before,))
    amended, _ = _amended_lines(tx.conn, before.outline, after.outline, after.version)
    _advance(rows, before.outline, after.outline, after.version, amended, after.edit)
    tx.conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value ="
        " excluded.value", (_DONE_KEY, str(after.version)),
    )


# -- the operation -------------------------------------------------------------------


def _section_paths(outline: Outline, span: Span) -> list[str]:
    """The sections of `span`, in document order."""
    if span.region == WHOLE:
        return [PREAMBLE, *outline.paths()]
    index = outline._lookup(span.region)
    assert index is not None
    stored = isinstance(outline, StoredOutline)
    end = outline._end_index(index) if stored else bisect_left(outline._starts, span.end)  # type: ignore[attr-defined]
    return list(outline.paths()[index:end])


def blame(tx: Tx, p: BlameParams) -> BlameAnswer:
    engine = tx.engine
    snap, span = engine.resolve(p.region, p.version)
    rows = _Rows(tx.conn, write=False)
    done = _done(tx.conn)
    text, first = _region_lines(snap, span)
    lines = split_lines(text)
    origins: list[int] = []
    if done == 0 and snap.version == 1:  # a new room: the file as found, before any row
        origins = [2] * len(lines)
    else:
        if done < snap.version:
            _catch_up(tx, rows, done, snap.version, (engine.current(),))
        for path in _section_paths(snap.outline, span):
            origins.extend(rows.load(path, snap.version))
    if len(lines) != len(origins):
        raise CommonroomError(
            "internal_error", f"the line history of {span.region!r} does not fit its text",
        )
    authors = _authors(tx, {origin // 2 for origin in origins})
    out: list[BlameLine] = []
    for i, (line, origin) in enumerate(zip(lines, origins, strict=True)):
        version = origin // 2
        pid, name, kind, proposal_id, reviewer = authors[version]
        out.append(BlameLine(first + i, line, version, pid, name, kind, proposal_id,
                             reviewer if origin & 1 else None))
    return BlameAnswer(snap.version, span.region, out)


_NO_CR: dict[str, bool] = {}
"""content hash -> the text has no carriage return (its scanner's line numbers are ours)."""


def _region_lines(snap: Snapshot, span: Span) -> tuple[str, int]:
    """The text of `span`'s lines (see `Sections`) and the 1-based line where they start."""
    outline = snap.outline
    if span.region == WHOLE:
        return outline.text if snap.in_memory else snap.text, 1
    if snap.in_memory:
        clean = _NO_CR.get(snap.content_hash)
        if clean is None:
            if len(_NO_CR) > 8:
                _NO_CR.clear()
            clean = _NO_CR[snap.content_hash] = "\r" not in outline.text
        index = outline._lookup(span.region)
        if clean and index is not None:  # headings start lines: the scanner's line, no count
            return outline.region_text(span), outline._lines[index] + 1
    whole = snap.text
    start = line_start(whole, span.start)
    end = span.end if span.end >= len(whole) else line_start(whole, span.end)
    return whole[start:end], whole.count("\n", 0, start) + 1


_Author = tuple[str | None, str, str, str | None, str | None]


def _authors(tx: Tx, versions: set[int]) -> dict[int, _Author]:
    """Per version: who wrote it (a proposal's author, not its committer), and its reviewer."""
    if not versions:
        return {}
    marks = ",".join("?" * len(versions))
    found: dict[int, _Author] = {}
    host = tx.engine.host_participant_id
    for version, pid, source, proposal_id, author, reviewer in tx.conn.execute(
        "SELECT v.version, v.participant_id, v.source, v.proposal_id, p.participant_id,"
        f" p.reviewer_id FROM versions v LEFT JOIN proposals p ON p.proposal_id = v.proposal_id"
        f" WHERE v.version IN ({marks})", tuple(versions),
    ):
        if source in ("external", "initial"):
            found[version] = (host, "", HOST_EDITOR, None, None)
        else:
            found[version] = (author or pid, "", "", proposal_id, reviewer)
    people = {pid for pid, *_ in found.values() if pid}
    names: dict[str, tuple[str, str]] = {}
    if people:
        marks = ",".join("?" * len(people))
        for pid, name, kind in tx.conn.execute(
            f"SELECT participant_id, name, kind FROM participants WHERE participant_id IN ({marks})",
            tuple(people),
        ):
            names[pid] = (name, kind)
    for version, (pid, _, kind, proposal_id, reviewer) in found.items():
        name, own_kind = names.get(pid or "", ("unknown", "agent"))
        found[version] = (pid, name, kind or own_kind, proposal_id, reviewer)
    return found
