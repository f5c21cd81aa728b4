"""Provenance verbs (docs/spec/PROTOCOL.md section 18): `ce blame`, `ce revert`, `ce restore`,
`ce policy add|list|rm|pause`, `ce export FILE --git`.

`ce blame REGION` is an agent verb (the saved session); `ce blame FILE REGION`
(or `ce blame FILE`, the whole document) is the host's, on the room around
FILE like the other host commands (`cli/host.py`). The rest are host
commands: revert, restore and policies need `admin`.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from commonroom.cli.output import echo, emit_json, guarded
from commonroom.protocol.vocabulary import WHOLE

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _host(file: Path, op_name: str, params: dict[str, Any]) -> dict[str, Any]:
    from commonroom.cli.host import check_answer, host_call

    return check_answer(host_call(file, op_name, params))


def _print(answer: dict[str, Any], json_mode: bool, lines: list[str]) -> None:
    if json_mode:
        emit_json(answer)
        return
    for line in lines:
        echo(line)


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
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object).")
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
        answer = _host(Path(target), "workspace.blame", params)
    else:
        from commonroom.cli import agent

        params["region"] = target
        answer = agent._call(agent._profile(profile, None, None), "workspace.blame", params)
    _print(answer, json_mode, format_blame(answer))


@click.command()
@click.argument("file", type=_FILE)
@click.argument("version", type=click.IntRange(min=1))
@click.option("--region", metavar="R", help="Undo it in this region only.")
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object).")
@guarded()
def revert(file: Path, version: int, region: str | None, json_mode: bool) -> None:
    """Undo what VERSION changed (three-way merge onto the current text); refused if later
    versions changed the same lines."""
    answer = _host(file, "workspace.revert", {"version": version, "region": region})
    _print(answer, json_mode, [f"version {answer['version']}: {answer['summary']}"])


@click.command()
@click.argument("file", type=_FILE)
@click.argument("region")
@click.argument("version", type=click.IntRange(min=1))
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object).")
@guarded()
def restore(file: Path, region: str, version: int, json_mode: bool) -> None:
    """Set REGION back to its text at VERSION."""
    answer = _host(file, "workspace.restore", {"region": region, "version": version})
    _print(answer, json_mode, [f"version {answer['version']}: {answer['summary']}"])


@click.group()
def policy() -> None:
    """Auto-approve policies (host only): add, list, rm, pause."""


def format_policy(row: dict[str, Any]) -> str:
    who = row.get("participant_id") or f"name {row.get('name_pattern')}"
    state = "active" if row.get("active") else ("paused" if row.get("paused") else "expired")
    until = f" until {row['expires_at']}" if row.get("expires_at") else ""
    return (f"{row['policy_id']}  {state:<7} {who}  regions {row['region_pattern']}"
            f"  <= {row['max_changed_lines']} lines{until}  approved {row.get('approved_count', 0)}")


@policy.command("add")
@click.argument("file", type=_FILE)
@click.option("--participant", "participant_id", metavar="PT_ID", help="The participant's id.")
@click.option("--name", "name_pattern", metavar="GLOB", help="Or a glob over participant names.")
@click.option("--regions", "region_pattern", required=True, metavar="GLOB",
              help="Glob over heading paths (`*` crosses `/`), e.g. 'Plan/*'.")
@click.option("--max-lines", "max_changed_lines", required=True, type=click.IntRange(min=1),
              metavar="N", help="The most lines a proposal may change.")
@click.option("--minutes", type=click.FloatRange(min=0, min_open=True), metavar="M",
              help="Expire after M minutes (default: never).")
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object).")
@guarded()
def policy_add(file: Path, participant_id: str | None, name_pattern: str | None,
               region_pattern: str, max_changed_lines: int, minutes: float | None,
               json_mode: bool) -> None:
    """Add a policy; prints its id."""
    expires_at = None
    if minutes is not None:
        moment = datetime.now(UTC) + timedelta(minutes=minutes)
        expires_at = moment.isoformat(timespec="microseconds")
    answer = _host(file, "workspace.policy_add", {
        "participant_id": participant_id, "name_pattern": name_pattern,
        "region_pattern": region_pattern, "max_changed_lines": max_changed_lines,
        "expires_at": expires_at,
    })
    _print(answer, json_mode, [str(answer["policy_id"])])


@policy.command("list")
@click.argument("file", type=_FILE)
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object).")
@guarded()
def policy_list(file: Path, json_mode: bool) -> None:
    """Every policy and how many proposals it approved."""
    answer = _host(file, "workspace.policies", {})
    _print(answer, json_mode, [format_policy(row) for row in answer.get("policies", [])]
           or ["no policies"])


@policy.command("rm")
@click.argument("file", type=_FILE)
@click.argument("policy_id")
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object).")
@guarded()
def policy_rm(file: Path, policy_id: str, json_mode: bool) -> None:
    """Remove a policy."""
    answer = _host(file, "workspace.policy_remove", {"policy_id": policy_id})
    _print(answer, json_mode, [f"removed {policy_id}"])


@policy.command("pause")
@click.argument("file", type=_FILE)
@click.argument("policy_id", required=False)
@click.option("--resume", is_flag=True, help="Resume instead of pausing.")
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object).")
@guarded()
def policy_pause(file: Path, policy_id: str | None, resume: bool, json_mode: bool) -> None:
    """Pause one policy, or every policy when none is named (the kill switch)."""
    params: dict[str, Any] = {"paused": not resume}
    if policy_id is None:
        params["all"] = True
    else:
        params["policy_id"] = policy_id
    answer = _host(file, "workspace.policy_pause", params)
    verb = "resumed" if resume else "paused"
    _print(answer, json_mode, [f"{verb} {len(answer.get('policy_ids', []))} policies"])


@click.command()
@click.argument("file", type=_FILE)
@click.option("--git", "git", is_flag=True, required=False,
              help="Commit every version the git branch lacks (idempotent).")
@click.option("--git-all", "git_all", is_flag=True, help="As --git, the host's own saves too.")
@click.option("--json", "json_mode", is_flag=True, help="Machine-readable output (one JSON object).")
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
    _print({"committed_versions": done}, json_mode,
           [f"committed {len(done)} versions" + (f" ({done[0]}..{done[-1]})" if done else "")])


def register(group: click.Group) -> None:
    for command in (blame, revert, restore, policy, export):
        group.add_command(command)
