"""The agent verbs: `ce regions/read/checkout/renew/release/propose/wait/withdraw/commit/diff/
history/participants/leases/whoami/leave`, over a saved session profile (`profiles.py`).

They are the agent side of `ce`, with `agent_session.py` (join, call, observe,
decode) and the agent forms of `conversation.py` and `provenance.blame`.

Each one-shot verb is one operation of the table called through the blocking
wire (`commonroom.wire.sync`: HTTP/1.1 over a loopback socket, or the
transport plugin), so it imports neither trio nor the engine on the common
path, and a script's `ce read` starts fast. `ce wait` runs the wire's review
plan under trio, so SIGINT/SIGTERM stop it (`runtime.until_stopped`).
Which session a verb uses is `profiles.select`'s rule.

Output: `--json` prints the operation's answer object; otherwise readable
text, where the verbs that create something (`checkout`, `propose`) print
its id alone on stdout so `ID=$(ce propose ...)` works, and `read` prints
the region's text exactly. Refusals exit with the codes of `output.EXIT_CODES`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Final

import click

from commonroom.cli import conversation, profiles, runtime
from commonroom.cli.output import echo, emit_json, guarded, note, print_answer, visible, write_text
from commonroom.cli.readable import Names, event_line, review_line
from commonroom.cli.session_calls import call_as, session_options
from commonroom.protocol import vocabulary

WHOLE: Final = vocabulary.WHOLE
# Completion asks the room; it must answer fast or not at all.
COMPLETION_TIMEOUT: Final = 2.0
WAIT_TERMINAL_OK: Final = frozenset(vocabulary.PROPOSAL_ACCEPTED)


# -- names and the host forms ----------------------------------------------------------------


def _names(who: profiles.Profile) -> Names:
    """Who is who in the room, for readable lines (`--json` keeps the ids)."""
    return Names(call_as(who, "workspace.participants"))


# The host forms of the read verbs (`ce history FILE`, `ce diff FILE`, `ce participants FILE`,
# `ce leases FILE`): FILE first, as the host, on the room around it (`host_call.py`).
FILE_ARGUMENT_HELP: Final = "[FILE]"


def _reader(file: str | None, profile: str | None, invitation: str | None,
            session: str | None) -> Callable[[str, dict[str, Any] | None], Any]:
    """How this command calls: as the host on the room around FILE, else as the session."""
    if file is not None:
        from pathlib import Path

        from commonroom.cli.host_call import host_answer

        doc = Path(file)

        def as_host(op: str, params: dict[str, Any] | None) -> Any:
            return host_answer(doc, op, params or {})

        return as_host
    who = profiles.select(profile, invitation, session)

    def as_session(op: str, params: dict[str, Any] | None) -> Any:
        return call_as(who, op, params)

    return as_session


# -- completion (never raises: a broken room means no suggestions) ---------------------------


def _completion_profile(ctx: click.Context) -> profiles.Profile:
    params = ctx.params
    return profiles.select(params.get("profile"), params.get("invitation"), params.get("session"))


def complete_regions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    try:
        who = _completion_profile(ctx)
        answer = call_as(who, "workspace.regions", timeout=COMPLETION_TIMEOUT)
        names = [str(row["region"]) for row in answer.get("regions", [])]
        names += [str(row["title"]) for row in answer.get("regions", [])]
        return sorted({n for n in names if n.startswith(incomplete)})
    except Exception:  # completion must never print a traceback
        return []


def complete_proposals(ctx: click.Context, param: click.Parameter, incomplete: str
                       ) -> list[str]:
    try:
        who = _completion_profile(ctx)
        answer = call_as(who, "workspace.proposals", timeout=COMPLETION_TIMEOUT)
        ids = [str(row["proposal_id"]) for row in answer.get("proposals", [])]
        return [i for i in ids if i.startswith(incomplete)]
    except Exception:  # completion must never print a traceback
        return []


def complete_leases(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    try:
        who = _completion_profile(ctx)
        return [str(row["lease_id"]) for row in _my_leases(who, COMPLETION_TIMEOUT)
                if str(row["lease_id"]).startswith(incomplete)]
    except Exception:  # completion must never print a traceback
        return []


# -- the verbs -----------------------------------------------------------------------------


@click.command()
@session_options
@guarded()
def whoami(profile: str | None, invitation: str | None, session: str | None,
           json_mode: bool) -> None:
    """Show the session a command would use: profile, participant, capabilities."""
    who = profiles.select(profile, invitation, session)
    data = {key: who.data.get(key) for key in (
        "participant_id", "name", "kind", "workspace_id", "capabilities", "expires_at")}
    data["profile"] = who.name
    data["profile_path"] = str(profiles.path_of(who.name)) if who.name else None
    default = profiles.default() if who.name else None
    data["default"] = bool(default and default.name == who.name)
    if json_mode:
        emit_json(data)
        return
    if who.name is None:
        echo("session: from --invitation/--session or CE_INVITATION/CE_SESSION (no profile)")
    else:
        echo(f"profile: {who.name}{' (the default)' if data['default'] else ''}")
        echo(f"room: {profiles.room_label(who)}")
    for key in ("name", "participant_id", "kind", "workspace_id", "expires_at"):
        if data.get(key) is not None:
            echo(f"{key}: {data[key]}")
    capabilities = data.get("capabilities")
    if isinstance(capabilities, list):
        echo(f"capabilities: {','.join(str(c) for c in capabilities)}")


@click.command()
@session_options
@guarded()
def leave(profile: str | None, invitation: str | None, session: str | None,
          json_mode: bool) -> None:
    """End the session (its leases are released) and delete its profile."""
    from commonroom.client import errors

    who = profiles.select(profile, invitation, session)
    try:
        answer = call_as(who, "workspace.leave")
    except errors.Unauthorized:
        # Already ended (expired, revoked): the profile is useless; remove it anyway.
        profiles.delete(who)
        raise
    profiles.delete(who)
    print_answer(answer, json_mode, lambda a: [f"left ({a.get('participant_id')})"
                                       + (f"; profile {who.name} deleted" if who.name else "")])


@click.command()
@session_options
@guarded()
def regions(profile: str | None, invitation: str | None, session: str | None,
            json_mode: bool) -> None:
    """List the document's regions (heading paths) at the current version."""
    answer = call_as(profiles.select(profile, invitation, session), "workspace.regions")

    def lines(a: Any) -> list[str]:
        out = [f"version {a.get('version')}"]
        out += [f"{row.get('line'):>5}  {row.get('region')}" for row in a.get("regions", [])]
        return out

    print_answer(answer, json_mode, lines)


@click.command()
@click.argument("region", required=False, default=WHOLE, shell_complete=complete_regions)
@click.option("--version", "version", type=click.IntRange(min=1), metavar="N",
              help="Read an older version (default: the current one).")
@session_options
@guarded()
def read(region: str, version: int | None, profile: str | None, invitation: str | None,
         session: str | None, json_mode: bool) -> None:
    """Print REGION's text (default: the whole document); remember its version for propose."""
    who = profiles.select(profile, invitation, session)
    answer = call_as(who, "workspace.read", {"region": region, "version": version})
    if version is None:
        who.record_read(sorted({region, str(answer.get("region", region))}),
                        int(answer["version"]))
    if json_mode:
        emit_json(answer)
        return
    content = str(answer.get("content", ""))
    write_text(content)
    note(f"({answer.get('region')} at version {answer.get('version')}"
          f"{', truncated' if answer.get('truncated') else ''})")


@click.command()
@click.argument("region", shell_complete=complete_regions)
@click.option("--minutes", type=click.IntRange(min=1), metavar="M",
              help="How long to hold it (default 15).")
@session_options
@guarded()
def checkout(region: str, minutes: int | None, profile: str | None, invitation: str | None,
             session: str | None, json_mode: bool) -> None:
    """Lease REGION so others keep out while you edit it; print the lease id."""
    answer = call_as(profiles.select(profile, invitation, session), "workspace.checkout",
                   {"region": region, "minutes": minutes})
    print_answer(answer, json_mode, lambda a: [str(a.get("lease_id"))])
    if not json_mode:
        note(f"leased {answer.get('region')} until {answer.get('expires_at')}")


def _my_leases(who: profiles.Profile, timeout: float | None = None) -> list[dict[str, Any]]:
    mine = who.participant_id
    if mine is None:
        return []  # a session from flags/env: its participant id is not known here
    rows = call_as(who, "workspace.leases", timeout=timeout).get("leases", [])
    return [row for row in rows if row.get("participant_id") == mine]


def _only_lease(who: profiles.Profile, lease: str | None) -> str:
    """LEASE as given (an id), or the id of your lease on the region it names (its path or
    its last title), or your only lease when none is given."""
    if lease:
        if lease.startswith("ls_") or who.participant_id is None:
            return lease
        named = [row for row in _my_leases(who)
                 if lease in (row["region"], str(row["region"]).rsplit("/", 1)[-1])]
        return str(named[0]["lease_id"]) if len(named) == 1 else lease
    if who.participant_id is None:
        raise click.UsageError("give LEASE: without a profile the session's leases are unknown")
    mine = _my_leases(who)
    if len(mine) == 1:
        return str(mine[0]["lease_id"])
    if not mine:
        raise click.UsageError("you hold no lease (ce checkout REGION takes one)")
    listed = ", ".join(f"{row['lease_id']} ({row['region']})" for row in mine)
    raise click.UsageError(f"you hold several leases; name one: {listed}")


@click.command()
@click.argument("lease", required=False, shell_complete=complete_leases)
@click.option("--minutes", type=click.IntRange(min=1), metavar="M",
              help="Extend to this many minutes from now (default 15).")
@session_options
@guarded()
def renew(lease: str | None, minutes: int | None, profile: str | None, invitation: str | None,
          session: str | None, json_mode: bool) -> None:
    """Extend LEASE: its id or its region (default: your only lease)."""
    who = profiles.select(profile, invitation, session)
    answer = call_as(who, "workspace.renew", {"lease_id": _only_lease(who, lease),
                                            "minutes": minutes})
    print_answer(answer, json_mode,
         lambda a: [f"{a.get('lease_id')} {a.get('region')} until {a.get('expires_at')}"])


@click.command()
@click.argument("lease", required=False, shell_complete=complete_leases)
@session_options
@guarded()
def release(lease: str | None, profile: str | None, invitation: str | None,
            session: str | None, json_mode: bool) -> None:
    """Release LEASE: its id or its region (default: your only lease)."""
    who = profiles.select(profile, invitation, session)
    answer = call_as(who, "workspace.release", {"lease_id": _only_lease(who, lease)})
    print_answer(answer, json_mode, lambda a: [f"released {a.get('lease_id')}"])


@click.command()
@click.argument("region", shell_complete=complete_regions)
@click.argument("source", required=False, metavar="[-]")
@click.option("--file", "file", type=click.File("r", encoding="utf-8"), metavar="F",
              help="The region's new text (heading line included); `-` or no --file: stdin.")
@click.option("--summary", metavar="S", help="One line for the reviewer (default: 'update REGION').")
@click.option("--base", type=click.IntRange(min=1), metavar="N",
              help="The version the text is based on (default: your last `ce read` of REGION).")
@session_options
@guarded()
def propose(region: str, source: str | None, file: Any, summary: str | None, base: int | None,
            profile: str | None, invitation: str | None, session: str | None,
            json_mode: bool) -> None:
    """Propose new text for REGION from --file F or stdin (-); print the proposal id."""
    if source is not None and source != "-":
        raise click.UsageError(f"unexpected argument {source!r}: give the text with --file F"
                               " or `-` for stdin")
    if (source == "-") == (file is not None):
        raise click.UsageError("give the new text with exactly one of --file F or `-` (stdin)")
    if source == "-" and session == profiles.FROM_STDIN:
        raise click.UsageError("stdin cannot carry both the text and the session: give the text"
                               " with --file F, or the session in CE_SESSION")
    who = profiles.select(profile, invitation, session)
    if base is None:
        base = who.last_read(region)
        if base is None:
            base = who.last_read(WHOLE)
        if base is None:
            raise click.UsageError(
                f"no read of {region!r} recorded for this session: `ce read {region}` first,"
                " or give --base N (the version your text is based on)"
            )
    content = str(file.read()) if file is not None else sys.stdin.read()
    answer = call_as(who, "workspace.propose", {
        "region": region, "content": content, "base_version": base,
        "summary": summary or f"update {region}"})
    print_answer(answer, json_mode, lambda a: [str(a.get("proposal_id"))])
    if not json_mode:
        note(f"proposed on {answer.get('region')} (base v{base}); `ce wait"
              f" {answer.get('proposal_id')}` until it is reviewed")


@click.command()
@click.argument("proposal", shell_complete=complete_proposals)
@click.option("--timeout", type=click.FloatRange(min=0), metavar="S",
              help="Give up after S seconds (exit 124). Default: wait for ever.")
@session_options
@guarded()
def wait(proposal: str, timeout: float | None, profile: str | None, invitation: str | None,
         session: str | None, json_mode: bool) -> None:
    """Wait until PROPOSAL is reviewed; print it. Exit 0 approved/committed, 3 otherwise.

    With a thread id (th_...) instead: wait until someone other than its author
    answers it (exit 0), or it is resolved or outdated unanswered (exit 3).
    A room that restarts meanwhile is waited for (a note on stderr says so).
    Ctrl-C or SIGTERM ends the wait with exit 130.
    """
    if proposal.startswith(conversation.THREAD_PREFIX):
        conversation.wait_for_thread(proposal, timeout, profile, invitation, session, json_mode)
        return
    from commonroom.client.common import proposal_of
    from commonroom.protocol.records import to_wire
    from commonroom.wire import plans

    who = profiles.select(profile, invitation, session)
    decided = proposal_of(runtime.run_plan(who.hint, who.session, plans.review(proposal, timeout),
                                           runtime.note_reconnecting))
    answer = to_wire(decided)
    if json_mode:
        emit_json(answer)
    else:
        echo(review_line(answer, _names(who)))
    if decided.status not in WAIT_TERMINAL_OK:
        from commonroom.cli.output import EXIT_CONFLICT

        raise SystemExit(EXIT_CONFLICT)


@click.command()
@click.argument("proposal", shell_complete=complete_proposals)
@session_options
@guarded()
def withdraw(proposal: str, profile: str | None, invitation: str | None, session: str | None,
             json_mode: bool) -> None:
    """Withdraw your PROPOSAL (pending or approved): it will not be committed."""
    answer = call_as(profiles.select(profile, invitation, session), "workspace.withdraw",
                   {"proposal_id": proposal})
    print_answer(answer, json_mode, lambda a: [f"{a.get('proposal_id')} {a.get('status')}"])


@click.command()
@click.argument("proposal", shell_complete=complete_proposals)
@session_options
@guarded()
def commit(proposal: str, profile: str | None, invitation: str | None, session: str | None,
           json_mode: bool) -> None:
    """Commit approved PROPOSAL: it lands in the file as a new version."""
    answer = call_as(profiles.select(profile, invitation, session), "workspace.commit",
                   {"proposal_id": proposal})
    print_answer(answer, json_mode,
         lambda a: [f"committed {a.get('proposal_id')} as version {a.get('version')}"
                    f" ({a.get('region')})"])


@click.command()
@click.option("--base", type=click.IntRange(min=1), metavar="N",
              help="From this version (default: your last `ce read` of the region).")
@click.option("--to", "to", type=click.IntRange(min=1), metavar="N",
              help="To this version (default: the current one).")
@click.option("--region", metavar="R", shell_complete=complete_regions,
              help="Only this region (default: the whole document).")
@click.argument("file", required=False, metavar=FILE_ARGUMENT_HELP)
@session_options
@guarded()
def diff(base: int | None, to: int | None, region: str | None, file: str | None,
         profile: str | None, invitation: str | None, session: str | None,
         json_mode: bool) -> None:
    """Show the unified diff between two versions (of one region, or the whole document).

    With FILE, as the host: from the version before the current one unless --base says.
    """
    run = _reader(file, profile, invitation, session)
    if base is None and file is not None:
        base = max(1, int(run("workspace.status", None)["version"]) - 1)
    elif base is None:
        base = profiles.select(profile, invitation, session).last_read(region or WHOLE)
        if base is None:
            raise click.UsageError("give --base N (no read recorded to diff from)")
    answer = run("workspace.diff", {"base_version": base, "to_version": to, "region": region})
    if json_mode:
        emit_json(answer)
        return
    text = str(answer.get("diff", ""))
    if text:
        from commonroom.cli.output import colour_diff

        sys.stdout.write(colour_diff(text, sys.stdout.isatty()))
        sys.stdout.flush()
    else:
        note(f"no change from version {answer.get('base_version')} to"
              f" {answer.get('to_version')}")


@click.command()
@click.option("--limit", type=click.IntRange(1, 200), metavar="N", help="At most N events.")
@click.option("--before", "before", type=click.IntRange(min=1), metavar="ID",
              help="Only events older than event ID.")
@click.argument("file", required=False, metavar=FILE_ARGUMENT_HELP)
@session_options
@guarded()
def history(limit: int | None, before: int | None, file: str | None, profile: str | None,
            invitation: str | None, session: str | None, json_mode: bool) -> None:
    """List the room's retained events, newest first (with FILE: as the host)."""
    run = _reader(file, profile, invitation, session)
    answer = run("workspace.history", {"limit": limit, "before_event_id": before})
    if json_mode:
        emit_json(answer)
        return
    names = Names(run("workspace.participants", None))
    for line in [event_line(e, names) for e in answer.get("events", [])] or ["no events"]:
        echo(line)


@click.command()
@click.argument("file", required=False, metavar=FILE_ARGUMENT_HELP)
@session_options
@guarded()
def participants(file: str | None, profile: str | None, invitation: str | None,
                 session: str | None, json_mode: bool) -> None:
    """List who is in the room, and who is present (with FILE: as the host)."""
    answer = _reader(file, profile, invitation, session)("workspace.participants", None)
    print_answer(answer, json_mode, lambda a: [
        f"{p.get('participant_id')}  {p.get('name')}  {p.get('kind')}  "
        f"{'present' if p.get('present') else 'away'}  {','.join(p.get('capabilities', []))}"
        + (f"  {runtime_words(p['runtime'])}" if p.get("runtime") else "")
        for p in a.get("participants", [])])


def runtime_words(runtime: dict[str, Any]) -> str:
    """A resident runtime as the page shows it: "resident · running · 2 queued"."""
    words = ["resident", str(runtime.get("state"))]
    if runtime.get("queued"):
        words.append(f"{runtime['queued']} queued")
    if runtime.get("note"):
        words.append(visible(str(runtime["note"])))
    return " · ".join(words)


@click.command()
@click.option("--mine", is_flag=True, help="Only the leases this session's participant holds.")
@click.argument("file", required=False, metavar=FILE_ARGUMENT_HELP)
@session_options
@guarded()
def leases(mine: bool, file: str | None, profile: str | None, invitation: str | None,
           session: str | None, json_mode: bool) -> None:
    """List the active leases (with FILE: as the host)."""
    run = _reader(file, profile, invitation, session)
    if mine:
        if file is not None:
            raise click.UsageError("--mine is an agent's: the host's own leases are its holds")
        who = profiles.select(profile, invitation, session)
        if who.participant_id is None:
            raise click.UsageError("--mine needs a profile (the participant id is unknown)")
        answer = run("workspace.leases", None)
        answer = {**answer, "leases": [row for row in answer.get("leases", [])
                                       if row.get("participant_id") == who.participant_id]}
    else:
        answer = run("workspace.leases", None)
    if json_mode:
        emit_json(answer)
        return
    names = Names(run("workspace.participants", None))
    for line in [f"{row.get('lease_id')}  {row.get('region')}  by {names.who(row.get('participant_id'))}"
                 f"  until {row.get('expires_at')}" for row in answer.get("leases", [])] or ["no leases"]:
        echo(line)


# What `cli/main.py` puts on the `ce` group.
COMMANDS: Final = (whoami, leave, regions, read, checkout, renew, release, propose, wait, withdraw,
                   commit, diff, history, participants, leases)
