"""The review conversation through real `ce` processes against a real `ce serve` (issue 22).

Threads (agent and host forms), a blocking question that holds only its author,
threads outdated by the host's own save, request changes -> revise -> approve
-> commit, and rebase (clean and conflicting), with the refusals.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commonroom.credentials import read_credentials
from tests.e2e.conftest import Http, RoomProcess, ce, ce_err, ce_ok, ce_path, start_room
from tests.e2e.review_support import mcp_error, mcp_tool
from tests.editing import save_like_an_editor

pytestmark = pytest.mark.e2e

PROBLEM = "Shelf Swap: a neighbourhood book exchange app/Problem"
RISKS = "Shelf Swap: a neighbourhood book exchange app/Risks"
QUOTE = "Public\nlibraries are far away"


@pytest.fixture
def room(doc: Path) -> Iterator[RoomProcess]:
    """A room without the human-editing hold: the host's saves here are the other side of a
    merge, and the agents act on the region right after them."""
    process = start_room(doc, "--port-ingress", "0", "--human-hold-minutes", "0")
    try:
        yield process
    finally:
        process.close()


def join(doc: Path, name: str) -> dict[str, Any]:
    invitation = ce("invite", str(doc)).stdout.strip()
    joined: dict[str, Any] = ce_ok("join", invitation, "--name", name, "--no-hold",
                                   "--profile", name)
    return joined


def region_text(name: str, region: str) -> tuple[str, int]:
    answer = ce_ok("read", region, "--profile", name)
    return answer["content"], answer["version"]


def test_threads_and_a_blocking_question_that_holds_only_its_author(
        room: RoomProcess, doc: Path) -> None:
    join(doc, "asker")
    join(doc, "bystander")
    thread = ce_ok("ask", PROBLEM, "Which libraries?", "--quote", QUOTE, "--blocking",
                   "--profile", "asker")
    assert thread["blocking"] is True and thread["quote"] == QUOTE
    thread_id = thread["thread_id"]
    waiter = subprocess.Popen([ce_path(), "wait", thread_id, "--profile", "asker", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Nobody else is held: the bystander reads, asks and is answered while the author waits.
        started = time.monotonic()
        ce_ok("read", PROBLEM, "--profile", "bystander")
        other = ce_ok("ask", RISKS, "More risks?", "--profile", "bystander")
        assert time.monotonic() - started < 10
        assert waiter.poll() is None
        # The author's own reply does not wake the author.
        ce_ok("reply", thread_id, "(the city ones)", "--profile", "asker")
        time.sleep(0.5)
        assert waiter.poll() is None
        ce_ok("reply", str(doc), thread_id, "The county library, 12 km away.")  # host form
        out, err = waiter.communicate(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate()
    assert waiter.returncode == 0, err
    answered = json.loads(out)
    assert answered["comments"][-1]["body"] == "The county library, 12 km away."
    # Listing: by region (agent and host forms), by status.
    listed = ce_ok("threads", "--region", "Problem", "--profile", "bystander")["threads"]
    assert [t["thread_id"] for t in listed] == [thread_id]
    assert {t["thread_id"] for t in ce_ok("threads", str(doc))["threads"]} == {
        thread_id, other["thread_id"]}
    text = ce("threads", "--profile", "asker")
    assert text.returncode == 0 and "The county library, 12 km away." in text.stdout
    resolved = ce_ok("resolve", thread_id, "--profile", "asker")
    assert resolved["status"] == "resolved"
    refused, run = ce_err("resolve", other["thread_id"], "--profile", "asker")
    assert refused["error"] == "permission_denied" and run.returncode == 5
    assert ce_ok("resolve", str(doc), other["thread_id"])["status"] == "resolved"  # the host may
    assert ce_ok("resolve", thread_id, "--reopen", "--profile", "asker")["status"] == "open"
    ce_ok("ask", str(doc), PROBLEM, "A note from the host.")


def test_bad_input_then_the_hosts_save_outdates_the_thread_whose_quote_it_edits_away(
        room: RoomProcess, doc: Path) -> None:
    join(doc, "asker")
    # Bad input first: clear errors, nothing stored.
    empty, run = ce_err("ask", PROBLEM, " ", "--profile", "asker")
    assert empty["error"] == "invalid_request" and empty["details"]["field"] == "body"
    assert run.returncode == 1
    big, _ = ce_err("ask", PROBLEM, "x" * 8193, "--profile", "asker")
    assert big["error"] == "limit_exceeded" and big["details"]["limit_bytes"] == 8192
    absent, _ = ce_err("ask", PROBLEM, "?", "--quote", "not in the text", "--profile", "asker")
    assert absent["details"]["reason"] == "quote_not_found"
    assert ce_ok("threads", "--profile", "asker")["threads"] == []
    usage = ce("ask", "only-one-word", "--profile", "asker")
    assert usage.returncode == 2 and "REGION TEXT" in usage.stderr
    quoted = ce_ok("ask", PROBLEM, "Far for whom?", "--quote", QUOTE, "--profile", "asker")
    kept = ce_ok("ask", RISKS, "And theft?", "--quote", "Books that never come back",
                 "--profile", "asker")
    version = ce_ok("status", str(doc))["version"]
    save_like_an_editor(doc, doc.read_text().replace(QUOTE, "Public\nlibraries are near"))
    deadline = time.monotonic() + 15
    while ce_ok("status", str(doc))["version"] == version:
        assert time.monotonic() < deadline, "the save was never recorded"
        time.sleep(0.1)
    statuses = {t["thread_id"]: t["status"] for t in ce_ok("threads", str(doc))["threads"]}
    assert statuses == {quoted["thread_id"]: "outdated", kept["thread_id"]: "open"}
    shown = ce("threads", str(doc)).stdout
    assert f"{quoted['thread_id']} outdated" in shown and "Far for whom?" in shown


def test_request_changes_then_revise_then_approve_and_commit(
        room: RoomProcess, doc: Path, tmp_path: Path) -> None:
    join(doc, "author")
    join(doc, "other")
    text, version = region_text("author", RISKS)
    first = tmp_path / "first.md"
    first.write_text(text.replace("- Privacy", "- Weather: meetings outdoors.\n- Privacy"))
    proposal = ce_ok("propose", RISKS, "--file", str(first), "--profile", "author")
    pid = proposal["proposal_id"]
    missing = ce("review", str(doc), pid, "--request-changes", "--yes", "--json")
    assert missing.returncode != 0 and json.loads(missing.stdout)["error"] == "invalid_request"
    asked = ce_ok("review", str(doc), pid, "--request-changes", "--comment", "Say what we do.",
                  "--yes")
    assert asked["status"] == "changes_requested"
    waited = ce("wait", pid, "--profile", "author", "--json")
    assert waited.returncode == 3 and json.loads(waited.stdout)["status"] == "changes_requested"
    linked = ce_ok("threads", "--proposal", pid, "--profile", "author")["threads"]
    assert [t["comments"][0]["body"] for t in linked] == ["Say what we do."]
    second = tmp_path / "second.md"
    second.write_text(text.replace("- Privacy", "- Weather: meetings move indoors.\n- Privacy"))
    refused, run = ce_err("revise", pid, "--file", str(second), "--profile", "other")
    assert refused["error"] == "permission_denied" and run.returncode == 5
    revised = ce_ok("revise", pid, "--file", str(second), "--summary", "weather, handled",
                    "--profile", "author")
    assert revised["revision"] == 2 and revised["status"] == "pending"
    detail = ce_ok("show", str(doc), pid)
    assert [r["revision"] for r in detail["revisions"]] == [1, 2]
    assert "+- Weather: meetings move indoors." in detail["revision_diff"]
    assert "-- Weather: meetings outdoors." in detail["revision_diff"]
    ce_ok("review", str(doc), pid, "--approve", "--yes")
    committed = ce_ok("commit", pid, "--profile", "author")
    assert committed["version"] == version + 1
    assert "meetings move indoors" in doc.read_text()


def _stale_proposal(doc: Path, tmp_path: Path, ours: tuple[str, str], theirs: tuple[str, str]
                    ) -> str:
    text, _ = region_text("author", RISKS)
    mine = tmp_path / "mine.md"
    mine.write_text(text.replace(*ours))
    pid = str(ce_ok("propose", RISKS, "--file", str(mine), "--profile", "author")["proposal_id"])
    # The host's own text moves on meanwhile: a commit of theirs (a save in their editor
    # would rebase the proposal by itself: tests/e2e/test_host_saves_keep_work.py).
    _host_commits(doc, *theirs)
    return pid


def test_rebase_clean_and_conflicting_through_the_cli(
        room: RoomProcess, doc: Path, tmp_path: Path) -> None:
    join(doc, "author")
    clean = _stale_proposal(doc, tmp_path, ("- Privacy", "- Weather.\n- Privacy"),
                            ("manual entry\n  must stay quick.", "manual entry\n  must be quick."))
    # The host's commit changed its region: superseded, so not `stale` (a decided proposal never
    # is, docs/protocol.md "The host's side"); rebase carries it onto the new text.
    shown = ce_ok("show", str(doc), clean)
    assert (shown["status"], shown["stale"]) == ("superseded", False)
    preview = ce_ok("rebase", clean, "--profile", "author")
    assert preview["clean"] is True and preview["applied"] is False
    assert "must be quick." in preview["content"] and "- Weather.\n" in preview["content"]
    assert ce_ok("show", str(doc), clean)["revision"] == 1
    readable = ce("rebase", clean, "--profile", "author")
    assert readable.returncode == 0 and "merges cleanly" in readable.stdout
    applied = ce_ok("rebase", str(doc), clean, "--apply")  # the host, as reviewer
    assert applied["applied"] is True and applied["revision"] == 2
    detail = ce_ok("show", str(doc), clean)
    assert detail["rebased"] is True and detail["stale"] is False
    ce_ok("review", str(doc), clean, "--approve", "--yes")
    ce_ok("commit", clean, "--profile", "author")
    assert "- Weather.\n" in doc.read_text() and "must be quick." in doc.read_text()
    refused, _ = ce_err("rebase", clean, "--profile", "author")
    assert refused["error"] == "proposal_conflict" and refused["details"]["status"] == "committed"

    conflicting = _stale_proposal(doc, tmp_path, ("- Privacy: a", "- Secrecy: a"),
                                  ("- Privacy: a", "- Confidentiality: a"))
    result = ce("rebase", conflicting, "--apply", "--profile", "author", "--json")
    assert result.returncode == 3
    answer = json.loads(result.stdout)
    assert answer["clean"] is False and answer["applied"] is False
    [hunk] = answer["conflicts"]
    assert "Secrecy" in hunk["ours"] and "Confidentiality" in hunk["theirs"]
    assert "Privacy" in hunk["base"]
    assert ce_ok("show", str(doc), conflicting)["revision"] == 1
    shown = ce("rebase", conflicting, "--profile", "author")
    assert shown.returncode == 3 and "conflict 1:" in shown.stdout


def _mcp_agent(room: RoomProcess, doc: Path, name: str) -> Http:
    credentials = read_credentials(doc)
    assert credentials is not None
    port = int(room.ready["ingress_port"])
    invite = Http(port, credentials.host_session).ok("POST", "/workspace/invite", {})
    joined = Http(port).ok("POST", "/session/join", {"invite": invite["invitation"],
                                                       "name": name, "kind": "agent"})
    return Http(port, joined["session_id"])


def _host_commits(doc: Path, old: str, new: str) -> None:
    """The host changes the text by a commit of the whole document (not a save)."""
    credentials = read_credentials(doc)
    assert credentials is not None
    host = Http(int(credentials.ingress_port), credentials.host_session)
    current = host.ok("GET", "/workspace/read?region=workspace")
    host.ok("POST", "/workspace/commit", {"base_version": current["version"], "summary": "host",
                                          "content": current["content"].replace(old, new)})


def test_rebase_clean_and_conflicting_over_mcp(room: RoomProcess, doc: Path) -> None:
    agent = _mcp_agent(room, doc, "mcp-author")
    other = _mcp_agent(room, doc, "mcp-other")
    read = mcp_tool(agent, "workspace_read", region=RISKS)
    proposal = mcp_tool(agent, "workspace_propose", region=RISKS, base_version=read["version"],
                        summary="weather", content=read["content"].replace(
                            "- Privacy", "- Weather.\n- Privacy"))
    pid = proposal["proposal_id"]
    refused = mcp_error(other, "workspace_proposal_revise", proposal_id=pid, content="## Risks\n")
    assert refused["error"] == "permission_denied"
    _host_commits(doc, "must stay quick.", "must be quick.")
    preview = mcp_tool(agent, "workspace_proposal_rebase", proposal_id=pid)
    assert preview["clean"] is True and preview["applied"] is False
    assert "- Weather.\n" in preview["content"] and "must be quick." in preview["content"]
    applied = mcp_tool(agent, "workspace_proposal_rebase", proposal_id=pid, apply=True)
    assert applied["applied"] is True and applied["revision"] == 2 and applied["status"] == "pending"
    detail = mcp_tool(agent, "workspace_proposal", proposal_id=pid)
    assert detail["rebased"] is True and [r["rebased"] for r in detail["revisions"]] == [False, True]
    ce_ok("review", str(doc), pid, "--approve", "--yes")
    committed = mcp_tool(agent, "workspace_commit", proposal_id=pid)
    assert committed["proposal_id"] == pid
    assert "- Weather.\n" in doc.read_text() and "must be quick." in doc.read_text()
    gone = mcp_error(agent, "workspace_proposal_rebase", proposal_id=pid)
    assert gone["error"] == "proposal_conflict" and gone["details"]["status"] == "committed"

    read = mcp_tool(agent, "workspace_read", region=RISKS)
    clash = mcp_tool(agent, "workspace_propose", region=RISKS, base_version=read["version"],
                     summary="secrecy", content=read["content"].replace("- Privacy: a",
                                                                         "- Secrecy: a"))
    _host_commits(doc, "- Privacy: a", "- Confidentiality: a")
    answer = mcp_tool(agent, "workspace_proposal_rebase", proposal_id=clash["proposal_id"],
                      apply=True)
    assert answer["clean"] is False and answer["applied"] is False
    [hunk] = answer["conflicts"]
    assert "Secrecy" in hunk["ours"] and "Confidentiality" in hunk["theirs"]
    assert mcp_tool(agent, "workspace_proposal", proposal_id=clash["proposal_id"])[
        "revision"] == 1
