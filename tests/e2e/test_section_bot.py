"""docs/examples/section_bot.py against a real room, including the re-read after a change.

The bot proposes; before the host reviews, the section is edited on disk (an
external edit: the room records it as a version and supersedes the pending
proposal). The bot must read the section again and propose anew on the new
text; the host approves that one; the bot commits it. The host side is the
Python client with the host session from the room's credential file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import commonroom
from commonroom.credentials import read_credentials
from commonroom.protocol.events import Event, ProposalCreated, ProposalSuperseded
from tests.e2e.conftest import REPO, RoomProcess, start_room
from tests.editing import save_like_an_editor

pytestmark = pytest.mark.e2e

BOT = REPO / "docs" / "examples" / "section_bot.py"
LINE = "- Reviewed by section_bot: no new risks this week."


def next_proposal(host: commonroom.Client, cursor: int) -> tuple[str, int]:
    """Long-poll until a proposal is created: (its id, the new cursor)."""
    for _ in range(20):
        answer = host.wait(cursor, timeout_seconds=5)
        cursor = answer.cursor
        for event in answer.events:
            if isinstance(event, Event) and isinstance(event.payload, ProposalCreated):
                return event.payload.proposal_id, cursor
    raise AssertionError("the bot never proposed")


def wait_for_superseded(host: commonroom.Client, cursor: int, proposal_id: str) -> None:
    """Long-poll (from a cursor of its own, so `next_proposal` still sees every event)
    until `proposal_id` is superseded."""
    for _ in range(20):
        answer = host.wait(cursor, timeout_seconds=5)
        cursor = answer.cursor
        for event in answer.events:
            if (isinstance(event, Event) and isinstance(event.payload, ProposalSuperseded)
                    and event.payload.proposal_id == proposal_id):
                return
    raise AssertionError("the edit never superseded the proposal")


def test_section_bot_rereads_after_a_change_and_commits(doc: Path) -> None:
    # A short human-editing hold: the bot must also wait out the hold the edit below places.
    room = start_room(doc, "--port-ingress", "0", "--human-hold-minutes", "0.025")
    try:
        _run_bot(room, doc)
    finally:
        room.close()


def _run_bot(room: RoomProcess, doc: Path) -> None:
    creds = read_credentials(doc)
    assert creds is not None
    invitation = room.ready["invitation"]
    host = commonroom.Client(invitation, session=creds.host_session)
    cursor = host.room().latest_event_id
    bot = subprocess.Popen(
        [sys.executable, str(BOT), invitation, "Risks", "--append", LINE, "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        first, cursor = next_proposal(host, cursor)
        # Someone edits the section in their editor before the host looks at it, adding a line
        # where the bot adds its own: the merge conflicts, so the save supersedes the proposal
        # (a clean one would rebase it: tests/e2e/test_host_saves_keep_work.py).
        save_like_an_editor(doc, doc.read_text().replace(
            "manual entry\n  must stay quick.", "manual entry\n  must stay quick and easy.").replace(
            "until a request is accepted.\n", "until a request is accepted.\n- Rain spoils books.\n"))
        wait_for_superseded(host, cursor, first)  # the save settles, then it is a version
        assert host.proposal(first).status == "superseded"
        second, cursor = next_proposal(host, cursor)
        detail = host.proposal(second)
        assert detail.base_version == 2 and LINE in detail.content
        assert "quick and easy" in detail.content  # proposed on the fresh text
        host.review(second, "approve", revision=detail.revision)
        out, err = bot.communicate(timeout=60)
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.wait()
    assert bot.returncode == 0, (out, err)
    assert "superseded: the section changed; reading it again" in out
    assert "is held" in out  # the edit's human-editing hold was waited out, not failed on
    assert "committed version 3" in out
    text = doc.read_text()
    assert LINE in text and "quick and easy" in text
    assert host.leases().leases == []  # the bot released its lease and left
