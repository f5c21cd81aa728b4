"""The room around FILE as the host sees it: its status, its handoffs and its room text.

`ce status FILE`, `ce handoffs FILE`, `ce handoff FILE ID accept|decline|done
[--note]`, `ce say FILE TEXT [--to NAME...]`, `ce messages FILE` (the host's side of
handoffs and room text). Host commands (`host_call.py` says how they reach the room):
the room decides every rule, these only translate names to ids and answers to
lines.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click

from commonroom.cli.host_call import host_answer
from commonroom.cli.options import file_argument, json_option
from commonroom.cli.output import echo, emit_json, guarded, print_answer, visible
from commonroom.cli.readable import Names, ago
from commonroom.cli.session_calls import session_options

HANDOFF_ACTIONS: Final = ("accept", "decline", "done")


def _names(doc: Path) -> Names:
    return Names(host_answer(doc, "workspace.participants", {}))


# -- status -----------------------------------------------------------------------------


@click.command()
@file_argument
@json_option
@guarded()
def status(file: Path, json_mode: bool) -> None:
    """Show the workspace status of the room around FILE."""
    print_answer(host_answer(file, "workspace.status", {}), json_mode, format_status)


def format_status(answer: dict[str, Any]) -> list[str]:
    keys = (
        "workspace_id", "name", "version", "content_hash", "lifecycle", "participants",
        "active_leases", "pending_proposals",
    )
    lines = [f"{key}: {answer[key]}" for key in keys if key in answer]
    lines += [
        f"{key}: {value}"
        for key, value in answer.items()
        if key not in keys and isinstance(value, (str, int, float, bool))
    ]
    return lines


# -- handoffs ---------------------------------------------------------------------------


def handoff_line(h: dict[str, Any], names: Names) -> str:
    line = (f"{h.get('handoff_id')}  {h.get('status', '?'):<9}  {names.name(h.get('from_participant_id'))}"
            f" → {names.name(h.get('to_participant_id'))}  \"{visible(str(h.get('summary', '')))}\"")
    if h.get("region"):
        line += f"  ({h['region']})"
    if h.get("result_summary"):
        line += f"  result: {visible(str(h['result_summary']))}"
    return line


@click.command()
@file_argument
@json_option
@guarded()
def handoffs(file: Path, json_mode: bool) -> None:
    """List the handoffs of the room around FILE, newest first (who asked whom, for what)."""
    answer = host_answer(file, "workspace.handoffs", {})
    if json_mode:
        emit_json(answer)
        return
    names = _names(file)
    for line in [handoff_line(h, names) for h in answer.get("handoffs") or []] or ["no handoffs"]:
        echo(line)


@click.command()
@file_argument
@click.argument("handoff_id")
@click.argument("action", type=click.Choice(HANDOFF_ACTIONS))
@click.option("--note", help="A note for the one who asked (the result, for done).")
@json_option
@guarded()
def handoff(file: Path, handoff_id: str, action: str, note: str | None, json_mode: bool) -> None:
    """Accept, decline or finish (done) handoff HANDOFF_ID addressed to you."""
    if action == "done":
        answer = host_answer(file, "handoff.result", {
            "handoff_id": handoff_id, "status": "completed", "summary": note or "done"})
    else:
        answer = host_answer(file, "handoff.respond", {
            "handoff_id": handoff_id, "decision": action, "summary": note})
    if json_mode:
        emit_json(answer)
    else:
        echo(handoff_line(answer, _names(file)))


# -- room text --------------------------------------------------------------------------


def _caller(file: str | None, profile: str | None, invitation: str | None,
            session: str | None) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """The host on the room around FILE, else the agent's session (`ce say`/`ce messages`
    have both forms, FILE first for the host)."""
    if file is not None:
        doc = Path(file)
        if not doc.is_file():
            raise click.UsageError(f"{file!r} is not a file: the host form is FILE first")
        return lambda op, params: host_answer(doc, op, params)
    from commonroom.cli import profiles
    from commonroom.cli.session_calls import call_as

    who = profiles.select(profile, invitation, session)

    def as_agent(op: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = call_as(who, op, params)
        return answer if isinstance(answer, dict) else {}

    return as_agent


def _recipients(run: Callable[[str, dict[str, Any]], dict[str, Any]], to: tuple[str, ...]
                ) -> list[str]:
    """Names (or ids) -> participant ids of present-or-away participants; one error per miss."""
    rows = run("workspace.participants", {}).get("participants") or []
    ids = []
    for wanted in to:
        matches = [p for p in rows if wanted in (p.get("name"), p.get("participant_id"))
                   and not p.get("left")]
        if not matches:
            raise click.UsageError(f"no participant named {wanted!r} in the room (`ce messages` "
                                   "lists who spoke; the page lists everyone)")
        if len(matches) > 1:
            raise click.UsageError(f"{len(matches)} participants are named {wanted!r}: give the id")
        ids.append(str(matches[0]["participant_id"]))
    return ids


@click.command()
@click.argument("words", nargs=-1, required=True, metavar="[FILE] TEXT")
@click.option("--to", "to", multiple=True, metavar="NAME",
              help="Address this participant (repeat for several; none: the whole room).")
@session_options
@guarded()
def say(words: tuple[str, ...], to: tuple[str, ...], profile: str | None, invitation: str | None,
        session: str | None, json_mode: bool) -> None:
    """Say TEXT in the room, to everyone or addressed (--to NAME): `ce say TEXT` as an agent,
    `ce say FILE TEXT` as the host."""
    if len(words) > 2:
        raise click.UsageError("give TEXT (as an agent) or FILE TEXT (as the host); quote TEXT")
    file, text = (words[0], words[1]) if len(words) == 2 else (None, words[0])
    run = _caller(file, profile, invitation, session)
    params: dict[str, Any] = {"text": text}
    if to:
        params["to"] = _recipients(run, to)
    answer = run("workspace.message", params)
    if json_mode:
        emit_json(answer)
    else:
        echo(f"said #{answer.get('seq')}" + (f" to {', '.join(to)}" if to else ""))


def message_line(m: dict[str, Any], names: Names) -> str:
    to = m.get("to") or []
    head = f"#{m.get('seq')} {names.name(m.get('participant_id'))}"
    if to:
        head += " → " + ", ".join(names.name(pid) for pid in to)
    return f"{head} · {ago(m.get('created_at'))}: {visible(str(m.get('text', '')))}"


@click.command()
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--after", type=click.IntRange(min=0), default=0, metavar="SEQ",
              help="Only messages after this one.")
@session_options
@guarded()
def messages(file: str | None, after: int, profile: str | None, invitation: str | None,
             session: str | None, json_mode: bool) -> None:
    """Show the room text, oldest first: `ce messages` as an agent, `ce messages FILE` as the
    host."""
    run = _caller(file, profile, invitation, session)
    answer = run("workspace.messages", {"after": after, "limit": 200})
    if json_mode:
        emit_json(answer)
        return
    names = Names(run("workspace.participants", {}))
    for line in [message_line(m, names) for m in answer.get("messages") or []] or ["no room text"]:
        echo(line)


COMMANDS: Final = (status, handoffs, handoff, say, messages)
