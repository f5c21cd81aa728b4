"""The host's side at the terminal (issue 21): names not ids, handoffs and room text, the
interactive `ce review` driven through a pty, amended and no-op proposals, on real `ce`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RoomProcess, at_terminal
from tests.e2e.test_agent_cli import join, ok_json, run

pytestmark = pytest.mark.e2e

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def converse(args: list[str], steps: list[tuple[str, bytes]]) -> tuple[int, str]:
    """`ce ARGS` at a terminal, answering each prompt in turn: (exit code, output without colours)."""
    code, out = at_terminal(args, steps)
    return code, ANSI.sub("", out)


def propose(region: str, extra: str, base: str = "1") -> str:
    text = run("read", region).stdout
    result = run("propose", region, "-", "--base", base, input=text + extra)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_review_without_a_decision_asks_and_walks_the_pending_ones(room: RoomProcess, doc: Path
                                                                     ) -> None:
    join(doc, "bot")
    first = propose("Risks", "- First risk.\n\n")
    second = propose("Problem", "More problem.\n\n")
    third = propose("Who it is for", "- Also teachers.\n\n")

    # One id: the diff, then the question; a reject asks why, and an empty answer is not enough.
    code, out = converse(["review", str(doc), first], [
        ("[a/r/s/q]", b"r\n"), ("comment for the author", b"\n"), ("needs a comment", b""),
        ("comment for the author", b"too vague\n")])
    assert code == 0, out
    assert "+- First risk." in out and "by:      bot" in out
    assert f"{first} rejected (by " in out and "pt_" not in out.split("rejected", 1)[1]
    detail = ok_json("show", str(doc), first)
    assert detail["status"] == "rejected" and detail["review_comment"] == "too vague"

    # No id: every pending one in order, oldest first; skip leaves it pending.
    code, out = converse(["review", str(doc)], [("(1/2)", b""), ("[a/r/s/q]", b"s\n"),
                                                ("(2/2)", b""), ("[a/r/s/q]", b"a\n")])
    assert code == 0, out
    assert out.index("More problem.") < out.index("Also teachers.")
    assert f"skipped {second}" in out and f"{third} approved" in out
    assert ok_json("show", str(doc), second)["status"] == "pending"
    assert ok_json("show", str(doc), third)["status"] == "approved"

    # Scripts keep the flags; without them and without a terminal it is a usage error.
    assert run("review", str(doc), second).returncode == 2
    assert run("review", str(doc), second, "--approve", "--yes").returncode == 0


def test_names_not_ids_in_history_wait_and_leases(room: RoomProcess, doc: Path) -> None:
    join(doc, "bot")
    lease = run("checkout", "Risks")
    assert lease.returncode == 0, lease.stderr
    leases = run("leases").stdout
    assert "by bot (agent)" in leases and "pt_" not in leases
    proposal = propose("Risks", "- A risk.\n\n")
    edited = run("read", "Risks").stdout + "- A risk, edited by the host.\n\n"
    # The host amends it before approving, as the page's "Edit" does (its own HTTP call).
    from commonroom.cli.host_call import host_call

    host_call(doc, "workspace.review", {"proposal_id": proposal, "revision": 1, "decision": "approve",
                                        "content": edited})
    waited = run("wait", proposal)
    assert waited.returncode == 0
    assert waited.stdout.startswith(f"{proposal} approved with edits by ")
    assert "pt_" not in waited.stdout
    as_json = ok_json("wait", proposal)
    assert as_json["amended"] is True and as_json["reviewer_id"].startswith("pt_")
    assert ok_json("commit", proposal)["version"] == 2
    committed = ok_json("show", str(doc), proposal)
    assert committed["stale"] is False and committed["proposed_content"].endswith("- A risk.\n\n")

    history = run("history", "--limit", "30").stdout
    line = next(line for line in history.splitlines() if line.startswith("v2 "))
    assert re.fullmatch(r'v2 .*Risks · bot \(agent\) · "update .*Risks" · \d+ s ago', line), line
    assert "proposal.approved" in history and "{" not in history and "pt_" not in history
    raw = ok_json("history", "--limit", "30")
    assert any(e["payload"].get("participant_id", "").startswith("pt_") for e in raw["events"])


def test_a_no_change_proposal_is_refused_at_the_terminal(room: RoomProcess, doc: Path) -> None:
    join(doc, "bot")
    same = run("read", "Risks").stdout
    refused = run("propose", "Risks", "-", "--base", "1", input=same, env=None)
    assert refused.returncode != 0 and "invalid_request" in refused.stderr
    answer = json.loads(run("propose", "Risks", "-", "--base", "1", "--json", input=same).stdout)
    assert answer["error"] == "invalid_request" and answer["details"]["reason"] == "no_change"
    assert ok_json("proposals", str(doc))["proposals"] == []


def test_host_handoffs_and_room_text(room: RoomProcess, doc: Path) -> None:
    helper = join(doc, "helper", "--profile", "helper")
    joined = join(doc, "bot")  # the last joined: the default profile
    participants = ok_json("participants")["participants"]
    host = next(p for p in participants if "*" in p["capabilities"])

    def ask(summary: str) -> Any:
        return ok_json("call", "POST", "/workspace/handoff", "--body", json.dumps(
            {"to_participant_id": host["participant_id"], "summary": summary}))

    one, two = ask("check the Risks"), ask("decide the name")
    listed = run("handoffs", str(doc)).stdout
    assert f"{one['handoff_id']}  requested  bot → " in listed and '"check the Risks"' in listed
    assert "pt_" not in listed

    accepted = run("handoff", str(doc), one["handoff_id"], "accept", "--note", "on it")
    assert accepted.returncode == 0 and "accepted" in accepted.stdout, accepted.stderr
    done = run("handoff", str(doc), one["handoff_id"], "done", "--note", "two risks added")
    assert done.returncode == 0 and "completed" in done.stdout and "two risks added" in done.stdout
    declined = ok_json("handoff", str(doc), two["handoff_id"], "decline", "--note", "not now")
    assert declined["status"] == "declined"
    again = run("handoff", str(doc), two["handoff_id"], "accept")
    assert again.returncode != 0 and "handoff_conflict" in again.stderr  # the room decides

    said = run("say", str(doc), "hello everyone")
    assert said.returncode == 0, said.stderr
    addressed = ok_json("say", str(doc), "bot, look at Goals", "--to", "bot")
    assert addressed["to"] == [joined["participant_id"]]
    unknown = run("say", str(doc), "hi", "--to", "nobody")
    assert unknown.returncode == 2 and "nobody" in unknown.stderr
    run("leave", "--profile", "helper")
    gone = run("say", str(doc), "hi", "--to", "helper")  # who left is not a recipient
    assert gone.returncode == 2, (gone.stdout, gone.stderr, helper["participant_id"])
    shown = run("messages", str(doc)).stdout.splitlines()
    assert shown[-2].endswith(": hello everyone") and "→" not in shown[-2]
    assert " → bot · " in shown[-1] and shown[-1].endswith(": bot, look at Goals")
    assert not any("pt_" in line for line in shown)


def test_serve_prints_the_same_unused_invitation_on_each_start(doc: Path, config_home: Path
                                                               ) -> None:
    from commonroom.protocol.invitation import decode
    from tests.e2e.conftest import start_room

    def serve_once() -> tuple[str, int]:
        room = start_room(doc, "--port-ingress", "0")
        try:
            listed = ok_json("invitations", str(doc))["invitations"]
            return str(room.ready["invitation"]), len(listed)
        finally:
            room.close()

    first, count = serve_once()
    again, count_again = serve_once()
    # The same secret (re-encoded for this start's port), and no new invitation row.
    assert decode(again).secret == decode(first).secret and count_again == count == 1
    room = start_room(doc, "--port-ingress", "0")
    try:
        used = room.ready["invitation"]
        assert decode(used).secret == decode(first).secret
        joined = run("join", used, "--name", "bot", "--no-hold")
        assert joined.returncode == 0, joined.stderr
    finally:
        room.close()
    fresh, count_fresh = serve_once()  # used now: a new one, once
    assert decode(fresh).secret != decode(first).secret and count_fresh == 2
