"""What every agent verb shares: the session options and one call as that session.

`agent_verbs.py`, `conversation.py`, `agent_tasks.py`, `host_room.py` and `provenance.py`
all call through here, so no verb module imports another to reach them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from commonroom.cli import profiles, runtime
from commonroom.cli.options import JSON_HELP

F = TypeVar("F", bound=Callable[..., Any])


def session_options(fn: F) -> F:
    """`--profile`, `--invitation`, `--session` and `--json`, on every agent verb."""
    for decorator in reversed((
        click.option("--profile", metavar="NAME", shell_complete=_complete_profiles,
                     help="The saved session to use (default: CE_PROFILE, else the last joined)."),
        click.option("--invitation", metavar="URI", help="With --session: use this session,"
                     " not a profile."),
        click.option("--session", metavar="ID|-", help="With --invitation: `-` reads the session"
                     " id from stdin (an ID here is visible to other users; CE_SESSION is not)."),
        click.option("--json", "json_mode", is_flag=True, help=JSON_HELP),
    )):
        fn = decorator(fn)
    return fn


def call_as(who: profiles.Profile, op: str, params: dict[str, Any] | None = None, *,
            timeout: float | None = None) -> Any:
    """Operation `op` as session `who`, on a connection of its own (`Connection: close`),
    within the wire's timeouts; its wire JSON (a refusal raises the client's error)."""
    import dataclasses

    from commonroom.client.routes import ROUTES
    from commonroom.wire.sync import Connection

    route = ROUTES[op]
    bounds = runtime.timeouts()
    if timeout is not None:
        bounds = dataclasses.replace(bounds, connect=timeout, call=timeout)
    return Connection(who.hint, timeouts=bounds).call(route.method, route.path, params,
                                                      bearer=who.session)


def _complete_profiles(ctx: click.Context, param: click.Parameter, incomplete: str
                       ) -> list[str]:
    try:
        return [p.name for p in profiles.all_profiles()
                if p.name is not None and p.name.startswith(incomplete)]
    except Exception:  # completion must never print a traceback
        return []


__all__ = ["call_as", "session_options"]
