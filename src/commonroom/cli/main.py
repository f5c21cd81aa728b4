"""`ce`, the command-line client (PROTOCOL.md section 13).

Commands: `serve` (and `ce FILE` as its shorthand), the host commands
(`invite`, `invitations`, `revoke`, `status`, `proposals`, `review`; see
`host.py`), and the session commands that reach a room through the
transport hint inside an invitation (`join`, `call`, `observe`), plus
`decode`.

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

from commonroom.cli import output
from commonroom.cli.output import echo, emit_json, guarded
from commonroom.protocol.errors import CommonroomError, invalid_request

if TYPE_CHECKING:
    import trio

    from commonroom.cli.byteclient import Response
    from commonroom.protocol.invitation import Invitation, TransportHint
    from commonroom.service import Ready

F = TypeVar("F", bound=Callable[..., Any])

TRANSPORTS: Final = ("loopback", "tailcat", "local")
# One request/response call may take this long (the longest server hold is
# a 25 s /workspace/wait).
CALL_TIMEOUT: Final = 60.0
WAIT_SECONDS: Final = 25
STATUS_POLL_SECONDS: Final = 30.0
RETRY_SECONDS: Final = 2.0


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
@json_option
@guarded(interrupt_exit=0)
def serve(
    file: Path,
    transport: str,
    port_owner: int | None,
    port_ingress: int | None,
    ephemeral: bool,
    human_hold_minutes: float,
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
@json_option
@guarded()
def invite(
    file: Path, capabilities: str | None, expires: int | None, max_uses: int | None,
    json_mode: bool,
) -> None:
    """Create an invitation to the room around FILE; print its commonroom:// line."""
    params: dict[str, Any] = {"expires_in_minutes": expires, "max_uses": max_uses}
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
@click.argument("proposal_id")
@click.option("--approve", is_flag=True, help="Approve the proposal.")
@click.option("--reject", is_flag=True, help="Reject the proposal.")
@click.option("--comment", help="A note for the proposer.")
@click.option("--yes", "-y", "assume_yes", is_flag=True,
              help="Do not show the diff and ask first (the default at a terminal).")
@json_option
@guarded()
def review(
    file: Path, proposal_id: str, approve: bool, reject: bool, comment: str | None,
    assume_yes: bool, json_mode: bool,
) -> None:
    """Approve or reject proposal PROPOSAL_ID (--approve or --reject).

    At a terminal it first prints the proposal's diff and asks; --yes skips that.
    """
    from commonroom.cli.host import format_proposal_detail, format_review, proposal_view

    if approve == reject:
        raise click.UsageError(
            "give exactly one of --approve or --reject" if approve else "give --approve or --reject"
        )
    decision = "approve" if approve else "reject"
    if not assume_yes and not json_mode and sys.stdin.isatty() and sys.stdout.isatty():
        detail = proposal_view(file, proposal_id)
        sys.stdout.write(format_proposal_detail(detail, colour=True))
        if not click.confirm(f"{decision} {proposal_id}?", default=False):
            raise click.UsageError("not reviewed (answer y to confirm, or pass --yes)")
    params = {"proposal_id": proposal_id, "decision": decision, "comment": comment}
    _print(_host(file, "workspace.review", params), json_mode, format_review)


@main.command("open")
@_file_argument
@click.option("--no-browser", is_flag=True, help="Only print the link.")
@json_option
@guarded()
def open_page(file: Path, no_browser: bool, json_mode: bool) -> None:
    """Print a fresh one-time link to the owner page of the room around FILE (and open it)."""
    import trio

    from commonroom.cli.output import error_from_wire
    from commonroom.credentials import read_credentials

    credentials = read_credentials(file)
    if credentials is None:
        raise CommonroomError(
            "transport_unavailable", f"no room is running around {file.name}; start one with `ce serve {file}`"
        )

    async def mint() -> str:
        from commonroom.cli.byteclient import request
        from commonroom.transport.base import open_loopback_tcp

        port = int(credentials.owner_port)
        with trio.fail_after(CALL_TIMEOUT):
            stream = await open_loopback_tcp("127.0.0.1", port, "owner page")
            response = await request(stream, "POST", "/owner/login-link", headers={
                "Authorization": f"Bearer {credentials.host_session}", "Host": f"127.0.0.1:{port}",
            })
        answer = response.json()
        if response.status != 200 or not isinstance(answer, dict) or "url" not in answer:
            raise error_from_wire(response.status, answer)
        return str(answer["url"])

    url = trio.run(mint)
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


async def _dial(hint: TransportHint) -> trio.abc.Stream:
    from commonroom.transport.registry import dial

    return await dial(hint)


async def _call(
    hint: TransportHint,
    method: str,
    path: str,
    *,
    session: str | None = None,
    body: bytes | None = None,
    timeout: float = CALL_TIMEOUT,
) -> Response:
    """One request to the room, on a fresh connection; no timeout is a hang."""
    import trio

    from commonroom.cli.byteclient import request

    headers: dict[str, str] = {}
    if session:
        headers["Authorization"] = f"Bearer {session}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    with trio.move_on_after(timeout) as scope:
        stream = await _dial(hint)
        return await request(stream, method, path, headers=headers, body=body)
    assert scope.cancelled_caught
    raise CommonroomError(
        "transport_unavailable", f"the room did not answer within {timeout:g} seconds"
    )


def _answer(response: Response) -> Any:
    answer = response.json()
    if not 200 <= response.status < 300:
        raise output.error_from_wire(response.status, answer)
    return answer


@main.command()
@click.argument("invitation")
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
    """Join a room with INVITATION; save and print the session, then hold it until Ctrl-C.

    The session is saved as a profile (see `ce whoami`), so the agent verbs
    (`ce read`, `ce propose`, ...) need neither the invitation nor the session.
    """
    import trio

    from commonroom.cli import profiles

    if profile is not None:
        profiles.check_name(profile)
    invite = _decode(invitation)

    async def run() -> None:
        body = {"invite": invitation.strip(), "name": name, "kind": kind,
                "transport": invite.transport.type}
        response = await _call(
            invite.transport, "POST", "/session/join", body=json.dumps(body).encode()
        )
        session = _answer(response)
        if not isinstance(session, dict) or not isinstance(session.get("session_id"), str):
            raise CommonroomError("transport_unavailable", "the room's join answer has no session")
        saved = profiles.create(profile or str(session.get("workspace_id") or "default"),
                                invitation, session, invite.transport.to_json())
        from commonroom.mcp.configs import mcp_url

        answer = {**session, "mcp_url": mcp_url(invite.transport.to_json())}
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
        await _hold(invite.transport, session["session_id"])

    trio.run(run)


async def _hold(hint: TransportHint, session: str) -> None:
    """Keep the session present until Ctrl-C: long-poll /workspace/wait, or poll status.

    Any request renews presence; the long poll does it with one request per
    25 s. A session without `observe` polls `/workspace/status` instead. A
    401 (the session ended or expired) ends the hold with that error; an
    unreachable room (say, restarting) is retried.
    """
    import trio

    cursor: int | None = None
    use_wait = True
    warned = False
    while True:
        try:
            if use_wait:
                if cursor is None:
                    cursor = await _latest_event_id(hint, session)
                response = await _call(
                    hint, "GET",
                    f"/workspace/wait?cursor={cursor}&timeout_seconds={WAIT_SECONDS}",
                    session=session,
                )
                cursor = _next_cursor(_answer(response), cursor)
            else:
                _answer(await _call(hint, "GET", "/workspace/status", session=session))
                await trio.sleep(STATUS_POLL_SECONDS)
            warned = False
        except CommonroomError as error:
            if error.code in ("unauthorized", "session_expired"):
                raise
            if error.code == "permission_denied":
                if use_wait:
                    use_wait = False
                    continue
                await trio.sleep(STATUS_POLL_SECONDS)  # a refused request still counts
                continue
            if error.code == "transport_unavailable" and not warned:
                echo("note: the room is unreachable; retrying", err=True)
                warned = True
            delay = error.recovery.get("retry_after_seconds", RETRY_SECONDS)
            await trio.sleep(float(delay) if isinstance(delay, (int, float)) else RETRY_SECONDS)


async def _latest_event_id(hint: TransportHint, session: str) -> int:
    """Where to long-poll from: the room's latest event (0 when the session cannot read)."""
    try:
        room = _answer(await _call(hint, "GET", "/workspace/room", session=session))
    except CommonroomError as error:
        if error.code != "permission_denied":
            raise
        return 0
    latest = room.get("latest_event_id") if isinstance(room, dict) else None
    return latest if isinstance(latest, int) else 0


def _next_cursor(answer: Any, cursor: int) -> int | None:
    if not isinstance(answer, dict):
        return cursor
    if answer.get("resync"):
        new = answer.get("cursor")
        return new if isinstance(new, int) else None
    new = answer.get("cursor")
    if isinstance(new, int):
        return new
    ids = [e.get("event_id") for e in answer.get("events") or [] if isinstance(e, dict)]
    ints = [i for i in ids if isinstance(i, int)]
    return max(ints, default=cursor)


@main.command()
@click.argument("invitation")
@click.argument("method")
@click.argument("path")
@click.option("--session", metavar="ID", help="The session id from `ce join`.")
@click.option("--body", metavar="JSON", help="The request body (JSON).")
@json_option
@guarded()
def call(
    invitation: str, method: str, path: str, session: str | None, body: str | None,
    json_mode: bool,
) -> None:
    """One request METHOD PATH to the room; print the JSON answer (exit 0 on 2xx)."""
    import trio

    payload: bytes | None = None
    if body is not None:
        try:
            parsed = json.loads(body)
        except json.JSONDecodeError as exc:
            raise invalid_request(f"--body is not JSON: {exc.msg}", "body") from None
        payload = json.dumps(parsed).encode()
    if not path.startswith("/"):
        raise invalid_request("PATH must start with '/'", "path")
    if payload is not None and method.upper() in ("GET", "HEAD"):
        raise click.UsageError(f"--body goes with POST, not {method.upper()}")
    invite = _decode(invitation)
    response = trio.run(
        lambda: _call(invite.transport, method.upper(), path, session=session, body=payload)
    )
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
@click.argument("invitation")
@click.option("--session", metavar="ID", required=True, help="The session id from `ce join`.")
@click.option("--since", type=click.IntRange(min=0), metavar="N",
              help="Replay the retained events after event N first.")
@json_option
@guarded(interrupt_exit=0)
def observe(invitation: str, session: str, since: int | None, json_mode: bool) -> None:
    """Print the room's events as JSON lines until Ctrl-C."""
    import trio

    invite = _decode(invitation)
    trio.run(_observe, invite.transport, session, since)


async def _observe(hint: TransportHint, session: str, since: int | None) -> None:
    import contextlib

    import trio

    from commonroom.cli.byteclient import iter_sse, open_stream

    last_id = "" if since is None else str(since)
    retry = 5.0
    connected_once = False
    while True:
        headers = {"Authorization": f"Bearer {session}"}
        if last_id:
            headers["Last-Event-ID"] = last_id
        try:
            stream = await _dial(hint)
            status, _, chunks = await open_stream(stream, "/workspace/observe", headers=headers)
            if not 200 <= status < 300:
                async with chunks:
                    raw = await chunks.read_all()
                try:
                    answer = json.loads(raw)
                except (UnicodeDecodeError, json.JSONDecodeError):
                    answer = None
                raise output.error_from_wire(status, answer)
            connected_once = True
            async with contextlib.aclosing(iter_sse(chunks)) as messages:
                async for message in messages:
                    if message.retry is not None:
                        retry = message.retry / 1000
                    if message.is_comment:
                        continue
                    if message.id:
                        last_id = message.id
                    emit_json(_event_line(message.event, message.data))
        except CommonroomError as error:
            if error.code != "transport_unavailable" or not connected_once:
                raise
            echo(f"note: the connection to the room dropped; reconnecting in {retry:g} s"
                 f" (from event {last_id or 'the start'})", err=True)
        else:
            echo(f"note: the room ended the stream; reconnecting in {retry:g} s", err=True)
        await trio.sleep(retry)


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
@click.option("--session", metavar="ID", help="Use this session instead of joining (and keeping"
              " the session in your profile).")
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
    from commonroom.cli import agent

    agent.register(main)


_register_agent_verbs()
