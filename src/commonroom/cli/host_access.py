"""Who gets into the room around FILE: `ce invite`, `ce invitations`, `ce revoke`, `ce open`.

Host commands (`host_call.py` says how they reach the room): invitations for
agents and people, and the host's own way into the owner page, a one-time
login link (`ce open FILE`; `--logout-all` ends every page login instead).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import click

from commonroom.cli.host_call import host_answer, logout_all_pages, owner_post
from commonroom.cli.options import file_argument, json_option
from commonroom.cli.output import echo, emit_json, error_from_wire, guarded, print_answer
from commonroom.protocol.errors import CommonroomError

# Where a browser can be opened for `ce open` (else the link is only printed).
BROWSER_ENVIRONMENT: Final = ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")


@click.command()
@file_argument
@click.option("--capabilities", metavar="A,B",
              help="Comma-separated capabilities (default: the agent set).")
@click.option("--expires", type=click.IntRange(min=1), metavar="MIN",
              help="Minutes until the invitation expires.")
@click.option("--max-uses", type=click.IntRange(min=1), metavar="N",
              help="How many joins it allows (default 1).")
@click.option("--max-sessions", type=click.IntRange(min=1), metavar="N",
              help="How many of its sessions may be active at once (default 8).")
@click.option("--label", metavar="NAME",
              help="A label every participant joining through it carries; a policy may name it"
              " (ce policy add --label NAME).")
@json_option
@guarded()
def invite(
    file: Path, capabilities: str | None, expires: int | None, max_uses: int | None,
    max_sessions: int | None, label: str | None, json_mode: bool,
) -> None:
    """Create an invitation to the room around FILE; print its commonroom:// line."""
    params: dict[str, Any] = {"expires_in_minutes": expires, "max_uses": max_uses,
                              "max_sessions": max_sessions, "label": label}
    if capabilities is not None:
        params["capabilities"] = [c.strip() for c in capabilities.split(",") if c.strip()]
    answer = host_answer(file, "workspace.invite", params)
    print_answer(answer, json_mode, lambda a: [str(a.get("invitation"))])


@click.command()
@file_argument
@json_option
@guarded()
def invitations(file: Path, json_mode: bool) -> None:
    """List the invitations of the room around FILE (never their secrets)."""
    print_answer(host_answer(file, "workspace.invitations", {}), json_mode, format_invitations)


@click.command()
@file_argument
@click.argument("invite_id")
@json_option
@guarded()
def revoke(file: Path, invite_id: str, json_mode: bool) -> None:
    """Revoke invitation INVITE_ID."""
    answer = host_answer(file, "workspace.revoke_invitation", {"invite_id": invite_id})
    print_answer(answer, json_mode, format_revoked)


@click.command("open")
@file_argument
@click.option("--no-browser", is_flag=True, help="Only print the link.")
@click.option("--logout-all", is_flag=True,
              help="End every browser's login to the owner page instead (prints no link).")
@json_option
@guarded()
def open_page(file: Path, no_browser: bool, logout_all: bool, json_mode: bool) -> None:
    """Print a fresh one-time link to the owner page of the room around FILE (and open it)."""
    from commonroom.credentials import read_credentials

    if logout_all:
        ended = logout_all_pages(file)
        if json_mode:
            emit_json({"ended": ended})
        else:
            echo(f"ended {ended} page login{'' if ended == 1 else 's'}; `ce open {file.name}` prints a new link")
        return
    credentials = read_credentials(file)
    if credentials is None:
        raise CommonroomError(
            "transport_unavailable", f"no room is running around {file.name}; start one with `ce serve {file}`"
        )
    answer = owner_post(credentials, "/owner/login-link")
    if "url" not in answer:
        raise error_from_wire(200, answer)
    url = str(answer["url"])
    opened = False
    if not no_browser and any(os.environ.get(name) for name in BROWSER_ENVIRONMENT):
        import webbrowser

        try:
            opened = webbrowser.open(url)
        except Exception:  # a broken browser setup never fails the command: the link is printed
            opened = False
    if json_mode:
        emit_json({"url": url, "opened": opened})
    else:
        echo(f"owner page (one-time link): {url}")
        if opened:
            echo("opened in your browser", err=True)


# -- readable output -------------------------------------------------------------------


def _caps(value: Any) -> str:
    return ",".join(str(c) for c in value) if isinstance(value, list) else str(value)


def format_invitations(answer: dict[str, Any]) -> list[str]:
    rows = answer.get("invitations") or []
    if not rows:
        return ["no invitations"]
    lines = []
    for row in rows:
        max_uses = row.get("max_uses")
        uses = f"{row.get('used_count', 0)}/{'∞' if max_uses is None else max_uses}"
        line = (
            f"{row.get('invite_id')}  {row.get('state', '?'):<8}  uses {uses}  "
            f"expires {row.get('expires_at')}  {_caps(row.get('capabilities', []))}"
        )
        if row.get("label"):
            line += f"  {row['label']}"
        lines.append(line)
    return lines


def format_revoked(answer: dict[str, Any]) -> list[str]:
    return [f"revoked {answer.get('invite_id')} ({answer.get('state', 'revoked')})"]


COMMANDS: Final = (invite, invitations, revoke, open_page)
