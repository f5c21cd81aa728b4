"""A proposal takes the line endings of the region it replaces (docs/protocol.md, "Line endings").

Agents (and the page's textarea, which always gives LF) send LF text. Into a CRLF file that
left the file mixed and showed every line of the region as changed in the host's diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commonroom.engine.dispatch import open_engine
from commonroom.engine.text import line_ending, with_line_endings
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import ManualClock
from tests.conftest import SAMPLE, Driver

CRLF_SAMPLE = SAMPLE.replace("\n", "\r\n")


@pytest.fixture
def doc_path(tmp_path: Path) -> Path:
    path = tmp_path / "idea.md"
    path.write_bytes(CRLF_SAMPLE.encode())
    return path


def _agent(room: Driver) -> str:
    session: str = room.join(caps=["read", "checkout", "propose", "commit"])["session_id"]
    return session


def test_lf_text_into_a_crlf_file_keeps_the_file_crlf(room: Driver) -> None:
    agent = _agent(room)
    proposal = room.call("workspace.propose", agent, region="Goals", base_version=1,
                         summary="two goals", content="## Goals\n\n- ship it\n- tell people\n\n")
    detail = room.call("workspace.proposal", agent, proposal_id=proposal["proposal_id"])
    assert detail["content"] == "## Goals\r\n\r\n- ship it\r\n- tell people\r\n\r\n"
    # The host's diff shows the one line added, not every line of the region.
    changed = [line for line in detail["diff"].splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["+- tell people"]
    room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"],
            revision=proposal["revision"], decision="approve")
    room.call("workspace.commit", agent, proposal_id=proposal["proposal_id"])
    data = room.engine.path.read_bytes()
    assert b"- tell people\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")  # no bare LF anywhere


def test_text_equal_but_for_its_line_endings_changes_nothing(room: Driver) -> None:
    error = room.error("workspace.propose", _agent(room), region="Goals", base_version=1,
                       summary="same", content="## Goals\n\n- ship it\n\n")
    assert error.code == "invalid_request" and error.details["reason"] == "no_change"


def test_the_hosts_edit_and_the_authors_revision_take_the_file_endings(room: Driver) -> None:
    agent = _agent(room)
    first = room.call("workspace.propose", agent, region="Risks", base_version=1, summary="risks",
                      content="## Risks\n\nOne risk.\n\n```python\n# not a heading\n```\n\n")
    revised = room.call("workspace.proposal.revise", agent, proposal_id=first["proposal_id"],
                        content="## Risks\n\nTwo risks.\n\n```python\n# not a heading\n```\n\n")
    assert "\r\n" in room.call("workspace.proposal", agent, proposal_id=revised["proposal_id"])["content"]
    room.call("workspace.review", room.host, proposal_id=first["proposal_id"], revision=revised["revision"],
              decision="approve", content="## Risks\n\nThree risks.\n\n```python\n# not a heading\n```\n\n")
    room.call("workspace.commit", agent, proposal_id=first["proposal_id"])
    data = room.engine.path.read_bytes()
    assert b"Three risks.\r\n" in data and data.count(b"\n") == data.count(b"\r\n")


def test_crlf_text_into_an_lf_file_and_a_mixed_region_kept_as_sent(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "lf.md"
    # Goals ends its lines with LF; Risks mixes both, so nothing says which it should have.
    path.write_bytes(b"# Plan\n\n## Goals\n\n- ship it\n\n## Risks\r\n\nNothing yet.\r\n")
    engine = open_engine(path, clock=clock)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    try:
        room = Driver(engine, clock)
        agent = _agent(room)
        lf = room.call("workspace.propose", agent, region="Goals", base_version=1, summary="g",
                       content="## Goals\r\n\r\n- ship it twice\r\n\r\n")
        assert room.call("workspace.proposal", agent, proposal_id=lf["proposal_id"])["content"] == (
            "## Goals\n\n- ship it twice\n\n")
        mixed = "## Risks\n\nOne.\r\n"
        kept = room.call("workspace.propose", agent, region="Risks", base_version=1, summary="r",
                         content=mixed)
        assert room.call("workspace.proposal", agent, proposal_id=kept["proposal_id"])["content"] == mixed
    finally:
        engine.close()


# A lone CR just before a line break ("\r\r\n") cannot keep its meaning in an LF text.
@given(st.text(alphabet="ab\r\n", max_size=40).filter(lambda text: "\r\r" not in text),
       st.sampled_from(["\n", "\r\n"]))
def test_with_line_endings_makes_every_break_one_kind(text: str, ending: str) -> None:
    out = with_line_endings(text, ending)
    assert out.replace("\r\n", "\n") == text.replace("\r\n", "\n")  # only the breaks changed
    assert line_ending(out) in (None if "\n" not in out else ending,)
    assert with_line_endings(text, None) == text


def test_a_quote_across_lines_is_found_in_a_crlf_region(room: Driver) -> None:
    # A selection in the page (or an agent's quote) has LF breaks; the CRLF text has CRLF.
    agent = room.join(caps=["read", "message"])["session_id"]
    thread = room.call("thread.open", agent, region="Goals", body="which one first?",
                       quote="## Goals\n\n- ship it")
    assert thread["quote"] == "## Goals\r\n\r\n- ship it"
    # It stays anchored: the thread is open on the region's text as it is.
    listed = room.call("workspace.threads", agent)["threads"]
    assert [t["thread_id"] for t in listed] == [thread["thread_id"]]
