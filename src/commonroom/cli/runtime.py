"""How a `ce` command runs: the wire's timeouts, and a long-running command's end on a signal.

Timeouts: every command uses the one set in `wire/timeouts.py`; `CE_TIMEOUTS`
(`call=30,silence=20`) overrides them, for slow links and for tests that make
a room go silent.

Stopping: the long-running commands (`ce observe`, `ce join`'s hold, `ce wait`,
`ce mcp`) run under trio inside `until_stopped`, which stops them on SIGINT or
SIGTERM through an explicit trio signal receiver. That matters because a
non-interactive shell starts a background job (`ce observe &`) with SIGINT
ignored, and Python then gives no KeyboardInterrupt at all; the receiver
installs its own handler whatever the inherited disposition. A signal cancels
the work and leaves as KeyboardInterrupt, which `output.guarded` turns into
the command's documented exit status. `ce serve` does the same in
`http.serving.wait_for_stop_signal`.

No trio at import: the one-shot verbs import this module for `timeouts()`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

import click

from commonroom.wire.timeouts import DEFAULT, Timeouts

T = TypeVar("T")

ENV_TIMEOUTS: Final = "CE_TIMEOUTS"


def timeouts() -> Timeouts:
    """The wire's timeouts, with the overrides of `CE_TIMEOUTS`."""
    text = os.environ.get(ENV_TIMEOUTS, "")
    if not text.strip():
        return DEFAULT
    try:
        return Timeouts.parse(text)
    except ValueError as exc:
        raise click.UsageError(f"{ENV_TIMEOUTS}: {exc}") from None


async def until_stopped(work: Callable[[], Awaitable[T]]) -> T:
    """`await work()`, unless SIGINT or SIGTERM comes first: then KeyboardInterrupt."""
    import signal

    import trio

    stopped = False
    result: list[T] = []
    failure: list[Exception] = []
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal stopped
                async for _ in signals:
                    stopped = True
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch)
            try:
                result.append(await work())
            except Exception as exc:  # raised below, not inside the nursery's exception group
                failure.append(exc)
            nursery.cancel_scope.cancel()
    if failure:
        raise failure[0]
    if stopped or not result:
        raise KeyboardInterrupt
    return result[0]


def run_plan(hint: Mapping[str, Any], session: str | None, plan: Any,
             on_emit: Callable[[Any], None] | None = None) -> Any:
    """Run a wire plan against the room under trio until it ends or a signal stops it."""
    import trio

    from commonroom.client.routes import ROUTES
    from commonroom.wire import aio

    chosen = timeouts()

    async def work() -> Any:
        runner = aio.Runner(aio.Connection(hint, timeouts=chosen), bearer=session, routes=ROUTES)
        return await runner.run(plan, on_emit)

    return trio.run(until_stopped, work)


def note_reconnecting(item: Any) -> None:
    """A wait's `on_emit`: say on stderr that the room is out of reach and when it is tried again."""
    from commonroom.cli.output import echo
    from commonroom.wire import plans

    if isinstance(item, plans.Reconnecting):
        echo(f"note: {item.reason}; reconnecting in {item.delay:g} s (still waiting)", err=True)
