"""The review conversation's verbs (docs/spec/PROTOCOL.md 17): `ce ask/threads/reply/resolve/revise/rebase`.

Each thread verb has two forms, told apart by their number of arguments:
the agent form (`ce ask REGION TEXT`) runs over the saved session like every
agent verb (`agent_verbs.py`); the host form puts the document first (`ce ask
FILE REGION TEXT`) and acts as the host on the room around FILE, like `ce
review FILE` (`host_call.py`: through the running room, or the sidecar).
`ce rebase` has both forms too; `ce revise` is the author's, so agent only.
`ce wait THREAD` (in `agent_verbs.py`, on a `th_` id) runs `wait_for_thread`.

A TEXT of `-` is read from stdin. `ce ask` prints the thread id alone, so
`T=$(ce ask ...)` works.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import click

from commonroom.cli import profiles
from commonroom.cli.output import (
    EXIT_CONFLICT,
    echo,
    emit_json,
    guarded,
    note,
    print_answer,
    visible,
)
from commonroom.cli.readable import Names
from commonroom.cli.session_calls import call_as, session_options

THREAD_PREFIX: Final = "th_"


def _text(value: str) -> str:
    return sys.stdin.read() if value == "-" else value


def _split(words: tuple[str, ...], names: tuple[str, ...]) -> tuple[Path | None, list[str]]:
    """(FILE or None, the agent form's arguments): the host form has FILE first."""
    if len(words) == len(names):
        return None, list(words)
    if len(words) == len(names) + 1:
        file = Path(words[0])
        if not file.is_file():
            raise click.UsageError(f"{words[0]!r} is not a file: the host form is FILE"
                                   f" {' '.join(names)}")
        return file, list(words[1:])
    form = " ".join(names)
    raise click.UsageError(f"give {form} (as an agent) or FILE {form} (as the host)"
                           if form else "give no argument (as an agent) or FILE (as the host)")


def _run(file: Path | None, op: str, params: dict[str, Any], profile: str | None,
         invitation: str | None, session: str | None) -> Any:
    params = {key: value for key, value in params.items() if value is not None}
    if file is not None:
        from commonroom.cli.host_call import host_answer

        return host_answer(file, op, params)
    return call_as(profiles.select(profile, invitation, session), op, params)


def thread_lines(thread: dict[str, Any], names: Names | None = None) -> list[str]:
    """A thread for a terminal: a head line, then each comment (`name (kind): body`, or the
    author's id when the names are not known)."""
    flags = " blocking" if thread.get("blocking") else ""
    linked = f" on {thread['proposal_id']}" if thread.get("proposal_id") else ""
    by = "" if names is None else f" by {names.who(thread.get('author_id'))}"
    lines = [f"{thread.get('thread_id')} {thread.get('status')}{flags} {thread.get('region')}"
             f"{linked}{by}"]
    if thread.get("quote"):
        lines.append(f"  > {visible(str(thread['quote']))}")
    for comment in thread.get("comments") or []:
        body = visible(str(comment.get("body", ""))).replace("\n", "\n    ")
        who = comment.get("participant_id") if names is None else names.who(
            comment.get("participant_id"))
        lines.append(f"  {who}: {body}")
    return lines


@click.command()
@click.argument("words", nargs=-1, required=True, metavar="[FILE] REGION TEXT|-")
@click.option("--quote", metavar="Q", help="An exact span of the region's text to anchor to.")
@click.option("--blocking", is_flag=True,
              help="A question you wait on (`ce wait THREAD`); nobody else is held.")
@session_options
@guarded()
def ask(words: tuple[str, ...], quote: str | None, blocking: bool, profile: str | None,
        invitation: str | None, session: str | None, json_mode: bool) -> None:
    """Open a thread on REGION (a question or a note); print its id."""
    file, (region, text) = _split(words, ("REGION", "TEXT"))
    answer = _run(file, "thread.open", {"region": region, "body": _text(text), "quote": quote,
                                        "blocking": blocking}, profile, invitation, session)
    print_answer(answer, json_mode, lambda a: [str(a.get("thread_id"))])
    if not json_mode and blocking:
        note(f"`ce wait {answer.get('thread_id')}` until someone answers")


@click.command()
@click.argument("words", nargs=-1, metavar="[FILE]")
@click.option("--region", metavar="R", help="Only this region's threads.")
@click.option("--status", type=click.Choice(["open", "resolved", "outdated"]),
              help="Only threads in this status.")
@click.option("--proposal", "proposal_id", metavar="ID", help="Only this proposal's threads.")
@session_options
@guarded()
def threads(words: tuple[str, ...], region: str | None, status: str | None,
            proposal_id: str | None, profile: str | None, invitation: str | None,
            session: str | None, json_mode: bool) -> None:
    """List threads, newest first (with their comments)."""
    file, _ = _split(words, ())
    answer = _run(file, "workspace.threads", {"region": region, "status": status,
                                              "proposal_id": proposal_id, "limit": 200},
                  profile, invitation, session)
    if json_mode:
        emit_json(answer)
        return
    names = Names(_run(file, "workspace.participants", {}, profile, invitation, session))
    lines = [line for thread in answer.get("threads") or [] for line in thread_lines(thread, names)]
    for line in lines or ["no threads"]:
        echo(line)


@click.command()
@click.argument("words", nargs=-1, required=True, metavar="[FILE] THREAD TEXT|-")
@session_options
@guarded()
def reply(words: tuple[str, ...], profile: str | None, invitation: str | None,
          session: str | None, json_mode: bool) -> None:
    """Reply in THREAD (it wakes its author's `ce wait`)."""
    file, (thread_id, text) = _split(words, ("THREAD", "TEXT"))
    answer = _run(file, "thread.reply", {"thread_id": thread_id, "body": _text(text)},
                  profile, invitation, session)
    print_answer(answer, json_mode, lambda a: [f"{a.get('thread_id')} {a.get('status')}:"
                                       f" {len(a.get('comments') or [])} comments"])


@click.command()
@click.argument("words", nargs=-1, required=True, metavar="[FILE] THREAD")
@click.option("--reopen", is_flag=True, help="Reopen the thread instead.")
@session_options
@guarded()
def resolve(words: tuple[str, ...], reopen: bool, profile: str | None, invitation: str | None,
            session: str | None, json_mode: bool) -> None:
    """Resolve THREAD (its author or the host); --reopen opens it again."""
    file, (thread_id,) = _split(words, ("THREAD",))
    answer = _run(file, "thread.resolve", {"thread_id": thread_id, "resolved": not reopen},
                  profile, invitation, session)
    print_answer(answer, json_mode, lambda a: [f"{a.get('thread_id')} {a.get('status')}"])


@click.command()
@click.argument("proposal")
@click.option("--file", "file", type=click.File("r", encoding="utf-8"), required=True,
              metavar="F", help="The region's new text (heading line included); `-`: stdin.")
@click.option("--summary", metavar="S", help="A new one-line summary (default: the proposal's).")
@click.option("--base", type=click.IntRange(min=1), metavar="N",
              help="The version the new text is based on (default: the proposal's base).")
@session_options
@guarded()
def revise(proposal: str, file: Any, summary: str | None, base: int | None,
           profile: str | None, invitation: str | None, session: str | None,
           json_mode: bool) -> None:
    """Revise your PROPOSAL in place from --file F: a new revision, pending again."""
    answer = _run(None, "workspace.proposal.revise", {
        "proposal_id": proposal, "content": str(file.read()), "summary": summary,
        "base_version": base}, profile, invitation, session)
    print_answer(answer, json_mode, lambda a: [f"{a.get('proposal_id')} revision {a.get('revision')}"
                                       f" {a.get('status')} (base v{a.get('base_version')})"])


def rebase_lines(answer: dict[str, Any]) -> list[str]:
    head = answer.get("proposal_id")
    if answer.get("clean"):
        done = (f"applied as revision {answer.get('revision')}" if answer.get("applied")
                else "preview (--apply makes it a revision)")
        return [f"{head} merges cleanly onto v{answer.get('base_version')}: {done}",
                visible(str(answer.get("content") or "")).rstrip("\n")]
    lines = [f"{head} conflicts with v{answer.get('base_version')}; nothing changed"]
    if answer.get("note"):  # past the merge's cost bound: one conflict of the three texts
        lines.append(str(answer["note"]))
    for number, hunk in enumerate(answer.get("conflicts") or [], 1):
        lines.append(f"conflict {number}:")
        for side in ("base", "ours", "theirs"):
            text = visible(str(hunk.get(side, ""))).rstrip("\n").replace("\n", "\n    ")
            lines.append(f"  {side}:\n    {text}")
    return lines


@click.command()
@click.argument("words", nargs=-1, required=True, metavar="[FILE] PROPOSAL")
@click.option("--apply", "apply_it", is_flag=True,
              help="Make a clean merge the proposal's new revision (on the current version).")
@session_options
@guarded()
def rebase(words: tuple[str, ...], apply_it: bool, profile: str | None, invitation: str | None,
           session: str | None, json_mode: bool) -> None:
    """Three-way merge of a stale PROPOSAL onto its region's current text (a preview).

    Exit 3 when it conflicts (the hunks are printed; nothing changed).
    """
    file, (proposal_id,) = _split(words, ("PROPOSAL",))
    answer = _run(file, "workspace.proposal.rebase", {"proposal_id": proposal_id,
                                                      "apply": apply_it},
                  profile, invitation, session)
    print_answer(answer, json_mode, rebase_lines)
    if not answer.get("clean"):
        raise SystemExit(EXIT_CONFLICT)


def wait_for_thread(thread_id: str, timeout: float | None, profile: str | None,
                    invitation: str | None, session: str | None, json_mode: bool) -> None:
    """`ce wait THREAD`: until someone other than its author answers; exit 3 if it closed
    unanswered (resolved or outdated without a reply)."""
    from commonroom.cli import runtime
    from commonroom.wire import plans

    who = profiles.select(profile, invitation, session)
    thread = runtime.run_plan(who.hint, who.session, plans.reply(thread_id, timeout),
                              runtime.note_reconnecting)
    comments = thread.get("comments") or []
    replied = bool(comments) and comments[-1].get("participant_id") != thread.get("author_id")
    print_answer(thread, json_mode, thread_lines)
    if not replied:
        raise SystemExit(EXIT_CONFLICT)


COMMANDS: Final = (ask, threads, reply, resolve, revise, rebase)
