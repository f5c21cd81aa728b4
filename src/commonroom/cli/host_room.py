"""The host's side of handoffs and room text, and the interactive review (issue 21, items 4, 7).

`ce handoffs FILE`, `ce handoff FILE ID accept|decline|done [--note]`,
`ce say FILE TEXT [--to NAME...]`, `ce messages FILE`, and `ce review FILE
[ID]` without a decision: it shows each diff and asks, the way `git add -p`
walks hunks. Every one acts as the host through `host.host_call` (the running
room, or the sidecar); the room decides every rule, these only translate
names to ids and answers to lines.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import click

from commonroom.cli.host import check_answer, host_call
from commonroom.cli.output import echo, emit_json, guarded, visible
from commonroom.cli.readable import Names, ago

HANDOFF_ACTIONS: Final = ("accept", "decline", "done")


def _file_argument(fn: Any) -> Any:
    return click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))(fn)


def _json_option(fn: Any) -> Any:
    return click.option("--json", "json_mode", is_flag=True,
                        help="Machine-readable output (one JSON object).")(fn)


def _call(doc: Path, op_name: str, params: dict[str, Any]) -> dict[str, Any]:
    return check_answer(host_call(doc, op_name, params))


def _names(doc: Path) -> Names:
    return Names(_call(doc, "workspace.participants", {}))


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
@_file_argument
@_json_option
@guarded()
def handoffs(file: Path, json_mode: bool) -> None:
    """List the handoffs of the room around FILE, newest first (who asked whom, for what)."""
    answer = _call(file, "workspace.handoffs", {})
    if json_mode:
        emit_json(answer)
        return
    names = _names(file)
    for line in [handoff_line(h, names) for h in answer.get("handoffs") or []] or ["no handoffs"]:
        echo(line)


@click.command()
@_file_argument
@click.argument("handoff_id")
@click.argument("action", type=click.Choice(HANDOFF_ACTIONS))
@click.option("--note", help="A note for the one who asked (the result, for done).")
@_json_option
@guarded()
def handoff(file: Path, handoff_id: str, action: str, note: str | None, json_mode: bool) -> None:
    """Accept, decline or finish (done) handoff HANDOFF_ID addressed to you."""
    if action == "done":
        answer = _call(file, "handoff.result", {"handoff_id": handoff_id, "status": "completed",
                                                "summary": note or "done"})
    else:
        answer = _call(file, "handoff.respond", {"handoff_id": handoff_id, "decision": action,
                                                 "summary": note})
    if json_mode:
        emit_json(answer)
    else:
        echo(handoff_line(answer, _names(file)))


# -- room text --------------------------------------------------------------------------


def _recipients(doc: Path, to: tuple[str, ...]) -> list[str]:
    """Names (or ids) -> participant ids of present-or-away participants; one error per miss."""
    rows = _call(doc, "workspace.participants", {}).get("participants") or []
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
@_file_argument
@click.argument("text")
@click.option("--to", "to", multiple=True, metavar="NAME",
              help="Address this participant (repeat for several; none: the whole room).")
@_json_option
@guarded()
def say(file: Path, text: str, to: tuple[str, ...], json_mode: bool) -> None:
    """Say TEXT in the room around FILE, to everyone or addressed (--to NAME)."""
    params: dict[str, Any] = {"text": text}
    if to:
        params["to"] = _recipients(file, to)
    answer = _call(file, "workspace.message", params)
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
@_file_argument
@click.option("--after", type=click.IntRange(min=0), default=0, metavar="SEQ",
              help="Only messages after this one.")
@_json_option
@guarded()
def messages(file: Path, after: int, json_mode: bool) -> None:
    """Show the room text of the room around FILE, oldest first."""
    answer = _call(file, "workspace.messages", {"after": after, "limit": 200})
    if json_mode:
        emit_json(answer)
        return
    names = _names(file)
    for line in [message_line(m, names) for m in answer.get("messages") or []] or ["no room text"]:
        echo(line)


# -- interactive review -----------------------------------------------------------------


def review_interactively(doc: Path, proposal_id: str | None) -> None:
    """Show each diff and ask approve / reject (with a comment) / skip / quit.

    With an id: that proposal; without: every pending one, oldest first.
    """
    from commonroom.cli.host import format_proposal_detail, proposal_view

    if proposal_id is not None:
        ids = [proposal_id]
    else:
        listed = _call(doc, "workspace.proposals", {"status": "pending", "limit": 200})
        ids = [str(p["proposal_id"]) for p in reversed(listed.get("proposals") or [])]
        if not ids:
            echo("no pending proposals")
            return
    names = _names(doc)
    colour = sys.stdout.isatty()
    for index, pid in enumerate(ids, 1):
        detail = proposal_view(doc, pid)
        if len(ids) > 1:
            echo(f"({index}/{len(ids)})")
        sys.stdout.write(format_proposal_detail(detail, colour=colour))
        if detail.get("status") != "pending":
            echo(f"{pid} is {detail.get('status')}: nothing to decide")
            continue
        answer = click.prompt("approve, reject, skip or quit? [a/r/s/q]",
                              type=click.Choice(["a", "r", "s", "q"]), show_choices=False)
        if answer == "q":
            return
        if answer == "s":
            echo(f"skipped {pid}")
            continue
        params: dict[str, Any] = {"proposal_id": pid,
                                  "decision": "approve" if answer == "a" else "reject"}
        if answer == "r":
            # A rejection tells the author why: the comment is asked for, never optional.
            comment = ""
            while not comment:
                comment = click.prompt("comment for the author (why)", default="",
                                       show_default=False).strip()
                if not comment:
                    echo("a reject needs a comment: it tells the author what to change")
            params["comment"] = comment
        reviewed = _call(doc, "workspace.review", params)
        echo(f"{pid} {reviewed.get('status')} (by {names.name(reviewed.get('reviewer_id'))})")


COMMANDS: Final = (handoffs, handoff, say, messages)


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
