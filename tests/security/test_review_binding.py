"""Issue 31, finding 1 (high): the host approves one text and another lands.

The attack: `workspace.review` named only the proposal, and its author may
revise a pending proposal at any moment. The agent proposed 50 -> 60 EUR; the
host opened the diff (or was at `ce review`'s `approve …? [y/N]`, or inside the
page's 8 s Undo window), the agent revised to 500000 EUR and an attacker's
link, and the revision the host never saw was approved and committed.

Now a decision that lets a text land (approve, an amended approve) or asks for
changes names the revision the reviewer read; when the proposal's current
revision differs the room answers 409 `proposal_conflict` with
`details.reason: "revised"` and `details.current_revision`, and decides
nothing (PROTOCOL section 7). Each way in is driven for real here: the owner
API of a real `ce serve`, and `ce review` in a real pty (confirming and
interactive). The page's Undo window is in `tests/browser/test_review_binding_page.py`.
"""

from __future__ import annotations

import os
from typing import Any

from tests.e2e.conftest import Room, at_terminal

SHOWN = "- The pilot costs 60 EUR a month.\n"
LANDED = "- The pilot costs 500000 EUR a month; pay at [the portal](https://evil.example/pay).\n"


def _propose(room: Room, bearer: str) -> dict[str, Any]:
    read = room.read(bearer, "Risks")
    proposal: dict[str, Any] = room.ok("POST", "/workspace/propose", bearer, {
        "region": "Risks", "base_version": read["version"], "summary": "50 -> 60 EUR",
        "content": read["content"].rstrip("\n") + "\n" + SHOWN + "\n"})
    return proposal


def _revise(room: Room, bearer: str, proposal_id: str) -> dict[str, Any]:
    read = room.read(bearer, "Risks")
    revised: dict[str, Any] = room.ok("POST", "/workspace/proposal/revise", bearer, {
        "proposal_id": proposal_id, "summary": "50 -> 60 EUR",
        "content": read["content"].rstrip("\n") + "\n" + LANDED + "\n"})
    return revised


def _status(room: Room, proposal_id: str) -> str:
    return str(room.ok("GET", f"/workspace/proposal?proposal_id={proposal_id}",
                       room.host_session)["status"])


def _nothing_landed(room: Room, agent: str, proposal_id: str) -> None:
    assert _status(room, proposal_id) == "pending"
    status, answer = room.call("POST", "/workspace/commit", agent, {"proposal_id": proposal_id})
    assert status == 409 and answer["error"] == "proposal_conflict", answer
    assert "500000" not in room.doc.read_text()


def test_an_approval_of_the_revision_shown_decides_nothing_once_it_was_revised(
        served: Room) -> None:
    room = served
    agent = room.join("sly")["session_id"]
    proposal = _propose(room, agent)
    pid = proposal["proposal_id"]
    shown = room.ok("GET", f"/workspace/proposal?proposal_id={pid}", room.host_session)
    assert "60 EUR" in shown["diff"] and shown["revision"] == 1
    _revise(room, agent, pid)  # while the host reads the diff
    for body in ({"decision": "approve"},
                 {"decision": "approve", "content": shown["content"]},  # an amended approval
                 {"decision": "request_changes", "comment": "cheaper?"},
                 {"decision": "reject", "comment": "no"}):
        status, answer = room.call("POST", "/workspace/proposal/review", room.host_session,
                                   {"proposal_id": pid, "revision": shown["revision"], **body})
        assert status == 409, (body, answer)
        assert answer["error"] == "proposal_conflict" and answer["proposal_id"] == pid
        assert answer["details"]["reason"] == "revised"
        assert answer["details"]["current_revision"] == 2
    # An approval that names no revision is refused too: a blind approval must say what it read.
    status, answer = room.call("POST", "/workspace/proposal/review", room.host_session,
                               {"proposal_id": pid, "decision": "approve"})
    assert status == 400 and answer["details"]["field"] == "revision", answer
    _nothing_landed(room, agent, pid)
    detail = room.ok("GET", f"/workspace/proposal?proposal_id={pid}", room.host_session)
    assert detail["amended"] is False and "500000" in detail["content"]
    # The host reads the new revision and decides on what it saw.
    reviewed = room.ok("POST", "/workspace/proposal/review", room.host_session, {
        "proposal_id": pid, "revision": detail["revision"], "decision": "reject",
        "comment": "no"})
    assert reviewed["status"] == "rejected"


def _pty_env() -> dict[str, str]:
    return {**os.environ, "TERM": "xterm", "COLUMNS": "132", "LINES": "60"}


def test_ce_review_confirming_at_a_terminal_approves_nothing_revised_while_it_asked(
        served: Room) -> None:
    room = served
    agent = room.join("sly")["session_id"]
    pid = _propose(room, agent)["proposal_id"]

    def revise_then_yes() -> bytes:
        _revise(room, agent, pid)  # the agent revises while `approve …? [y/N]` waits
        return b"y\n"

    code, output = at_terminal(["review", str(room.doc), pid, "--approve"],
                               [("[y/N]", revise_then_yes)], env=_pty_env())
    assert code == 3, output
    assert "was revised while you read it" in output and "nothing was decided" in output
    assert output.index("60 EUR") < output.index("[y/N]") < output.index("500000")
    _nothing_landed(room, agent, pid)


def test_ce_review_interactive_shows_the_new_diff_and_asks_again(served: Room) -> None:
    room = served
    agent = room.join("sly")["session_id"]
    pid = _propose(room, agent)["proposal_id"]

    def revise_then_approve() -> bytes:
        _revise(room, agent, pid)
        return b"a\n"

    code, output = at_terminal(["review", str(room.doc), pid],
                               [("[a/r/s/q]", revise_then_approve), ("[a/r/s/q]", b"q\n")],
                               env=_pty_env())
    assert code == 0, output
    first, second = output.split("was revised while you read it", 1)
    assert "60 EUR" in first and "500000" not in first
    assert "500000" in second and "revision 2" in second  # the new diff, asked about again
    _nothing_landed(room, agent, pid)
