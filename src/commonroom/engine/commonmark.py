"""The CommonMark block scanner: a line-for-line port of markdown-it's block rules.

`scan(text)` finds where CommonMark blocks start and end, as markdown-it-py's
"commonmark" preset parses them (code, fence, blockquote, hr, list, reference,
html_block, heading, lheading, paragraph), keeping only what decides the
top-level headings; `engine/regions.py` builds the outline, the region paths
and the incremental rescans on it (its docstring says what counts as a
heading). The differential tests (tests/unit/test_regions.py) hold this port
to markdown-it-py, which the test extra pins. Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from itertools import accumulate, repeat
from operator import add, sub
from typing import Final, NamedTuple

# markdown-it's `state.md.options.maxNesting` in the commonmark preset.
_MAX_NESTING: Final = 20

# What markdown-it's mdTrim strips (JavaScript's String.prototype.trim set).
_TRIM: Final = (
    "\t\n\x0b\x0c\r \xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

# First characters of the blocks that can interrupt a paragraph (fence,
# blockquote, hr, list, html_block, ATX heading). A paragraph line starting
# with anything else is plain continuation, the scanner's fast path.
_INTERRUPT: Final = frozenset("`~>*-_+0123456789<#")
_INTERRUPT_OR_UNDERLINE: Final = _INTERRUPT | {"="}
_DIGITS: Final = frozenset("0123456789")
# First characters of every block but a paragraph.
_BLOCK_START: Final = _INTERRUPT | {"["}

_NEWLINE: Final = re.compile(r"(\r\n?|\n)")

# -- HTML blocks: markdown-it-py's HTML_SEQUENCES, verbatim ------------------

_BLOCK_NAMES: Final = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|"
    "colgroup|dd|details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|"
    "footer|form|frame|frameset|h1|h2|h3|h4|h5|h6|head|header|hr|html|iframe|"
    "legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|"
    "param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|"
    "track|ul"
)
_ATTR_NAME: Final = "[a-zA-Z_:][a-zA-Z0-9:._-]*"
_ATTR_VALUE: Final = "(?:[^\"'=<>`\\x00-\\x20]+|'[^']*'|\"[^\"]*\")"
_ATTRIBUTE: Final = "(?:\\s+" + _ATTR_NAME + "(?:\\s*=\\s*" + _ATTR_VALUE + ")?)"
_OPEN_TAG: Final = "<[A-Za-z][A-Za-z0-9\\-]*" + _ATTRIBUTE + "*\\s*\\/?>"
_CLOSE_TAG: Final = "<\\/[A-Za-z][A-Za-z0-9\\-]*\\s*>"

# (start, end, can interrupt a paragraph); end None = ends at a blank line.
_HTML_BLOCKS: Final[tuple[tuple[re.Pattern[str], re.Pattern[str] | None, bool], ...]] = (
    (
        re.compile(r"^<(?a:(script|pre|style|textarea))(?=(\s|>|$))", re.IGNORECASE),
        re.compile(r"<\/(?a:(script|pre|style|textarea))>", re.IGNORECASE),
        True,
    ),
    (re.compile(r"^<!--"), re.compile(r"-->"), True),
    (re.compile(r"^<\?"), re.compile(r"\?>"), True),
    (re.compile(r"^<![A-Za-z]"), re.compile(r">"), True),
    (re.compile(r"^<!\[CDATA\["), re.compile(r"\]\]>"), True),
    (re.compile("^</?(?a:(" + _BLOCK_NAMES + "))(?=(\\s|/?>|$))", re.IGNORECASE), None, True),
    (re.compile("^(?:" + _OPEN_TAG + "|" + _CLOSE_TAG + ")\\s*$"), None, False),
)

# -- link reference definitions ----------------------------------------------

_LABEL_STOP: Final = re.compile(r"[\[\]\\\n]")
_ESCAPE: Final = re.compile(r"\\([\\!\"#$%&'()*+,./:;<=>?@\[\]^`{}|_~-])")
_BAD_PROTOCOL: Final = re.compile(r"^(vbscript|javascript|file|data):")
_GOOD_DATA: Final = re.compile(r"^data:image\/(gif|png|jpeg|webp);")


def _link_destination(string: str, pos: int, maximum: int) -> tuple[bool, str, int]:
    """markdown-it's parseLinkDestination: (ok, destination, position after it)."""
    start = pos
    if pos < maximum and string[pos] == "<":
        pos += 1
        while pos < maximum:
            ch = string[pos]
            if ch in "\n<":
                return False, "", pos
            if ch == ">":
                return True, string[start + 1 : pos], pos + 1
            if ch == "\\" and pos + 1 < maximum:
                pos += 2
                continue
            pos += 1
        return False, "", pos
    level = 0
    while pos < maximum:
        ch = string[pos]
        if ch <= " " or ch == "\x7f":
            break
        if ch == "\\" and pos + 1 < maximum:
            if string[pos + 1] == " ":
                break
            pos += 2
            continue
        if ch == "(":
            level += 1
            if level > 32:
                return False, "", pos
        elif ch == ")":
            if level == 0:
                break
            level -= 1
        pos += 1
    if start == pos or level != 0:
        return False, "", pos
    return True, string[start:pos], pos


def _link_title(string: str, start: int, maximum: int, marker: str) -> tuple[bool, bool, int, str, int]:
    """markdown-it's parseLinkTitle.

    Returns (ok, can_continue, position after it, closing marker, length of the
    title text seen); `marker` is "" on the first call, the closing marker when
    continuing on the next line.
    """
    pos = start
    if not marker:
        if pos >= maximum:
            return False, False, 0, "", 0
        opening = string[pos]
        if opening not in "\"'(":
            return False, False, 0, "", 0
        start += 1
        pos += 1
        marker = ")" if opening == "(" else opening
    while pos < maximum:
        ch = string[pos]
        if ch == marker:
            return True, False, pos + 1, marker, pos - start
        if ch == "(" and marker == ")":
            return False, False, 0, marker, 0
        if ch == "\\" and pos + 1 < maximum:
            pos += 1
        pos += 1
    return False, True, 0, marker, pos - start


def _valid_link(url: str) -> bool:
    """markdown-it's validateLink: no javascript:, vbscript:, file:, data: (but images)."""
    url = _ESCAPE.sub(r"\1", url).strip().lower()
    return bool(_GOOD_DATA.search(url)) if _BAD_PROTOCOL.search(url) else True


# -- the block scanner -------------------------------------------------------


# A block the scanner recorded (`_Scanner.notes`): its kind ("fence", "html" or "reference"),
# its nesting level (0: top level), its first line index and the index of the line after it,
# and the offsets of its source text (its first non-blank character to its last line's end).
# A plain tuple: a recording scan of a large region makes thousands.
_Noted = tuple[str, int, int, int, int, int]


class _Scanner:
    """markdown-it's StateBlock plus its block rules, reduced to block boundaries.

    Line arrays as in markdown-it: `b` line start (moved past ``>`` markers
    while a blockquote is parsed), `e` end of the line's text (before its line
    ending), `t` offset of the first non-blank character from `b`, `s` its
    column with tabs expanded, `bs` the blockquote tab-stop fix-up. The last
    entry of each is a sentinel. Headings at nesting level 0 are collected in
    `found` as (level, line index, title).
    """

    __slots__ = (
        "b",
        "blk",
        "bs",
        "e",
        "found",
        "level",
        "line",
        "list_indent",
        "n",
        "notes",
        "s",
        "src",
        "t",
    )

    def __init__(self, src: str, b: list[int], e: list[int], t: list[int], s: list[int]) -> None:
        self.src = src
        self.b = b
        self.e = e
        self.t = t
        self.s = s
        self.n = len(b) - 1
        self.bs = [0] * len(b)
        self.blk = 0
        self.line = 0
        self.list_indent = -1
        self.level = 0
        self.found: list[tuple[int, int, str]] = []
        # When a list (`_recorded`): every fenced code block, HTML block and link reference
        # definition met, at any nesting, in order; the outline's scans record nothing.
        self.notes: list[_Noted] | None = None

    # ParserBlock.tokenize
    def tokenize(self, line: int, end: int) -> None:
        b, e, t, s = self.b, self.e, self.t, self.s
        n = self.n
        while line < end:
            while line < n and b[line] + t[line] >= e[line]:
                line += 1
            self.line = line
            if line >= end:
                break
            if s[line] < self.blk:
                break
            if self.level >= _MAX_NESTING:
                self.line = end
                break
            self._block(line, end)
            line = self.line
            if line < end and b[line] + t[line] >= e[line]:
                line += 1
                self.line = line

    def _block(self, line: int, end: int) -> None:
        """Run the first block rule that matches at `line` (non-blank, not outdented)."""
        if self.s[line] - self.blk >= 4:
            self._code(line, end)
            return
        ch = self.src[self.b[line] + self.t[line]]
        if ch in _BLOCK_START:
            if ch == "`" or ch == "~":
                if self._fence(line, end, False):
                    if self.notes is not None:
                        self._note(self.notes, "fence", line)
                    return
            elif ch == ">":
                self._blockquote(line, end)
                return
            elif ch == "#":
                if self._heading(line, False):
                    return
            elif ch == "<":
                if self._html(line, end, False):
                    if self.notes is not None:
                        self._note(self.notes, "html", line)
                    return
            elif ch == "[":
                if self._reference(line):
                    if self.notes is not None:
                        self._note(self.notes, "reference", line)
                    return
            else:
                if ch in "*-_" and self._hr(line, False):
                    return
                if ch != "_" and self._list(line, end, False, False):
                    return
        self._paragraph(line, end)

    def _note(self, notes: list[_Noted], kind: str, line: int) -> None:
        """Record the block just scanned (lines `line` to `self.line`).

        Its source text's offsets are taken now: inside a blockquote `b` is moved past
        the ``>`` markers only while the quote is scanned.
        """
        after = self.line
        notes.append((kind, self.level, line, after, self.b[line] + self.t[line],
                      self.e[after - 1 if after > line else line]))

    def _interrupts(self, line: int, paragraph: bool) -> bool:
        """Does a block start at `line` that ends a paragraph (or blockquote, reference)?

        markdown-it's terminator rules, silent: fence, blockquote, hr, list,
        html_block, heading. `paragraph` is `parentType == "paragraph"`, the
        one case where an ordered list must start at 1 and an empty item
        cannot interrupt.
        """
        pos = self.b[line] + self.t[line]
        if pos >= self.e[line] or self.s[line] - self.blk >= 4:
            return False
        ch = self.src[pos]
        if ch not in _INTERRUPT:
            return False
        if ch == ">":
            return True
        if ch == "`" or ch == "~":
            return self._fence(line, 0, True)
        if ch == "#":
            return self._heading(line, True)
        if ch == "<":
            return self._html(line, 0, True)
        if ch in "*-_" and self._hr(line, True):
            return True
        return ch != "_" and self._list(line, 0, True, paragraph)

    def _ends_list(self, line: int) -> bool:
        """markdown-it's "list" terminators: fence, blockquote, hr."""
        pos = self.b[line] + self.t[line]
        if pos >= self.e[line] or self.s[line] - self.blk >= 4:
            return False
        ch = self.src[pos]
        if ch == ">":
            return True
        if ch == "`" or ch == "~":
            return self._fence(line, 0, True)
        if ch in "*-_":
            return self._hr(line, True)
        return False

    # rules_block/code.py
    def _code(self, line: int, end: int) -> None:
        b, e, t, s = self.b, self.e, self.t, self.s
        code_indent = self.blk + 4
        last = nxt = line + 1
        while nxt < end:
            if b[nxt] + t[nxt] >= e[nxt]:
                nxt += 1
            elif s[nxt] >= code_indent:
                nxt += 1
                last = nxt
            else:
                break
        self.line = last

    # rules_block/fence.py
    def _fence(self, line: int, end: int, silent: bool) -> bool:
        src, b, e, t, s = self.src, self.b, self.e, self.t, self.s
        pos = b[line] + t[line]
        mx = e[line]
        if pos + 3 > mx or s[line] - self.blk >= 4:
            return False
        marker = src[pos]
        if marker != "`" and marker != "~":
            return False
        p = pos + 1
        while p < mx and src[p] == marker:
            p += 1
        length = p - pos
        if length < 3:
            return False
        if marker == "`" and "`" in src[p:mx]:
            return False
        if silent:
            return True
        blk = self.blk
        closed = False
        nxt = line
        while True:
            nxt += 1
            if nxt >= end:
                break
            pos = b[nxt] + t[nxt]
            mx = e[nxt]
            if pos >= mx:
                continue
            if s[nxt] < blk:
                break
            if src[pos] != marker or s[nxt] - blk >= 4:
                continue
            p = pos + 1
            while p < mx and src[p] == marker:
                p += 1
            if p - pos < length:
                continue
            while p < mx and (src[p] == " " or src[p] == "\t"):
                p += 1
            if p < mx:
                continue
            closed = True
            break
        self.line = nxt + 1 if closed else nxt
        return True

    # rules_block/blockquote.py
    def _quote_line(self, line: int, pos: int, mx: int) -> None:
        """Move line `line`'s markers past the ``>`` at `pos - 1` (and one optional space)."""
        src, b, t, s, bs = self.src, self.b, self.t, self.s, self.bs
        initial = offset = s[line] + 1
        ch = src[pos] if pos < mx else ""
        adjust_tab = False
        if ch == " ":
            pos += 1
            initial += 1
            offset += 1
            space_after = True
        elif ch == "\t":
            space_after = True
            if (bs[line] + offset) % 4 == 3:
                pos += 1
                initial += 1
                offset += 1
            else:
                adjust_tab = True
        else:
            space_after = False
        b[line] = pos
        while pos < mx:
            ch = src[pos]
            if ch == "\t":
                offset += 4 - (offset + bs[line] + (1 if adjust_tab else 0)) % 4
            elif ch == " ":
                offset += 1
            else:
                break
            pos += 1
        bs[line] = s[line] + 1 + (1 if space_after else 0)
        s[line] = offset - initial
        t[line] = pos - b[line]

    def _blockquote(self, line: int, end: int) -> None:
        src, b, e, t, s, bs = self.src, self.b, self.e, self.t, self.s, self.bs
        old_line_max = self.n
        blk = self.blk
        # Every line from `line` to the last one touched gets its markers back.
        saved: list[tuple[int, int, int, int]] = []
        pos = b[line] + t[line] + 1
        mx = e[line]
        saved.append((b[line], t[line], s[line], bs[line]))
        self._quote_line(line, pos, mx)
        last_line_empty = b[line] + t[line] >= mx
        nxt = line + 1
        while nxt < end:
            outdented = s[nxt] < blk
            pos = b[nxt] + t[nxt]
            mx = e[nxt]
            if pos >= mx:
                break
            if src[pos] == ">" and not outdented:
                saved.append((b[nxt], t[nxt], s[nxt], bs[nxt]))
                self._quote_line(nxt, pos + 1, mx)
                last_line_empty = b[nxt] + t[nxt] >= mx
                nxt += 1
                continue
            if last_line_empty:
                break
            if self._interrupts(nxt, False):
                # "hard termination": inner paragraphs must not look past it
                self.n = nxt
                if blk != 0:
                    saved.append((b[nxt], t[nxt], s[nxt], bs[nxt]))
                    s[nxt] -= blk
                break
            saved.append((b[nxt], t[nxt], s[nxt], bs[nxt]))
            s[nxt] = -1  # lazy continuation line
            nxt += 1
        self.blk = 0
        self.level += 1
        self.tokenize(line, nxt)
        self.level -= 1
        self.n = old_line_max
        for i, (ob, ot, os, obs) in enumerate(saved, line):
            b[i] = ob
            t[i] = ot
            s[i] = os
            bs[i] = obs
        self.blk = blk

    # rules_block/hr.py
    def _hr(self, line: int, silent: bool) -> bool:
        pos = self.b[line] + self.t[line]
        mx = self.e[line]
        if pos >= mx or self.s[line] - self.blk >= 4:
            return False
        src = self.src
        marker = src[pos]
        if marker not in "*-_":
            return False
        p = pos + 1
        while p < mx and (src[p] == " " or src[p] == "\t"):
            p += 1
        if p >= mx or src[p] != marker:  # the quick "no" for list items
            return False
        rest = src[p:mx]
        if rest.count(marker) < 2 or rest.replace(marker, "").strip(" \t"):
            return False
        if not silent:
            self.line = line + 1
        return True

    # rules_block/list.py: skipOrderedListMarker, skipBulletListMarker
    def _ordered_marker(self, line: int) -> int:
        src = self.src
        start = pos = self.b[line] + self.t[line]
        mx = self.e[line]
        if pos + 1 >= mx or src[pos] not in _DIGITS:
            return -1
        pos += 1
        while True:
            if pos >= mx:
                return -1
            ch = src[pos]
            pos += 1
            if ch in _DIGITS:
                if pos - start >= 10:
                    return -1
                continue
            if ch == ")" or ch == ".":
                break
            return -1
        if pos < mx and src[pos] != " " and src[pos] != "\t":
            return -1
        return pos

    def _bullet_marker(self, line: int) -> int:
        src = self.src
        pos = self.b[line] + self.t[line]
        mx = self.e[line]
        if pos >= mx or src[pos] not in "*-+":
            return -1
        pos += 1
        if pos < mx and src[pos] != " " and src[pos] != "\t":
            return -1
        return pos

    def _plain(self, pos: int, mx: int) -> bool:
        """Can text starting at `pos` (not indented code) only be paragraph text?

        False when unsure: the callers then take the long way.
        """
        src = self.src
        ch = src[pos]
        if ch not in _BLOCK_START:
            return True
        if ch == "*" or ch == "-" or ch == "_" or ch == "+":
            after = src[pos + 1] if pos + 1 < mx else " "
            if ch != "_" and (after == " " or after == "\t"):
                return False  # a list item
            # a thematic break has nothing but markers and blanks
            return ch == "+" or bool(src[pos:mx].strip(ch + " \t"))
        return False

    def _list(self, line: int, end: int, silent: bool, paragraph: bool) -> bool:
        src, b, e, t, s, bs = self.src, self.b, self.e, self.t, self.s, self.bs
        if s[line] - self.blk >= 4:
            return False
        if self.list_indent >= 0 and s[line] - self.list_indent >= 4 and s[line] < self.blk:
            return False
        interrupting = silent and paragraph and s[line] >= self.blk
        ordered = src[b[line] + t[line]] in _DIGITS
        if ordered:
            after = self._ordered_marker(line)
            if after < 0:
                return False
            if interrupting and int(src[b[line] + t[line] : after - 1]) != 1:
                return False
        else:
            after = self._bullet_marker(line)
            if after < 0:
                return False
        if interrupting:
            mx = e[line]
            p = after
            while p < mx and (src[p] == " " or src[p] == "\t"):
                p += 1
            if p >= mx:
                return False
        if silent:
            return True

        marker = src[after - 1]
        old_parent_level = self.level
        self.level += 1  # the list
        start = nxt = line
        while nxt < end:
            pos = after
            mx = e[nxt]
            initial = offset = s[nxt] + after - (b[start] + t[start])
            while pos < mx:
                ch = src[pos]
                if ch == "\t":
                    offset += 4 - (offset + bs[nxt]) % 4
                elif ch == " ":
                    offset += 1
                else:
                    break
                pos += 1
            content = pos
            indent_after = 1 if content >= mx else offset - initial
            if indent_after > 4:
                indent_after = 1
            indent = initial + indent_after

            # Fast path, same outcome: a one-line item whose text is plain
            # paragraph text, followed by a sibling item (not a thematic
            # break) that the text cannot lazily continue into.
            nxt += 1
            if (
                nxt < end
                and content < mx
                and offset - indent < 4
                and self._plain(content, mx)
                and self.level + 1 < _MAX_NESTING
            ):
                pos = b[nxt] + t[nxt]
                sc = s[nxt]
                if (
                    pos < e[nxt]
                    and 0 <= self.blk <= sc < indent
                    and sc - self.blk < 4
                    and (src[pos] in _DIGITS if ordered else src[pos] == marker)
                ):
                    after = self._ordered_marker(nxt) if ordered else self._bullet_marker(nxt)
                    if (
                        after >= 0
                        and src[after - 1] == marker
                        and (ordered or marker == "+" or not self._hr(nxt, True))
                    ):
                        self.line = start = nxt
                        continue
            nxt = start

            self.level += 1  # the item
            old_t = t[start]
            old_s = s[start]
            old_list_indent = self.list_indent
            self.list_indent = self.blk
            self.blk = indent
            t[start] = content - b[start]
            s[start] = offset
            if content >= mx and b[start + 1] + t[start + 1] >= e[start + 1]:
                # an empty item followed by a blank line ends the list
                self.line = min(self.line + 2, end)
            else:
                self.tokenize(start, end)
            self.blk = self.list_indent
            self.list_indent = old_list_indent
            t[start] = old_t
            s[start] = old_s
            self.level -= 1

            nxt = start = self.line
            if nxt >= end:
                break
            if s[nxt] < self.blk or s[nxt] - self.blk >= 4:
                break
            if self._ends_list(nxt):
                break
            after = self._ordered_marker(nxt) if ordered else self._bullet_marker(nxt)
            if after < 0 or src[after - 1] != marker:
                break
        self.level = old_parent_level
        self.line = nxt
        return True

    # rules_block/reference.py
    def _reference_line(self, line: int) -> str | None:
        """getNextLine: the next line of a reference definition, or None."""
        if line >= self.n:
            return None
        pos = self.b[line] + self.t[line]
        mx = self.e[line]
        if pos >= mx:
            return None
        lazy = self.s[line] - self.blk >= 4 or self.s[line] < 0
        if not lazy and self._interrupts(line, False):
            return None
        return self.src[pos:mx] + ("\n" if mx < len(self.src) else "")

    def _reference(self, line: int) -> bool:
        """markdown-it's reference rule, one line at a time.

        markdown-it grows one string line by line and scans it; scanning the
        lines in turn is the same walk without the quadratic copying.
        """
        src = self.src
        pos = self.b[line] + self.t[line]
        mx = self.e[line]
        if self.s[line] - self.blk >= 4 or src[pos] != "[":
            return False
        cur = src[pos:mx] + ("\n" if mx < len(src) else "")
        nxt = line + 1

        # [label]: the label may span lines; an empty one is no definition
        label_blank = True
        start = pos = 1
        while True:
            stop = _LABEL_STOP.search(cur, pos)
            if stop is None:
                return False
            pos = stop.start()
            ch = cur[pos]
            if ch == "[":
                return False
            if ch == "]":
                break
            if ch == "\\":
                pos += 1
                ch = cur[pos] if pos < len(cur) else ""
            if ch == "\n":
                more = self._reference_line(nxt)
                if more is None:
                    return False  # the label runs into the end of the string
                if label_blank and cur[start:].strip(_TRIM):
                    label_blank = False
                cur = more
                start = pos = 0
                nxt += 1
                continue
            pos += 1
        if label_blank and cur[start:pos].strip(_TRIM):
            label_blank = False
        if cur[pos + 1 : pos + 2] != ":":
            return False

        # blanks, line breaks included, then the destination
        cur, pos, nxt, _ = self._reference_blanks(cur, pos + 2, nxt)
        ok, destination, pos = _link_destination(cur, pos, len(cur))
        if not ok or not _valid_link(destination):
            return False
        dest_cur, dest_end, dest_line = cur, pos, nxt

        # blanks again, then an optional title, which may span lines
        cur, pos, nxt, moved = self._reference_blanks(cur, pos, nxt)
        title_ok, can_continue, title_end, marker, title_len = _link_title(cur, pos, len(cur), "")
        while can_continue:
            more = self._reference_line(nxt)
            if more is None:
                break
            cur = more
            pos = 0
            moved = True
            nxt += 1
            title_ok, can_continue, title_end, marker, more_len = _link_title(cur, 0, len(cur), marker)
            title_len += more_len

        has_title = False
        if pos < len(cur) and moved and title_ok:
            has_title = title_len > 0
            pos = title_end
        else:
            cur, pos, nxt = dest_cur, dest_end, dest_line
        while pos < len(cur) and cur[pos] in " \t":
            pos += 1
        if pos < len(cur) and cur[pos] != "\n" and has_title:
            # garbage after the title, but the definition may stand without it
            cur, pos, nxt = dest_cur, dest_end, dest_line
            while pos < len(cur) and cur[pos] in " \t":
                pos += 1
        if pos < len(cur) and cur[pos] != "\n":
            return False
        if label_blank:
            return False
        self.line = nxt
        return True

    def _reference_blanks(self, cur: str, pos: int, nxt: int) -> tuple[str, int, int, bool]:
        """Skip spaces, tabs and line breaks (taking the next lines as they come).

        Returns the line, the position, the next line index, and whether
        anything was skipped.
        """
        moved = False
        while pos < len(cur):
            ch = cur[pos]
            if ch == "\n":
                more = self._reference_line(nxt)
                if more is not None:
                    cur = more
                    pos = 0
                    nxt += 1
                    moved = True
                    continue
            elif ch != " " and ch != "\t":
                break
            pos += 1
            moved = True
        return cur, pos, nxt, moved

    # rules_block/html_block.py
    def _html(self, line: int, end: int, silent: bool) -> bool:
        src, b, e, t, s = self.src, self.b, self.e, self.t, self.s
        pos = b[line] + t[line]
        mx = e[line]
        if pos >= mx or src[pos] != "<" or s[line] - self.blk >= 4:
            return False
        text = src[pos:mx]
        kind = next((k for k in _HTML_BLOCKS if k[0].search(text)), None)
        if kind is None:
            return False
        _, closing, interrupts = kind
        if silent:
            return interrupts
        blk = self.blk
        nxt = line + 1
        if closing is None:
            # types 6 and 7 end at a blank line (not part of the block)
            while nxt < end:
                if b[nxt] + t[nxt] >= e[nxt] or s[nxt] < blk:
                    break
                nxt += 1
        elif not closing.search(text):
            while nxt < end:
                pos = b[nxt] + t[nxt]
                mx = e[nxt]
                if s[nxt] < blk and pos < mx:
                    break
                if pos < mx and closing.search(src, pos, mx):
                    nxt += 1
                    break
                nxt += 1
        self.line = nxt
        return True

    # rules_block/heading.py
    def _heading(self, line: int, silent: bool) -> bool:
        src = self.src
        pos = self.b[line] + self.t[line]
        mx = self.e[line]
        if pos >= mx or src[pos] != "#" or self.s[line] - self.blk >= 4:
            return False
        level = 1
        pos += 1
        while pos < mx and src[pos] == "#" and level <= 6:
            level += 1
            pos += 1
        if level > 6 or (pos < mx and src[pos] != " " and src[pos] != "\t"):
            return False
        if silent:
            return True
        self.line = line + 1
        if self.level == 0:
            title = src[pos:mx].rstrip(" \t")
            stripped = title.rstrip("#")
            if len(stripped) < len(title) and stripped and stripped[-1] in " \t":
                title = stripped
            self.found.append((level, line, title.strip(_TRIM)))
        return True

    # rules_block/lheading.py and rules_block/paragraph.py, in one pass
    def _paragraph(self, line: int, end: int) -> None:
        src, b, e, t, s = self.src, self.b, self.e, self.t, self.s
        blk = self.blk
        n = self.n
        setext = 0
        nxt = line + 1
        while nxt < n:
            pos = b[nxt] + t[nxt]
            mx = e[nxt]
            if pos >= mx:
                break
            sc = s[nxt]
            if sc - blk > 3 or src[pos] not in _INTERRUPT_OR_UNDERLINE:
                nxt += 1
                continue
            ch = src[pos]
            if (ch == "=" or ch == "-") and nxt < end and sc >= blk:
                p = pos + 1
                while p < mx and src[p] == ch:
                    p += 1
                while p < mx and (src[p] == " " or src[p] == "\t"):
                    p += 1
                if p >= mx:
                    setext = 1 if ch == "=" else 2
                    break
            if sc < 0:
                nxt += 1
                continue
            if self._interrupts(nxt, True):
                break
            nxt += 1
        if not setext:
            self.line = nxt
            return
        self.line = nxt + 1
        if self.level == 0:
            title = " ".join(src[b[i] : e[i]].strip(_TRIM) for i in range(line, nxt))
            self.found.append((setext, line, title))


class Block(NamedTuple):
    """A top-level fenced code block (`kind` "fence") or HTML block ("html") of a scan:
    its first line index and the index of the line after it."""

    kind: str
    first: int
    after: int


class Blocks(NamedTuple):
    """What `blocks` finds in a text: top-level headings (level, line index, title), the
    fenced code and HTML blocks, and the line starts (the last one is the text's length)."""

    headings: list[tuple[int, int, str]]
    blocks: list[Block]
    starts: list[int]


def blocks(text: str) -> Blocks:
    """The top-level headings, fenced code and HTML blocks of `text`, a stretch that starts
    at a top-level block boundary inside a document (a region's text).

    The fenced code and HTML blocks are the two that can run past the text they start in:
    they explain why a text does not fit its region (`engine/fitting.py`).
    """
    scanner, notes = _recorded(text)
    return Blocks(scanner.found,
                  [Block(kind, first, after) for kind, level, first, after, _, _ in notes
                   if level == 0 and kind != "reference"],
                  scanner.b)


def _front_matter_end(src: str, b: list[int], e: list[int]) -> int:
    """Index of the first line after YAML front matter, 0 when there is none."""
    n = len(b) - 1
    if n == 0 or src[b[0] : e[0]].rstrip(" \t") != "---":
        return 0
    for i in range(1, n):
        if src[b[i] : e[i]].rstrip(" \t") in ("---", "..."):
            return i + 1
    return 0


def special_blocks(text: str) -> list[tuple[str, str]]:
    """The link reference definitions and HTML blocks of `text` (a region, or a whole
    document), at any nesting, as ("reference" | "html", source text), in order.

    Both act beyond where they stand: a definition decides where links elsewhere in the
    document point (the first one of a label wins), an HTML block can hide or restyle what
    follows. The room's auto-approve policies never approve a change to either.
    """
    scanner, notes = _recorded(text)
    src = scanner.src
    return [(kind, src[start:end]) for kind, _, _, _, start, end in notes if kind != "fence"]


def _recorded(text: str) -> tuple[_Scanner, list[_Noted]]:
    """The one recording scan, shared by `blocks` and `special_blocks`: a scanner that has
    tokenized `text` (a region's stretch, see `_scan`) and the blocks it recorded."""
    notes: list[_Noted] = []
    return _scanned(text, False, notes), notes


def _scan(text: str, document: bool = True) -> tuple[list[tuple[int, int, str]], list[int]]:
    """Top-level headings of `text` as (level, line index, title), and line starts.

    `document=False` scans a stretch that starts at a top-level block boundary
    inside a document (the incremental outline): no byte order mark, no front
    matter.
    """
    scanner = _scanned(text, document)
    return scanner.found, scanner.b


def _scanned(text: str, document: bool, notes: list[_Noted] | None = None) -> _Scanner:
    """A scanner that has tokenized `text` (see `_scan`), recording its fenced code blocks,
    HTML blocks and link reference definitions in `notes` when given (`_recorded`)."""
    src = text.replace("\0", "\ufffd") if "\0" in text else text  # as markdown-it
    widths: list[int] | None = None  # line ending lengths, when not all 1
    if "\r" not in src:
        lines = src.split("\n")
    elif src.count("\r") == src.count("\r\n") == src.count("\n"):
        lines = src.split("\r\n")
        widths = [2] * (len(lines) - 1)
    else:
        parts = _NEWLINE.split(src)
        lines = parts[0::2]
        widths = list(map(len, parts[1::2]))
    # A byte order mark is not text (markdown-it would read "\ufeff# A" as a
    # paragraph): the first line starts after it.
    bom = 1 if document and src.startswith("\ufeff") else 0
    if bom:
        lines[0] = lines[0][1:]
    # markdown-it has no line for the empty tail after a final line ending,
    # nor for a last line of only blanks.
    if not lines[-1].strip(" \t"):
        lines.pop()
    count = len(lines)
    lengths = list(map(len, lines))
    if widths is None:
        b = list(map(add, accumulate(lengths, initial=bom), range(count + 1)))
    else:
        b = list(accumulate(map(add, lengths, widths), initial=bom))
    del b[count:]
    e = list(map(add, b, lengths))
    # leading blanks: all at C speed but for the (few) indented lines
    t = list(map(sub, lengths, map(len, map(str.lstrip, lines, repeat(" \t", count)))))
    s = t.copy()
    if "\t" in src:
        for i in [i for i, k in enumerate(t) if k]:
            prefix = lines[i][: t[i]]
            if "\t" in prefix:
                col = 0
                for ch in prefix:
                    col += 4 - col % 4 if ch == "\t" else 1
                s[i] = col
    # the sentinel line
    b.append(len(src))
    e.append(len(src))
    t.append(0)
    s.append(0)
    scanner = _Scanner(src, b, e, t, s)
    scanner.notes = notes
    scanner.tokenize(_front_matter_end(src, b, e) if document else 0, scanner.n)
    return scanner


# -- incremental re-scan -------------------------------------------------------

# A line that is an ATX heading wherever it starts a top-level block. Every
# block rule stops at (or before) such a line and reads nothing after it, so
# the scan up to it is a function of the text before it: a safe place to
# restart a scan, and a safe place to rejoin the old heading list.
_ATX_LINE: Final = re.compile(r" {0,3}#{1,6}(?:[ \t\r\n]|\Z)")
_LINE_END: Final = re.compile(r"[\r\n]")
_FRONT_MATTER_CLOSE: Final = re.compile(r"(?:\r\n?|\n)(?:---|\.\.\.)[ \t]*(?=[\r\n]|\Z)")


def _after_line(text: str, pos: int) -> int:
    """The offset just after the line ending of the line at `pos` (or the end of the text)."""
    found = _LINE_END.search(text, pos)
    if found is None:
        return len(text)
    end = found.start()
    return end + 2 if text.startswith("\r\n", end) else end + 1


def _front_matter_blocks(text: str, start: int) -> bool:
    """Could an edit at `start` change the front matter (so the whole text must be re-scanned)?"""
    bom = 1 if text.startswith("\ufeff") else 0
    first = _LINE_END.search(text, bom)
    first_end = len(text) if first is None else first.start()
    if text[bom:first_end].rstrip(" \t") != "---":
        return False
    close = _FRONT_MATTER_CLOSE.search(text, first_end)
    # unclosed: new text could close it; closed: an edit up to its closing line moves it
    return close is None or start <= close.end()


scan = _scan
ATX_LINE = _ATX_LINE
LINE_END = _LINE_END
after_line = _after_line
front_matter_blocks = _front_matter_blocks
FRONT_MATTER_CLOSE = _FRONT_MATTER_CLOSE
