"""Real `ce` processes: a room started with `ce serve --json`, and one-shot commands.

Every process a test starts is stopped by the test: `RoomProcess.stop()`
sends SIGINT and waits (SIGKILL after 5 s), and the `room` fixture always
calls it. One-shot commands run with `subprocess.run(..., timeout=...)`.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "idea.md"
READY_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0
CALL_TIMEOUT = 30.0


def ce_path() -> str:
    beside = Path(sys.executable).parent / "ce"
    if beside.exists():
        return str(beside)
    found = shutil.which("ce")
    if found is None:
        pytest.skip("the `ce` console script is not installed (pip install -e .)")
    return found


class RoomProcess:
    """A `ce serve` (or `ce FILE`) subprocess; stdout is read line by line in a thread."""

    def __init__(self, args: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self.args = args
        self.stderr_path = cwd / f".ce-serve-{os.getpid()}-{id(self)}.err"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [ce_path(), *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=dict(env) if env is not None else None,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout_lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.ready: dict[str, Any] = {}

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout_lines.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def next_line(self, timeout: float = READY_TIMEOUT) -> str | None:
        """The next stdout line; None at EOF."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"ce {' '.join(self.args)}: no output within {timeout} s; stderr:\n{self.stderr()}"
            ) from None

    def wait_ready_json(self) -> dict[str, Any]:
        line = self.next_line()
        assert line is not None, f"the room exited before it was ready:\n{self.stderr()}"
        self.ready = json.loads(line)
        return self.ready

    def wait_for_line(self, prefix: str, timeout: float = READY_TIMEOUT) -> str:
        while True:
            line = self.next_line(timeout)
            assert line is not None, f"no line starting with {prefix!r}:\n{self.stderr()}"
            if line.startswith(prefix):
                return line.strip()

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> int:
        """SIGINT, as Ctrl-C; SIGKILL if it does not exit within 5 s. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(STOP_TIMEOUT)
        self._stderr.close()
        return self.proc.returncode

    def close(self) -> None:
        self.stop()
        self.stderr_path.unlink(missing_ok=True)


def start_room(doc: Path, *extra: str, env: Mapping[str, str] | None = None) -> RoomProcess:
    """`ce serve DOC --json --port-owner 0 EXTRA...`, waited until its ready line."""
    room = RoomProcess(["serve", str(doc), "--json", "--port-owner", "0", *extra], doc.parent, env)
    try:
        room.wait_ready_json()
    except BaseException:
        room.close()
        raise
    return room


def ce(*args: str, timeout: float = CALL_TIMEOUT, env: Mapping[str, str] | None = None,
       cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [ce_path(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def ce_ok(*args: str) -> Any:
    """Run `ce ARGS --json`, expect exit 0, return the parsed JSON answer."""
    result = ce(*args, "--json")
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def ce_err(*args: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run `ce ARGS --json`, expect a non-zero exit, return the error object printed."""
    result = ce(*args, "--json")
    assert result.returncode != 0, (args, result.stdout)
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    error = json.loads(lines[0])
    assert isinstance(error.get("error"), str) and "message" in error, error
    return error, result


@pytest.fixture(autouse=True)
def config_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every `ce` a test starts keeps its session profiles in a temp folder, never in ~."""
    home = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for name in ("CE_PROFILE", "CE_INVITATION", "CE_SESSION"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "idea.md"
    shutil.copyfile(SAMPLE, path)
    return path


@pytest.fixture
def room(doc: Path) -> Iterator[RoomProcess]:
    process = start_room(doc, "--port-ingress", "0")
    try:
        yield process
    finally:
        process.close()
