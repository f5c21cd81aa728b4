"""Real `ce` processes and plain HTTP to them: the helpers of every test that runs `ce`.

A room started with `ce serve --json` (`start_room`, `RoomProcess`; the `room`
fixture), one as a `Room` with the host's bearer and calls as anyone (the
`served` fixture), one-shot commands (`ce`, `ce_ok`, `ce_err`), a command at a
pseudo-terminal (`at_terminal`), JSON over HTTP to a listener (`Http`,
`http_json`), a fake `tailcat` on PATH (`fake_tailcat_env`). tests/browser and
tests/security import these fixtures into their own conftest.

Every process a test starts is stopped by the test: `RoomProcess.stop()`
sends SIGINT and waits (SIGKILL after 5 s), and the `room` and `served`
fixtures always call it. One-shot commands run with `subprocess.run(...,
timeout=...)`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from commonroom.credentials import read_credentials

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


def start_room(doc: Path, *extra: str, env: Mapping[str, str] | None = None,
               owner_port: str | None = "0") -> RoomProcess:
    """`ce serve DOC --json --port-owner 0 EXTRA...`, waited until its ready line.

    `owner_port=None`: no `--port-owner`, so the room takes the port it kept for this file.
    """
    owner = [] if owner_port is None else ["--port-owner", owner_port]
    room = RoomProcess(["serve", str(doc), "--json", *owner, *extra], doc.parent, env)
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


def at_terminal(args: Sequence[str], steps: Sequence[tuple[str, bytes | Callable[[], bytes]]] = (), *,
                env: Mapping[str, str] | None = None, size: tuple[int, int] | None = None,
                timeout: float = 30.0) -> tuple[int, str]:
    """Run `ce ARGS` with stdin, stdout and stderr on a pseudo-terminal (`size`: columns, rows);
    for each (prompt text, answer) wait for the text, then type the answer (a callable answer is
    called at that moment: something can happen while the prompt waits). Every prompt must
    come. Returns (exit code, everything it printed, escapes kept)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    if size is not None:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    proc = subprocess.Popen([ce_path(), *args], stdin=follower, stdout=follower, stderr=follower,
                            env=dict(env) if env is not None else None, close_fds=True,
                            start_new_session=True)
    os.close(follower)
    out = b""
    seen = 0  # where the next prompt is looked for: a prompt counts once
    pending = list(steps)
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], timeout)
            assert ready, f"no output within {timeout} s: {out!r}"
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
            while pending and pending[0][0].encode() in out[seen:]:
                prompt, answer = pending.pop(0)
                seen = out.index(prompt.encode(), seen) + len(prompt)
                os.write(leader, answer() if callable(answer) else answer)
    finally:
        os.close(leader)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    assert not pending, f"never asked {pending[0][0]!r}: {out!r}"
    return code, out.decode("utf-8", "replace")


def fake_tailcat_env(folder: Path) -> dict[str, str]:
    """This environment with the fake `tailcat` (tests/fixtures/fake_tailcat.py) first on PATH."""
    fake = REPO / "tests" / "fixtures" / "fake_tailcat.py"
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "tailcat"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" "$@"\n')
    launcher.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


class Http:
    """Plain HTTP to one listener of a room: JSON in, (status, JSON, headers) out."""

    def __init__(self, port: int, bearer: str | None = None, *, timeout: float = CALL_TIMEOUT) -> None:
        self.port = port
        self.bearer = bearer
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None,
             headers: Mapping[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
        """The answer's status, its body (parsed JSON, else text; None when empty), headers."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        if self.bearer:
            request.add_header("Authorization", f"Bearer {self.bearer}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with _opener.open(request, timeout=self.timeout) as response:
                raw, status, got = response.read(), response.status, {k.lower(): v for k, v in response.headers.items()}
        except urllib.error.HTTPError as error:
            raw, status, got = error.read(), error.code, {k.lower(): v for k, v in error.headers.items()}
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return status, parsed, got

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer, _ = self.call(method, path, body)
        assert status == 200, (method, path, status, answer)
        return answer


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# No proxy from the environment (the room is on 127.0.0.1), no redirect followed.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def http_json(port: int, method: str, path: str, bearer: str | None = None,
              body: Any = None) -> tuple[int, Any]:
    """One call to the listener on `port`: (status, answer)."""
    status, answer, _ = Http(port, bearer).call(method, path, body)
    return status, answer


class Room:
    """A running `ce serve`: its ports and page link, the host's bearer, calls as anyone.

    `call`/`ok` take the bearer per call (`host_session` for the host); `host` and `agent()`
    are `Http` clients bound to one bearer.
    """

    def __init__(self, process: RoomProcess, doc: Path) -> None:
        self.process = process
        self.doc = doc
        self.port = int(process.ready["ingress_port"])
        self.owner_port = int(process.ready["owner_port"])
        self.url = str(process.ready["human_url"])
        credentials = read_credentials(doc)
        assert credentials is not None
        self.host_session = str(credentials.host_session)
        self.host = Http(self.port, self.host_session)

    def call(self, method: str, path: str, bearer: str | None = None, body: Any = None,
             ) -> tuple[int, Any]:
        return http_json(self.port, method, path, bearer, body)

    def ok(self, method: str, path: str, bearer: str | None = None, body: Any = None) -> Any:
        status, answer = self.call(method, path, bearer, body)
        assert status == 200, (method, path, status, answer)
        return answer

    def invite(self, bearer: str | None = None, **params: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self.ok("POST", "/workspace/invite", bearer or self.host_session,
                                         params)
        return answer

    def join(self, name: str = "agent", capabilities: list[str] | None = None,
             invitation: str | None = None) -> dict[str, Any]:
        if invitation is None:
            params = {} if capabilities is None else {"capabilities": capabilities}
            invitation = self.invite(**params)["invitation"]
        joined: dict[str, Any] = self.ok("POST", "/session/join", None,
                                         {"invite": invitation, "name": name})
        return joined

    def agent(self, name: str = "drafter") -> Http:
        """A new agent (the default invitation) as an `Http` client with its bearer."""
        return Http(self.port, self.join(name)["session_id"])

    def read(self, bearer: str, region: str) -> dict[str, Any]:
        query = urllib.parse.quote(region)
        answer: dict[str, Any] = self.ok("GET", f"/workspace/read?region={query}", bearer)
        return answer

    def version(self) -> int:
        return int(self.host.ok("GET", "/workspace/status")["version"])

    def propose(self, agent: Http, region: str, content: str, summary: str) -> dict[str, Any]:
        answer: dict[str, Any] = agent.ok("POST", "/workspace/propose", {
            "region": region, "base_version": self.version(), "summary": summary, "content": content})
        return answer


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


@contextlib.contextmanager
def serving(doc: Path, *extra: str) -> Iterator[Room]:
    """`ce serve DOC` (any free ports) as a `Room`, stopped on the way out."""
    process = start_room(doc, "--port-ingress", "0", *extra)
    try:
        yield Room(process, doc)
    finally:
        process.close()


@pytest.fixture
def served(doc: Path) -> Iterator[Room]:
    with serving(doc) as room:
        yield room
