"""The host's review of proposals: `ce proposals FILE`, `ce show FILE ID`, `ce review FILE [ID]`.

Host commands (`host_call.py` says how they reach the room). `ce review` with
a decision (`--approve`, `--reject`, `--request-changes`) decides one proposal;
without one it shows each diff and asks, the way `git add -p` walks hunks
(`review_interactively`). The room decides every rule; these only show its
answers, with names where the room answers with ids.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

import click

from commonroom.cli.host_call import host_answer
from commonroom.cli.options import file_argument, json_option
from commonroom.cli.output import (
    EXIT_CONFLICT,
    colour_diff,
    echo,
    emit_json,
    guarded,
    print_answer,
    visible,
)
from commonroom.cli.readable import Names
from commonroom.protocol import vocabulary
from commonroom.protocol.errors import CommonroomError


@click.command()
@file_argument
@json_option
@guarded()
def proposals(file: Path, json_mode: bool) -> None:
    """List the proposals of the room around FILE, newest first: author, base, whether it applies."""
    print_answer(proposals_view(file), json_mode, format_proposals)


@click.command()
@file_argument
@click.argument("proposal_id")
@json_option
@guarded()
def show(file: Path, proposal_id: str, json_mode: bool) -> None:
    """Show proposal PROPOSAL_ID with its diff against the current text (coloured on a terminal)."""
    detail = proposal_view(file, proposal_id)
    if json_mode:
        emit_json(detail)
        return
    sys.stdout.write(format_proposal_detail(detail, colour=sys.stdout.isatty()))
    sys.stdout.flush()


@click.command()
@file_argument
@click.argument("proposal_id", required=False)
@click.option("--approve", is_flag=True, help="Approve the proposal.")
@click.option("--reject", is_flag=True, help="Reject the proposal.")
@click.option("--request-changes", "request_changes", is_flag=True,
              help="Ask the author to revise it (needs --comment).")
@click.option("--comment", help="A note for the proposer (it opens a thread on the region; a"
              " reject or a request for changes needs one when asked).")
@click.option("--yes", "-y", "assume_yes", is_flag=True,
              help="Do not show the diff and ask first (the default at a terminal).")
@click.option("--revision", type=click.IntRange(min=1), default=None,
              help="The revision you read (`ce show --json`): nothing is decided when the"
              " author revised it since. Default: the revision shown here, or, when nothing is"
              " shown (--yes, no terminal), the one current when the command reads it.")
@json_option
@guarded()
def review(
    file: Path, proposal_id: str | None, approve: bool, reject: bool, request_changes: bool,
    comment: str | None, assume_yes: bool, revision: int | None, json_mode: bool,
) -> None:
    """Review PROPOSAL_ID, or every pending proposal in turn when no id is given.

    Without --approve/--reject it shows each diff and asks: approve, reject
    (asking for the comment), skip or quit. With one of them it decides at
    once; at a terminal it shows the diff and asks to confirm unless --yes.
    A decision binds to the revision shown: when the author revises the
    proposal while the question waits, nothing is decided.
    """
    chosen = [name for name, given in (("approve", approve), ("reject", reject),
                                       ("request_changes", request_changes)) if given]
    if len(chosen) > 1:
        raise click.UsageError("give at most one of --approve, --reject or --request-changes")
    if not chosen:
        if json_mode or not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise click.UsageError(
                "give --approve, --reject or --request-changes (asking needs a terminal: run it"
                " without --json at one)")
        review_interactively(file, proposal_id)
        return
    if proposal_id is None:
        raise click.UsageError("--approve/--reject/--request-changes decide one proposal: give its id")
    decision = chosen[0]
    if not assume_yes and not json_mode and sys.stdin.isatty() and sys.stdout.isatty():
        detail = proposal_view(file, proposal_id)
        sys.stdout.write(format_proposal_detail(detail, colour=True))
        if revision is not None and revision != detail.get("revision"):
            raise click.UsageError(
                f"{proposal_id} is at revision {detail.get('revision')}, not {revision}: the"
                " diff above is the current one; run the command again without --revision")
        if not click.confirm(f"{decision} {proposal_id}?", default=False):
            raise click.UsageError("not reviewed (answer y to confirm, or pass --yes)")
        params = {"proposal_id": proposal_id, "decision": decision, "comment": comment,
                  "revision": _revision_of(detail)}
        try:
            answer = host_answer(file, "workspace.review", params)
        except CommonroomError as error:
            notice = _revised_notice(error)
            if notice is None:
                raise
            echo(notice)
            sys.stdout.write(format_proposal_detail(proposal_view(file, proposal_id), colour=True))
            echo(f"run `ce review {file} {proposal_id}` again to decide on it")
            raise SystemExit(EXIT_CONFLICT) from None
        print_answer(answer, json_mode, lambda a: format_review(a, file))
        return
    if revision is None:
        # Nothing was shown: the decision is on the revision current as the command reads it.
        revision = _revision_of(host_answer(file, "workspace.proposal", {"proposal_id": proposal_id}))
    params = {"proposal_id": proposal_id, "decision": decision, "comment": comment,
              "revision": revision}
    answer = host_answer(file, "workspace.review", params)
    print_answer(answer, json_mode, lambda a: format_review(a, file))


def _revision_of(detail: dict[str, Any]) -> int:
    revision = detail.get("revision")
    return revision if isinstance(revision, int) else 1


def _revised_notice(error: CommonroomError) -> str | None:
    """The line `ce review` prints when the author revised the proposal while it asked."""
    if error.code != "proposal_conflict" or error.details.get("reason") != "revised":
        return None
    return (f"{error.recovery.get('proposal_id')} was revised while you read it (now revision"
            f" {error.details.get('current_revision')}): nothing was decided; here is the new"
            " diff")


def review_interactively(doc: Path, proposal_id: str | None) -> None:
    """Show each diff and ask approve / reject (with a comment) / skip / quit.

    With an id: that proposal; without: every pending one, oldest first.
    """
    if proposal_id is not None:
        ids = [proposal_id]
    else:
        listed = host_answer(doc, "workspace.proposals", {"status": "pending", "limit": 200})
        ids = [str(p["proposal_id"]) for p in reversed(listed.get("proposals") or [])]
        if not ids:
            echo("no pending proposals")
            return
    names = _names(doc)
    colour = sys.stdout.isatty()
    for index, pid in enumerate(ids, 1):
        if len(ids) > 1:
            echo(f"({index}/{len(ids)})")
        if not _review_one(doc, pid, names, colour):
            return


def _review_one(doc: Path, pid: str, names: Names, colour: bool) -> bool:
    """Show one proposal and ask until it is decided or skipped; False when the host quits.

    The decision names the revision shown; when the author revised it while the question
    waited, the room decides nothing and the new diff is shown and asked about again."""
    while True:
        detail = proposal_view(doc, pid)
        sys.stdout.write(format_proposal_detail(detail, colour=colour))
        if detail.get("status") != "pending":
            echo(f"{pid} is {detail.get('status')}: nothing to decide")
            return True
        answer = click.prompt("approve, reject, skip or quit? [a/r/s/q]",
                              type=click.Choice(["a", "r", "s", "q"]), show_choices=False)
        if answer == "q":
            return False
        if answer == "s":
            echo(f"skipped {pid}")
            return True
        params: dict[str, Any] = {"proposal_id": pid, "revision": _revision_of(detail),
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
        try:
            reviewed = host_answer(doc, "workspace.review", params)
        except CommonroomError as error:
            notice = _revised_notice(error)
            if notice is None:
                raise
            echo(notice)
            continue
        echo(f"{pid} {reviewed.get('status')} (by {names.name(reviewed.get('reviewer_id'))})")
        return True


# -- views: the room's answers, with names -----------------------------------------------


def proposals_view(doc: Path) -> dict[str, Any]:
    """`workspace.proposals` plus, per row, the author's name and whether it still applies.

    `applies` (pending and approved proposals only; null otherwise) is the
    engine's `stale`, negated: the room decides, the command only shows it.
    """
    answer = host_answer(doc, "workspace.proposals", {})
    names = _participant_names(doc)
    rows = []
    for row in answer.get("proposals") or []:
        row = dict(row)
        row["author_name"] = names.get(str(row.get("participant_id")))
        open_ = row.get("status") in vocabulary.PROPOSAL_OPEN
        row["applies"] = (not row.get("stale")) if open_ else None
        rows.append(row)
    return {**answer, "proposals": rows}


def proposal_view(doc: Path, proposal_id: str) -> dict[str, Any]:
    """`workspace.proposal` (content and diff from the current text) plus the author's name."""
    detail = host_answer(doc, "workspace.proposal", {"proposal_id": proposal_id})
    detail["author_name"] = _participant_names(doc).get(str(detail.get("participant_id")))
    return detail


def _names(doc: Path) -> Names:
    return Names(host_answer(doc, "workspace.participants", {}))


def _participant_names(doc: Path) -> dict[str, str]:
    answer = host_answer(doc, "workspace.participants", {})
    return {str(p.get("participant_id")): str(p.get("name"))
            for p in answer.get("participants") or [] if isinstance(p, dict)}


# -- readable output -------------------------------------------------------------------


def _author(row: dict[str, Any]) -> str:
    name = row.get("author_name")
    return str(name) if name else str(row.get("participant_id"))


def format_proposals(answer: dict[str, Any]) -> list[str]:
    rows = answer.get("proposals") or []
    if not rows:
        return ["no proposals"]
    lines = []
    for row in rows:
        applies = {True: "applies", False: "stale: region changed since base", None: ""}[
            row.get("applies")]
        lines.append(
            f"{row.get('proposal_id')}  {row.get('status', '?'):<10}  {row.get('region')}  "
            f"base v{row.get('base_version')}  by {_author(row)}  "
            f"{json.dumps(row.get('summary', ''), ensure_ascii=False)}"
            + (f"  ({applies})" if applies else "")
        )
    return lines


def format_proposal_detail(detail: dict[str, Any], *, colour: bool) -> str:
    """What `ce show` and `ce review` print: nothing in it can drive the terminal (`visible`)."""
    head = [
        f"proposal {detail.get('proposal_id')} ({detail.get('status')}, revision"
        f" {detail.get('revision', 1)})",
        f"region:  {detail.get('region')}",
        f"by:      {_author(detail)}",
        f"base:    v{detail.get('base_version')} (current v{detail.get('current_version')})",
        f"summary: {detail.get('summary')}",
    ]
    if detail.get("review_comment"):
        head.append(f"comment: {detail.get('review_comment')}")
    if detail.get("amended"):
        head.append("amended: the reviewer edited it before approving")
    head.extend(f"warning: {warning}" for warning in detail.get("warnings") or [])
    diff = str(detail.get("diff") or "")
    body = colour_diff(diff, colour) if diff else "(no change to the current text)\n"
    return visible("\n".join(head)) + "\n\n" + body


def format_review(answer: dict[str, Any], doc: Path) -> list[str]:
    """`pr_… approved (by host)`: the reviewer's name, not their id (`--json` keeps the id)."""
    return [f"{answer.get('proposal_id')} {answer.get('status')} (by {_names(doc).name(answer.get('reviewer_id'))})"]


COMMANDS: Final = (proposals, show, review)
