"""Item 4 of issue 24: terminal escapes must not hide text from the host.

The attack: a proposal ending `...pay the bot author 50 EUR a month.` followed
by escapes that erase that line and move the cursor rendered, above the
`approve? [y/N]` prompt of `ce review`, only as "+Tidied the wording.".

Two fixes, both tested for real:

- at the edge, every free-text parameter refuses control characters other
  than tab and newline (and carriage return in document content) with
  `invalid_request` naming the field (a real `ce serve`, over HTTP);
- in the CLI, human output shows what is left (a carriage return in document
  content, or an escape a sidecar stored before the edge check) in caret
  notation: `ce review` runs in a real pty and its bytes are rendered by a
  VT100 emulator (pyte), so the assertion is about what a person sees.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

import pyte
import pytest

from commonroom.engine.core import SIDECAR_SUFFIX
from tests.e2e.conftest import Room, at_terminal

ESC = "\x1b"
HIDDEN = "- We pay the bot author 50 EUR a month."
ERASE_AND_COVER = f"{ESC}[2K{ESC}[1A{ESC}[2K\r+Tidied the wording."
COLUMNS, ROWS = 132, 60


def _risks_attack(room: Room, agent: str, tail: str) -> str:
    """Propose Risks with one hidden line and `tail` after it; the proposal id."""
    read = room.read(agent, "Risks")
    content = read["content"].rstrip("\n") + f"\n{HIDDEN}{tail}\n\n"
    proposal = room.ok("POST", "/workspace/propose", agent, {
        "region": "Risks", "base_version": read["version"], "summary": "Tidied the wording",
        "content": content,
    })
    return str(proposal["proposal_id"])


# -- the edge ----------------------------------------------------------------------------


def test_control_characters_are_refused_in_every_free_text_field(served: Room) -> None:
    room = served
    agent = room.join("writer")
    bearer = agent["session_id"]
    version = room.read(bearer, "Risks")["version"]
    bad = f"fine{ESC}[2K"
    c1 = "fine\x9b2K"  # CSI as one C1 character

    def refused(method: str, path: str, who: str | None, body: Any, field: str) -> None:
        status, answer = room.call(method, path, who, body)
        assert status == 400, (path, field, status, answer)
        assert answer["error"] == "invalid_request", answer
        assert answer["details"]["field"] == field, answer
        assert answer["details"]["reason"] == "control_character", answer

    invitation = room.invite()["invitation"]
    refused("POST", "/session/join", None, {"invite": invitation, "name": bad}, "name")
    refused("POST", "/workspace/propose", bearer, {
        "region": "Risks", "base_version": version, "summary": c1, "content": "## Risks\n\nx\n",
    }, "summary")
    refused("POST", "/workspace/propose", bearer, {
        "region": "Risks", "base_version": version, "summary": "s",
        "content": f"## Risks\n\n{HIDDEN}{ERASE_AND_COVER}\n",
    }, "content")
    refused("POST", "/workspace/message", bearer, {"text": bad}, "text")
    refused("POST", "/workspace/message", bearer, {"text": "a\rb"}, "text")  # CR: only in documents
    refused("POST", "/workspace/capabilities", bearer, {"capabilities": ["ok", bad]}, "capabilities")
    refused("POST", "/workspace/attachment", bearer, {
        "file_name": f"notes{ESC}.txt", "mime_type": "text/plain", "data_base64": "aGk=",
    }, "file_name")
    refused("POST", "/workspace/invite", room.host_session, {"label": "label\x7f"}, "label")
    refused("GET", "/workspace/read?region=" + urllib.parse.quote(f"Risks{ESC}"), bearer, None,
            "region")
    other = room.join("helper")
    refused("POST", "/workspace/handoff", bearer, {
        "to_participant_id": other["participant_id"], "summary": "take it", "details": bad,
    }, "details")
    pending = _risks_attack(room, bearer, "")
    refused("POST", "/workspace/proposal/review", room.host_session, {
        "proposal_id": pending, "decision": "reject", "comment": bad,
    }, "comment")
    # What stays text: tab and newline everywhere, CR in document content.
    assert room.call("POST", "/workspace/message", bearer, {"text": "a\tb\nc"})[0] == 200
    status, _ = room.call("POST", "/workspace/proposal/withdraw", bearer, {"proposal_id": pending})
    assert status == 200
    # (A CRLF text into this LF file is stored with LF, docs/protocol.md "Line endings", so the
    # text must also change something to be a proposal.)
    crlf = (room.read(bearer, "Risks")["content"] + "One more line.\n").replace("\n", "\r\n")
    status, answer = room.call("POST", "/workspace/propose", bearer, {
        "region": "Risks", "base_version": version, "summary": "CRLF", "content": crlf,
    })
    assert status == 200, answer


# -- the terminal ------------------------------------------------------------------------


def _review_in_pty(doc: Path, proposal_id: str, answer: bytes = b"n\n") -> tuple[list[str], int]:
    """`ce review DOC ID --approve` at a real terminal; (the screen it leaves, exit code)."""
    env = {**os.environ, "TERM": "xterm", "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}
    code, output = at_terminal(["review", str(doc), proposal_id, "--approve"], [("[y/N]", answer)],
                               env=env, size=(COLUMNS, ROWS))
    screen = pyte.Screen(COLUMNS, ROWS)
    pyte.Stream(screen).feed(output)
    return [line.rstrip() for line in screen.display], code


def _line_of(lines: list[str], needle: str) -> int:
    for number, line in enumerate(lines):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} is not on the screen:\n" + "\n".join(lines))


def test_a_carriage_return_in_a_proposal_cannot_hide_a_line_from_ce_review(served: Room) -> None:
    room = served
    agent = room.join("sly")["session_id"]
    # A carriage return is text in document content (CRLF files), so the edge lets it
    # through; at the terminal it would send the cursor back to cover the line.
    proposal_id = _risks_attack(room, agent, "\r+Tidied the wording." + " " * 60)
    lines, code = _review_in_pty(room.doc, proposal_id)
    # (The diff splits the line at the carriage return; both halves stay on one screen line.)
    hidden_at = _line_of(lines, "pay the bot author 50 EUR a month.^M")
    assert "Tidied the wording." in lines[hidden_at]
    prompt_at = _line_of(lines, f"approve {proposal_id}? [y/N]")
    assert hidden_at < prompt_at
    assert code == 2  # answered "n": not reviewed
    status, detail = room.call("GET", f"/workspace/proposal?proposal_id={proposal_id}", room.host_session)
    assert status == 200 and detail["status"] == "pending"


def test_escapes_stored_before_the_edge_check_are_shown_not_obeyed(served: Room) -> None:
    """A sidecar an older room wrote may hold the original attack: `ce review` shows it."""
    room = served
    agent = room.join("sly")["session_id"]
    proposal_id = _risks_attack(room, agent, "")
    room.process.close()  # the room stops; the host reviews through the sidecar directly
    sidecar = room.doc.with_name(room.doc.name + SIDECAR_SUFFIX)
    with contextlib.closing(sqlite3.connect(sidecar)) as conn, conn:
        (content,) = conn.execute("SELECT content FROM proposals WHERE proposal_id = ?",
                                  (proposal_id,)).fetchone()
        conn.execute("UPDATE proposals SET content = ?, summary = ? WHERE proposal_id = ?",
                     (content.replace(HIDDEN, HIDDEN + ERASE_AND_COVER),
                      f"Tidied{ESC}[8m the wording", proposal_id))
    lines, code = _review_in_pty(room.doc, proposal_id)
    hidden_at = _line_of(lines, "pay the bot author 50 EUR a month.^[[2K^[[1A^[[2K^M")
    assert _line_of(lines, "summary: Tidied^[[8m the wording") < hidden_at
    assert hidden_at < _line_of(lines, f"approve {proposal_id}? [y/N]")
    assert code == 2


@pytest.mark.parametrize("text", [f"a{ESC}[31mb", "a\x9bb", "a\u202eb", "a\rb"])
def test_json_output_escapes_what_a_terminal_would_obey(text: str) -> None:
    from commonroom.cli.output import dumps

    printed = dumps({"text": text})
    assert json.loads(printed) == {"text": text}
    assert not any(ch in printed for ch in (ESC, "\x9b", "\u202e", "\r"))
