"""Agent text fits the document (docs/spec/PROTOCOL.md section 7; docs/protocol.md "Agent text
fits the document").

Agents send section text the way a language model writes it: without a final newline,
without the blank line before the next heading, with a blank line too many. Before any check
(propose, revise, a reviewer's amended text) a region proposal's text is fitted to the
region it replaces (`fit_region`): the region's line endings, and the region's own tail (the
line break after its last line and the blank lines after that, the separator before the next
heading) in place of the text's own (but the blank line that ends an HTML block). Nothing
else changes: trailing blanks on a text line stay (a markdown hard break), and a blank text
(deleting the region) stays as sent. A whole-document proposal only gets the document's final
line break when it lacks one (`fit_whole`).

A region text that would still change the outline outside its region is refused with one
cause (`misfit`): the first of the start of the text (fenced whole, text before the heading,
heading missing, level changed), then its end (a block that runs into the next section, a
heading that adopts the sections after it). Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Final

import attrs

from commonroom.engine.commonmark import ATX_LINE, after_line, blocks
from commonroom.engine.regions import Outline, Span
from commonroom.engine.text import line_ending, with_line_endings

# What `details.cause` of an `outline_outside_region` refusal may be (PROTOCOL section 7).
UNCLOSED_FENCE: Final = "unclosed_fence"
UNCLOSED_HTML_BLOCK: Final = "unclosed_html_block"
HEADING_MISSING: Final = "heading_missing"
HEADING_LEVEL_CHANGED: Final = "heading_level_changed"
TEXT_BEFORE_HEADING: Final = "text_before_heading"
ADOPTS_FOLLOWING_SECTIONS: Final = "adopts_following_sections"
FENCED_WHOLE_TEXT: Final = "fenced_whole_text"
CAUSES: Final = (UNCLOSED_FENCE, UNCLOSED_HTML_BLOCK, HEADING_MISSING, HEADING_LEVEL_CHANGED,
                 TEXT_BEFORE_HEADING, ADOPTS_FOLLOWING_SECTIONS, FENCED_WHOLE_TEXT)

_BLANKS: Final = " \t"
_BREAKS: Final = "\r\n"
_BREAK_ONLY: Final = frozenset({"\n", "\r\n", "\r"})
_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")
# A line of the text quoted in a refusal is cut to this many characters.
_SHOWN_MAX: Final = 60


def split_tail(text: str) -> tuple[str, str]:
    """(body, tail): the tail is the line break after the last non-blank line and every blank
    line after it; blanks at the end of that last line stay in the body (a hard break).
    A blank text is all tail; a text whose last line has no line break has no tail."""
    last = len(text.rstrip(_BLANKS + _BREAKS))
    if last == 0:
        return "", text
    while last < len(text) and text[last] in _BLANKS:
        last += 1
    return text[:last], text[last:]


def fit_region(region_text: str, content: str) -> str:
    """`content` fitted to the region whose text (at the proposal's base) is `region_text`.

    The region's line endings when it keeps to one kind; then, unless the text is blank, the
    region's own tail in place of the text's: the next heading keeps its separator, and a text
    that differs from the region only in trailing blank lines equals it. The last region of a
    file has the file's end as its tail (none when the file ends without a line break). One
    exception: where the region has no blank line before the next heading but the text does
    and ends with a block only a blank line ends (an HTML block), one blank line stays.
    Idempotent."""
    content = with_line_endings(content, line_ending(region_text))
    body, tail = split_tail(content)
    if not body:
        return content
    # (A region's text starts with its heading; were it blank, its tail starts at a break.)
    region_tail = split_tail(region_text)[1].lstrip(_BLANKS)
    if (region_tail in _BREAK_ONLY and len(_LINE_BREAK.findall(tail)) > 1
            and _needs_a_blank_line(body)):
        # The region has no blank line before the next heading, and the text ends with a
        # block only a blank line ends (an HTML block): the author's blank line stays.
        return body + region_tail * 2
    return body + region_tail


def _needs_a_blank_line(body: str) -> bool:
    """Would the last block of `body` run on into a heading line right after it?"""
    probe = blocks(body + "\n# end\n")
    last = len(probe.starts) - 2  # the heading line
    return not any(line == last for _, line, _ in probe.headings)


def fit_whole(document: str, content: str) -> str:
    """A whole-document text with the document's line endings, and its final line break
    when the document has one and the text (not blank) lacks it. Its trailing blank lines
    are the author's: it is the whole file."""
    ending = line_ending(document)
    content = with_line_endings(content, ending)
    if content.endswith(tuple(_BREAKS)) or not content.strip(_BLANKS + _BREAKS):
        return content
    if document.endswith("\r\n"):
        return content + "\r\n"
    return content + "\n" if document.endswith("\n") else content


@attrs.frozen
class Misfit:
    """Why a region text does not fit: one of `CAUSES`, the 1-based line in the text it
    concerns, and what to do about it."""

    cause: str
    line: int
    message: str


def _shown(line: str) -> str:
    """A line of text as quoted in a message: no line ending, no control character, cut."""
    line = line.rstrip(_BREAKS)
    cut = line[:_SHOWN_MAX] + ("..." if len(line) > _SHOWN_MAX else "")
    return "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in cut)


def misfit(outline: Outline, span: Span, content: str, new: Outline) -> Misfit:
    """Why replacing region `span` of `outline` (a full outline of the current text) with
    `content` changes the outline outside the span (`Outline.changes_outside` said it does);
    `new` is the outline of the replaced text."""
    index = outline.index_of(span.region)
    assert index is not None
    head = outline.heading(index)
    text = outline.text
    own = text[head.start : after_line(text, head.start)]
    heading = _shown(own).rstrip() if ATX_LINE.match(own) else f"{'#' * head.level} {head.title}"
    # The text, and after it the first line of the heading that follows the region: a block
    # that contains that line runs out of the region.
    following = outline.first_heading_from(span.end)
    has_following = span.end < len(text)  # a span ends where a heading starts, or at the end
    probe = content
    if has_following and content.endswith(tuple(_BREAKS)):
        probe += text[span.end : after_line(text, span.end)]
    found = blocks(probe)
    starts = found.starts
    lines = bisect_left(starts, len(content), hi=len(starts) - 1)  # the text's lines
    next_line = lines if len(probe) > len(content) else None

    def first_line(offset: int) -> str:
        return text[offset : after_line(text, offset)]

    def line_text(i: int) -> str:
        return probe[starts[i] : starts[i + 1]]

    def blank(i: int) -> bool:
        return not line_text(i).strip(_BLANKS + _BREAKS)

    first = next((i for i in range(lines) if not blank(i)), 0)
    own_headings = [h for h in found.headings if h[1] < lines]
    starts_with_heading = bool(own_headings) and own_headings[0][1] == first

    # The start of the text: it must be the region's heading line.
    if not starts_with_heading:
        block = next((b for b in found.blocks if b.first == first), None)
        if block is not None and block.kind == "fence" and not any(
                not blank(i) for i in range(block.after, lines)):
            return Misfit(FENCED_WHOLE_TEXT, first + 1, (
                f"your text is wrapped in a {_shown(line_text(first)).strip()} fence (line"
                f" {first + 1}): send the section's markdown itself, starting with its heading"
                f" line `{heading}`"))
        later = any(level <= head.level for level, _, _ in own_headings) or any(
            _shown(line_text(i)).strip() == heading for i in range(first + 1, lines))
        if later:
            return Misfit(TEXT_BEFORE_HEADING, first + 1, (
                f"there is text before the section's heading (line {first + 1}): the text must"
                f" start with the section's heading line `{heading}`; move that text below it"))
        return Misfit(HEADING_MISSING, first + 1, (
            f"the text must start with the section's heading line `{heading}` (line"
            f" {first + 1} is not a heading): send the whole section, heading included"))
    if first > 0:
        return Misfit(TEXT_BEFORE_HEADING, 1, (
            f"the text starts with {first} blank line(s): it must start with the section's"
            f" heading line `{heading}`"))
    level, _, title = own_headings[0]
    if level > head.level and title.casefold() != head.title.casefold():
        return Misfit(HEADING_MISSING, 1, (
            f"the text starts with the sub-heading `{_shown(line_text(0))}`: it must start with"
            f" the section's heading line `{heading}`; send the whole section, heading included"))
    if level != head.level:
        return Misfit(HEADING_LEVEL_CHANGED, 1, (
            f"the heading on line 1 is level {level} and the section's is level {head.level}:"
            f" keep its level, `{'#' * head.level} {_shown(title)}` (renaming it is fine), or"
            " propose on the whole document to move the section"))

    # The end of the text: nothing in it may run into, adopt or rename what follows.
    if next_line is not None:
        for block in found.blocks:
            if block.first < next_line < block.after:
                opened = _shown(line_text(block.first)).strip()
                if block.kind == "fence":
                    return Misfit(UNCLOSED_FENCE, block.first + 1, (
                        f"the code fence opened on line {block.first + 1} with {opened} is never"
                        " closed, so it would swallow the sections after this one: close it"))
                return Misfit(UNCLOSED_HTML_BLOCK, block.first + 1, (
                    f"the HTML block opened on line {block.first + 1} with {opened} does not end"
                    " inside the section, so it would swallow the sections after this one:"
                    " close it and end it with a blank line"))
    if has_following:
        after = outline.heading(following)
        for level, line, _ in own_headings[1:]:
            if level < after.level:
                return Misfit(ADOPTS_FOLLOWING_SECTIONS, line + 1, (
                    f"the heading `{_shown(line_text(line))}` on line {line + 1} is of a higher"
                    f" level than the section after this one (`{_shown(first_line(after.start))}`), so"
                    f" it would take that section in: make it level {after.level} or deeper, or"
                    " propose on the whole document"))
        # A heading of the text that takes the path of a section after the region.
        content_end = span.start + len(content)
        count = new.heading_count()
        at = new.first_heading_from(span.start)
        while at < count and (h := new.heading(at)).start < content_end:
            at += 1
            taken = outline.index_of(h.path)
            if taken is not None and taken >= following:
                line = h.line - head.line + 1
                if line == 1:
                    return Misfit(HEADING_MISSING, 1, (
                        f"the text starts with `{_shown(line_text(0))}`, the heading of a section"
                        f" after this one: it must start with the section's own heading line"
                        f" `{heading}`"))
                return Misfit(ADOPTS_FOLLOWING_SECTIONS, line, (
                    f"line {line} repeats the heading of a section after this one"
                    f" (`{_shown(line_text(line - 1))}`): end the text before it"))
    at = new.first_heading_from(span.start)
    if at >= new.heading_count() or new.heading(at).start != span.start:
        # The text's first heading is a setext one whose first line joins the paragraph the
        # section before ends with: in the document the text starts with no heading.
        return Misfit(HEADING_MISSING, 1, (
            f"the text's first line would join the text before the section (an underlined"
            f" heading needs a blank line before it): start with the heading line `{heading}`"))
    last = max((i for i in range(lines) if not blank(i)), default=0)
    if has_following:
        return Misfit(ADOPTS_FOLLOWING_SECTIONS, last + 1, (
            f"the end of the text (line {last + 1}) runs into the heading after the section"
            f" (`{_shown(first_line(span.end))}`): end the section with a blank line or a complete"
            " block, or propose on the whole document"))
    return Misfit(TEXT_BEFORE_HEADING, 1, (
        f"the text changes the headings before the section: it must start with the section's"
        f" heading line `{heading}`"))
