"""Regions: the outline of a document and the region resolver (docs/spec/PROTOCOL.md section 5).

Pure: no I/O, no clock. `Outline(text)` scans one document text once (with
the CommonMark block scanner of `engine/commonmark.py`); every lookup after
that is a dict access, and `Outline.replaced` rescans only around a change.

What counts as a heading
------------------------
The block structure is CommonMark's, as markdown-it-py ("commonmark" preset)
parses it; the scanner is a line-for-line port of markdown-it's block rules
(code, fence, blockquote, hr, list, reference, html_block, heading, lheading,
paragraph) that keeps only what decides where blocks start and end, and the
differential tests hold it to markdown-it-py. So:

- ATX headings (``#``..``######``, up to 3 spaces of indent, ``#`` followed by
  a space, a tab or the end of the line; the closing ``#`` run is dropped) and
  setext headings (paragraph lines underlined with ``===`` or ``---``; a
  multi-line paragraph is one heading whose title is its lines, stripped and
  joined with one space, and whose line is the paragraph's first line).
- ``#`` lines inside fenced code, indented code, HTML blocks (the 7 CommonMark
  start conditions), link reference definitions and YAML front matter (a
  ``---`` first line up to the next ``---`` or ``...`` line; not CommonMark,
  handled before the scan) are not headings. ``---`` after a blank line is a
  thematic break.

Decision: only top-level headings are regions. A heading inside a blockquote
(``> # x``) or a list item (``- # x``) is part of the text of the region around
it: it neither names a region nor ends one. Blockquotes and lists are still
parsed in full, so a ``---`` under a list item or a lazy blockquote line is
never read as the setext underline of top-level text. markdown-it's nesting
limit is kept too: past 20 levels (10 nested lists) nothing more is parsed,
and an item that deep runs to the end of the document, headings included.

Paths and spans
---------------
A heading's path is the titles of its enclosing headings (those of a strictly
lower level number) and its own, joined with ``/``. A second heading with the
same path gets ``#2`` on its last component (``A/B#2``, its child
``A/B#2/C``), a third ``#3``; if a literal title already took that name the
counter moves on, so paths are always unique. ``workspace``, ``*`` and the
empty string are never paths: a top-level heading titled ``workspace`` is
``workspace#2``, a lone ``#`` at top level is ``#2``. Titles are raw markdown
(``# Use *this*`` is ``Use *this*``). A title containing ``/`` is still one
component: its exact path resolves, and so does the title itself when it is
unique; `related` compares paths as strings, so such a title can only make it
more cautious, never less. Every path resolves to itself, even one that
starts with ``section:`` (the exact path is tried before the prefix is
stripped).

A region spans its heading's first line up to the line before the next
heading of the same or a higher level (level number <= its own), or the end
of the text; it includes its sub-regions. Text before the first heading
belongs only to the whole document (`WHOLE`). Offsets are ``str`` offsets in
the text as given (``\\n``, ``\\r\\n`` and lone ``\\r`` line endings all
work); a line's line ending is inside the span, so
``text[:start] + content + text[end:]`` is exact.

Two departures from markdown-it: a leading byte order mark is skipped (the
first line starts after it); and, a known simplification, character
references in a link reference definition's destination (``&#106;avascript:``)
are not decoded before markdown-it's unsafe-scheme check (backslash escapes
are).
"""

from __future__ import annotations

import hashlib
import weakref
from bisect import bisect_left
from itertools import repeat
from operator import add
from typing import TYPE_CHECKING, Final

import attrs

from commonroom.engine.commonmark import ATX_LINE as _ATX_LINE
from commonroom.engine.commonmark import FRONT_MATTER_CLOSE as _FRONT_MATTER_CLOSE
from commonroom.engine.commonmark import LINE_END as _LINE_END
from commonroom.engine.commonmark import front_matter_blocks as _front_matter_blocks
from commonroom.engine.commonmark import scan as _scan
from commonroom.engine.document_text import DocumentText, JoinedText, OneByteText, SplicedText
from commonroom.engine.text import encode_text
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.vocabulary import WHOLE  # the whole document's region (``*`` is accepted too)

if TYPE_CHECKING:
    from commonroom.engine.snapshot import Snapshot  # a snapshot holds an outline: type-only here

__all__ = ["WHOLE", "Heading", "Outline", "Span", "region_digest", "region_text", "related"]

_SECTION_PREFIX: Final = "section:"
_WHOLE_ALIASES: Final = frozenset({WHOLE, "*"})
# Never a heading's path: a top-level heading titled "workspace" is
# "workspace#2", an empty top-level title ("#" alone) is "#2".
_RESERVED: Final = frozenset({WHOLE, "*", ""})
# At most this many regions an unknown name may have meant (`Outline._no_match`).
MAX_SUGGESTIONS: Final = 5
# Folded name -> the names it may mean, the folded names sorted, and the longest's length
# (`Outline._folded_index`).
_FoldedIndex = tuple[dict[str, list[str]], list[str], int]


def _folded(name: str) -> str:
    """A region name as compared for suggestions: no case, one blank between words, none
    around a slash, no slash at either end."""
    return "/".join(" ".join(part.casefold().split()) for part in name.strip().strip("/").split("/"))


# -- the public API ----------------------------------------------------------


@attrs.frozen
class Heading:
    """One top-level heading and the span of its region."""

    level: int
    """1..6"""
    title: str
    path: str
    """Canonical path, with ``#N`` suffixes."""
    line: int
    """1-based number of the heading's first line."""
    start: int
    """Offset in the text where the span starts (the start of the heading line)."""
    end: int
    """Offset where the span ends (exclusive)."""


@attrs.frozen
class Span:
    """A resolved region: its canonical name (a path, or `WHOLE`) and its offsets."""

    region: str
    start: int
    end: int



_ATX_LINE_MAX: Final = 11
"""More characters than an ATX heading line's start can take (` {0,3}#{1,6}` and one
blank): `_ATX_LINE` decides on a window this long as on the whole text."""


def _atx_line_at(text: DocumentText, pos: int) -> bool:
    return _ATX_LINE.match(text.window(pos, pos + _ATX_LINE_MAX)) is not None


def _line_end_at(text: DocumentText, pos: int) -> int | None:
    """The offset of the first line ending character at or after `pos`, or None."""
    size, step = len(text), 256
    while pos < size:
        piece = text.window(pos, pos + step)
        found = _LINE_END.search(piece)
        if found is not None:
            return pos + found.start()
        pos += len(piece)
        step *= 4
    return None


def _after_line_at(text: DocumentText, pos: int) -> int:
    """`commonmark.after_line` on a `DocumentText`."""
    end = _line_end_at(text, pos)
    if end is None:
        return len(text)
    return end + 2 if text.window(end, end + 2) == "\r\n" else end + 1


def _front_matter_blocks_at(text: DocumentText, start: int) -> bool:
    """`commonmark.front_matter_blocks` on a `DocumentText`, deciding on its first
    characters (the front matter, if any) rather than the whole text."""
    size, head = len(text), 4096
    while head < size:
        prefix = text.window(0, head)
        bom = 1 if prefix.startswith("\ufeff") else 0
        if not prefix.startswith("---", bom):
            return False
        first = _LINE_END.search(prefix, bom)
        if first is not None:
            if prefix[bom : first.start()].rstrip(" \t") != "---":
                return False
            close = _FRONT_MATTER_CLOSE.search(prefix, first.start())
            # A close whose look-ahead saw a line ending inside the prefix is the text's own.
            if close is not None and close.end() < len(prefix):
                return start <= close.end()
        head *= 4
    return _front_matter_blocks(text.joined(), start)

class Outline:
    """The parsed heading index of one document text.

    Build once per version (`Outline(text)`, a full scan) or from the previous
    version's outline (`replaced`, which re-scans only around the change);
    every lookup after that is a dict access. The headings are kept as
    parallel lists; `headings` builds the `Heading` records on first use.
    """

    __slots__ = (
        "__weakref__",
        "_by_folded",
        "_by_path",
        "_by_title",
        "_changed",
        "_changed_from",
        "_doc",
        "_ends",
        "_headings",
        "_levels",
        "_lines",
        "_paths",
        "_starts",
        "_titles",
    )

    def __init__(self, text: str) -> None:
        found, starts = _scan(text)
        self._build(
            JoinedText(text),
            [f[0] for f in found],
            [f[2] for f in found],
            [f[1] for f in found],
            [starts[f[1]] for f in found],
        )

    def _build(
        self,
        text: DocumentText,
        levels: list[int],
        titles: list[str],
        lines: list[int],
        starts: list[int],
    ) -> None:
        self._doc = text
        self._levels = levels
        self._titles = titles
        self._lines = lines
        self._starts = starts
        size = len(text)
        ends = [size] * len(levels)
        open_: list[int] = []  # indices whose region is still open
        for i, level in enumerate(levels):
            while open_ and levels[open_[-1]] >= level:
                ends[open_.pop()] = starts[i]
            open_.append(i)
        self._ends = ends
        self._set_paths()
        self._headings: tuple[Heading, ...] | None = None
        # (first, tail, rejoin) after `replaced`: headings [first, tail) were
        # scanned again, those from `tail` on are the old ones from `rejoin` on;
        # `_changed_from` is the outline that was replaced (not kept alive by this one)
        self._changed: tuple[int, int, int] | None = None
        self._changed_from: weakref.ref[Outline] | None = None

    @property
    def text(self) -> str:
        """The document text, whole (joined at the first ask: `document_text`). For a
        stretch of it, `window`."""
        return self._doc.joined()

    def window(self, start: int, end: int) -> str:
        """``text[start:end]`` (``0 <= start``, ``0 <= end``), without the whole text."""
        return self._doc.window(start, end)

    def text_length(self) -> int:
        """``len(text)``, without the whole text."""
        return self._size()

    @property
    def document_text(self) -> DocumentText:
        """The text as it is held (`document_text`): for reading it a stretch at a time."""
        return self._doc

    def backed_by(self, data: bytes) -> None:
        """Hold the text as `data`, the version's bytes, when each byte is one character
        (`document_text.OneByteText`): the same text, without a copy of its own."""
        if len(data) == len(self._doc):
            self._doc = OneByteText(data)

    def _set_paths(self) -> None:
        by_path: dict[str, int] = {}
        seen: dict[str, int] = {}
        taken = set(_RESERVED)
        paths: list[str] = []
        ancestors: list[tuple[int, str]] = []  # (level, path)
        for i, (level, title) in enumerate(zip(self._levels, self._titles, strict=True)):
            while ancestors and ancestors[-1][0] >= level:
                ancestors.pop()
            base = f"{ancestors[-1][1]}/{title}" if ancestors else title
            number = seen.get(base, 0) + 1
            path = base if number == 1 else f"{base}#{number}"
            while path in taken:  # a literal title (or the whole document) has it
                number += 1
                path = f"{base}#{number}"
            seen[base] = number
            taken.add(path)
            paths.append(path)
            by_path[path] = i
            ancestors.append((level, path))
        self._paths = paths
        self._by_path = by_path
        self._by_title: dict[str, list[str]] | None = None
        self._by_folded: _FoldedIndex | None = None

    @property
    def headings(self) -> tuple[Heading, ...]:
        """Every top-level heading, in document order."""
        if self._headings is None:
            self._headings = tuple(
                map(
                    Heading,
                    self._levels,
                    self._titles,
                    self._paths,
                    [line + 1 for line in self._lines],
                    self._starts,
                    self._ends,
                )
            )
        return self._headings

    def heading(self, index: int) -> Heading:
        """The `index`-th heading (in document order), without building them all."""
        return Heading(self._levels[index], self._titles[index], self._paths[index],
                       self._lines[index] + 1, self._starts[index], self._ends[index])

    def index_of(self, path: str) -> int | None:
        """The index of the heading whose canonical path is `path`."""
        return self._lookup(path)

    def heading_count(self) -> int:
        return len(self._starts)

    def first_heading_from(self, offset: int) -> int:
        """The index of the first heading that starts at or after `offset` (the count of
        headings when none does)."""
        return bisect_left(self._starts, offset)

    def replaced(self, span: Span, content: str, *, text: str | None = None) -> Outline:
        """The outline of ``replace(span, content)``, re-scanning only around the change.

        The scan restarts at the last ATX heading line before the change (or
        the start of the text) and runs past the new content until it finds
        an ATX heading the old outline has at the same place after the
        change; from there on the old headings stand, shifted. An unclosed
        fence (or anything else that swallows what follows) simply keeps the
        scan going, up to the end of the text if need be. `text`, when
        given, must be that new text (the caller has built it already).
        """
        old = self._doc
        start, end = span.start, span.end
        if not 0 <= start <= end <= len(old):
            raise ValueError(f"span {span.start}..{span.end} is outside the text")
        # Not joined: the scan below reads only around the change (`document_text`).
        new = SplicedText(old, start, end, content) if text is None else JoinedText(text)
        delta = len(content) - (end - start)
        if len(new) != len(old) + delta:
            raise ValueError("text is not the replaced text")
        # Front matter is decided by the text's first lines, before any restart
        # point: an edit that could open, close or move it (in the old text or
        # in the new one) is re-scanned whole.
        if _front_matter_blocks_at(old, start) or _front_matter_blocks_at(new, start):
            return Outline(new.joined())
        starts, levels, titles, lines = self._starts, self._levels, self._titles, self._lines

        # restart: the last ATX heading whose line (ending included) is before the change
        first = bisect_left(starts, start) - 1
        while first >= 0:
            pos = starts[first]
            if _atx_line_at(old, pos):
                line_end = _line_end_at(old, pos)
                if line_end is not None and line_end < start:
                    break
            first -= 1
        if first < 0:
            first, restart, restart_line = 0, 0, 0
        else:
            restart, restart_line = starts[first], lines[first]

        # rejoin: an old ATX heading after the change, found again where it should be
        count = len(starts)
        candidate = bisect_left(starts, end)
        line_delta = 0
        step = 1
        while True:
            while candidate < count and not _atx_line_at(old, starts[candidate]):
                candidate += 1
            if candidate >= count:
                stop, rejoin = len(new), count
            else:
                stop, rejoin = _after_line_at(old, starts[candidate]) + delta, candidate
            found, line_starts = _scan(new.window(restart, stop), restart == 0)
            if restart and (not found or line_starts[found[0][1]] != 0):
                return Outline(new.joined())  # cannot happen (the restart line is a heading); be safe
            if rejoin == count:
                break
            if found and restart + line_starts[found[-1][1]] == starts[rejoin] + delta:
                # the rejoining heading itself: kept from the old list, moved
                line_delta = restart_line + found.pop()[1] - lines[rejoin]
                break
            candidate += step
            step *= 2

        new_levels = [f[0] for f in found]
        new_titles = [f[2] for f in found]
        new_lines = [restart_line + f[1] for f in found]
        new_starts = [restart + line_starts[f[1]] for f in found]
        outline = Outline.__new__(Outline)
        same_headings = new_levels == levels[first:rejoin] and new_titles == titles[first:rejoin]
        outline._doc = new
        outline._levels = levels[:first] + new_levels + levels[rejoin:]
        outline._titles = titles[:first] + new_titles + titles[rejoin:]
        outline._lines = lines[:first] + new_lines + (
            list(map(add, lines[rejoin:], repeat(line_delta))) if line_delta else lines[rejoin:]
        )
        outline._starts = starts[:first] + new_starts + list(map(add, starts[rejoin:], repeat(delta)))
        outline._headings = None
        outline._changed = (first, first + len(found), rejoin)
        outline._changed_from = weakref.ref(self)
        outline._ends = self._ends_after(outline, first, first + len(found), rejoin, delta)
        if same_headings:
            # same titles and levels everywhere: paths (and their indices) stand
            outline._paths = self._paths
            outline._by_path = self._by_path
            outline._by_title = self._by_title
            outline._by_folded = self._by_folded
        else:
            outline._set_paths()
        return outline

    def _ends_after(self, new: Outline, first: int, tail: int, rejoin: int, delta: int) -> list[int]:
        """The span ends of `new`, whose headings [first, tail) were re-scanned.

        Headings from `tail` on are the old ones from `rejoin` on: their ends
        only depend on what follows them, so they shift. Of the headings
        before `first`, only those still open at the restart (at most one per
        level) can change.
        """
        old_ends = self._ends
        levels, starts = new._levels, new._starts
        size = len(new._doc)
        ends = old_ends[:first] + [size] * (tail - first) + list(map(add, old_ends[rejoin:], repeat(delta)))
        restart = starts[first] if first < len(starts) else size
        pending: list[int] = []  # open at the restart, in document order
        lowest = 7
        i = first - 1
        while i >= 0 and lowest > 1:
            if levels[i] < lowest:
                lowest = levels[i]
                if old_ends[i] > restart:
                    pending.append(i)
            i -= 1
        pending.reverse()
        # the re-scanned stretch: a stack, as in a full build
        for j in range(first, tail):
            level = levels[j]
            while pending and levels[pending[-1]] >= level:
                ends[pending.pop()] = starts[j]
            pending.append(j)
        # still open after it: the first later heading of the same or a higher level
        count = len(levels)
        for i in pending:
            level = levels[i]
            j = tail
            while j < count and levels[j] > level:
                # everything inside heading j's span is deeper than heading j
                next_start = ends[j]
                if next_start >= size:
                    j = count
                    break
                j = bisect_left(starts, next_start, j + 1)
            ends[i] = starts[j] if j < count else size
        return ends

    def subsections(self, span: Span) -> int:
        """How many headings lie inside `span` after its own (all levels)."""
        if span.region == WHOLE:
            return len(self._starts)
        starts = self._starts
        return bisect_left(starts, span.end) - bisect_left(starts, span.start) - 1

    def is_root(self, span: Span) -> bool:
        """Does `span` hold every heading of the document (the whole document, or its one top heading)?"""
        return span.region == WHOLE or (bool(self._starts) and self.subsections(span) == len(self._starts) - 1)

    def changes_outside(self, span: Span, content: str, new: Outline | None = None) -> bool:
        """Would replacing region `span` with `content` change the outline outside the span?

        `new` is ``self.replaced(span, content)`` when the caller has built it
        already (a commit builds it once, checks it here, then writes it).

        A region proposal may rewrite its own region (its heading, its
        sub-sections) and nothing else (the outline rule). It changes what is
        outside when, in the new text:

        - a heading before the span differs or a new one appears there (a
          setext underline at the start of `content`);
        - the headings after the span are not exactly the old ones (level,
          title, path), each at its old place shifted by the change in
          length: an unclosed code fence or HTML block, or a last line
          without its newline, swallows what follows; a heading of a higher
          level adopts the sections after it; a rename takes a sibling's path;
        - `content` does not start with a heading of the region's level or a
          higher one (its first lines would join the region before it, or
          the region would become a sub-section of its previous sibling).
          Blank `content` deletes the region and is fine.
        """
        if new is None:
            new = self.replaced(span, content)
        old_starts, new_starts = self._starts, new._starts
        before = bisect_left(old_starts, span.start)
        after_old = bisect_left(old_starts, span.end)
        after_new = bisect_left(new_starts, span.start + len(content))
        if len(new_starts) - after_new != len(old_starts) - after_old:
            return True
        delta = len(content) - (span.end - span.start)
        # Headings [head, before) and, from `after_old` on, the old ones [after_old, tail)
        # are compared. `replaced` built `new` from this outline keeping the headings
        # before `first` and, shifted, those from `rejoin` on: only the rest can differ,
        # and a path depends only on the headings up to its own (`_set_paths`).
        head, tail, same_paths = 0, len(old_starts), new._paths is self._paths
        made_from = new._changed_from
        if (new._changed is not None and made_from is not None and made_from() is self
                and new.text_length() - self.text_length() == delta):
            head, _, tail = new._changed
            tail = max(tail, after_old)
        if before > head and (new_starts[head:before] != old_starts[head:before]
                              or new._levels[head:before] != self._levels[head:before]
                              or new._titles[head:before] != self._titles[head:before]
                              or new._paths[head:before] != self._paths[head:before]):
            return True
        moved = after_new - after_old
        if (new._levels[after_old + moved : tail + moved] != self._levels[after_old:tail]
                or new._titles[after_old + moved : tail + moved] != self._titles[after_old:tail]
                or any(new_starts[j + moved] - old_starts[j] != delta for j in range(after_old, tail))
                or (not same_paths and new._paths[after_new:] != self._paths[after_old:])):
            return True
        if not content.strip():
            return False
        return not (after_new > before and new_starts[before] == span.start
                    and before < len(self._levels) and new._levels[before] <= self._levels[before])

    def resolve(self, region: str) -> Span:
        """The span of a requested region; raises `invalid_region`.

        Accepts ``section:`` before any form; ``workspace`` or ``*`` for the
        whole document; an exact path; otherwise a title that exactly one
        heading has (two or more → the candidates are in
        ``details.candidates``). Surrounding blanks are ignored. Every path
        in `paths()` resolves to itself.
        """
        name = region.strip()
        index = self._lookup(name)  # even a title that starts with "section:"
        if index is None and name.startswith(_SECTION_PREFIX):
            name = name[len(_SECTION_PREFIX) :].strip()
            index = self._lookup(name)
        if not name:
            raise CommonroomError("invalid_region", "region is empty", region=region)
        if name in _WHOLE_ALIASES:
            return Span(WHOLE, 0, self._size())
        if index is None:
            candidates = self._titles_index().get(name, ())
            if len(candidates) > 1:
                raise CommonroomError(
                    "invalid_region",
                    f"region {name!r} matches {len(candidates)} headings; use a path",
                    {"candidates": list(candidates)},
                    region=region,
                )
            if not candidates:
                raise self._no_match(name, region)
            index = self._lookup(candidates[0])
            assert index is not None
        return self._span(index)

    def _no_match(self, name: str, region: str) -> CommonroomError:
        """`invalid_region` for a name no heading has, with what it may have meant
        (`details.suggestions`, each one that resolves): an agent that wrote `problem`
        for `Problem`, or `Risk` for `Risks`, learns the region's name from the answer.
        A few dict and bisect steps over an index built once per set of headings, so a
        stream of bad names costs no scan of a long outline."""
        names, keys, longest = self._folded_index()
        wanted = _folded(name)
        found = list(names.get(wanted, ()))
        if not found and len(wanted) >= 4:
            # A name that begins with it (`Risk` for `Risks`), or that it begins with: only
            # prefixes as long as the longest name are looked up, so a megabyte of region
            # name costs one fold, not a slice per character.
            at = bisect_left(keys, wanted)
            while at < len(keys) and keys[at].startswith(wanted) and len(found) < MAX_SUGGESTIONS:
                found.extend(names[keys[at]])
                at += 1
            for cut in range(min(len(wanted) - 1, longest), 3, -1):
                found.extend(names.get(wanted[:cut], ()))
        suggestions = list(dict.fromkeys(found))[:MAX_SUGGESTIONS]
        if not suggestions:
            return CommonroomError("invalid_region", f"no heading matches region {name!r}", region=region)
        return CommonroomError(
            "invalid_region",
            f"no heading matches region {name!r}; did you mean {' or '.join(map(repr, suggestions))}?",
            {"suggestions": suggestions}, region=region,
        )

    def _folded_index(self) -> _FoldedIndex:
        """Folded title or path -> the names that resolve to it (a unique title as the
        title, else the paths), the folded keys sorted for prefix search, and the length
        of the longest."""
        if self._by_folded is None:
            names: dict[str, list[str]] = {}
            for title, paths in self._titles_index().items():
                names.setdefault(_folded(title), []).extend([title] if len(paths) == 1 else paths)
                for path in paths:
                    names.setdefault(_folded(path), []).append(path)
            self._by_folded = (names, sorted(names), max(map(len, names), default=0))
        return self._by_folded

    # what `resolve` needs; a stored outline answers them from its index
    def _lookup(self, path: str) -> int | None:
        return self._by_path.get(path)

    def _size(self) -> int:
        return len(self._doc)

    def _span(self, index: int) -> Span:
        return Span(self._paths[index], self._starts[index], self._ends[index])

    def _titles_index(self) -> dict[str, list[str]]:
        if self._by_title is None:
            by_title: dict[str, list[str]] = {}
            for title, path in zip(self._titles, self._paths, strict=True):
                by_title.setdefault(title, []).append(path)
            self._by_title = by_title
        return self._by_title

    def region_text(self, span: Span) -> str:
        """The text of `span`: ``text[start:end]``."""
        return self._doc.window(span.start, span.end)

    def replace(self, span: Span, content: str) -> str:
        """The new full text with `span` replaced by `content`."""
        return SplicedText(self._doc, span.start, span.end, content).joined()

    def has_path(self, path: str) -> bool:
        """Is `path` a canonical region of this text (`WHOLE` always is)?"""
        return path == WHOLE or self._lookup(path) is not None

    def paths(self) -> tuple[str, ...]:
        """Every heading's canonical path, in document order."""
        return tuple(self._paths)

    def __repr__(self) -> str:
        return f"<Outline {len(self._doc)} chars, {len(self._levels)} headings>"


def related(a: str, b: str) -> bool:
    """True when canonical regions a and b are the same, or one is an ancestor of the other.

    WHOLE relates to everything. Used for lease conflicts.
    """
    if a == b or a in _WHOLE_ALIASES or b in _WHOLE_ALIASES:
        return True
    return b.startswith(a + "/") if len(a) < len(b) else a.startswith(b + "/")


def region_text(snap: Snapshot, region: str) -> str:
    """A region's text at a version, by its heading path; "" when the region does not exist there."""
    if region == WHOLE:
        return snap.text
    if not snap.outline.has_path(region):
        return ""
    return snap.outline.region_text(snap.outline.resolve(region))


def region_digest(snap: Snapshot, region: str) -> str | None:
    """sha256 of a region's text at a version; None when the region does not exist there."""
    if region == WHOLE:
        return snap.content_hash
    if not snap.outline.has_path(region):
        return None
    return hashlib.sha256(encode_text(region_text(snap, region))).hexdigest()
