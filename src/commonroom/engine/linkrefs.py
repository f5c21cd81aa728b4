"""Link reference definitions that reach beyond their region (the review's warnings).

`[label]: destination` renders as nothing where it stands, yet decides where every
`[text][label]`, `[label][]` and `[label]` link of the document points (the first
definition of a label wins). So a one-line change in one region can rewire links in
regions leased by someone else: `proposal_warnings` names the other sections whose
links use a label the proposal adds, removes or changes, and the review shows it
("also changes where links in Goals point"). Pure: texts in, sentences out.
"""

from __future__ import annotations

import re
from typing import Final

from commonroom.engine.commonmark import special_blocks
from commonroom.engine.linediff import Deferred
from commonroom.engine.regions import WHOLE, Outline

# The label and destination of one definition block (`special_blocks` found it whole).
_DEFINITION: Final = re.compile(r"\[((?:[^\]\\]|\\.)+)\]:\s*(<[^>\n]*>|\S+)", re.S)
# Reference links: full `[text][label]`, collapsed `[label][]`, shortcut `[label]`.
_FULL: Final = re.compile(r"\]\[((?:[^\]\\]|\\.)+)\]")
_COLLAPSED_OR_SHORTCUT: Final = re.compile(r"\[((?:[^\]\\\[]|\\.)+)\](?:\[\])?(?![(:\[])")


def _label(text: str) -> str:
    """CommonMark's label matching: case-folded, inner whitespace collapsed."""
    return " ".join(text.split()).casefold()


def definitions(text: str) -> dict[str, str]:
    """label -> destination of every definition in `text` (the first of a label wins)."""
    found: dict[str, str] = {}
    if "]:" not in text:  # every definition has its label's `]` followed by `:`: no scan
        return found
    for kind, source in special_blocks(text):
        if kind != "reference":
            continue
        match = _DEFINITION.match(source.lstrip())
        if match is not None:
            found.setdefault(_label(match.group(1)), match.group(2))
    return found


def uses(text: str) -> set[str]:
    """The labels `text`'s reference links name (a cheap over-approximation: brackets
    that are no link count too, which can only add a warning)."""
    return ({_label(m.group(1)) for m in _FULL.finditer(text)}
            | {_label(m.group(1)) for m in _COLLAPSED_OR_SHORTCUT.finditer(text)})


def proposal_warnings(outline: Outline, region: str, content: str) -> list[str]:
    """Sentences naming the other sections whose links the proposal's definitions move."""
    if region == WHOLE or not outline.has_path(region):
        return []
    span = outline.resolve(region)
    if definitions(outline.region_text(span)) == definitions(content):
        return []
    # Where each label points in the whole document, before and after (the first wins).
    before, after = definitions(outline.text), definitions(outline.replace(span, content))
    moved = {label for label in before.keys() | after.keys()
             if before.get(label) != after.get(label)}
    if not moved:
        return []
    text = outline.text
    headings = outline.headings
    starts = [0, *(h.start for h in headings)]
    names = ["(before the first heading)", *(h.title for h in headings)]
    ends = [*starts[1:], len(text)]
    warnings = []
    for label in sorted(moved):
        where = [name for name, start, end in zip(names, starts, ends, strict=True)
                 if not span.start <= start < span.end and end > start
                 and label in uses(text[start:end])]
        if where:
            warnings.append(f"[{label}]: also changes where links in {', '.join(where)} point")
    return warnings


class LaterWarnings(list[str], Deferred):
    """`proposal_warnings` not computed yet: empty until `linediff.resolved`.

    Scanning the whole document twice for its definitions costs about 60 ms per
    256 KiB: like a diff, it is computed after the read's transaction, off the store
    (`linediff.Later`), and never for a caller that does not answer it (a proposal wait).
    """

    outline: Outline
    region: str
    content: str

    def compute(self) -> list[str]:
        return proposal_warnings(self.outline, self.region, self.content)


def later_warnings(outline: Outline, region: str, content: str) -> list[str]:
    """`proposal_warnings(outline, region, content)`, to be computed by `linediff.resolved`."""
    pending = LaterWarnings()
    pending.outline, pending.region, pending.content = outline, region, content
    return pending
