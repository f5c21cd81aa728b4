"""Agent text fits the document (PROTOCOL section 7; engine/fitting.py).

A region proposal's text gets a final line break, the region's own trailing blank lines and its
line endings before any check; a text that still changes the outline outside its region is
refused with one cause (`details.cause`), the line it concerns (`details.line`) and its fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from commonroom.engine.commonmark import LINE_END, blocks, special_blocks
from commonroom.engine.dispatch import open_engine
from commonroom.engine.fitting import CAUSES, fit_region, fit_whole, misfit, split_tail
from commonroom.engine.regions import Outline
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import ManualClock
from tests.conftest import Driver
from tests.unit.test_regions import document

# -- the fitting itself ---------------------------------------------------------------------


@pytest.mark.parametrize(("text", "body", "tail"), [
    ("## A\n\ntext\n\n", "## A\n\ntext", "\n\n"),
    ("## A\n\ntext", "## A\n\ntext", ""),
    ("## A\n\nhard break  \n\n", "## A\n\nhard break  ", "\n\n"),
    ("## A\r\n\r\ntext\r\n  \r\n", "## A\r\n\r\ntext", "\r\n  \r\n"),
    ("\n\n", "", "\n\n"),
    ("", "", ""),
])
def test_the_tail_is_the_line_break_after_the_last_text_and_the_blank_lines(
        text: str, body: str, tail: str) -> None:
    assert split_tail(text) == (body, tail)


REGION = "## Goals\n\n- ship it\n\n"


@pytest.mark.parametrize(("sent", "fitted"), [
    ("## Goals\n\n- ship it\n- tell people", "## Goals\n\n- ship it\n- tell people\n\n"),
    ("## Goals\n\n- ship it\n- tell people\n", "## Goals\n\n- ship it\n- tell people\n\n"),
    ("## Goals\n\n- ship it\n- tell people\n\n\n\n", "## Goals\n\n- ship it\n- tell people\n\n"),
    ("## Goals\n\n- ship it\n\n   \n\t\n", REGION),
    # a markdown hard break is the author's: trailing blanks on a text line stay
    ("## Goals\n\nfirst  \nsecond  ", "## Goals\n\nfirst  \nsecond  \n\n"),
    ("## Goals\r\n\r\n- ship it\r\n- crlf\r\n", "## Goals\n\n- ship it\n- crlf\n\n"),
    # a blank text deletes the region: as sent
    ("", ""),
    ("\n\n", "\n\n"),
])
def test_a_region_text_gets_a_final_break_and_the_regions_own_separator(sent: str, fitted: str) -> None:
    assert fit_region(REGION, sent) == fitted



def shown_revision(room: Driver, proposal: dict[str, Any]) -> int:
    """The revision the host reads before it approves (a review binds to it)."""
    revision: int = room.call("workspace.proposal", room.host,
                              proposal_id=proposal["proposal_id"])["revision"]
    return revision

def test_the_region_keeps_its_own_separator_whatever_it_is() -> None:
    # no blank line before the next heading in the document: none after the fitted text either
    assert fit_region("## A\n- x\n", "## A\n- x\n- y\n\n\n") == "## A\n- x\n- y\n"
    # but the blank line that ends an HTML block stays, or it would swallow the next heading
    assert fit_region("## A\n- x\n", "## A\n- x\n\n<div>\n\n\n") == "## A\n- x\n\n<div>\n\n"
    assert fit_region("## A\r\nx\r\n", "## A\n<div>\n\n") == "## A\r\n<div>\r\n\r\n"
    assert fit_region("## A\n- x\n", "## A\n<div>\n") == "## A\n<div>\n"  # none sent: none
    # blank lines holding blanks are kept byte for byte, and a CRLF region gets CRLF
    assert fit_region("## A\n\nx\n \n\n", "## A\n\ny") == "## A\n\ny\n \n\n"
    assert fit_region("## A\r\n\r\nx\r\n\r\n", "## A\n\ny") == "## A\r\n\r\ny\r\n\r\n"


def test_the_last_region_takes_the_end_of_the_file() -> None:
    # the last region's tail is the end of the file: a file without a final newline keeps none
    assert fit_region("## Last\n\nend", "## Last\n\nnew end\n") == "## Last\n\nnew end"
    assert fit_region("## Last\n\nend\n", "## Last\n\nnew end") == "## Last\n\nnew end\n"


def test_a_whole_document_only_gets_the_final_break_it_lacks() -> None:
    document = "# Plan\n\n## A\n\nx\n"
    assert fit_whole(document, "# Plan\n\n## A\n\ny") == "# Plan\n\n## A\n\ny\n"
    # its trailing blank lines are the author's: it is the whole file
    assert fit_whole(document, "# Plan\n\ny\n\n\n") == "# Plan\n\ny\n\n\n"
    assert fit_whole("# Plan\r\n\r\nx\r\n", "# Plan\n\ny") == "# Plan\r\n\r\ny\r\n"
    # a file without a final newline gets none, and a blank text stays blank
    assert fit_whole("# Plan\n\nx", "# Plan\n\ny") == "# Plan\n\ny"
    assert fit_whole(document, "") == ""


_LINE = st.text(st.sampled_from(list("ab #-`~>*<\t ")), max_size=8)
_TEXT = st.lists(st.tuples(_LINE, st.sampled_from(["\n", "\r\n", ""])), max_size=8).map(
    lambda lines: "".join(line + end for line, end in lines))


@given(region=_TEXT, content=_TEXT)
@example(region="## A\r\n\r\n", content="x\r")
def test_fitting_is_idempotent(region: str, content: str) -> None:
    once = fit_region(region, content)
    assert fit_region(region, once) == once
    whole = fit_whole(region, content)
    assert fit_whole(region, whole) == whole


@settings(max_examples=300, deadline=None)
@given(text=document())
def test_the_fences_and_html_blocks_noted_are_markdown_its(text: str) -> None:
    """`commonmark.blocks`, which `misfit` reads, against markdown-it-py's top-level tokens."""
    theirs = [("fence" if token.type == "fence" else "html", *token.map)
              for token in MarkdownIt("commonmark").parse(text)
              if token.level == 0 and token.type in ("fence", "html_block") and token.map]
    assert [tuple(block) for block in blocks(text).blocks] == theirs



@settings(max_examples=300, deadline=None)
@given(text=document())
def test_the_html_blocks_recorded_for_the_policies_are_markdown_its(text: str) -> None:
    """`commonmark.special_blocks` (the auto-approve policies' and the link warnings' reading)
    records HTML blocks at any nesting, from the same recording scan as `blocks`: its HTML
    blocks are markdown-it-py's, in order, and its top-level ones are those `blocks` finds."""
    theirs = [token.content.split("\n", 1)[0].strip() for token in MarkdownIt("commonmark").parse(text)
              if token.type == "html_block"]
    ours = [LINE_END.split(source, 1)[0].strip() for kind, source in special_blocks(text) if kind == "html"]
    assert ours == theirs
    scanned = blocks(text)
    top = [LINE_END.split(text[scanned.starts[block.first]:], 1)[0].strip()
           for block in scanned.blocks if block.kind == "html"]
    assert all(first in ours for first in top)

# -- fitting never makes an accepted text refused ---------------------------------------------

_WORD = st.sampled_from(["alpha", "beta", "x", "- item", "1. step", "> quote", "text  ",
                         "<div>", "</div>", "```", "~~~", "    code", "***", "[a]: /u", "<!--",
                         "-->", "---", "===", "Title", "### Deep", "# Top", "## Same"])
_BODY = st.lists(st.one_of(_WORD, st.just("")), max_size=6)


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A document of ATX sections, each followed by none to two blank lines, and the
    sections' headings."""
    parts = ["# Plan\n\n"]
    headings = []
    for number in range(draw(st.integers(1, 4))):
        level = draw(st.sampled_from(["##", "###"])) if number else "##"
        heading = f"{level} S{number}"
        headings.append(f"S{number}")
        body = "".join(line + "\n" for line in draw(st.lists(
            st.sampled_from(["alpha", "- item", "> quote", "text  "]), max_size=3)))
        parts.append(f"{heading}\n\n{body}" + "\n" * draw(st.integers(0, 2)))
    return "".join(parts), headings


@given(document=documents(), pick=st.integers(0, 3), body=_BODY,
       ending=st.sampled_from(["", "\n", "\n\n", "\n\n\n", "\n  \n"]))
@example(document=("# Plan\n\n## S0\n\nalpha\n\n## S1\n\n", ["S0", "S1"]), pick=0,
         body=["<div>"], ending="\n\n")
def test_a_text_accepted_as_sent_is_accepted_fitted_with_the_same_outline_outside(
        document: tuple[str, list[str]], pick: int, body: list[str], ending: str) -> None:
    text, names = document
    outline = Outline(text)
    heading = outline.headings[1 + pick % len(names)]
    span = outline.resolve(heading.path)
    own = text[span.start:span.end]
    sent = own.split("\n", 1)[0] + "\n" + "\n".join(body) + ending
    assume(not outline.changes_outside(span, sent))
    fitted = fit_region(own, sent)
    assert not outline.changes_outside(span, fitted)
    before, after = outline.replaced(span, sent), outline.replaced(span, fitted)
    outside = [h for h in outline.headings if h.end <= span.start or h.start >= span.end]
    kept = {(h.level, h.title, h.path) for h in outside}
    assert kept <= {(h.level, h.title, h.path) for h in before.headings}
    assert kept <= {(h.level, h.title, h.path) for h in after.headings}


@given(document=documents(), pick=st.integers(0, 3), first=st.sampled_from(
           ["", "## S0", "## S1", "### S1", "# S1", "## Renamed", "```markdown", "Text", "\n## S1"]),
       body=_BODY, ending=st.sampled_from(["", "\n", "\n\n"]))
def test_every_refused_text_gets_one_cause_and_a_line_of_its_own(
        document: tuple[str, list[str]], pick: int, first: str, body: list[str], ending: str) -> None:
    text, names = document
    outline = Outline(text)
    span = outline.resolve(outline.headings[1 + pick % len(names)].path)
    content = fit_region(text[span.start:span.end], "\n".join([first, *body]) + ending)
    new = outline.replaced(span, content)
    assume(outline.changes_outside(span, content, new))
    why = misfit(outline, span, content, new)
    assert why.cause in CAUSES
    assert 1 <= why.line <= max(1, len(content.splitlines())), (why, content)
    assert why.message


# -- each cause, against a real engine --------------------------------------------------------

DOCUMENT = """# Plan

Intro.

## Goals

- ship it

## Risks

Nothing yet.

## Notes
- glued to the next heading
## Last

The end.
"""


@pytest.fixture
def doc_path(tmp_path: Path) -> Path:
    path = tmp_path / "plan.md"
    path.write_text(DOCUMENT)
    return path


def _agent(room: Driver) -> str:
    session: str = room.join(caps=["read", "checkout", "propose", "commit"])["session_id"]
    return session


def _refused(room: Driver, agent: str, region: str, content: str) -> CommonroomError:
    error = room.error("workspace.propose", agent, region=region, base_version=room.version,
                       summary="edit", content=content)
    assert error.code == "invalid_request", error
    assert error.details["reason"] == "outline_outside_region", error.details
    assert error.details["cause"] in CAUSES
    return error


@pytest.mark.parametrize(("region", "content", "cause", "line", "fix"), [
    ("Goals", "- ship it\n- tell people\n", "heading_missing", 1,
     "must start with the section's heading line `## Goals`"),
    ("Goals", "### Goals\n\n- ship it\n", "heading_level_changed", 1, "keep its level, `## Goals`"),
    ("Goals", "# Goals\n\n- ship it\n", "heading_level_changed", 1, "level 1"),
    ("Goals", "Here is the section:\n\n## Goals\n\n- ship it\n", "text_before_heading", 1,
     "move that text below it"),
    ("Goals", "\n## Goals\n\n- ship it\n", "text_before_heading", 1, "blank line"),
    ("Goals", "```markdown\n## Goals\n\n- ship it\n- more\n```\n", "fenced_whole_text", 1,
     "your text is wrapped in a ```markdown fence"),
    ("Goals", "~~~\n## Goals\n\n- more\n", "fenced_whole_text", 1, "send the section's markdown"),
    ("Goals", "## Goals\n\n- ship it\n\n```python\nprint()\n", "unclosed_fence", 5,
     "opened on line 5 with ```python is never closed"),
    ("Notes", "## Notes\n- glued\n<div>\n", "unclosed_html_block", 3, "HTML block opened on line 3"),
    ("Goals", "## Goals\n\n- ship it\n\n# Appendix\n\nMore.\n", "adopts_following_sections", 5,
     "`# Appendix` on line 5"),
    ("Goals", "## Goals\n\n- ship it\n\n## Risks\n", "adopts_following_sections", 5,
     "repeats the heading of a section after this one"),
    ("Goals", "## Risks\n\n- ship it\n", "heading_missing", 1, "the heading of a section after"),
])
def test_a_refusal_names_its_one_cause_its_line_and_its_fix(
        room: Driver, region: str, content: str, cause: str, line: int, fix: str) -> None:
    error = _refused(room, _agent(room), region, content)
    assert (error.details["cause"], error.details["line"]) == (cause, line), error.message
    assert fix in error.message, error.message
    assert room.engine.path.read_text() == DOCUMENT


def test_the_cause_is_given_again_at_commit(room: Driver) -> None:
    """An unclosed fence in the last section swallows nothing until a section follows it."""
    agent = _agent(room)
    proposal = room.call("workspace.propose", agent, region="Last", base_version=1, summary="code",
                         content="## Last\n\nThe end.\n\n```\ncode\n")
    room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"],
              revision=shown_revision(room, proposal), decision="approve")
    whole = room.engine.path.read_text()
    room.call("workspace.commit", room.host, base_version=1, summary="appendix",
              content=whole + "## Appendix\n")
    error = room.error("workspace.commit", agent, proposal_id=proposal["proposal_id"])
    assert (error.details["cause"], error.details["line"]) == ("unclosed_fence", 5), error.message


def test_what_fits_is_accepted(room: Driver) -> None:
    agent = _agent(room)
    for region, content in [
        ("Goals", "## Aims\n\n- ship it"),  # renamed, no final newline
        ("Goals", "## Goals\n\n- ship it\n- more\n"),  # no separator
        ("Goals", "## Goals\n\n- ship it\n\n### Sub\n\nNew.\n"),  # a new sub-section
        ("Notes", "## Notes\n- glued\n- again\n\n\n"),  # extra blank lines before a glued heading
        ("Notes", "## Notes\n- glued\n\n<div>\n\n"),  # the blank line that ends an HTML block
        ("Risks", ""),  # deleted
    ]:
        proposal = room.call("workspace.propose", agent, region=region, base_version=1,
                             summary="edit", content=content)
        room.call("workspace.withdraw", agent, proposal_id=proposal["proposal_id"])


def test_the_fitted_text_is_what_is_stored_reviewed_and_committed(room: Driver) -> None:
    agent = _agent(room)
    proposal = room.call("workspace.propose", agent, region="Notes", base_version=1,
                         summary="notes", content="## Notes\n- glued\n- one more\n\n\n")
    detail = room.call("workspace.proposal", agent, proposal_id=proposal["proposal_id"])
    assert detail["content"] == "## Notes\n- glued\n- one more\n"
    revised = room.call("workspace.proposal.revise", agent, proposal_id=proposal["proposal_id"],
                        content="## Notes\n- glued\n- two more")
    assert room.call("workspace.proposal", agent, proposal_id=revised["proposal_id"])[
        "content"] == "## Notes\n- glued\n- two more\n"
    # the reviewer's amended text is fitted too
    room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"],
              revision=shown_revision(room, proposal), decision="approve",
              content="## Notes\n- glued\n- the host's\n\n\n\n")
    room.call("workspace.commit", agent, proposal_id=proposal["proposal_id"])
    assert room.engine.path.read_text() == DOCUMENT.replace(
        "## Notes\n- glued to the next heading\n", "## Notes\n- glued\n- the host's\n")


@pytest.mark.parametrize("content", [
    "## Goals\n\n- ship it",
    "## Goals\n\n- ship it\n",
    "## Goals\n\n- ship it\n\n\n\n",
    "## Goals\r\n\r\n- ship it\r\n\r\n\r\n",
])
def test_a_difference_only_in_trailing_blank_lines_is_no_change(room: Driver, content: str) -> None:
    error = room.error("workspace.propose", _agent(room), region="Goals", base_version=1,
                       summary="same", content=content)
    assert error.code == "invalid_request" and error.details["reason"] == "no_change"


def test_a_whole_document_proposal_is_byte_exact_but_for_its_final_break(room: Driver) -> None:
    agent = room.join(caps=["read", "checkout", "propose", "commit", "wide_lease"])["session_id"]
    error = room.error("workspace.propose", agent, region="workspace", base_version=1,
                       summary="same", content=DOCUMENT.rstrip("\n"))
    assert error.details["reason"] == "no_change"
    text = DOCUMENT.replace("The end.\n", "The end.\n\n\n").replace("## Goals", "# Goals")
    proposal = room.call("workspace.propose", agent, region="workspace", base_version=1,
                         summary="whole", content=text)
    room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"],
              revision=shown_revision(room, proposal), decision="approve")
    room.call("workspace.commit", agent, proposal_id=proposal["proposal_id"])
    assert room.engine.path.read_text() == text  # not checked against the outline, not refitted


def test_a_raw_commit_stays_byte_exact(room: Driver) -> None:
    room.call("workspace.commit", room.host, base_version=1, summary="raw",
              content=DOCUMENT.rstrip("\n"))
    assert room.engine.path.read_bytes() == DOCUMENT.rstrip("\n").encode()


def test_the_last_region_of_a_file_without_a_final_newline(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "short.md"
    path.write_bytes(b"# Plan\n\n## Last\n\nThe end.")
    engine = open_engine(path, clock=clock)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    try:
        room = Driver(engine, clock)
        agent = _agent(room)
        error = room.error("workspace.propose", agent, region="Last", base_version=1,
                           summary="same", content="## Last\n\nThe end.\n")
        assert error.details["reason"] == "no_change"
        proposal = room.call("workspace.propose", agent, region="Last", base_version=1,
                             summary="new end", content="## Last\n\nA new end.\n\n")
        room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"],
                  revision=shown_revision(room, proposal), decision="approve")
        room.call("workspace.commit", agent, proposal_id=proposal["proposal_id"])
        assert path.read_bytes() == b"# Plan\n\n## Last\n\nA new end."
    finally:
        engine.close()


def test_a_region_with_sub_sections_ends_where_its_last_sub_section_ends() -> None:
    """A region's span holds its sub-sections: its tail is the separator after the last one,
    and the text between its own lines and its first sub-section heading is the author's."""
    text = "# Plan\n\n## A\n\nIntro.\n\n### A1\n\nOne.\n\n\n## B\n\nBee.\n"
    outline = Outline(text)
    parent, child = outline.resolve("Plan/A"), outline.resolve("Plan/A/A1")
    parent_text, child_text = text[parent.start:parent.end], text[child.start:child.end]
    assert fit_region(parent_text, "## A\n\nNew intro.\n### A1\n\nOne.") == (
        "## A\n\nNew intro.\n### A1\n\nOne.\n\n\n")
    assert fit_region(child_text, "### A1\n\nTwo.\n") == "### A1\n\nTwo.\n\n\n"
    assert not outline.changes_outside(child, fit_region(child_text, "### A1\n\nTwo."))


def test_a_text_that_starts_with_a_sub_heading_misses_the_sections_heading(room: Driver) -> None:
    error = _refused(room, _agent(room), "Goals", "### Details\n\n- ship it\n")
    assert (error.details["cause"], error.details["line"]) == ("heading_missing", 1), error.message
    assert "`## Goals`" in error.message


def test_no_change_says_the_text_was_fitted(room: Driver) -> None:
    error = room.error("workspace.propose", _agent(room), region="Goals", base_version=1,
                       summary="same", content="## Goals\n\n- ship it")
    assert error.details["reason"] == "no_change" and "once fitted" in error.message


def test_an_underlined_heading_that_joins_the_section_before(room: Driver) -> None:
    """"Notes" ends with no blank line: an underlined (setext) "Last" would continue its list."""
    error = _refused(room, _agent(room), "Last", "Last\n----\n\nThe end.\n")
    assert (error.details["cause"], error.details["line"]) == ("heading_missing", 1), error.message
    assert "would join the text before the section" in error.message
