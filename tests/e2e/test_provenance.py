"""Provenance end to end (issue 23, docs/spec/PROTOCOL.md section 18) on a real `ce serve`.

Blame, revert and restore, auto-approve policies and git: REST, MCP and the
`ce` verbs against one real room in a real git repository (`git log`/`git
show` read what the room committed). Every room and `ce` a test starts is
stopped by the test.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Room, ce, ce_err, ce_ok, start_room

pytestmark = pytest.mark.e2e

TOP = "Shelf Swap: a neighbourhood book exchange app"
PROBLEM = f"{TOP}/Problem"
RISKS = f"{TOP}/Risks"
IDEA = f"{TOP}/The idea"


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=30,
                            check=True)
    return result.stdout


def make_repo(doc: Path) -> Path:
    repo = doc.parent
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Host Person")
    git(repo, "config", "user.email", "host@example.com")
    (repo / "other.txt").write_text("other\n")
    git(repo, "add", doc.name, "other.txt")
    git(repo, "commit", "-q", "-m", "start")
    return repo


def read(room: Room, bearer: str, region: str) -> dict[str, Any]:
    return room.read(bearer, region)


def propose(room: Room, bearer: str, region: str, content: str, summary: str) -> dict[str, Any]:
    base = read(room, bearer, region)["version"]
    answer: dict[str, Any] = room.ok("POST", "/workspace/propose", bearer, {
        "region": region, "base_version": base, "summary": summary, "content": content})
    return answer


def land(room: Room, bearer: str, region: str, content: str, summary: str, *,
         amend: str | None = None) -> dict[str, Any]:
    proposal = propose(room, bearer, region, content, summary)
    review: dict[str, Any] = {"proposal_id": proposal["proposal_id"],
            "revision": proposal["revision"], "decision": "approve"}
    if amend is not None:
        review["content"] = amend
    room.ok("POST", "/workspace/proposal/review", room.host_session, review)
    committed: dict[str, Any] = room.ok("POST", "/workspace/commit", bearer,
                                        {"proposal_id": proposal["proposal_id"]})
    return committed


def host_save(room: Room, doc: Path, old: str, new: str) -> int:
    """The host's editor saves the file; returns the version the room recorded for it."""
    before = room.ok("GET", "/workspace/status", room.host_session)["version"]
    text = doc.read_text()
    assert old in text
    doc.write_text(text.replace(old, new))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        version = int(room.ok("GET", "/workspace/status", room.host_session)["version"])
        if version > before:
            return version
        time.sleep(0.1)
    raise AssertionError("the save was never recorded")


def mcp_tool(room: Room, bearer: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"}}}}
    conn = http.client.HTTPConnection("127.0.0.1", room.port, timeout=30)
    try:
        conn.request("POST", "/mcp", body=json.dumps(message).encode(), headers={
            "Host": "commonroom", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call", "Mcp-Name": name, "Authorization": f"Bearer {bearer}"})
        response = conn.getresponse()
        body = json.loads(response.read())
    finally:
        conn.close()
    assert response.status == 200, body
    result: dict[str, Any] = body["result"]
    return result


def test_blame_revert_restore_and_git_on_a_real_room(doc: Path) -> None:
    repo = make_repo(doc)
    process = start_room(doc, "--port-ingress", "0", "--git")
    try:
        room = Room(process, doc)
        ada = room.join("ada")
        bob = room.join("bob")
        problem = "## Problem\n\nReaders keep books they read once.\n\n"
        first = land(room, ada["session_id"], PROBLEM, problem, "sharpen the problem")
        risks_text = read(room, bob["session_id"], RISKS)["content"]
        amended = land(room, bob["session_id"], RISKS, risks_text + "A flood of paperbacks.\n\n",
                       "add a risk", amend=risks_text + "A flood of hardbacks.\n\n")
        saved = host_save(room, doc, "## Open questions", "## Open questions (host)")

        # blame over REST: two agents, an amended proposal, one host save
        blamed = room.ok("GET", "/workspace/blame?region=workspace", room.host_session)
        by_text = {line["text"]: line for line in blamed["lines"]}
        assert [line["text"] for line in blamed["lines"]] == doc.read_text().split("\n")[:-1]
        assert by_text["Readers keep books they read once."]["name"] == "ada"
        assert by_text["Readers keep books they read once."]["proposal_id"] == (
            first["proposal_id"])
        assert by_text["A flood of hardbacks."]["name"] == "bob"
        host_id = next(p["participant_id"] for p in room.ok(
            "GET", "/workspace/participants", room.host_session)["participants"] if p["name"] != "ada"
            and p["name"] != "bob")
        assert by_text["A flood of hardbacks."]["amended_by"] == host_id
        assert by_text["## Risks"]["amended_by"] is None
        assert by_text["## Open questions (host)"]["kind"] == "host_editor"
        assert by_text["## Open questions (host)"]["version"] == saved

        # the agent verb, the host verb and the MCP tool say the same
        profile = ce_ok("join", room.invite()["invitation"], "--name", "cli", "--no-hold")
        assert profile["session_id"]
        agent_view = ce_ok("blame", "Problem")
        host_view = ce_ok("blame", str(doc), "Problem")
        assert agent_view == host_view
        assert [line["name"] for line in host_view["lines"]][2] == "ada"
        text_out = ce("blame", str(doc), "Problem").stdout
        assert "ada" in text_out and "Readers keep books they read once." in text_out
        tool = mcp_tool(room, ada["session_id"], "workspace_blame", {"region": "Problem"})
        assert tool["structuredContent"]["lines"] == host_view["lines"]

        # revert that merges: ada's change undone, bob's and the host's stay
        reverted = ce_ok("revert", str(doc), str(first["version"]))
        assert reverted["reverts"] == first["version"]
        now = doc.read_text()
        assert "Readers keep books they read once." not in now
        assert "A flood of hardbacks." in now and "## Open questions (host)" in now
        # revert that conflicts: a later change touched the same lines; nothing written
        later = land(room, bob["session_id"], RISKS, read(room, bob["session_id"], RISKS)[
            "content"].replace("A flood of hardbacks.", "A flood of comics."), "comics")
        before = doc.read_text()
        error, result = ce_err("revert", str(doc), str(amended["version"]))
        assert error["error"] == "stale_version" and result.returncode == 4
        assert error["details"]["reverts"] == amended["version"]
        assert doc.read_text() == before
        # bad input: a revert of version 1, a restore of a region that did not exist then
        error, _ = ce_err("revert", str(doc), "1")
        assert error["error"] == "invalid_request" and "version 1" in error["message"]
        error, _ = ce_err("restore", str(doc), "Nowhere", "1")
        assert error["error"] == "invalid_region" and "did not exist at version 1" in (
            error["message"])
        # restore: the region back to version 1
        restored = ce_ok("restore", str(doc), "Risks", "1")
        assert restored["restores"] == 1
        assert "A flood of" not in doc.read_text()
        events = room.ok("GET", "/workspace/history?limit=20", room.host_session)["events"]
        changes = [e["payload"] for e in events if e["type"] == "change.committed"]
        assert {"reverts": first["version"]}.items() <= next(
            c for c in changes if c["source"] == "revert").items()
        assert next(c for c in changes if c["source"] == "restore")["restores"] == 1

        # git: one commit per committed version, touching only the file; not the host save
        log = git(repo, "log", "--format=%an <%ae>%x1f%s%x1f%b%x1e")
        commits = [entry.strip().split("\x1f") for entry in log.split("\x1e") if entry.strip()]
        subjects = [c[1] for c in commits]
        assert subjects[-1] == "start"
        assert "sharpen the problem" in subjects and "add a risk" in subjects
        assert "external edit" not in subjects
        by_subject = {c[1]: c for c in commits}
        assert by_subject["sharpen the problem"][0] == (
            f"ada <{ada['participant_id']}@commonroom.invalid>")
        body = by_subject["add a risk"][2]
        assert f"Commonroom-Version: {amended['version']}" in body
        assert "Reviewed-by: " in body and "@commonroom.invalid>" in body
        assert f"Commonroom-Version: {later['version']}" in by_subject["comics"][2]
        workspace = room.ok("GET", "/workspace/status", room.host_session)["workspace_id"]
        assert f"Commonroom-Workspace: {workspace}" in body
        assert git(repo, "show", "--format=", "--name-only", "HEAD").split() == [doc.name]
        assert git(repo, "status", "--porcelain", "--untracked-files=no").strip() in ("", )

        # a staged change elsewhere: no commit, one line on stderr, the room goes on
        (repo / "other.txt").write_text("changed\n")
        git(repo, "add", "other.txt")
        head = git(repo, "rev-parse", "HEAD")
        land(room, ada["session_id"], PROBLEM, "## Problem\n\nStaged elsewhere.\n\n", "staged")
        assert git(repo, "rev-parse", "HEAD") == head
        assert room.ok("GET", "/workspace/status", room.host_session)["version"] > 0
        process.stop()
        assert "not committed: the index has staged changes" in process.stderr()
    finally:
        process.close()
    # export: what the branch lacks, once
    git(repo, "reset", "-q", "other.txt")
    exported = ce_ok("export", str(doc), "--git")
    assert len(exported["committed_versions"]) == 1
    assert ce_ok("export", str(doc), "--git")["committed_versions"] == []


def test_policies_over_the_cli_and_rest(doc: Path) -> None:
    process = start_room(doc, "--port-ingress", "0")
    try:
        room = Room(process, doc)
        ada = room.join("ada")
        bearer = ada["session_id"]
        all_but_admin = ["read", "observe", "checkout", "propose", "commit", "approve",
                         "invite", "handoff", "message", "wide_lease"]
        mallory = room.join("mallory", all_but_admin)["session_id"]
        status, refused = room.call("POST", "/workspace/policy", mallory, {
            "name_pattern": "*", "region_pattern": "*", "max_changed_lines": 999})
        assert status == 403 and refused["error"] == "permission_denied"

        error, _ = ce_err("policy", "add", str(doc), "--label", "ada", "--regions", "Nowhere/*",
                          "--max-lines", "3")
        assert error["error"] == "invalid_request"
        assert error["details"]["reason"] == "pattern_matches_nothing"
        policy = ce_ok("policy", "add", str(doc), "--participant", ada["participant_id"],
                       "--regions", f"{TOP}/*", "--max-lines", "2", "--minutes", "30")
        problem = read(room, bearer, PROBLEM)["content"]
        one_line = propose(room, bearer, PROBLEM, problem.replace("Readers", "Many readers", 1),
                           "one-line fix")
        assert one_line["status"] == "approved"
        assert one_line["reviewer_id"] == f"policy:{policy['policy_id']}"
        room.ok("POST", "/workspace/commit", bearer, {"proposal_id": one_line["proposal_id"]})
        thirty = "## Problem\n\n" + "".join(f"Line {n}.\n" for n in range(30)) + "\n"
        big = propose(room, bearer, PROBLEM, thirty, "thirty lines")
        assert big["status"] == "pending"
        room.ok("POST", "/workspace/proposal/withdraw", bearer, {"proposal_id": big["proposal_id"]})

        # a change under a human-editing hold: refused at propose, nothing approved
        text = doc.read_text()
        doc.write_text(text.replace("## Risks\n", "## Risks\n\nHost is typing.\n", 1))
        deadline = time.monotonic() + 15
        while not any(lease.get("reason") == "human_editing" and lease["region"] == RISKS
                      for lease in room.ok("GET", "/workspace/leases", room.host_session)["leases"]):
            assert time.monotonic() < deadline, "the save never held Risks"
            time.sleep(0.1)
        risks = read(room, bearer, RISKS)
        status, held = room.call("POST", "/workspace/propose", bearer, {
            "region": RISKS, "base_version": risks["version"], "summary": "fix",
            "content": risks["content"].replace("Host is typing.", "Host typed.")})
        assert status == 409 and held["details"]["reason"] == "human_editing"

        listed = ce_ok("policy", "list", str(doc))["policies"]
        assert listed[0]["approved_count"] == 1 and listed[0]["active"] is True
        assert listed[0]["approved"][0]["proposal_id"] == one_line["proposal_id"]
        # the kill switch
        assert ce_ok("policy", "pause", str(doc))["policy_ids"] == [policy["policy_id"]]
        problem = read(room, bearer, PROBLEM)["content"]
        after = propose(room, bearer, PROBLEM, problem.replace("Many readers", "Readers", 1),
                        "another fix")
        assert after["status"] == "pending"
        assert ce_ok("policy", "list", str(doc))["policies"][0]["active"] is False
        assert ce_ok("policy", "rm", str(doc), policy["policy_id"])["removed"] is True
        assert ce_ok("policy", "list", str(doc))["policies"] == []
    finally:
        process.close()


def test_git_outside_a_work_tree_is_a_clear_error(doc: Path) -> None:
    result = ce("serve", str(doc), "--git", "--json", "--port-owner", "0", "--port-ingress", "0",
                timeout=60)
    assert result.returncode != 0
    error = json.loads(result.stdout.strip().splitlines()[-1])
    assert error["error"] == "invalid_request" and "not inside a git work tree" in error["message"]
    error, _ = ce_err("export", str(doc), "--git")
    assert "not inside a git work tree" in error["message"]
