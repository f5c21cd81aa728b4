"""`ce agent` (keep an agent in the room) and the host's side of it (docs/spec/PROTOCOL.md 19).

`ce agent INVITATION --name NAME -- COMMAND [ARGS...]`, `ce agent --profile NAME -- COMMAND`,
or a shorthand instead of COMMAND (`gemini`, `claude`, `codex`, `goose`, `opencode`). It joins
once: the session is a profile named `--profile` (default: NAME), so running it again with the
same invitation resumes that participant, its cursor and its queue. The runtime is
`cli/resident.py`, imported (with trio) only when it runs.

The host's commands over the room around FILE: `ce permissions FILE`, `ce permit FILE PM_ID
OPTION_ID`, `ce interrupt FILE NAME`, `ce resume FILE NAME` (they act through `host_call.py`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Final

import click

from commonroom.cli import profiles, runtime
from commonroom.cli.host_call import host_answer
from commonroom.cli.options import file_argument, json_option
from commonroom.cli.output import echo, emit_json, guarded, visible
from commonroom.protocol.errors import CommonroomError

SHORTHANDS: Final = ("claude", "codex", "gemini", "goose", "opencode")


def _command(words: tuple[str, ...], exec_mode: bool) -> tuple[list[str], str, str]:
    """(argv, harness, label) for COMMAND or a shorthand; a missing program is one line."""
    from commonroom.cli.resident import shorthand

    if not words:
        raise click.UsageError("give the agent's command after `--` (or a shorthand: "
                               + ", ".join(SHORTHANDS) + ")")
    known = shorthand(words[0], exec_mode) if len(words) == 1 else None
    if known is not None:
        argv, package = known
        if shutil.which(argv[0]) is None:
            raise CommonroomError("invalid_request",
                                  f"{words[0]} is not installed ({argv[0]} is not on PATH):"
                                  f" {package}")
        return argv, f"{'exec' if exec_mode else 'acp'}:{words[0]}", words[0]
    argv = list(words)
    if shutil.which(argv[0]) is None:
        raise CommonroomError("invalid_request", f"{argv[0]!r} is not on PATH")
    label = Path(argv[0]).name
    if label.startswith(("python", "node", "bun", "deno", "uv")) and len(argv) > 1:
        label = Path(argv[-1] if argv[1] == "run" else argv[1]).stem  # the script, not its runtime
    return argv, f"{'exec' if exec_mode else 'acp'}:{label}"[:64], label


def _profile(words: list[str], profile: str | None, name: str | None) -> profiles.Profile:
    """The session: joined once per (invitation, profile), kept in the profile."""
    if words and (words[0].startswith("commonroom://") or words[0] == profiles.FROM_STDIN):
        invitation = profiles.invitation_argument(words.pop(0))
        if not name:
            raise click.UsageError("--name NAME is needed with INVITATION (the agent's name in"
                                   " the room)")
        key = profiles.check_name(profile or name)
        try:
            kept = profiles.load(key)
        except click.UsageError:
            kept = None
        if kept is not None and kept.invitation == invitation.strip() and kept.session:
            return kept
        return _join(invitation, name, key)
    if name and not profile:
        raise click.UsageError("--name goes with INVITATION; with a saved session give --profile")
    return profiles.select(profile)


def _join(invitation: str, name: str, key: str) -> profiles.Profile:
    from commonroom.protocol.invitation import decode
    from commonroom.wire.sync import Connection

    invite = decode(invitation)
    hint = invite.transport.to_json()
    joined = Connection(hint, timeouts=runtime.timeouts()).call("POST", "/session/join", {
        "invite": invitation.strip(), "name": name, "kind": "agent",
        "transport": invite.transport.type})
    if not isinstance(joined, dict) or not isinstance(joined.get("session_id"), str):
        raise CommonroomError("transport_unavailable", "the room's join answer has no session")
    return profiles.create(key, invitation, joined, hint)


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--profile", metavar="NAME", help="The saved session to run as (with INVITATION:"
              " the profile to keep it in; default NAME).")
@click.option("--name", metavar="NAME", help="The agent's name in the room (with INVITATION).")
@click.option("--exec", "exec_mode", is_flag=True, help="COMMAND is a headless CLI run once per"
              " wake: the prompt on stdin, its stdout posted as room text to whoever woke it.")
@click.option("--turn-minutes", type=click.FloatRange(min=0.05, max=24 * 60), default=15.0,
              show_default=True, help="A longer turn is cancelled.")
@click.option("--max-turns", type=click.IntRange(min=1, max=1000), default=20, show_default=True,
              help="At most this many turns start in any 10 minutes (the rest wait, queued).")
@click.argument("words", nargs=-1, type=click.UNPROCESSED,
                metavar="[INVITATION] (SHORTHAND | -- COMMAND [ARGS...])")
@guarded(interrupt_exit=0)
def agent(profile: str | None, name: str | None, exec_mode: bool, turn_minutes: float,
          max_turns: int, words: tuple[str, ...], json_mode: bool = False) -> None:
    """Keep an agent in the room: woken when addressed, one turn at a time.

    COMMAND speaks ACP (Agent Client Protocol) on its stdio, or, with --exec, is run once per
    wake. Shorthands: claude, codex, gemini, goose, opencode. The agent reaches the room through
    `ce mcp` as this participant; it never sees the session. Ctrl-C stops it.
    """
    from commonroom.cli import resident

    # click took `--` away: an invitation (or `-`) first, then the command or a shorthand.
    rest = list(words)
    head = rest[:1] if rest and (rest[0].startswith("commonroom://")
                                 or rest[0] == profiles.FROM_STDIN) else []
    command_words = rest[len(head):]
    argv, harness, label = _command(tuple(command_words), exec_mode)  # before joining anything
    who = _profile(head, profile, name)
    settings = resident.Settings(command=argv, harness=harness, exec_mode=exec_mode,
                                 turn_minutes=turn_minutes, max_turns=max_turns, label=label)
    try:
        resident.run(who, settings, runtime.timeouts())
    except resident.AgentFailed as failure:
        raise click.ClickException(str(failure)) from None


# -- the host's side ----------------------------------------------------------------------------


def permission_lines(answer: dict[str, Any], names: dict[str, str]) -> list[str]:
    out = []
    for p in answer.get("permissions") or []:
        who = names.get(str(p.get("participant_id")), str(p.get("participant_id")))
        out.append(f"{p.get('permission_id')}  {visible(who)} asks: {visible(str(p.get('title')))}"
                   + (f"  [{visible(str(p['tool']))}]" if p.get("tool") else "")
                   + f"  until {p.get('expires_at')}")
        if p.get("input_preview"):
            for line in str(p["input_preview"]).splitlines()[:8]:
                out.append(f"    | {visible(line)}")
        for option in p.get("options") or []:
            out.append(f"    {visible(str(option.get('option_id')))}  {visible(str(option.get('name')))}"
                       f"  ({option.get('kind')})")
    return out or ["no pending permission requests"]


def _names(file: Path) -> dict[str, str]:
    parts = host_answer(file, "workspace.participants", {}).get("participants") or []
    return {str(p.get("participant_id")): str(p.get("name")) for p in parts}


def _participant(file: Path, wanted: str) -> str:
    parts = host_answer(file, "workspace.participants", {}).get("participants") or []
    matches = [p for p in parts if wanted in (p.get("name"), p.get("participant_id"))
               and not p.get("left")]
    if len(matches) != 1:
        raise click.UsageError(f"no participant named {wanted!r} in the room" if not matches
                               else f"{len(matches)} participants are named {wanted!r}: give the id")
    return str(matches[0]["participant_id"])


@click.command()
@file_argument
@json_option
@guarded()
def permissions(file: Path, json_mode: bool) -> None:
    """List the pending permission requests of resident agents in the room around FILE."""
    answer = host_answer(file, "workspace.permissions", {})
    if json_mode:
        emit_json(answer)
        return
    for line in permission_lines(answer, _names(file)):
        echo(line)


@click.command()
@file_argument
@click.argument("permission_id", metavar="PM_ID")
@click.argument("option_id", metavar="OPTION_ID")
@json_option
@guarded()
def permit(file: Path, permission_id: str, option_id: str, json_mode: bool) -> None:
    """Answer a resident agent's permission request with one of its exact options."""
    answer = host_answer(file, "permission.answer",
                         {"permission_id": permission_id, "option_id": option_id})
    if json_mode:
        emit_json(answer)
    else:
        echo(f"{permission_id}: {visible(option_id)}")


@click.command()
@file_argument
@click.argument("who", metavar="NAME")
@json_option
@guarded()
def interrupt(file: Path, who: str, json_mode: bool) -> None:
    """Cancel the running turn of the resident agent NAME (that turn only)."""
    pid = _participant(file, who)
    parts = host_answer(file, "workspace.participants", {}).get("participants") or []
    runtime_of = next((p.get("runtime") for p in parts if p.get("participant_id") == pid), None)
    if not runtime_of or runtime_of.get("state") != "running":
        raise click.UsageError(f"{who} is not running a turn")
    answer = host_answer(file, "runtime.interrupt", {"participant_id": pid,
                                                     "turn": int(runtime_of["turn"])})
    if json_mode:
        emit_json(answer)
    else:
        echo(f"interrupted turn {answer.get('turn')} of {who}")


@click.command()
@file_argument
@click.argument("who", metavar="NAME")
@json_option
@guarded()
def resume(file: Path, who: str, json_mode: bool) -> None:
    """Resume the resident agent NAME after its runtime paused it."""
    answer = host_answer(file, "runtime.resume", {"participant_id": _participant(file, who)})
    if json_mode:
        emit_json(answer)
    else:
        echo(f"resumed {who}")


COMMANDS: Final = (agent, permissions, permit, interrupt, resume)
