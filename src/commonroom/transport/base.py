"""The transport plugin interface.

Theory of operation: the room serves its session ingress (HTTP/1.1) on
127.0.0.1. A plugin's `run()` makes that listener reachable some way, reports
a `TransportHint` through `task_status.started()` once it is, and then runs
until it is cancelled; the room puts the hint into invitations. A client
(`ce`) reads the hint back out of an invitation and calls the plugin's
`dial()`, which returns a plain `trio.abc.Stream` to the ingress; the byte
client speaks HTTP over it.

Rules a plugin keeps:

- it carries bytes only: no capabilities, no sessions, no workspace access;
- every failure is `CommonroomError("transport_unavailable", ...)`, and the
  message never contains an address or a port (addresses are secrets: they
  never enter logs, errors or diagnostics);
- every child process or listener it starts is owned by the task that
  started it and is gone when that task ends, cancelled or not.
"""

from __future__ import annotations

import abc
import ipaddress
import os
from typing import Any, ClassVar

import trio

from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint


def transport_unavailable(message: str, details: dict[str, Any] | None = None) -> CommonroomError:
    """The one error a transport raises. Keep addresses out of `message` and `details`."""
    return CommonroomError("transport_unavailable", message, details)


def is_loopback(address: str) -> bool:
    """True for `localhost` and any loopback IP literal (127.0.0.0/8, ::1)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class TransportPlugin(abc.ABC):
    """Exposes the ingress (`run`) and dials it from a hint (`dial`).

    Plugins are instantiated without arguments by the room.
    """

    name: ClassVar[str]
    encrypted: ClassVar[bool]
    mode: ClassVar[str]  # "private" | "local"

    @abc.abstractmethod
    async def run(
        self,
        ingress_host: str,
        ingress_port: int,
        *,
        task_status: trio.TaskStatus[TransportHint] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Expose the ingress; call `task_status.started(hint)` once reachable.

        Runs until cancelled. Raises `transport_unavailable` if it cannot
        start, or if the underlying program exits (before or after started).
        """

    @classmethod
    @abc.abstractmethod
    async def dial(cls, hint: TransportHint) -> trio.abc.Stream:
        """Client side: open a byte stream to the room described by `hint`.

        Raises `transport_unavailable` on failure. The caller owns the stream
        and must `aclose()` it.
        """


async def open_loopback_tcp(address: str | None, port: int | None, what: str) -> trio.SocketStream:
    """TCP to a loopback endpoint, for the plugins whose hint is a local socket."""
    if address is None or port is None:
        raise transport_unavailable(f"the {what} transport hint has no address and port")
    if not is_loopback(address):
        raise transport_unavailable(f"the {what} transport only dials loopback addresses")
    try:
        return await trio.open_tcp_stream(address, port)
    except OSError as exc:
        raise transport_unavailable(
            f"cannot connect to the room over {what}: {os_reason(exc)}"
        ) from None


def os_reason(exc: BaseException) -> str:
    """A short reason for an OS error, without the address trio puts in its messages."""
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if isinstance(current, OSError) and current.errno is not None:
            # os.strerror, not .strerror: trio puts the address into the latter.
            return os.strerror(current.errno)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        if current.__cause__ is not None:
            pending.append(current.__cause__)
    return "connection failed"
