"""`ce serve FILE` (and `ce FILE`, its shorthand): open the room around FILE until a signal.

The host's first command: it runs the room in this process (`service.serve_room`
under trio), prints the owner page's URL and an invitation (or, with `--json`,
one ready object), and stops on Ctrl-C or SIGTERM. Every other host command
acts on the room it opened (`host_call.py`). The service (and with it the
engine and the web stack) is imported inside the command, so `ce --help` does
not load it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from commonroom.cli import output
from commonroom.cli.options import file_argument, json_option
from commonroom.cli.output import echo, emit_json, guarded
from commonroom.protocol.errors import CommonroomError

if TYPE_CHECKING:
    from commonroom.service import Ready

TRANSPORTS: Final = ("loopback", "tailcat", "local")
# `--settle-ms` default and bounds: copies of protocol.limits.SETTLE_MS(_MIN, _MAX),
# which imports attrs (every `ce` start would pay for it); a unit test holds them equal.
SETTLE_MS: Final = 250
SETTLE_MS_MIN: Final = 50
SETTLE_MS_MAX: Final = 5000
# `--max-sessions` default and bound: protocol.limits.MAX_ACTIVE_SESSIONS and
# MAX_SESSIONS_LIMIT, copied for the same reason (the same test holds them equal).
MAX_SESSIONS: Final = 64
MAX_SESSIONS_LIMIT: Final = 4096


@click.command()
@file_argument
@click.option(
    "--transport", type=click.Choice(TRANSPORTS), default="loopback", show_default=True,
    help="How joiners reach the room.",
)
@click.option("--port-owner", type=click.IntRange(0, 65535), default=None,
              help="Owner page port (default: last time's port when free; 0: any).")
@click.option("--port-ingress", type=click.IntRange(0, 65535), default=None,
              help="Session ingress port (default: last time's port when free; 0: any).")
@click.option("--ephemeral", is_flag=True,
              help="Keep the sidecar in a temp folder and delete it on exit.")
@click.option("--human-hold-minutes", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="How long your own edit of a section keeps agents out of it (0: never).")
@click.option("--settle-ms", type=click.IntRange(SETTLE_MS_MIN, SETTLE_MS_MAX), default=SETTLE_MS,
              show_default=True, metavar="N",
              help="Record your save once the file stayed unchanged this long (ms).")
@click.option("--max-sessions", type=click.IntRange(1, MAX_SESSIONS_LIMIT), default=MAX_SESSIONS,
              show_default=True, metavar="N",
              help="Agent and viewer sessions active at once (up to 4096): raise it for a room"
                   " with a large audience, such as many dashboards (8 streams a session).")
@click.option("--git", "git", is_flag=True,
              help="Record every committed version as a git commit of FILE (FILE must be in a"
                   " git work tree; the host's own saves are not committed).")
@click.option("--git-all", "git_all", is_flag=True,
              help="As --git, and commit the host's own saves too.")
@click.option("--mcp-legacy", "mcp_legacy", is_flag=True,
              help="Also serve MCP's initialize eras (2025-03-26/06-18/11-25) on /mcp, for"
                   " clients set up by URL that cannot speak 2026-07-28 (by default they use the"
                   " `ce mcp` bridge).")
@json_option
@guarded(interrupt_exit=0)
def serve(
    file: Path,
    transport: str,
    port_owner: int | None,
    port_ingress: int | None,
    ephemeral: bool,
    human_hold_minutes: float,
    settle_ms: int,
    max_sessions: int,
    git: bool,
    git_all: bool,
    mcp_legacy: bool,
    json_mode: bool,
) -> None:
    """Open the room around FILE until Ctrl-C; print its URL and an invitation."""
    import trio

    from commonroom.service import ServeOptions, serve_room

    options = ServeOptions(
        path=file,
        transport=transport,
        owner_port=port_owner,
        ingress_port=port_ingress,
        ephemeral=ephemeral,
        human_hold_minutes=human_hold_minutes,
        settle_ms=settle_ms,
        max_sessions=max_sessions,
        git=git,
        git_all=git_all,
        mcp_legacy=mcp_legacy,
    )
    ready_printed = False

    def on_ready(ready: Ready) -> None:
        nonlocal ready_printed
        if json_mode:
            for note in ready.notes:
                echo(f"note: {note}", err=True)
            emit_json(ready.ready_json())
        else:
            for line in _ready_lines(file, ready, mcp_legacy=mcp_legacy):
                echo(line)
        ready_printed = True

    try:
        trio.run(functools.partial(serve_room, options, on_ready=on_ready))
    except BaseException as exc:
        if not ready_printed:
            raise
        # The ready line was the one stdout line of `--json`; later failures go to stderr.
        code = _report_late_failure(exc, json_mode)
        if code:
            raise SystemExit(code) from None
    if not json_mode:
        echo("room closed", err=True)


def _ready_lines(file: Path, ready: Ready, *, mcp_legacy: bool = False) -> list[str]:
    transport = ready.transport
    encrypted = "encrypted" if transport.get("encrypted") else "not encrypted"
    lines = [f"note: {note}" for note in ready.notes]
    lines += [
        f"commonroom: room open around {file.name} (workspace {ready.workspace_id})",
        f"owner page (open it in your browser): {ready.human_url}",
        f"transport: {transport.get('type')} ({encrypted}) "
        f"{transport.get('status', 'READY')}",
        "invitation (single use; `ce invite FILE` makes more):",
        ready.invitation,
        ("MCP endpoint, revisions 2026-07-28 and the older 2025 ones (`ce mcp config CLIENT`"
         " prints a client's setup):" if mcp_legacy else
         "MCP endpoint, revision 2026-07-28 (`ce mcp config CLIENT` prints a client's setup;"
         " older clients run the `ce mcp` bridge):"),
        ready.mcp_url,
        "Ctrl-C closes the room.",
    ]
    return lines


def _report_late_failure(exc: BaseException, json_mode: bool) -> int:
    leaves = output._leaves(exc)
    if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
        return 0
    for leaf in leaves:
        if isinstance(leaf, CommonroomError):
            output.report_error(leaf, json_mode, json_to_stderr=True)
            return output.EXIT_ERROR
    if json_mode:
        # Keep stdout to the ready line: print the failure as a readable line.
        return output.handle_failure(exc, False, 0)
    return output.handle_failure(exc, json_mode, 0)


COMMANDS: Final = (serve,)
