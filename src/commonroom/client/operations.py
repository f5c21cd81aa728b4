"""How the clients carry an operation: a `Call`, and the one method each shell provides for it.

Every operation of the table is a method of both clients, generated into `generated.py` by
`tools/gen_client.py` from the operation's spec and parameter record: `BlockingOperations`
(for `Client`, a `BlockingShell`) returns the result record; `AsyncOperations` (for
`AsyncClient`, an `AsyncShell`) is the same methods as coroutines. A method builds a `Call`
and hands it to the shell's `_run`, which says how a call is carried (`sync.py`, `aio.py`).

The shells write by hand only what does more than carry one call: the operations of
`SHELL_METHODS` (joining; a lease as a context manager; leaving, which closes the client;
observing, an event stream run by `wire.plans`) and the waits for a person
(`wait_for_review`, `wait_for_reply`), which repeat a long-poll.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final, Generic, TypeAlias, TypeVar

T = TypeVar("T")
Params: TypeAlias = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Call(Generic[T]):
    """One operation call: its name, result record, parameters, and how long the room may hold it."""

    op: str
    result: type[T]
    params: Params
    hold: float = 0.0


class BlockingShell:
    """What `Client` provides: carry one call, return its record."""

    def _run(self, call: Call[T]) -> T:
        raise NotImplementedError


class AsyncShell:
    """What `AsyncClient` provides: carry one call under trio, return its record."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError


SHELL_METHODS: Final[dict[str, str]] = {
    "session.join": "join",
    "workspace.checkout": "checkout",
    "workspace.leave": "leave",
    "workspace.observe": "observe",
}
"""Operations the shells carry with methods of their own (sessions, leases, streams)."""
NOT_A_METHOD: Final = frozenset({"workspace.observe_ws"})
"""Operations no client method carries: the client observes over SSE."""
