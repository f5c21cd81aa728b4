"""The session commands: `ce join`, `ce call`, `ce observe`, `ce decode` (the agent side).

`ce join INVITATION` redeems an invitation over the transport hint inside it,
saves the session as a profile (so the agent verbs of `agent_verbs.py` need
neither) and holds it present until a signal. `ce call` and `ce observe` reach
a room with the saved profile or with an invitation and a session: one raw
request, or the event stream as JSON lines. `ce decode` shows an invitation
without its secret. All of them speak through `commonroom.wire`; the
long-running ones stop on SIGINT/SIGTERM whatever disposition they inherited
(`runtime.until_stopped`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

from commonroom.cli import output, runtime
from commonroom.cli.options import json_option
from commonroom.cli.output import echo, emit_json, guarded
from commonroom.protocol.errors import CommonroomError, invalid_request

if TYPE_CHECKING:
    from commonroom.protocol.invitation import Invitation
    from commonroom.wire.sync import Connection as SyncConnection

F = TypeVar("F", bound=Callable[..., Any])


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


@click.command()
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
    try:  # the room's name (its document), so commands and `ce profiles` can say which room
        status = _connection(hint).call("GET", "/workspace/status", None,
                                        bearer=str(session["session_id"]))
        room = status.get("name") if isinstance(status, dict) else None
    except CommonroomError:
        room = None
    saved = profiles.create(profile or str(session.get("workspace_id") or "default"),
                            invitation, {**session, "room": room}, hint)
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


@click.command()
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


@click.command()
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


@click.command()
@click.argument("invitation")
@json_option
@guarded()
def decode(invitation: str, json_mode: bool) -> None:
    """Print the decoded INVITATION without its secret."""
    emit_json(_decode(invitation).public_json(), pretty=not json_mode)


@click.command()
@click.argument("name")
@json_option
@guarded()
def use(name: str, json_mode: bool) -> None:
    """Make profile NAME the one commands use without --profile (instead of the last joined)."""
    from commonroom.cli import profiles

    chosen = profiles.use(name)
    answer = {"profile": chosen.name, "room": profiles.room_label(chosen),
              "name": chosen.data.get("name"), "workspace_id": chosen.data.get("workspace_id")}
    if json_mode:
        emit_json(answer)
    else:
        echo(f"commands without --profile now use {chosen.name} (room {answer['room']},"
             f" as {answer['name']})")


@click.command("profiles")
@json_option
@guarded()
def list_profiles(json_mode: bool) -> None:
    """List the saved sessions: profile, room, your name there; `*` marks the default."""
    from commonroom.cli import profiles

    default = profiles.default()
    rows = [{"profile": p.name, "room": profiles.room_label(p), "name": p.data.get("name"),
             "kind": p.data.get("kind"), "workspace_id": p.data.get("workspace_id"),
             "default": default is not None and p.name == default.name}
            for p in profiles.all_profiles()]
    if json_mode:
        emit_json({"profiles": rows})
        return
    for row in rows:
        echo(f"{'*' if row['default'] else ' '} {row['profile']}  room {row['room']}  as"
             f" {row['name']} ({row['kind']})")
    if not rows:
        echo("no profiles: `ce join INVITATION --name NAME` saves one")


COMMANDS: Final = (join, call, observe, decode, use, list_profiles)
