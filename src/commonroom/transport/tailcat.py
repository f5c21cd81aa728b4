"""The `tailcat` transport: shells out to an external `tailcat` program.

`tailcat` is any program on PATH that keeps this command-line contract
(commonroom ships none; `tests/fixtures/fake_tailcat.py` is a reference
implementation over plain TCP):

`tailcat serve --target HOST:PORT`
    Makes the TCP endpoint HOST:PORT (always the room's ingress on
    127.0.0.1; an IPv6 HOST is written in brackets) reachable to others.
    Once it accepts connections it prints exactly one line on stdout,
    `READY <address> <port> <encrypted>` (ASCII, space separated, `\\n`
    terminated; `<encrypted>` is `true` or `false`: whether the bytes are
    encrypted between the dialing `tailcat forward` and this endpoint). Then
    it keeps running and forwards every connection it accepts to the target,
    byte for byte in both directions, propagating half-closes. It must print
    READY within 10 s. It exits non-zero when it cannot serve; any exit is
    the end of the transport. It ends on SIGTERM (SIGKILL follows after a
    2 s grace). Nothing else is read from stdout (extra output is
    discarded); stdin is /dev/null and stderr is discarded, because it could
    contain the address.

`tailcat forward -- <address> <port>`
    Connects to the endpoint a `serve` reported and pumps bytes: stdin to the
    connection and the connection to stdout, unbuffered. (`--` ends the
    options, so an address never reaches it as one; it has been checked to
    be a host name or an IP address anyway.) EOF on stdin
    half-closes the connection (it keeps reading); EOF from the connection
    closes stdout and ends the program. It exits 0 after a clean end and
    non-zero when it cannot connect or the connection fails. It ends on
    SIGTERM.

Both run in their own session (process group), so a Ctrl-C at the terminal
reaches the room, which then stops the child itself.

`run()` starts `tailcat serve` as a child of its own task, waits for the
READY line and reports `TransportHint(type="tailcat", encrypted=<from the
line>, mode="private", address=..., port=...)`; if the program is missing,
fails to start, prints something else first, is not ready in time, or exits
at any point, `run()` raises `transport_unavailable` (the message names the
exit status, never the address). Cancelling `run()` terminates the child and
waits for it.

`dial()` starts `tailcat forward <address> <port>` and returns a
`ProcessStream` over its stdin/stdout; `aclose()` terminates the process.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from typing import ClassVar, Final

import trio

from commonroom.protocol.invitation import ADDRESS, TransportHint, check_address
from commonroom.transport.base import TransportPlugin, os_reason, transport_unavailable

PROGRAM: Final = "tailcat"
READY_TIMEOUT: Final = 10.0
GRACE: Final = 2.0
MAX_READY_LINE: Final = 1024


class TailcatTransport(TransportPlugin):
    name: ClassVar[str] = "tailcat"
    encrypted: ClassVar[bool] = True  # the expectation; the hint says what READY said
    mode: ClassVar[str] = "private"

    def __init__(self, *, ready_timeout: float = READY_TIMEOUT, grace: float = GRACE) -> None:
        self.ready_timeout = ready_timeout
        self.grace = grace
        #: The pid of the running `tailcat serve`, or None (for diagnostics and tests).
        self.pid: int | None = None

    async def run(
        self,
        ingress_host: str,
        ingress_port: int,
        *,
        task_status: trio.TaskStatus[TransportHint] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        program = find_program()
        host = f"[{ingress_host}]" if ":" in ingress_host else ingress_host
        process = await spawn([program, "serve", "--target", f"{host}:{ingress_port}"], stdin=False)
        self.pid = process.pid
        try:
            assert process.stdout is not None
            hint = await self._wait_ready(process, process.stdout)
            task_status.started(hint)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, process.stdout)
                await process.wait()
                nursery.cancel_scope.cancel()
            raise transport_unavailable(f"tailcat exited with status {process.returncode}")
        finally:
            await stop_process(process, self.grace)
            self.pid = None

    async def _wait_ready(
        self, process: trio.Process, stdout: trio.abc.ReceiveStream
    ) -> TransportHint:
        buffer = bytearray()
        with trio.move_on_after(self.ready_timeout):
            while b"\n" not in buffer:
                chunk = await stdout.receive_some(MAX_READY_LINE)
                if not chunk:
                    with trio.move_on_after(self.grace):
                        await process.wait()
                    if process.returncode is None:
                        raise transport_unavailable("tailcat closed its output before it was ready")
                    raise transport_unavailable(
                        f"tailcat exited with status {process.returncode} before it was ready"
                    )
                buffer += chunk
                if len(buffer) > MAX_READY_LINE and b"\n" not in buffer:
                    raise transport_unavailable("tailcat printed an over-long first line")
            return parse_ready(bytes(buffer.partition(b"\n")[0]))
        raise transport_unavailable(f"tailcat was not ready within {self.ready_timeout:g} s")

    @classmethod
    async def dial(cls, hint: TransportHint) -> trio.abc.Stream:
        if hint.address is None or hint.port is None:
            raise transport_unavailable("the tailcat transport hint has no address and port")
        check_address(hint.address)  # a hint need not have come through the codec
        program = find_program()
        process = await spawn([program, "forward", "--", hint.address, str(hint.port)], stdin=True)
        return ProcessStream(process)


def parse_ready(line: bytes) -> TransportHint:
    """`READY <address> <port> <true|false>` -> the hint. Errors never quote the line."""
    bad = transport_unavailable("tailcat printed an unexpected first line (expected READY)")
    try:
        text = line.decode("ascii").rstrip("\r")
    except UnicodeDecodeError:
        raise bad from None
    parts = text.split(" ")
    if len(parts) != 4 or parts[0] != "READY" or not parts[1]:
        raise bad
    _, address, port_text, encrypted = parts
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise bad
    if encrypted not in ("true", "false"):
        raise bad
    if ADDRESS.fullmatch(address) is None:
        raise bad  # it goes into every invitation, and onto each client's command line
    return TransportHint(
        type=TailcatTransport.name,
        encrypted=encrypted == "true",
        mode=TailcatTransport.mode,
        address=address,
        port=int(port_text),
    )


def find_program() -> str:
    program = shutil.which(PROGRAM)
    if program is None:
        raise transport_unavailable("the tailcat program is not installed (not found on PATH)")
    return program


async def spawn(command: Sequence[str], *, stdin: bool) -> trio.Process:
    try:
        return await trio.lowlevel.open_process(
            list(command),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise transport_unavailable(f"tailcat cannot be started: {os_reason(exc)}") from None


async def stop_process(process: trio.Process, grace: float) -> None:
    """Close the pipes, SIGTERM, SIGKILL after `grace` seconds, and reap. Never cancelled."""
    with trio.CancelScope(shield=True):
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                await pipe.aclose()
        if process.returncode is None:
            process.terminate()
            with trio.move_on_after(grace):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


class ProcessStream(trio.abc.HalfCloseableStream):
    """A byte stream over a child's stdin (send) and stdout (receive).

    `send_eof()` closes the child's stdin; `aclose()` closes both pipes and
    terminates the child (SIGKILL after a grace), then reaps it. Bytes handed
    to `send_all()` just before `aclose()` may not reach the peer: wait for
    the peer's answer first, as HTTP does. An end of output from a child
    that already exited with a non-zero status is `trio.BrokenResourceError`.
    """

    def __init__(self, process: trio.Process, *, grace: float = GRACE) -> None:
        if process.stdin is None or process.stdout is None:
            raise ValueError("the process needs piped stdin and stdout")
        self._process = process
        self._stdin: trio.abc.SendStream = process.stdin
        self._stdout: trio.abc.ReceiveStream = process.stdout
        self._grace = grace

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stdin.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stdin.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stdin.aclose()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self._stdout.receive_some(max_bytes)
        if not data:
            status = self._process.poll()
            if status is not None and status != 0:
                raise trio.BrokenResourceError(f"tailcat forward exited with status {status}")
        return data

    async def aclose(self) -> None:
        await stop_process(self._process, self._grace)
