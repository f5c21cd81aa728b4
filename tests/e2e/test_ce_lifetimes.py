"""How long-running `ce` commands end, and what they show other users, on real processes.

- Started the way a non-interactive shell's `&` starts them (SIGINT ignored),
  `ce observe`, `ce join`'s hold, `ce wait` and `ce mcp` still stop on SIGINT
  and on SIGTERM, with their documented exit status.
- `ce observe` against a room that goes silent (a half-open connection)
  reconnects from the last event it printed; `ce mcp` re-opens `GET /mcp`.
- A `ce observe` started the documented way has no bearer in
  `/proc/PID/cmdline` (issue 24 item 12), and neither has `ce join -`.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import STOP_TIMEOUT, RoomProcess, ce_ok, ce_path
from tests.silent_room import SilentRoom, invitation_for

pytestmark = pytest.mark.e2e

READY_TIMEOUT = 20.0


class Background:
    """`ce ARGS` started as `sh -c "trap '' INT; exec ce ARGS"`: SIGINT ignored, as `&` does."""

    def __init__(self, *args: str, env: dict[str, str] | None = None,
                 stdin: str | None = None) -> None:
        command = "trap '' INT; exec " + shlex.join([ce_path(), *args])
        self.proc = subprocess.Popen(
            ["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdin is not None
        if stdin is not None:
            self.proc.stdin.write(stdin)
            self.proc.stdin.flush()  # stdin stays open: `ce mcp` ends at EOF
        self.out: queue.Queue[str | None] = queue.Queue()
        self.err: list[str | None] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out.put),
                         daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err.append),
                         daemon=True).start()

    @staticmethod
    def _read(pipe: Any, put: Any) -> None:
        for line in pipe:
            put(line)
        put(None)

    def line(self, timeout: float = READY_TIMEOUT) -> str:
        try:
            line = self.out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output in {timeout} s; stderr: {self.stderr()}") from None
        assert line is not None, f"exited: {self.stderr()}"
        return line

    def stderr(self) -> str:
        return "".join(line for line in self.err if line is not None)

    def signals(self, field: str) -> int:
        for row in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if row.startswith(f"{field}:"):
                return int(row.split()[1], 16)
        raise AssertionError(f"no {field} in /proc/{self.proc.pid}/status")

    def wait_until_it_catches(self, *wanted: signal.Signals) -> None:
        """Until the process has its own handler for `wanted` (its trio signal receiver is up)."""
        mask = sum(1 << (signum - 1) for signum in wanted)
        deadline = time.monotonic() + READY_TIMEOUT
        while self.signals("SigCgt") & mask != mask:
            assert self.proc.poll() is None, f"exited: {self.stderr()}"
            assert time.monotonic() < deadline, "the command never installed its signal receiver"
            time.sleep(0.02)

    def stop(self, signum: signal.Signals) -> int:
        self.proc.send_signal(signum)
        try:
            return self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{signum.name} did not stop it within {STOP_TIMEOUT} s") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdin is not None
        self.proc.stdin.close()


def stops(args: list[str], signum: signal.Signals, expected: int, **kwargs: Any) -> None:
    command = Background(*args, **kwargs)
    try:
        command.wait_until_it_catches(signal.SIGINT, signal.SIGTERM)
        assert command.stop(signum) == expected, command.err
        assert not any("Traceback" in str(line) for line in command.err)
    finally:
        command.close()


def joined(doc: Path, name: str) -> dict[str, Any]:
    invitation = ce_ok("invite", str(doc))["invitation"]
    answer: dict[str, Any] = ce_ok("join", invitation, "--name", name, "--no-hold")
    answer["invitation"] = invitation
    return answer


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_observe_and_join_stop_on_a_signal_they_inherited_ignored(
    room: RoomProcess, doc: Path, signum: signal.Signals,
) -> None:
    joined(doc, "watcher")  # the profile `ce observe` uses
    stops(["observe", "--json"], signum, 0)
    invitation = ce_ok("invite", str(doc))["invitation"]
    stops(["join", invitation, "--name", "holder", "--json"], signum, 0)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_wait_and_mcp_stop_on_a_signal_they_inherited_ignored(
    room: RoomProcess, doc: Path, signum: signal.Signals,
) -> None:
    joined(doc, "author")
    ce_ok("read", "Risks")
    proposal = subprocess.run([ce_path(), "propose", "Risks", "-"], input="## Risks\n\nNone.\n\n",
                              capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    stops(["wait", proposal], signum, 130)  # interrupted: the documented 130
    invitation = ce_ok("invite", str(doc))["invitation"]
    stops(["mcp", invitation, "--name", "bridge"], signum, 0, stdin="")


def test_observe_reconnects_after_the_room_goes_silent() -> None:
    room = SilentRoom([[1], [2]])
    env = {**os.environ, "CE_SESSION": "ses_watcher", "CE_TIMEOUTS": "silence=1"}
    watcher = Background("observe", invitation_for(room.port), "--json", env=env)
    try:
        first, second = json.loads(watcher.line()), json.loads(watcher.line(10))
        assert (first["event_id"], second["event_id"]) == (1, 2)
        assert room.last_event_ids() == [None, "1"]
        # Said on stderr before the reconnection (read by another thread: wait for it).
        deadline = time.monotonic() + READY_TIMEOUT
        while not watcher.err and time.monotonic() < deadline:
            time.sleep(0.02)
        assert watcher.err[0] == ("note: the room sent nothing for 1 seconds; reconnecting in"
                                  " 0.05 s (from event 1)\n")
        watcher.wait_until_it_catches(signal.SIGINT)
        assert watcher.stop(signal.SIGINT) == 0
    finally:
        watcher.close()
        room.close()


def test_mcp_reopens_its_notification_stream_after_the_room_goes_silent() -> None:
    room = SilentRoom([[1], [2]])
    env = {**os.environ, "CE_SESSION": "ses_bridge", "CE_TIMEOUTS": "silence=1"}
    bridge = Background("mcp", invitation_for(room.port), "--name", "bridge", env=env, stdin="")
    try:
        first, second = json.loads(bridge.line()), json.loads(bridge.line(10))
        assert (first["event_id"], second["event_id"]) == (1, 2)  # the stream's messages, as sent
        assert [request.split(b" ", 2)[:2] for request in room.requests] == [[b"GET", b"/mcp"]] * 2
        assert room.last_event_ids() == [None, None]  # the room does not replay MCP notifications
        bridge.wait_until_it_catches(signal.SIGINT)
        assert bridge.stop(signal.SIGINT) == 0
    finally:
        bridge.close()
        room.close()


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_no_bearer_in_the_process_list(room: RoomProcess, doc: Path) -> None:
    session = joined(doc, "watcher")
    secret_bits = (session["session_id"], "ses_", "commonroom://join/",
                   session["invitation"].rsplit("/", 1)[1][:24])
    watcher = Background("observe", "--since", "0")  # the README's way: the saved profile
    holder = None
    try:
        assert json.loads(watcher.line())["type"] == "workspace.created"
        seen = cmdline(watcher.proc.pid)
        assert "observe" in seen and not any(bit in seen for bit in secret_bits), seen
        # The invitation can come on stdin too, so a holding `ce join` shows none either.
        invitation = ce_ok("invite", str(doc))["invitation"]
        holder = Background("join", "-", "--name", "holder", "--json", stdin=invitation + "\n")
        assert json.loads(holder.line())["name"] == "holder"
        seen = cmdline(holder.proc.pid)
        assert "commonroom://join/" not in seen and "ses_" not in seen, seen
        assert not any("warning" in str(line) for line in watcher.err + holder.err)
    finally:
        watcher.close()
        if holder is not None:
            holder.close()
