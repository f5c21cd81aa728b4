"""`ce`, the command-line client (docs/spec/PROTOCOL.md section 13).

Commands: `serve` (and `ce FILE` as its shorthand), the host commands
(`invite`, `invitations`, `revoke`, `status`, `proposals`, `review`; see
`host.py`), and the session commands that reach a room through the
transport hint inside an invitation or the saved profile (`join`, `call`,
`observe`, `mcp`), plus `decode`. They all speak to a room through
`commonroom.wire`; the long-running ones stop on SIGINT/SIGTERM whatever
disposition they inherited (`runtime.until_stopped`).

The agent verbs (`regions`, `read`, `checkout`, `propose`, `wait`, `commit`,
...) over a saved session profile live in `agent.py` and are registered on
the group below.

Every command takes `--json`. Every command body runs inside
`output.guarded`, so any failure is one error object (`--json`, on stdout)
or one readable line (on stderr) and a non-zero exit whose code says what
kind of failure it was (`output.EXIT_CODES`). Imports of the heavier layers (trio, the engine,
the room service) happen inside the commands, so `ce` starts fast.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

from commonroom.cli import output, runtime
from commonroom.cli.output import echo, emit_json, guarded
from commonroom.protocol.errors import CommonroomError, invalid_request

if TYPE_CHECKING:
    from commonroom.protocol.invitation import Invitation
    from commonroom.service import Ready
    from commonroom.wire.sync import Connection as SyncConnection

F = TypeVar("F", bound=Callable[..., Any])

TRANSPORTS: Final = ("loopback", "tailcat", "local")
# `--settle-ms` default and bounds: copies of protocol.limits.SETTLE_MS(_MIN, _MAX),
# which imports attrs (every `ce` start would pay for it); a unit test holds them equal.
SETTLE_MS: Final = 250
SETTLE_MS_MIN: Final = 50
SETTLE_MS_MAX: Final = 5000


class CeGroup(click.Group):
    """The `ce` group: `ce FILE` is `ce serve FILE`; usage errors honour `--json`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["ce.json"] = "--json" in args
        return super().parse_args(ctx, args)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            if os.path.isfile(name):
                return "serve", self.get_command(ctx, "serve"), list(args)
            raise click.UsageError(f"no such command or file: {name!r}", ctx)
        return super().resolve_command(ctx, args)

    def _main_shell_completion(self, ctx_args: Any, prog_name: str, complete_var: str | None = None
                               ) -> None:
        # A completion script must never print a traceback: no suggestions instead.
        try:
            super()._main_shell_completion(ctx_args, prog_name, complete_var)
        except SystemExit:
            raise
        except BaseException:  # whatever went wrong, the shell gets nothing
            raise SystemExit(1) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            if not ctx.meta.get("ce.json"):
                raise
            output.report_usage(error)
            raise SystemExit(error.exit_code) from None


def json_option(fn: F) -> F:
    return click.option(
        "--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object)."
    )(fn)


def _file_argument(fn: F) -> F:
    return click.argument(
        "file", type=click.Path(exists=True, dir_okay=False, path_type=Path)
    )(fn)


@click.group(
    cls=CeGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="\b\nExit codes:\n" + output.exit_codes_help(),
)
@click.version_option(package_name="commonroom", prog_name="ce")
def main() -> None:
    """commonroom: open a temporary room around a markdown file.

    `ce FILE` opens a room around FILE (the same as `ce serve FILE`) and prints
    an invitation; people and agents join with `ce join INVITATION`.
    """


# -- serve -----------------------------------------------------------------------------


@main.command()
@_file_argument
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
@click.option("--git", "git", is_flag=True,
              help="Record every committed version as a git commit of FILE (FILE must be in a"
                   " git work tree; the host's own saves are not committed).")
@click.option("--git-all", "git_all", is_flag=True,
              help="As --git, and commit the host's own saves too.")
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
    git: bool,
    git_all: bool,
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
        git=git,
        git_all=git_all,
    )
    ready_printed = False

    def on_ready(ready: Ready) -> None:
        nonlocal ready_printed
        if json_mode:
            for note in ready.notes:
                echo(f"note: {note}", err=True)
            emit_json(ready.ready_json())
        else:
            for line in _ready_lines(file, ready):
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


def _ready_lines(file: Path, ready: Ready) -> list[str]:
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
        "MCP endpoint (`ce mcp config CLIENT` prints a client's setup):",
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


# -- host commands -----------------------------------------------------------------------


def _host(file: Path, op_name: str, params: dict[str, Any]) -> dict[str, Any]:
    from commonroom.cli.host import check_answer, host_call

    return check_answer(host_call(file, op_name, params))


def _print(answer: dict[str, Any], json_mode: bool, lines: Callable[[dict[str, Any]], list[str]]
           ) -> None:
    if json_mode:
        emit_json(answer)
    else:
        for line in lines(answer):
            echo(line)


@main.command()
@_file_argument
@click.option("--capabilities", metavar="A,B",
              help="Comma-separated capabilities (default: the agent set).")
@click.option("--expires", type=click.IntRange(min=1), metavar="MIN",
              help="Minutes until the invitation expires.")
@click.option("--max-uses", type=click.IntRange(min=1), metavar="N",
              help="How many joins it allows (default 1).")
@click.option("--max-sessions", type=click.IntRange(min=1), metavar="N",
              help="How many of its sessions may be active at once (default 8).")
@json_option
@guarded()
def invite(
    file: Path, capabilities: str | None, expires: int | None, max_uses: int | None,
    max_sessions: int | None, json_mode: bool,
) -> None:
    """Create an invitation to the room around FILE; print its commonroom:// line."""
    params: dict[str, Any] = {"expires_in_minutes": expires, "max_uses": max_uses,
                              "max_sessions": max_sessions}
    if capabilities is not None:
        params["capabilities"] = [c.strip() for c in capabilities.split(",") if c.strip()]
    answer = _host(file, "workspace.invite", params)
    _print(answer, json_mode, lambda a: [str(a.get("invitation"))])


@main.command()
@_file_argument
@json_option
@guarded()
def invitations(file: Path, json_mode: bool) -> None:
    """List the invitations of the room around FILE (never their secrets)."""
    from commonroom.cli.host import format_invitations

    _print(_host(file, "workspace.invitations", {}), json_mode, format_invitations)


@main.command()
@_file_argument
@click.argument("invite_id")
@json_option
@guarded()
def revoke(file: Path, invite_id: str, json_mode: bool) -> None:
    """Revoke invitation INVITE_ID."""
    from commonroom.cli.host import format_revoked

    answer = _host(file, "workspace.revoke_invitation", {"invite_id": invite_id})
    _print(answer, json_mode, format_revoked)


@main.command()
@_file_argument
@json_option
@guarded()
def status(file: Path, json_mode: bool) -> None:
    """Show the workspace status of the room around FILE."""
    from commonroom.cli.host import format_status

    _print(_host(file, "workspace.status", {}), json_mode, format_status)


@main.command()
@_file_argument
@json_option
@guarded()
def proposals(file: Path, json_mode: bool) -> None:
    """List the proposals of the room around FILE, newest first: author, base, whether it applies."""
    from commonroom.cli.host import format_proposals, proposals_view

    _print(proposals_view(file), json_mode, format_proposals)


@main.command()
@_file_argument
@click.argument("proposal_id")
@json_option
@guarded()
def show(file: Path, proposal_id: str, json_mode: bool) -> None:
    """Show proposal PROPOSAL_ID with its diff against the current text (coloured on a terminal)."""
    from commonroom.cli.host import format_proposal_detail, proposal_view

    detail = proposal_view(file, proposal_id)
    if json_mode:
        emit_json(detail)
        return
    sys.stdout.write(format_proposal_detail(detail, colour=sys.stdout.isatty()))
    sys.stdout.flush()


@main.command()
@_file_argument
@click.argument("proposal_id", required=False)
@click.option("--approve", is_flag=True, help="Approve the proposal.")
@click.option("--reject", is_flag=True, help="Reject the proposal.")
@click.option("--request-changes", "request_changes", is_flag=True,
              help="Ask the author to revise it (needs --comment).")
@click.option("--comment", help="A note for the proposer (it opens a thread on the region; a"
              " reject or a request for changes needs one when asked).")
@click.option("--yes", "-y", "assume_yes", is_flag=True,
              help="Do not show the diff and ask first (the default at a terminal).")
@json_option
@guarded()
def review(
    file: Path, proposal_id: str | None, approve: bool, reject: bool, request_changes: bool,
    comment: str | None, assume_yes: bool, json_mode: bool,
) -> None:
    """Review PROPOSAL_ID, or every pending proposal in turn when no id is given.

    Without --approve/--reject it shows each diff and asks: approve, reject
    (asking for the comment), skip or quit. With one of them it decides at
    once; at a terminal it shows the diff and asks to confirm unless --yes.
    """
    from commonroom.cli.host import format_proposal_detail, format_review, proposal_view

    chosen = [name for name, given in (("approve", approve), ("reject", reject),
                                       ("request_changes", request_changes)) if given]
    if len(chosen) > 1:
        raise click.UsageError("give at most one of --approve, --reject or --request-changes")
    if not chosen:
        if json_mode or not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise click.UsageError(
                "give --approve, --reject or --request-changes (asking needs a terminal: run it"
                " without --json at one)")
        from commonroom.cli.host_room import review_interactively

        review_interactively(file, proposal_id)
        return
    if proposal_id is None:
        raise click.UsageError("--approve/--reject/--request-changes decide one proposal: give its id")
    decision = chosen[0]
    if not assume_yes and not json_mode and sys.stdin.isatty() and sys.stdout.isatty():
        detail = proposal_view(file, proposal_id)
        sys.stdout.write(format_proposal_detail(detail, colour=True))
        if not click.confirm(f"{decision} {proposal_id}?", default=False):
            raise click.UsageError("not reviewed (answer y to confirm, or pass --yes)")
    params = {"proposal_id": proposal_id, "decision": decision, "comment": comment}
    answer = _host(file, "workspace.review", params)
    _print(answer, json_mode, lambda a: format_review(a, file))


@main.command("open")
@_file_argument
@click.option("--no-browser", is_flag=True, help="Only print the link.")
@click.option("--logout-all", is_flag=True,
              help="End every browser's login to the owner page instead (prints no link).")
@json_option
@guarded()
def open_page(file: Path, no_browser: bool, logout_all: bool, json_mode: bool) -> None:
    """Print a fresh one-time link to the owner page of the room around FILE (and open it)."""
    from commonroom.cli.output import error_from_wire
    from commonroom.credentials import read_credentials
    from commonroom.wire.calls import loopback_hint

    if logout_all:
        from commonroom.cli.host import logout_all_pages

        ended = logout_all_pages(file)
        if json_mode:
            emit_json({"ended": ended})
        else:
            echo(f"ended {ended} page login{'' if ended == 1 else 's'}; `ce open {file.name}` prints a new link")
        return
    credentials = read_credentials(file)
    if credentials is None:
        raise CommonroomError(
            "transport_unavailable", f"no room is running around {file.name}; start one with `ce serve {file}`"
        )

    port = int(credentials.owner_port)
    response = _connection(loopback_hint(port)).exchange("POST", "/owner/login-link", {
        "Authorization": f"Bearer {credentials.host_session}", "Host": f"127.0.0.1:{port}"})
    answer = response.json()
    if response.status != 200 or not isinstance(answer, dict) or "url" not in answer:
        raise error_from_wire(response.status, answer)
    url = str(answer["url"])
    opened = False
    if not no_browser and any(os.environ.get(name) for name in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")):
        import webbrowser

        try:
            opened = webbrowser.open(url)
        except Exception:  # a broken browser setup never fails the command: the link is printed
            opened = False
    if json_mode:
        emit_json({"url": url, "opened": opened})
    else:
        echo(f"owner page (one-time link): {url}")
        if opened:
            echo("opened in your browser", err=True)


# -- session commands --------------------------------------------------------------------


def _decode(text: str) -> Invitation:
    from commonroom.protocol.invitation import decode

    return decode(text)


def _connection(hint: dict[str, Any]) -> SyncConnection:
    """The blocking wire to a room: over loopback a plain socket, so trio is never imported."""
    from commonroom.wire.sync import Connection

    return Connection(hint, timeouts=runtime.timeouts())


def _session_option(fn: F) -> F:
    return click.option(
        "--session", metavar="ID|-",
        help="With INVITATION: the session id, or `-` to read it from stdin (default:"
             " CE_SESSION; an ID here is visible to other users).")(fn)


def _profile_option(fn: F) -> F:
    return click.option("--profile", metavar="NAME",
                        help="The saved session to use (default: as for every agent verb).")(fn)


@main.command()
@click.argument("invitation", metavar="INVITATION|-")
@click.option("--name", required=True, help="Your display name in the room.")
@click.option("--kind", type=click.Choice(["agent", "human"]), default="agent", show_default=True)
@click.option("--no-hold", is_flag=True, help="Exit right after joining.")
@click.option("--profile", metavar="NAME",
              help="Save the session under this profile (default: the workspace id).")
@json_option
@guarded(interrupt_exit=0)
def join(
    invitation: str, name: str, kind: str, no_hold: bool, profile: str | None, json_mode: bool
) -> None:
    """Join a room with INVITATION (`-`: read it from stdin); save and print the session, then
    hold it until Ctrl-C (or SIGTERM).

    The session is saved as a profile (see `ce whoami`), so the agent verbs
    (`ce read`, `ce propose`, ...) need neither the invitation nor the session.
    """
    from commonroom.cli import profiles

    if profile is not None:
        profiles.check_name(profile)
    invitation = profiles.invitation_argument(invitation)
    invite = _decode(invitation)
    hint = invite.transport.to_json()
    session = _connection(hint).call("POST", "/session/join", {
        "invite": invitation.strip(), "name": name, "kind": kind, "transport": invite.transport.type})
    if not isinstance(session, dict) or not isinstance(session.get("session_id"), str):
        raise CommonroomError("transport_unavailable", "the room's join answer has no session")
    saved = profiles.create(profile or str(session.get("workspace_id") or "default"),
                            invitation, session, hint)
    from commonroom.mcp.configs import mcp_url

    answer = {**session, "mcp_url": mcp_url(hint)}
    if json_mode:
        emit_json(answer)
    else:
        for key in ("session_id", "participant_id", "workspace_id", "name", "kind",
                    "expires_at", "mcp_url"):
            if answer.get(key) is not None:
                echo(f"{key}: {answer[key]}")
        echo(f"capabilities: {','.join(session.get('capabilities') or [])}")
        echo(f"profile: {saved.name}")
    if no_hold:
        return
    if not json_mode:
        echo("holding the session (presence stays live); Ctrl-C to stop", err=True)
    _hold(hint, session["session_id"])


def _hold(hint: dict[str, Any], session: str) -> None:
    """Keep the session present until a signal: the wire's presence plan (long-poll or status)."""
    from commonroom.wire import plans

    def note(item: Any) -> None:
        if isinstance(item, plans.Unreachable):
            echo("note: the room is unreachable; retrying", err=True)

    runtime.run_plan(hint, session, plans.presence(), note)


@main.command()
@click.argument("words", nargs=-1, metavar="[INVITATION] METHOD PATH")
@_profile_option
@_session_option
@click.option("--body", metavar="JSON", help="The request body (JSON).")
@json_option
@guarded()
def call(
    words: tuple[str, ...], profile: str | None, session: str | None, body: str | None,
    json_mode: bool,
) -> None:
    """One request METHOD PATH to the room; print the JSON answer (exit 0 on 2xx).

    Without INVITATION the saved profile says which room and session; with it,
    the session is --session or CE_SESSION, and none makes an anonymous request.
    """
    from commonroom.cli import profiles
    from commonroom.wire.calls import bearer_headers

    if len(words) not in (2, 3):
        raise click.UsageError("give [INVITATION] METHOD PATH")
    invitation = words[0] if len(words) == 3 else None
    method, path = words[-2].upper(), words[-1]
    payload: bytes | None = None
    if body is not None:
        try:
            parsed = json.loads(body)
        except json.JSONDecodeError as exc:
            raise invalid_request(f"--body is not JSON: {exc.msg}", "body") from None
        payload = json.dumps(parsed).encode()
    if not path.startswith("/"):
        raise invalid_request("PATH must start with '/'", "path")
    if payload is not None and method in ("GET", "HEAD"):
        raise click.UsageError(f"--body goes with POST, not {method}")
    who = profiles.select(profile, invitation, session, anonymous=invitation is not None)
    headers = bearer_headers(who.session)
    if payload is not None:
        headers["Content-Type"] = "application/json"
    response = _connection(who.hint).exchange(method, path, headers, payload)
    ok = 200 <= response.status < 300
    if not response.body.strip():
        if json_mode and not ok:
            emit_json({"error": "invalid_request", "message": f"HTTP {response.status}",
                       "details": {"status": response.status}})
        if not ok:
            raise SystemExit(output.EXIT_ERROR)
        return
    content_type = (response.header("content-type") or "").lower()
    if ok and "json" not in content_type:
        # A document route (the skill is markdown): print it as it came.
        text = response.body.decode("utf-8", "replace")
        if json_mode:
            emit_json({"status": response.status, "content_type": content_type, "body": text})
            return
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    answer = response.json()
    emit_json(answer, pretty=not json_mode)
    if not ok:
        error = output.error_from_wire(response.status, answer)
        if not json_mode:
            echo(output.error_line(error.code, error.message, error.recovery), err=True)
        raise SystemExit(output.exit_code_for(error.code))


@main.command()
@click.argument("invitation", required=False)
@_profile_option
@_session_option
@click.option("--since", type=click.IntRange(min=0), metavar="N",
              help="Replay the retained events after event N first.")
@json_option
@guarded(interrupt_exit=0)
def observe(invitation: str | None, profile: str | None, session: str | None,
            since: int | None, json_mode: bool) -> None:
    """Print the room's events as JSON lines until Ctrl-C (or SIGTERM).

    Without INVITATION the saved profile says which room and session. A
    dropped or silent stream is re-opened from the last event printed.
    """
    from commonroom.cli import profiles
    from commonroom.client.routes import ROUTES
    from commonroom.wire import plans

    who = profiles.select(profile, invitation, session)

    def show(item: Any) -> None:
        if isinstance(item, plans.SSEMessage):
            emit_json(_event_line(item.event, item.data))
        elif isinstance(item, plans.Reconnecting):
            echo(f"note: {item.reason}; reconnecting in {item.delay:g} s"
                 f" (from event {item.last_event_id or 'the start'})", err=True)

    plan = plans.events(ROUTES["workspace.observe"].path, since=since)
    runtime.run_plan(who.hint, who.session, plan, show)


def _event_line(event: str, data: str) -> Any:
    try:
        value = json.loads(data)
    except json.JSONDecodeError:
        value = data
    if event == "resync" and isinstance(value, dict):
        return {"type": "resync", **value}
    return value


@main.command()
@click.argument("invitation")
@json_option
@guarded()
def decode(invitation: str, json_mode: bool) -> None:
    """Print the decoded INVITATION without its secret."""
    emit_json(_decode(invitation).public_json(), pretty=not json_mode)


@click.command(name="bridge")
@click.argument("invitation")
@click.option("--session", metavar="ID", help="Use this session instead of joining (default:"
              " CE_SESSION, else join once and keep the session in your profile; an ID here is"
              " visible to other users).")
@click.option("--name", default="mcp-agent", show_default=True,
              help="Your display name when the bridge joins.")
@json_option
def mcp(invitation: str, session: str | None, name: str, json_mode: bool) -> None:
    """A stdio MCP server for local MCP clients, bridged to the room's POST /mcp (the default
    command of `ce mcp`: `ce mcp INVITATION`; `ce mcp config CLIENT` prints a client's setup)."""
    from commonroom.cli.mcp_bridge import command

    command(invitation, session=session, name=name)


def _register_mcp() -> None:
    from commonroom.cli import mcp_config

    mcp_config.register(main, mcp)


_register_mcp()


def _register_agent_verbs() -> None:
    from commonroom.cli import agent, provenance

    agent.register(main)
    provenance.register(main)  # blame, revert, restore, policy, export (docs/spec/PROTOCOL.md 18)
    # -- host: handoffs and room text (issue 21) --
    from commonroom.cli import host_room

    host_room.register(main)
    from commonroom.cli import review  # the review conversation (issue 22)

    review.register(main)


_register_agent_verbs()
