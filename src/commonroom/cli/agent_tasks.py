"""`ce task view|app|ask|show`: a task's surfaces from a script (docs/spec/PROTOCOL.md 20).

The agent of an accepted task publishes its live view (`ce task view TASK --file view.json`,
`--clear`) and its app (`ce task app TASK --file bundle.json`), asks the app open in the host's
page (`ce task ask TASK '{"question": "A or B?"}'`, the reply's JSON on stdout) and reads what
a task shows (`ce task show [TASK]`). JSON comes from a file, an argument or stdin (`-`); each
verb is one operation of the table over the blocking wire, as the other agent verbs.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from commonroom.cli import profiles
from commonroom.cli.output import emit_json, guarded, note, print_answer
from commonroom.cli.session_calls import call_as, session_options


def _json(source: str | None, file: Any, what: str) -> Any:
    """The JSON value of --file F, of the argument, or of stdin (`-`)."""
    if (source is None) == (file is None):
        raise click.UsageError(f"give the {what} as JSON with exactly one of --file F, the"
                               " argument, or `-` (stdin)")
    from_stdin = file is None and source == "-"
    text = str(file.read() if file is not None else sys.stdin.read() if from_stdin else source)
    try:
        return json.loads(text)
    except ValueError as error:
        raise click.UsageError(f"the {what} is not JSON: {error}") from None


_FILE = click.option("--file", "file", type=click.File("r", encoding="utf-8"), metavar="F",
                     help="Read the JSON from file F.")


@click.group("task")
def task() -> None:
    """A task's surfaces: its live view and its app (the task's agent), and app requests."""


@task.command("view")
@click.argument("task_id", metavar="TASK")
@click.argument("source", required=False, metavar="[JSON|-]")
@_FILE
@click.option("--clear", is_flag=True, help="Remove the task's live view.")
@session_options
@guarded()
def view(task_id: str, source: str | None, file: Any, clear: bool, profile: str | None,
         invitation: str | None, session: str | None, json_mode: bool) -> None:
    """Publish (or replace, at a higher revision) TASK's live view; --clear removes it."""
    who = profiles.select(profile, invitation, session)
    params: dict[str, Any] = {"task_id": task_id}
    if clear:
        if source is not None or file is not None:
            raise click.UsageError("--clear takes no view")
        params["clear"] = True
    else:
        params["surface"] = _json(source, file, "live view")
    answer = call_as(who, "task.live_view", params)

    def lines(a: Any) -> list[str]:
        shown = a.get("live_view")
        if shown is None:
            return ["cleared" if a.get("cleared") else "no live view to clear"]
        return [f"live view {shown.get('surface_id')} revision {shown.get('revision')}"]

    print_answer(answer, json_mode, lines)


@task.command("app")
@click.argument("task_id", metavar="TASK")
@click.argument("source", required=False, metavar="[JSON|-]")
@_FILE
@session_options
@guarded()
def app(task_id: str, source: str | None, file: Any, profile: str | None,
        invitation: str | None, session: str | None, json_mode: bool) -> None:
    """Publish (or replace) TASK's app bundle: {version: 1, manifest, html, css, js, initialState}."""
    who = profiles.select(profile, invitation, session)
    answer = call_as(who, "task.app", {"task_id": task_id, "bundle": _json(source, file, "bundle")})
    print_answer(answer, json_mode, lambda a: [
        f"app {a.get('title')!r} revision {a.get('revision')} ({a.get('size')} bytes)"])


@task.command("ask")
@click.argument("task_id", metavar="TASK")
@click.argument("source", required=False, metavar="[JSON|-]")
@_FILE
@session_options
@guarded()
def ask(task_id: str, source: str | None, file: Any, profile: str | None,
        invitation: str | None, session: str | None, json_mode: bool) -> None:
    """Ask TASK's app (open in the host's page) one JSON question; print its reply's JSON.

    Waits at most 15 s; no page hosting the app fails at once (exit 9, `no_app_host`)."""
    who = profiles.select(profile, invitation, session)
    answer = call_as(who, "task.app_request", {"task_id": task_id,
                                               "payload": _json(source, file, "payload")})
    emit_json(answer if json_mode else answer.get("reply"))  # escaped: the reply is the app's


@task.command("show")
@click.argument("task_id", metavar="[TASK]", required=False)
@session_options
@guarded()
def show(task_id: str | None, profile: str | None, invitation: str | None, session: str | None,
         json_mode: bool) -> None:
    """What the tasks show: each live view's and app's revision (one task's with TASK)."""
    who = profiles.select(profile, invitation, session)
    answer = call_as(who, "task.surfaces", {"task_id": task_id} if task_id else None)

    def lines(a: Any) -> list[str]:
        out = []
        for s in a.get("surfaces") or []:
            view_part = (f"live view r{s['live_view']['revision']}" if s.get("live_view")
                         else "no live view")
            app_part = (f"app {s['app']['title']!r} r{s['app']['revision']}, state r"
                        f"{s['app_state']['revision']}" if s.get("app") else "no app")
            ended = "" if s.get("open") else " (ended)"
            out.append(f"{s.get('task_id')}{ended}: {s.get('summary')} · {view_part} · {app_part}")
        return out or ["no task shows anything"]

    print_answer(answer, json_mode, lines)
    if not json_mode and task_id is None:
        note("`ce task show TASK --json` prints a task's views, bundle and state")


COMMANDS = (task,)
