"""Provenance verbs (docs/spec/PROTOCOL.md section 18): `ce blame`, `ce revert`, `ce restore`,
`ce policy add|list|rm|pause`, `ce export FILE --git`.

`ce blame REGION` is an agent verb (the saved session, as in `agent_verbs.py`);
`ce blame FILE REGION` (or `ce blame FILE`, the whole document) is the host's,
on the room around FILE like the other host commands (`host_call.py`). The
rest are host commands: revert, restore and policies need `admin`; `ce export`
works on the sidecar through the engine's facade.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import click

from commonroom.cli.host_call import host_answer
from commonroom.cli.options import file_argument, json_option
from commonroom.cli.output import echo, guarded, print_answer
from commonroom.protocol.vocabulary import WHOLE


def format_blame(answer: dict[str, Any]) -> list[str]:
    rows = answer.get("lines", [])
    width = max((len(str(row.get("name", ""))) for row in rows), default=4)
    out = []
    for row in rows:
        who = str(row.get("name", ""))
        if row.get("kind") == "host_editor":
            who = f"{who} (editor)"
        mark = "*" if row.get("amended_by") else " "
        out.append(f"{row.get('version', 0):>5} {who:<{width + 9}}{mark}{row.get('line', 0):>6}  "
                   f"{row.get('text', '')}")
    return out


@click.command()
@click.argument("target")
@click.argument("region", required=False)
@click.option("--version", "version", type=click.IntRange(min=1), metavar="N",
              help="Blame an older version (default: the current one).")
@click.option("--profile", metavar="NAME", help="Agent form: the saved session to use.")
@json_option
@guarded()
def blame(target: str, region: str | None, version: int | None, profile: str | None,
          json_mode: bool) -> None:
    """Who last changed each line: `ce blame REGION` (agent), `ce blame FILE [REGION]` (host).

    Columns: version, author (an `(editor)` mark for the host's own saves, `*` where a
    reviewer amended the line), document line, text.
    """
    params: dict[str, Any] = {"version": version}
    if region is not None or os.path.isfile(target):
        params["region"] = region or WHOLE
        answer = host_answer(Path(target), "workspace.blame", params)
    else:
        from commonroom.cli import profiles
        from commonroom.cli.session_calls import call_as

        params["region"] = target
        answer = call_as(profiles.select(profile), "workspace.blame", params)
    print_answer(answer, json_mode, format_blame)


@click.command()
@file_argument
@click.argument("version", type=click.IntRange(min=1))
@click.option("--region", metavar="R", help="Undo it in this region only.")
@json_option
@guarded()
def revert(file: Path, version: int, region: str | None, json_mode: bool) -> None:
    """Undo what VERSION changed (three-way merge onto the current text); refused if later
    versions changed the same lines."""
    answer = host_answer(file, "workspace.revert", {"version": version, "region": region})
    print_answer(answer, json_mode, lambda a: [f"version {a['version']}: {a['summary']}"])


@click.command()
@file_argument
@click.argument("version", type=click.IntRange(min=2))
@click.option("--keep", is_flag=True, help="Keep your save as it is (the page's Keep mine).")
@json_option
@guarded()
def reapply(file: Path, version: int, keep: bool, json_mode: bool) -> None:
    """Re-apply what your save VERSION undid (`ce history FILE` names it: "undid NAME's
    change (vN)"), as a new version; --keep keeps the save instead."""
    answer = host_answer(file, "workspace.reapply", {"version": version, "keep": keep})
    print_answer(answer, json_mode, lambda a: [
        f"kept version {a['version']} as you saved it" if a["settled"] == "kept" else
        f"version {a['new_version']}: re-applied what version {a['version']} undid"])


@click.command()
@file_argument
@click.argument("region")
@click.argument("version", type=click.IntRange(min=1))
@json_option
@guarded()
def restore(file: Path, region: str, version: int, json_mode: bool) -> None:
    """Set REGION back to its text at VERSION."""
    answer = host_answer(file, "workspace.restore", {"region": region, "version": version})
    print_answer(answer, json_mode, lambda a: [f"version {a['version']}: {a['summary']}"])


@click.group()
def policy() -> None:
    """Auto-approve policies (host only): add, list, rm, pause."""


def format_policy(row: dict[str, Any]) -> str:
    who = row.get("participant_id") or (
        f"label {row.get('label')}" if row.get("label") else f"name {row.get('name_pattern')} (never)")
    state = "active" if row.get("active") else ("paused" if row.get("paused") else "expired")
    until = f" until {row['expires_at']}" if row.get("expires_at") else ""
    return (f"{row['policy_id']}  {state:<7} {who}  regions {row['region_pattern']}"
            f"  <= {row['max_changed_lines']} lines{until}  approved {row.get('approved_count', 0)}")


@policy.command("add")
@file_argument
@click.option("--participant", "participant_id", metavar="PT_ID", help="The participant's id.")
@click.option("--label", metavar="LABEL",
              help="Or whoever joined through an invitation you gave this label (ce invite --label).")
@click.option("--regions", "region_pattern", required=True, metavar="GLOB",
              help="Glob over heading paths (`*` crosses `/`), e.g. 'Plan/*'.")
@click.option("--max-lines", "max_changed_lines", required=True, type=click.IntRange(min=1),
              metavar="N", help="The most lines a proposal may change.")
@click.option("--minutes", type=click.FloatRange(min=0, min_open=True), metavar="M",
              help="Expire after M minutes (default: never).")
@json_option
@guarded()
def policy_add(file: Path, participant_id: str | None, label: str | None,
               region_pattern: str, max_changed_lines: int, minutes: float | None,
               json_mode: bool) -> None:
    """Add a policy; prints its id."""
    expires_at = None
    if minutes is not None:
        moment = datetime.now(UTC) + timedelta(minutes=minutes)
        expires_at = moment.isoformat(timespec="microseconds")
    answer = host_answer(file, "workspace.policy_add", {
        "participant_id": participant_id, "label": label,
        "region_pattern": region_pattern, "max_changed_lines": max_changed_lines,
        "expires_at": expires_at,
    })
    print_answer(answer, json_mode, lambda a: [str(a["policy_id"])])


@policy.command("list")
@file_argument
@json_option
@guarded()
def policy_list(file: Path, json_mode: bool) -> None:
    """Every policy and how many proposals it approved."""
    answer = host_answer(file, "workspace.policies", {})
    print_answer(answer, json_mode,
                 lambda a: [format_policy(row) for row in a.get("policies", [])] or ["no policies"])


@policy.command("rm")
@file_argument
@click.argument("policy_id")
@json_option
@guarded()
def policy_rm(file: Path, policy_id: str, json_mode: bool) -> None:
    """Remove a policy."""
    answer = host_answer(file, "workspace.policy_remove", {"policy_id": policy_id})
    print_answer(answer, json_mode, lambda a: [f"removed {policy_id}"])


@policy.command("pause")
@file_argument
@click.argument("policy_id", required=False)
@click.option("--resume", is_flag=True, help="Resume instead of pausing.")
@json_option
@guarded()
def policy_pause(file: Path, policy_id: str | None, resume: bool, json_mode: bool) -> None:
    """Pause one policy, or every policy when none is named (the kill switch)."""
    params: dict[str, Any] = {"paused": not resume}
    if policy_id is None:
        params["all"] = True
    else:
        params["policy_id"] = policy_id
    answer = host_answer(file, "workspace.policy_pause", params)
    verb = "resumed" if resume else "paused"
    print_answer(answer, json_mode, lambda a: [f"{verb} {len(a.get('policy_ids', []))} policies"])


@click.command()
@file_argument
@click.option("--git", "git", is_flag=True, required=False,
              help="Commit every version the git branch lacks (idempotent).")
@click.option("--git-all", "git_all", is_flag=True, help="As --git, the host's own saves too.")
@json_option
@guarded()
def export(file: Path, git: bool, git_all: bool, json_mode: bool) -> None:
    """Export the room's history so far: `ce export FILE --git`."""
    if not (git or git_all):
        raise click.UsageError("say where to: --git")
    from commonroom.engine.facade import SIDECAR_SUFFIX, export_git

    doc = file.resolve()

    def report(line: str) -> None:
        echo(line, err=True)

    done = export_git(doc, doc.with_name(doc.name + SIDECAR_SUFFIX), all_saves=git_all,
                      report=report)
    print_answer({"committed_versions": done}, json_mode,
                 lambda a: [f"committed {len(done)} versions" + (f" ({done[0]}..{done[-1]})" if done else "")])


COMMANDS: Final = (blame, revert, restore, policy, export, reapply)
