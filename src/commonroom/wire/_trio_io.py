"""The trio side of the wire's I/O: a transport's byte stream, the clock, sleeping.

`wire.aio` does all its I/O through this module and `wire.sync` (generated from
it) through `_socket_io`, which has the same names. Everything that differs
between trio and blocking code is here, so the drivers are one text.

Failures leave as the wire's errors (`http11.ConnectionLost`, `http11.TimedOut`);
messages never carry an address.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

import trio

from commonroom.protocol.errors import CommonroomError
from commonroom.wire import errors, http11

T = TypeVar("T")

# What a broken connection looks like from trio.
_BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class Stream:
    """A `trio.abc.Stream` (whatever a transport plugin dialled) as the drivers use it."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.raw = stream

    async def send_all(self, data: bytes, deadline: float) -> None:
        with trio.move_on_at(deadline) as scope:
            try:
                await self.raw.send_all(data)
            except _BROKEN as exc:
                raise http11.ConnectionLost(f"the connection to the room failed: {reason(exc)}") from None
        if scope.cancelled_caught:
            raise http11.TimedOut("the room took nothing in time")

    async def receive(self, deadline: float, silent: str) -> bytes:
        """Some bytes (b"" at the end of the stream); `TimedOut(silent)` past `deadline`."""
        with trio.move_on_at(deadline) as scope:
            try:
                return bytes(await self.raw.receive_some(http11.RECEIVE_SIZE))
            except _BROKEN as exc:
                raise http11.ConnectionLost(f"the connection to the room failed: {reason(exc)}") from None
        assert scope.cancelled_caught
        raise http11.TimedOut(silent)

    async def send_while(self, payload: bytes, deadline: float, read: Callable[[], Awaitable[T]]) -> T:
        """Send `payload` while `read()` reads the answer; `read()`'s result.

        A room may answer early (a 413 from the head alone) and never read the
        rest, so the send runs beside the read and is dropped once the read is
        done. When both fail, the send's failure is the one that explains it
        (unless the room sent something that is not HTTP).
        """
        sent: list[http11.WireFailure] = []
        outcome: T | errors.CommonroomError

        async def send() -> None:
            try:
                await self.send_all(payload, deadline)
            except http11.WireFailure as failure:
                sent.append(failure)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            try:
                outcome = await read()
            except errors.CommonroomError as failure:  # kept out of the nursery's exception group
                outcome = failure
            nursery.cancel_scope.cancel()
        if isinstance(outcome, errors.CommonroomError):
            raise http11.explain(sent[0] if sent else None, outcome)
        return outcome

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.raw)


Streamlike = Stream | trio.abc.Stream


def wrap(stream: Streamlike) -> Stream:
    return stream if isinstance(stream, Stream) else Stream(stream)


async def connect(hint: Mapping[str, Any], timeout: float) -> Stream:
    """A stream to the room the hint describes, dialled by the hint's transport plugin."""
    from commonroom.wire.calls import transport_hint

    plugin = _plugin(str(hint.get("type")))
    with trio.move_on_after(timeout) as scope:
        try:
            return Stream(await plugin.dial(transport_hint(hint)))
        except CommonroomError as error:
            raise errors.from_protocol(error) from None
    assert scope.cancelled_caught
    raise http11.TimedOut(f"the room could not be reached within {timeout:g} seconds")


_PLUGINS: dict[str, Any] = {}


def _plugin(name: str) -> Any:
    # An entry-point scan per dial costs milliseconds; a plugin class is looked up once.
    if name not in _PLUGINS:
        from commonroom.transport.registry import load

        try:
            _PLUGINS[name] = load(name)
        except CommonroomError as error:
            raise errors.from_protocol(error) from None
    return _PLUGINS[name]


def reason(exc: BaseException) -> str:
    """Why a connection failed, without its address."""
    from commonroom.transport.base import os_reason

    if isinstance(exc, trio.ClosedResourceError):
        return "it was already closed"
    if isinstance(exc, OSError):
        return str(os_reason(exc))
    if exc.__cause__ is not None:
        return str(os_reason(exc.__cause__))
    return str(exc) or "connection broken"


def now() -> float:
    return trio.current_time()


def after(seconds: float | None) -> float:
    """The deadline `seconds` from now (never, for None)."""
    return math.inf if seconds is None else trio.current_time() + seconds


async def sleep(seconds: float) -> None:
    await trio.sleep(seconds)


class Guard:
    """Guards the few statements that hand a kept connection over (no await inside).

    trio runs one task at a time, so nothing is needed; `_socket_io.Guard` is a lock.
    """

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None
