"""`ce agent` end to end (docs/spec/PROTOCOL.md section 19): a real `ce serve`, a real `ce agent`,
and a scripted ACP agent on the official ACP SDK's agent side (`tests/e2e/acp_agent.py`) that acts
through the room's MCP server (the `ce mcp` bridge `session/new` gave it).

Waits are bounded polls of the agent's log and the room (the processes are real; nothing here
asserts a duration).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.e2e.conftest import Room, ce, ce_path

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ACP_AGENT = Path(__file__).with_name("acp_agent.py")
BOUND = 30.0  # seconds a step may take on a loaded machine before the test gives up
T = TypeVar("T")


def eventually(check: Callable[[], T | None], what: str, bound: float = BOUND) -> T:
    deadline = time.monotonic() + bound
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound} s: {what}")
        time.sleep(0.05)


def approve(room: Room, proposal_id: str) -> None:
    """The host approves the revision it read."""
    shown = room.ok("GET", f"/workspace/proposal?proposal_id={proposal_id}", room.host_session)
    room.ok("POST", "/workspace/proposal/review", room.host_session,
            {"proposal_id": proposal_id, "decision": "approve", "revision": shown["revision"]})


class ResidentAgent:
    """A `ce agent` process over the scripted ACP agent; its log is the agent's."""

    def __init__(self, room: Room, tmp: Path, *extra: str, name: str = "bot",
                 invitation: str | None = None) -> None:
        self.room = room
        self.log = tmp / f"{name}.acp.log"
        self.invitation = invitation or room.invite()["invitation"]
        self.args = [self.invitation, "--name", name, *extra]
        self.err_path = tmp / f"{name}.ce-agent.err"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        env = {**os.environ, "ACP_AGENT_LOG": str(self.log)}
        self.err = self.err_path.open("ab")
        self.proc = subprocess.Popen(
            [ce_path(), "agent", *self.args, "--", sys.executable, str(ACP_AGENT)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err, env=env)
        eventually(lambda: self.participant() and (self.participant() or {}).get("runtime"),
                   f"ce agent reported its runtime; stderr: {self.stderr()}")

    def entries(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [row for row in rows if event is None or row.get("event") == event]

    def prompts(self) -> list[str]:
        return [str(row["text"]) for row in self.entries("prompt")]

    def participant(self) -> dict[str, Any] | None:
        parts = self.room.ok("GET", "/workspace/participants", self.room.host_session)
        return next((p for p in parts["participants"] if p["name"] == "bot"), None)

    def runtime(self) -> dict[str, Any]:
        found = (self.participant() or {}).get("runtime")
        assert isinstance(found, dict)
        return found

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def stop(self, sig: int = signal.SIGINT) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()
        # the scripted agent ends when its stdin closes; make sure of it
        for row in self.entries("initialize"):
            pid = int(row.get("pid") or 0)
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def bot(served: Room, tmp_path: Path) -> Iterator[ResidentAgent]:
    agent = ResidentAgent(served, tmp_path)
    try:
        yield agent
    finally:
        agent.stop()


def _say(room: Room, text: str, *to: str) -> None:
    args = ["say", str(room.doc), text, *[w for name in to for w in ("--to", name)]]
    result = ce(*args)
    assert result.returncode == 0, result.stderr


def test_addressed_text_wakes_it_and_it_proposes_then_commits_once_approved(
    served: Room, bot: ResidentAgent,
) -> None:
    other = served.agent("drafter")
    # Unaddressed text and another participant's commit wake nobody.
    _say(served, "tighten Risks, someone")
    theirs = served.propose(other, "Problem", "## Problem\n\nBooks sit unread.\n\n", "problem")
    approve(served, theirs["proposal_id"])
    other.ok("POST", "/workspace/commit", {"proposal_id": theirs["proposal_id"]})
    _say(served, "tighten Risks", "bot")
    proposed = eventually(lambda: bot.entries("proposed"), "the agent proposed")
    prompts = bot.prompts()
    assert len(prompts) == 1, prompts
    assert "host" in prompts[0] and "> tighten Risks" in prompts[0]
    assert "someone" not in prompts[0]
    assert served.host_session not in prompts[0]
    proposal_id = proposed[0]["proposal_id"]
    approve(served, proposal_id)
    eventually(lambda: bot.entries("committed"), "the approval's wake made it commit")
    assert f"approved your proposal {proposal_id}" in bot.prompts()[1]
    assert "Scope creep: one page, no more." in served.doc.read_text()
    blame = served.ok("GET", "/workspace/blame?region=Risks", served.host_session)
    names = {line["name"] for line in blame["lines"] if "Scope creep" in line["text"]}
    assert names == {"bot"}
    # the agent reached the room only through `ce mcp`, its secrets in the environment
    started = bot.entries("new_session")[0]
    assert started["args"] == ["mcp"] and started["env_names"] == ["CE_INVITATION", "CE_SESSION"]
    eventually(lambda: bot.runtime()["state"] == "idle", "idle again")
    listed = ce("participants", "--profile", "bot")
    assert "resident · idle" in listed.stdout


def test_its_permission_prompt_is_answered_by_the_host_with_the_exact_option(
    served: Room, bot: ResidentAgent, config_home: Path,
) -> None:
    _say(served, "please ask permission", "bot")
    pending = eventually(lambda: served.ok("GET", "/workspace/permissions",
                                           served.host_session)["permissions"],
                         "the permission request reached the room")
    asked = pending[0]
    assert asked["title"] == "Run the tests" and asked["tool"] == "execute"
    assert json.loads(asked["input_preview"]) == {"command": "pytest -q"}
    assert [(o["option_id"], o["name"], o["kind"]) for o in asked["options"]] == [
        ("allow-once", "Allow once", "allow_once"), ("reject", "Reject", "reject_once")]
    eventually(lambda: "waiting for the host" in str(bot.runtime().get("note")),
               "the runtime shows what it waits for")
    # the agent's own session can never answer it, even with the right option
    own = json.loads((config_home / "commonroom" / "profiles" / "bot.json").read_text())
    status, refused = served.call("POST", "/workspace/permission/answer", own["session_id"],
                                  {"permission_id": asked["permission_id"],
                                   "option_id": "allow-once"})
    assert status == 403 and refused["error"] == "permission_denied"
    # room text is not an answer
    _say(served, "allow-once", "bot")
    listed = ce("permissions", str(served.doc))
    assert asked["permission_id"] in listed.stdout and "allow-once  Allow once" in listed.stdout
    result = ce("permit", str(served.doc), asked["permission_id"], "allow-once")
    assert result.returncode == 0, result.stderr
    outcome = eventually(lambda: bot.entries("permission"), "the agent got the host's answer")
    assert outcome == [{"event": "permission", "outcome": "allow-once"}]


def test_a_restarted_runtime_handles_each_wake_exactly_once(
    served: Room, bot: ResidentAgent,
) -> None:
    _say(served, "take your time", "bot")
    eventually(lambda: bot.runtime()["state"] == "running", "the first turn runs")
    for n in (1, 2, 3):
        _say(served, f"queued wake {n}", "bot")
    eventually(lambda: bot.runtime()["queued"] == 3, "three wakes queued")
    bot.stop(signal.SIGKILL)  # mid-queue, mid-turn
    bot.start()
    _say(served, "after the restart", "bot")
    eventually(lambda: sum("after the restart" in p for p in bot.prompts()) == 1
               and bot.runtime()["state"] == "idle", "every wake prompted")
    prompts = bot.prompts()
    for text in ("take your time", "queued wake 1", "queued wake 2", "queued wake 3",
                 "after the restart"):
        assert sum(f"> {text}" in p for p in prompts) == 1, (text, prompts)


def test_interrupt_cancels_that_turn_only(served: Room, bot: ResidentAgent) -> None:
    _say(served, "take your time", "bot")
    eventually(lambda: bot.runtime()["state"] == "running", "the turn runs")
    turn = bot.runtime()["turn"]
    pid = (bot.participant() or {})["participant_id"]
    # a stale turn number cancels nothing
    served.ok("POST", "/workspace/runtime/interrupt", served.host_session,
              {"participant_id": pid, "turn": turn + 5})
    result = ce("interrupt", str(served.doc), "bot")
    assert result.returncode == 0, result.stderr
    eventually(lambda: bot.entries("cancelled"), "the agent saw session/cancel")
    assert len(bot.entries("cancel")) == 1
    eventually(lambda: bot.runtime()["state"] == "idle", "idle after the interrupt")


def test_a_turn_past_its_limit_is_cancelled(served: Room, tmp_path: Path) -> None:
    agent = ResidentAgent(served, tmp_path, "--turn-minutes", "0.05")
    try:
        _say(served, "take your time", "bot")
        eventually(lambda: agent.entries("cancelled"), "the long turn was cancelled")
        assert "longer than" in agent.stderr()
    finally:
        agent.stop()


def test_three_turns_that_do_nothing_pause_it_until_the_host_resumes(
    served: Room, bot: ResidentAgent,
) -> None:
    for n in (1, 2, 3):
        _say(served, f"idle chat {n}", "bot")
        eventually(lambda n=n: len(bot.prompts()) == n and bot.runtime()["turn"] == n
                   and bot.runtime()["state"] in ("idle", "paused"), f"turn {n} ran")
    eventually(lambda: bot.runtime()["state"] == "paused", "paused after three idle turns")
    messages = served.ok("GET", "/workspace/messages", served.host_session)["messages"]
    assert any("did nothing in the room" in m["text"] for m in messages)
    _say(served, "tighten Risks", "bot")  # queued while paused
    eventually(lambda: bot.runtime()["queued"] == 1, "queued while paused")
    assert len(bot.prompts()) == 3
    result = ce("resume", str(served.doc), "bot")
    assert result.returncode == 0, result.stderr
    eventually(lambda: bot.entries("proposed"), "resumed: the queued wake ran")


def test_max_turns_holds_further_wakes_in_the_queue(served: Room, tmp_path: Path) -> None:
    agent = ResidentAgent(served, tmp_path, "--max-turns", "1")
    try:
        _say(served, "tighten Risks", "bot")
        eventually(lambda: agent.entries("proposed"), "the first turn ran")
        _say(served, "second wake", "bot")
        eventually(lambda: "turn limit" in str(agent.runtime().get("note")),
                   "the second waits for the turn budget")
        assert agent.runtime()["queued"] == 1 and len(agent.prompts()) == 1
    finally:
        agent.stop()


def test_a_missing_shorthand_is_one_line_naming_the_package(served: Room) -> None:
    invitation = served.invite()["invitation"]
    result = ce("agent", invitation, "--name", "g", "gemini",
                env={**os.environ, "PATH": str(Path(ce_path()).parent)})
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "@google/gemini-cli" in lines[0], result.stderr


async def test_an_unanswered_permission_request_returns_cancelled_after_its_expiry(
    tmp_path: Path, config_home: Path,
) -> None:
    """Fail closed: the room's clock is injected and moved past `expires_at`; the agent gets
    `cancelled` (a real `ce agent` and the scripted agent against an in-process room)."""
    import trio

    from commonroom.protocol.timefmt import ManualClock
    from tests.service.conftest import start_room

    doc = tmp_path / "idea.md"
    doc.write_text((Path(__file__).parents[2] / "samples" / "idea.md").read_text())
    clock = ManualClock(datetime.now(UTC))
    log = tmp_path / "acp.log"

    def entries(event: str) -> list[dict[str, Any]]:
        rows = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        return [row for row in rows if row.get("event") == event]

    async def until(check: Callable[[], Any], what: str) -> Any:
        with trio.fail_after(BOUND):
            while not (found := check()):
                await trio.sleep(0.05)
        return found

    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, clock=clock)
        host = live.host_session
        invite = json.loads((await live.call("POST", "/workspace/invite", host, {})).body)
        process = await trio.lowlevel.open_process(
            [ce_path(), "agent", invite["invitation"], "--name", "bot", "--", sys.executable,
             str(ACP_AGENT)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={**os.environ, "ACP_AGENT_LOG": str(log)})
        try:
            await until(lambda: entries("tools"), "the agent started")
            bot = await _participant_named(live, host, "bot")
            while bot.get("runtime") is None:
                await trio.sleep(0.05)
                bot = await _participant_named(live, host, "bot")
            await live.call("POST", "/workspace/message", host,
                            {"text": "please ask permission", "to": [bot["participant_id"]]})

            async def pending() -> list[Any]:
                answer = await live.call("GET", "/workspace/permissions", host)
                found: list[Any] = json.loads(answer.body)["permissions"]
                return found

            with trio.fail_after(BOUND):
                while not await pending():
                    await trio.sleep(0.05)
            clock.advance(seconds=299)
            assert await pending()  # not yet
            assert not entries("permission")
            clock.advance(seconds=2)
            assert await pending() == []  # this read ran the expiry: `permission.expired`
            outcome = await until(lambda: entries("permission"), "the agent got an answer")
            assert outcome == [{"event": "permission", "outcome": "cancelled"}]
        finally:
            process.send_signal(signal.SIGINT)
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            for row in entries("initialize"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(row["pid"]), signal.SIGKILL)
            live.stop.set()


async def _participant_named(live: Any, host: str, name: str) -> dict[str, Any]:
    answer = await live.call("GET", "/workspace/participants", host)
    found: dict[str, Any] = next(p for p in json.loads(answer.body)["participants"]
                                 if p["name"] == name)
    return found


def test_exec_runs_the_command_once_per_wake_and_posts_its_stdout_to_whoever_woke_it(
    served: Room, tmp_path: Path,
) -> None:
    script = tmp_path / "headless.py"
    script.write_text("import sys\nprompt = sys.stdin.read()\n"
                      "print('heard: ' + prompt.splitlines()[-1].strip('> '))\n")
    invitation = served.invite()["invitation"]
    err = (tmp_path / "exec.err").open("wb")
    process = subprocess.Popen(
        [ce_path(), "agent", invitation, "--name", "bot", "--exec", "--", sys.executable,
         str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        def bot() -> dict[str, Any] | None:
            parts = served.ok("GET", "/workspace/participants", served.host_session)
            return next((p for p in parts["participants"] if p["name"] == "bot"
                         and (p.get("runtime") or {}).get("state") == "idle"), None)

        me = eventually(bot, "the exec runtime is in the room")
        assert me["runtime"]["harness"] == "exec:headless"
        _say(served, "what is the plan?", "bot")

        def answers() -> list[dict[str, Any]]:
            rows = served.ok("GET", "/workspace/messages", served.host_session)["messages"]
            return [m for m in rows if m["participant_id"] == me["participant_id"]]

        posted = eventually(answers, "the command's stdout came back as room text")
        host_id = next(p["participant_id"] for p in served.ok(
            "GET", "/workspace/participants", served.host_session)["participants"]
            if "*" in p["capabilities"])
        assert posted[0]["text"] == "heard: what is the plan?"
        assert posted[0]["to"] == [host_id]
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(15)
        err.close()


def test_an_interrupted_turn_withdraws_its_pending_permission_request(
    served: Room, bot: ResidentAgent,
) -> None:
    _say(served, "please ask permission", "bot")
    eventually(lambda: served.ok("GET", "/workspace/permissions", served.host_session)
               ["permissions"], "the permission request reached the room")
    # The host interrupts a turn it sees running (the report may follow the request).
    eventually(lambda: bot.runtime()["state"] == "running", "the runtime reports its turn")
    result = ce("interrupt", str(served.doc), "bot")
    assert result.returncode == 0, result.stderr
    outcome = eventually(lambda: bot.entries("permission"), "the agent got an answer")
    assert outcome == [{"event": "permission", "outcome": "cancelled"}]
    withdrawn = eventually(lambda: served.ok(
        "GET", "/workspace/permissions?status=withdrawn", served.host_session)["permissions"],
        "the card went away: nothing waits for it")
    assert len(withdrawn) == 1
    assert served.ok("GET", "/workspace/permissions", served.host_session)["permissions"] == []
