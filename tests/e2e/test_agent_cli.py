"""The `ce` agent verbs against a real room: profiles, exit codes, the host's view of a proposal.

Every command is a real `ce` process; the room is a real `ce serve`.
"""

from __future__ import annotations

import json
import os
import queue
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RoomProcess, at_terminal, ce_path, fake_tailcat_env, start_room

pytestmark = pytest.mark.e2e

PROBLEM = "Shelf Swap: a neighbourhood book exchange app/Problem"
RISKS = "Shelf Swap: a neighbourhood book exchange app/Risks"


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([ce_path(), *args], capture_output=True, text=True, timeout=30,
                            input=input, env=env)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def ok_json(*args: str, input: str | None = None) -> Any:
    result = run(*args, "--json", input=input)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def join(doc: Path, name: str, *extra: str) -> dict[str, Any]:
    invitation = run("invite", str(doc)).stdout.strip()
    joined: dict[str, Any] = ok_json("join", invitation, "--name", name, "--no-hold", *extra)
    joined["invitation"] = invitation
    return joined


def test_profile_saved_on_join_and_selected(room: RoomProcess, doc: Path,
                                            config_home: Path) -> None:
    joined = join(doc, "bot")
    folder = config_home / "commonroom" / "profiles"
    saved = folder / f"{joined['workspace_id']}.json"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert json.loads(saved.read_text())["session_id"] == joined["session_id"]
    assert not list(doc.parent.glob("*profile*"))  # never in the project folder

    # The default profile is the last joined; --profile and CE_PROFILE pick another.
    second = join(doc, "second", "--profile", "two")
    assert ok_json("whoami")["participant_id"] == second["participant_id"]
    assert ok_json("whoami", "--profile", joined["workspace_id"])["name"] == "bot"
    env = {**os.environ, "CE_PROFILE": joined["workspace_id"]}
    by_env = run("whoami", "--json", env=env)
    assert json.loads(by_env.stdout)["name"] == "bot"
    # CE_INVITATION + CE_SESSION come before CE_PROFILE.
    env = {**env, "CE_INVITATION": second["invitation"], "CE_SESSION": second["session_id"]}
    regions = run("regions", "--json", env=env)
    assert regions.returncode == 0 and json.loads(regions.stdout)["version"] == 1
    half = {**os.environ, "CE_SESSION": second["session_id"]}
    assert run("regions", env=half).returncode == 2

    # Leave ends the session and deletes its profile; then the session is refused (7).
    left = ok_json("leave", "--profile", "two")
    assert left["left"] is True and not (folder / "two.json").exists()
    refused = run("regions", "--invitation", second["invitation"], "--session", "-",
                  input=second["session_id"] + "\n")
    assert refused.returncode == 7 and refused.stderr.startswith("error: unauthorized")
    assert second["session_id"] not in refused.stderr
    assert run("whoami", "--profile", "two").returncode == 2


@pytest.mark.slow
def test_agent_loop_and_exit_codes(room: RoomProcess, doc: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    join(doc, "bot")
    text = "## Problem\n\nReaders keep books they read once.\n\n"
    # No read recorded: propose refuses with a usage error instead of guessing a base.
    no_base = run("propose", "Problem", "-", input=text)
    assert no_base.returncode == 2 and "ce read" in no_base.stderr
    both = run("propose", "Problem", "-", "--file", str(doc), input=text)
    assert both.returncode == 2

    read = run("read", "Problem")
    assert read.returncode == 0 and read.stdout.startswith("## Problem\n\nReaders buy books")
    lease = run("checkout", "Problem").stdout.strip()
    assert lease.startswith("ls_")
    proposal = run("propose", "Problem", "-", "--summary", "shorter", input=text).stdout.strip()
    assert proposal.startswith("pr_")
    assert ok_json("leases", "--mine")["leases"][0]["lease_id"] == lease
    renewed = ok_json("renew", "--minutes", "30")  # the only lease, without naming it
    assert renewed["lease_id"] == lease and renewed["expires_at"] > ok_json(
        "leases")["leases"][0]["acquired_at"]

    # A wait that runs out exits 124 and prints nothing on stdout.
    waited = run("wait", proposal, "--timeout", "0.5")
    assert waited.returncode == 124 and waited.stdout == ""

    # The host sees the author's name, the base and that it still applies; --approve --reject
    # is a usage error and decides nothing.
    listed = run("proposals", str(doc))
    assert f"{proposal}  pending" in listed.stdout and "by bot" in listed.stdout
    assert "base v1" in listed.stdout and "(applies)" in listed.stdout
    row = ok_json("proposals", str(doc))["proposals"][0]
    assert row["author_name"] == "bot" and row["applies"] is True
    contradictory = run("review", str(doc), proposal, "--approve", "--reject")
    assert contradictory.returncode == 2
    assert ok_json("proposals", str(doc))["proposals"][0]["status"] == "pending"

    shown = run("show", str(doc), proposal)
    assert shown.returncode == 0 and "\x1b[" not in shown.stdout  # plain when piped
    assert "-Readers buy books" in shown.stdout and "+Readers keep books" in shown.stdout
    assert "by:      bot" in shown.stdout
    detail = ok_json("show", str(doc), proposal)
    assert detail["proposal_id"] == proposal and detail["diff"].startswith("---")

    assert run("review", str(doc), proposal, "--approve").returncode == 0
    decided = ok_json("wait", proposal)
    assert decided["status"] == "approved"
    committed = ok_json("commit", proposal)
    assert committed["version"] == 2 and "Readers keep books" in doc.read_text()
    assert run("release").stdout.strip() == f"released {lease}"
    assert "+Readers keep books" in run("diff", "--base", "1", "--region", "Problem").stdout
    assert ok_json("history", "--limit", "2")["events"][0]["type"] in (
        "proposal.committed", "lease.released")

    # Conflict (3), stale (4), not found (6), several leases without an argument (2).
    # `other` joins last, so it is the default from here on; the bot is named by CE_PROFILE.
    bot = ok_json("whoami")["profile"]
    other = join(doc, "other", "--profile", "other")
    assert ok_json("whoami")["profile"] == "other"
    monkeypatch.setenv("CE_PROFILE", bot)
    assert run("checkout", "Risks", "--profile", "other").returncode == 0
    taken = run("checkout", "Risks")
    assert taken.returncode == 3 and taken.stderr.startswith("error: lease_conflict")
    assert run("commit", "pr_nothing").returncode == 6
    held = ok_json("checkout", "Who it is for", "--profile", "other")["lease_id"]
    several = run("release", "--profile", "other")
    assert several.returncode == 2 and "several leases" in several.stderr
    # A lease is named by its id or by the region it holds (its title is enough).
    assert run("renew", "Who it is for", "--profile", "other").returncode == 0
    assert run("release", "Who it is for", "--profile", "other").stdout.strip() == f"released {held}"
    assert run("release", "Who it is for", "--profile", "other").returncode != 0
    assert other["participant_id"]

    run("read", "The idea")
    idea = run("read", "The idea").stdout
    first = run("propose", "The idea", "-", input=idea + "One.\n\n").stdout.strip()
    second = run("propose", "The idea", "-", input=idea + "Two.\n\n").stdout.strip()
    for pid in (first, second):
        assert run("review", str(doc), pid, "--approve").returncode == 0
    assert run("commit", first).returncode == 0
    stale = run("commit", second, "--json")
    assert stale.returncode == 4
    error = json.loads(stale.stdout)
    assert error["error"] == "stale_version" and error["current_version"] == 3

    rejected = run("propose", "Problem", "-", "--base", "2", input=text + "x\n").stdout.strip()
    run("review", str(doc), rejected, "--reject", "--comment", "no")
    refused = run("wait", rejected)
    assert refused.returncode == 3 and f"{rejected} rejected" in refused.stdout


def test_help_lists_exit_codes() -> None:
    helped = run("--help")
    assert helped.returncode == 0
    for line in ("Exit codes:", "124", "stale_version", "transport_unavailable"):
        assert line in helped.stdout
    for verb in ("regions", "read", "checkout", "renew", "release", "propose", "wait", "commit",
                 "diff", "history", "participants", "leases", "whoami", "leave", "show"):
        assert run(verb, "--help").returncode == 0, verb


def test_unreachable_room_is_9(tmp_path: Path, config_home: Path, doc: Path) -> None:
    room = start_room(doc, "--port-ingress", "0")
    try:
        join(doc, "bot")
    finally:
        room.close()
    gone = run("regions")
    assert gone.returncode == 9 and gone.stderr.startswith("error: transport_unavailable")
    assert "is the room still open?" in gone.stderr  # what to check, without the room's address
    assert "127.0.0.1" not in gone.stderr


def test_completion_never_tracebacks(room: RoomProcess, doc: Path) -> None:
    join(doc, "bot")

    def complete(words: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "_CE_COMPLETE": "bash_complete", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
        result = subprocess.run([ce_path()], capture_output=True, text=True, env=env,
                                timeout=30)
        assert "Traceback" not in result.stdout + result.stderr, result.stderr
        return result

    assert "plain,regions" in complete("ce reg").stdout
    assert f"plain,{PROBLEM}" in complete("ce read Shelf").stdout
    assert "plain,Risks" in complete("ce checkout Ri").stdout
    assert complete("ce read Plan/R").stdout.strip() == ""
    assert complete("ce nosuch x").stdout.strip() == ""
    proposal = run("propose", "Problem", "-", "--base", "1", input="## Problem\n\nx\n").stdout
    assert f"plain,{proposal.strip()}" in complete("ce wait pr_").stdout


class Lines:
    """A pipe read line by line in a thread, so a test can wait for a line with a time limit."""

    def __init__(self, pipe: Any) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe: Any) -> None:
        for line in pipe:
            self.queue.put(line)
        self.queue.put(None)

    def until(self, predicate: Any, timeout: float = 20.0) -> str:
        while True:
            line = self.queue.get(timeout=timeout)
            assert line is not None, "the stream ended first"
            if predicate(line):
                return line


def test_observe_says_it_reconnects(doc: Path) -> None:
    room = start_room(doc)
    invitation = run("invite", str(doc)).stdout.strip()
    session = ok_json("join", invitation, "--name", "watcher", "--no-hold")["session_id"]
    observer = subprocess.Popen([ce_path(), "observe", invitation, "--session", session,
                                 "--since", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    again: RoomProcess | None = None
    try:
        out, err = Lines(observer.stdout), Lines(observer.stderr)
        out.until(lambda line: json.loads(line)["type"] == "session.created")
        room.stop()
        line = err.until(lambda line: "reconnecting" in line)
        assert line.startswith("note: ") and session not in line
        again = start_room(doc)  # the same ingress port: the stream comes back
        out.until(lambda line: json.loads(line)["type"] == "workspace.started")
    finally:
        observer.terminate()
        observer.wait(10)
        room.close()
        if again is not None:
            again.close()


def test_observe_call_and_withdraw_take_the_profile(room: RoomProcess, doc: Path) -> None:
    join(doc, "bot")
    assert ok_json("call", "GET", "/workspace/status")["version"] == 1  # no invitation, no session
    risks = run("read", "Risks").stdout
    proposal = run("propose", "Risks", "-", input=risks + "- Withdrawn later.\n\n").stdout.strip()
    assert ok_json("call", "GET", f"/workspace/proposal?proposal_id={proposal}")["status"] == "pending"
    withdrawn = run("withdraw", proposal)
    assert withdrawn.returncode == 0 and withdrawn.stdout == f"{proposal} withdrawn\n"
    again = run("withdraw", proposal)
    assert again.returncode == 3 and again.stderr.startswith("error: proposal_conflict")
    waited = run("wait", proposal)  # decided already: withdrawn is not approved
    assert waited.returncode == 3 and f"{proposal} withdrawn" in waited.stdout
    observer = subprocess.Popen([ce_path(), "observe", "--since", "0", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = Lines(observer.stdout).until(
            lambda line: json.loads(line)["type"] == "proposal.withdrawn")
        assert json.loads(line)["payload"]["proposal_id"] == proposal
    finally:
        observer.terminate()
        observer.wait(10)


def test_review_at_a_terminal_shows_the_diff_and_asks(room: RoomProcess, doc: Path) -> None:
    join(doc, "bot")
    run("read", "Risks")
    risks = run("read", "Risks").stdout
    proposal = run("propose", "Risks", "-", input=risks + "- New risk.\n\n").stdout.strip()
    shown_code, shown = at_terminal(["show", str(doc), proposal])
    assert shown_code == 0 and "\x1b[32m+- New risk.\x1b[0m" in shown  # coloured at a terminal
    code, output = at_terminal(["review", str(doc), proposal, "--approve"], [("[y/N]", b"n\n")])
    assert code == 2 and "+- New risk." in output and "not reviewed" in output
    assert ok_json("show", str(doc), proposal)["status"] == "pending"
    code, output = at_terminal(["review", str(doc), proposal, "--approve"], [("[y/N]", b"y\n")])
    assert code == 0 and f"{proposal} approved" in output
    # --yes decides without asking, even at a terminal.
    again = run("propose", "Risks", "-", "--base", "1", input=risks + "- Other.\n\n")
    code, output = at_terminal(["review", str(doc), again.stdout.strip(), "--reject", "--yes"])
    assert code == 0 and "[y/N]" not in output


def test_contradictory_or_missing_flags_are_usage_errors(room: RoomProcess, doc: Path) -> None:
    joined = join(doc, "bot")
    cases = [
        ["review", str(doc), "pr_x", "--approve", "--reject"],
        ["review", str(doc), "pr_x"],
        ["call", joined["invitation"], "GET", "/workspace/status", "--session",
         joined["session_id"], "--body", "{}"],
        ["propose", "Risks"],  # no text
        ["propose", "Risks", "notdash", "--base", "1"],
        ["regions", "--profile", "x", "--session", joined["session_id"]],
        ["regions", "--session", joined["session_id"]],  # --session without --invitation
        ["checkout", "Risks", "--minutes", "0"],
        ["diff"] ,  # no read recorded and no --base
    ]
    for args in cases:
        result = run(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        as_json = run(*args, "--json")
        assert as_json.returncode == 2 and json.loads(as_json.stdout)["error"] == \
            "invalid_request", args


def test_verbs_and_client_over_the_tailcat_plugin(doc: Path, tmp_path: Path) -> None:
    """A hint that is not plain loopback goes through the transport plugin (a fake tailcat)."""
    env = fake_tailcat_env(tmp_path)
    room = start_room(doc, "--transport", "tailcat", "--port-ingress", "0", env=env)
    try:
        invitation = room.ready["invitation"]
        joined = run("join", invitation, "--name", "far", "--no-hold", "--json", env=env)
        assert joined.returncode == 0, joined.stderr
        read = run("read", "Problem", env=env)
        assert read.returncode == 0 and read.stdout.startswith("## Problem")
        assert run("checkout", "Problem", env=env).stdout.startswith("ls_")
        script = ("import sys, commonroom\n"
                  "c = commonroom.Client(sys.argv[1], session=sys.argv[2])\n"
                  "print(c.read('Risks').version, c.leases().leases[0].region)\n")
        session = json.loads(joined.stdout)["session_id"]
        done = subprocess.run([sys.executable, "-c", script, invitation, session], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"1 {PROBLEM}"
    finally:
        room.close()


def host_approves(doc: Path, proposal: str) -> None:
    """The host approves with `ce review` (the one place this module's new tests review)."""
    assert run("review", str(doc), proposal, "--approve").returncode == 0


def test_wait_outlives_a_room_restart_and_says_it_reconnects(doc: Path, config_home: Path) -> None:
    room = start_room(doc)
    again: RoomProcess | None = None
    waiter: subprocess.Popen[str] | None = None
    try:
        joined = join(doc, "waiter")
        risks = run("read", "Risks").stdout
        proposal = run("propose", "Risks", "-", input=risks + "- Restarts.\n\n").stdout.strip()
        waiter = subprocess.Popen([ce_path(), "wait", proposal], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        err = Lines(waiter.stderr)
        room.stop()
        line = err.until(lambda line: "reconnecting" in line)
        assert line.startswith("note: ") and joined["session_id"] not in line
        again = start_room(doc)  # the same ingress port, the same sidecar: the session stands
        host_approves(doc, proposal)
        assert waiter.wait(60) == 0
        assert waiter.stdout is not None
        out = waiter.stdout.read()
        assert proposal in out and "approved" in out
    finally:
        if waiter is not None and waiter.poll() is None:
            waiter.terminate()
            waiter.wait(10)
        room.close()
        if again is not None:
            again.close()
