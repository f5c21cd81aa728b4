"""Start `ce serve` many times without paying its imports each time: fork it from one process.

A `ce serve` start costs about a second of CPU, nearly all of it imports (the attrs records,
quart, hypercorn, trio); the crash harness restarts the room after every kill, so a run of a
hundred kills spends most of its time importing. The fork server imports `ce` and the room
service once; for each start it forks a child that takes the start's arguments, environment,
working folder and standard streams and runs `ce`'s own entry point, then leaves through the
interpreter's normal exit. The child is a process of its own: its listeners, its SQLite
connection, its document writes and its signal handlers are all made after the fork, and a
SIGKILL stops it where it stands, as it stops an exec'd `ce serve`. Only the imports are shared.

The one thing an import decides: `commonroom.store.faults` reads `COMMONROOM_FAULT` when it is
imported, so the child reloads it once the start's environment is in place (and checks the
hook is armed as asked).

    server = ForkServer()                      # one process, imports once (~1 s)
    proc = server.spawn([ce, "serve", ...], env=..., cwd=..., stdout=PIPE_WRITE_FD, stderr=fd)
    proc.stdout / proc.pid / proc.poll() / proc.wait(t) / proc.send_signal(s) / proc.returncode
    server.close()                             # SIGKILLs any child still running, then exits

The harness talks to the server over a SOCK_SEQPACKET socket pair: one JSON message and four
file descriptors per start (stdin, stdout, stderr and the write end of a status pipe); the
server answers with the child's pid and, when it reaps the child, writes its exit code
(Popen's convention: -N for signal N) to that status pipe and closes it. A server whose harness
goes away (end of file on the socket) kills its children and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from typing import IO, Any

MESSAGE_BYTES = 1 << 20
START_TIMEOUT = 60.0


# ------------------------------------------------------------------ the harness's side


class ForkedProcess:
    """The part of `subprocess.Popen` the crash harness uses, for a child of the fork server."""

    def __init__(self, pid: int, stdout: IO[bytes] | None, status_fd: int) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._status = os.fdopen(status_fd, "rb", buffering=0)
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        return self._collect(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"forked ce (pid {self.pid})", timeout or 0.0)
        return code

    def send_signal(self, sig: int) -> None:
        # The server reaps the child only after it died, and reports it on the status pipe:
        # while no code has come, the pid is still this child's (alive or a zombie).
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _collect(self, timeout: float | None) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            readable, _, _ = select.select([self._status], [], [], timeout)
            if not readable:
                return None
            line = self._status.read(64)
            self._status.close()
            if not line:
                raise RuntimeError(f"the fork server went away before child {self.pid} ended")
            self.returncode = int(line.decode().strip())
            return self.returncode


class ForkServer:
    """One server process (a child of this one) that forks `ce` on request."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._socket = ours
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), str(theirs.fileno())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
        )
        theirs.close()
        ready = self._socket.recv(MESSAGE_BYTES)  # after its imports
        if json.loads(ready or b"{}").get("ready") is not True:
            self.close()
            raise RuntimeError(f"the fork server did not start: {ready!r}")

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: str, stdout: int,
              stderr: int, stdout_reader: IO[bytes] | None = None) -> ForkedProcess:
        """Fork `argv` (`ce` and its arguments); `stdout` and `stderr` are fds it gets as its own."""
        status_read, status_write = os.pipe()
        with open(os.devnull, "rb") as stdin:
            fds = [stdin.fileno(), stdout, stderr, status_write]
            message = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()
            try:
                with self._lock:
                    socket.send_fds(self._socket, [message], fds)
                    self._socket.settimeout(START_TIMEOUT)
                    answer = json.loads(self._socket.recv(MESSAGE_BYTES) or b"{}")
            finally:
                os.close(status_write)
        if "pid" not in answer:
            os.close(status_read)
            raise RuntimeError(f"the fork server refused the start: {answer}")
        return ForkedProcess(int(answer["pid"]), stdout_reader, status_read)

    def close(self) -> None:
        """End the server: it SIGKILLs any child still running, reaps them and exits."""
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ------------------------------------------------------------------ the server


def _serve(control: socket.socket) -> dict[str, Any] | None:
    """Fork on each request. Returns in a child only (its start); the server exits here."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select below
    status_fds: dict[int, int] = {}
    control.send(json.dumps({"ready": True}).encode())
    try:
        while True:
            readable, _, _ = select.select([control, wake_read], [], [])
            if wake_read in readable:
                os.read(wake_read, 4096)
                _reap(status_fds, block=False)
            if control not in readable:
                continue
            message, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 4)
            if not message:
                return None  # the harness went away
            start = json.loads(message)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in status_fds.values():
                    os.close(fd)
                os.close(wake_read)
                os.close(wake_write)
                control.close()
                start["fds"] = fds
                return dict(start)
            for fd in fds[:3]:
                os.close(fd)
            status_fds[pid] = fds[3]
            control.send(json.dumps({"pid": pid}).encode())
    finally:
        if os.getpid() == _SERVER_PID:
            for pid in list(status_fds):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _reap(status_fds, block=True)


def _reap(status_fds: dict[int, int], *, block: bool) -> None:
    while status_fds:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status_fds.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, f"{os.waitstatus_to_exitcode(status)}\n".encode())
            os.close(fd)


def _become(start: dict[str, Any]) -> int:
    """In the forked child: take the start's streams, folder, environment and arguments, run `ce`."""
    stdin, stdout, stderr = start["fds"][:3]
    os.close(start["fds"][3])
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(start["cwd"])
    os.environ.clear()
    os.environ.update(start["env"])
    import importlib

    from commonroom.store import faults

    importlib.reload(faults)  # COMMONROOM_FAULT is read at import: read this start's value
    armed = os.environ.get(faults.ENV)
    assert faults._target == (faults.parse(armed) if armed else None)
    sys.argv = ["ce", *start["argv"][1:]]
    code = _ENTRY()
    return code if isinstance(code, int) else 0


def _load_entry() -> Any:
    from importlib.metadata import entry_points

    (entry,) = entry_points(group="console_scripts", name="ce")
    return entry.load()


_SERVER_PID = os.getpid()
_ENTRY: Any = None

if __name__ == "__main__":
    _ENTRY = _load_entry()
    import commonroom.service  # noqa: F401  (the room `ce serve` opens: the imports to share)

    if threading.active_count() != 1:  # a fork copies only the forking thread
        raise SystemExit("the fork server must not run threads before it forks")
    child = _serve(socket.socket(fileno=int(sys.argv[1])))
    if child is None:
        sys.exit(0)
    sys.exit(_become(child))
