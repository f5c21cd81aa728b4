"""Session profiles: what `ce join` saves so later agent verbs need no invitation or session.

A profile is `$XDG_CONFIG_HOME/commonroom/profiles/NAME.json` (default
`~/.config/commonroom/profiles/`): the folder is 0700, each file 0600,
written atomically. Never in the project folder: it holds a session bearer.
`ce join` names the profile after the workspace unless `--profile NAME` is
given, so there is one per room by default.

Which session a command uses (the profile selection rule):

1. flags: `--profile NAME`, or `--invitation` with `--session` (either may
   come from `CE_INVITATION` / `CE_SESSION` instead);
2. the environment: `CE_INVITATION` with `CE_SESSION`, then `CE_PROFILE`;
3. the default profile: the one most recently joined (`ce whoami` says which).

A bearer on the command line is readable by every local user (`ps`,
`/proc/PID/cmdline`), so the session comes from the profile, `CE_SESSION`
(the environment of a process is private to its user) or stdin
(`--session -`); `--session ID` still works, with a one-line warning.

A profile also remembers the version of the last `ce read` per region, the
base `ce propose` defaults to. A session given by flags or `CE_SESSION` has
no profile, so its `ce propose` needs `--base`.

Kept free of heavy imports (no attrs, no trio): every agent verb loads it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import click

ENV_INVITATION: Final = "CE_INVITATION"
ENV_SESSION: Final = "CE_SESSION"
ENV_PROFILE: Final = "CE_PROFILE"
FROM_STDIN: Final = "-"
VISIBLE_WARNING: Final = (
    "warning: --session on the command line is visible to other users of this machine (ps);"
    " use the saved profile, CE_SESSION, or --session - (read from stdin)"
)
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def profiles_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "commonroom" / "profiles"


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise click.UsageError(
            f"profile name {name!r}: use 1-64 letters, digits, '_', '-' or '.', starting with a"
            " letter or digit"
        )
    return name


class Profile:
    """A saved session. `data` is the JSON object on disk."""

    def __init__(self, name: str | None, data: dict[str, Any]) -> None:
        self.name = name  # None: a session from flags or the environment, not saved
        self.data = data

    @property
    def invitation(self) -> str:
        return str(self.data.get("invitation", ""))

    @property
    def session(self) -> str:
        return str(self.data.get("session_id", ""))

    @property
    def participant_id(self) -> str | None:
        value = self.data.get("participant_id")
        return value if isinstance(value, str) else None

    @property
    def hint(self) -> dict[str, Any]:
        hint = self.data.get("hint")
        if isinstance(hint, dict):
            return hint
        from commonroom.wire.calls import hint_of

        hint = hint_of(self.invitation)
        self.data["hint"] = hint
        return hint

    def last_read(self, region: str) -> int | None:
        """The version of the last recorded read of `region` (as typed, or its full path)."""
        reads = self.data.get("reads")
        if not isinstance(reads, dict):
            return None
        value = reads.get(region)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def record_read(self, names: list[str], version: int) -> None:
        if self.name is None:
            return
        reads = self.data.setdefault("reads", {})
        for name in names:
            reads[name] = version
        save(self)


def path_of(name: str) -> Path:
    return profiles_dir() / f"{check_name(name)}.json"


def save(profile: Profile) -> Path:
    """Write `profile` atomically with mode 0600, in a 0700 folder."""
    assert profile.name is not None
    folder = profiles_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    path = path_of(profile.name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(profile.data, handle, indent=1)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def create(name: str, invitation: str, joined: Mapping[str, Any], hint: Mapping[str, Any]
           ) -> Profile:
    data = {
        "invitation": invitation.strip(),
        "hint": dict(hint),
        **{key: joined.get(key) for key in (
            "session_id", "participant_id", "workspace_id", "name", "kind", "capabilities",
            "expires_at", "room")},
        "joined_at": time.time(),
        "reads": {},
    }
    profile = Profile(check_name(name), data)
    save(profile)
    return profile


def load(name: str) -> Profile:
    path = path_of(name)
    try:
        raw = path.read_text()
    except FileNotFoundError:
        raise click.UsageError(
            f"no profile named {name!r} (`ce join INVITATION --name NAME --profile {name}`"
            " saves one)"
        ) from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        raise click.UsageError(f"profile {name!r} is not valid JSON ({path})") from None
    if not isinstance(data, dict) or not isinstance(data.get("session_id"), str):
        raise click.UsageError(f"profile {name!r} has no session ({path})")
    return Profile(name, data)


def delete(profile: Profile) -> None:
    if profile.name is not None:
        path_of(profile.name).unlink(missing_ok=True)


def all_profiles() -> list[Profile]:
    folder = profiles_dir()
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            found.append(load(path.stem))
        except click.UsageError:
            continue
    return found


def default() -> Profile | None:
    """The profile `ce use NAME` chose, else the most recently joined one."""
    candidates = all_profiles()
    if not candidates:
        return None
    chosen = chosen_default()
    for candidate in candidates:
        if candidate.name == chosen:
            return candidate
    return max(candidates, key=lambda p: float(p.data.get("joined_at") or 0))


# `ce use NAME` writes the default's name here (not a `*.json`: it is no profile).
_DEFAULT_FILE: Final = ".default"


def chosen_default() -> str | None:
    try:
        name = (profiles_dir() / _DEFAULT_FILE).read_text().strip()
    except OSError:
        return None
    return name if _NAME.match(name) else None


def use(name: str) -> Profile:
    """Make profile `name` the default of commands without --profile (`ce use NAME`)."""
    chosen = load(name)
    folder = profiles_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / _DEFAULT_FILE
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(name + "\n")
    os.replace(tmp, path)
    return chosen


def room_label(profile: Profile) -> str:
    """The room a profile is for, as a person reads it: its document's name, else its id."""
    room = profile.data.get("room")
    return str(room) if isinstance(room, str) and room else str(profile.data.get("workspace_id"))


# -- the room a command talks to is never a guess ---------------------------------------------

SIDECAR_SUFFIX: Final = ".commonroom.db"  # the engine's (`engine/core.py`), without loading it


def rooms_here(folder: Path) -> dict[str, str]:
    """workspace id -> document name of each room whose sidecar is in `folder` (read-only;
    a sidecar that cannot be read is skipped)."""
    import sqlite3

    found: dict[str, str] = {}
    for sidecar in sorted(folder.glob(f"*{SIDECAR_SUFFIX}")) if folder.is_dir() else []:
        try:
            conn = sqlite3.connect(f"{sidecar.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'workspace_id'").fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            continue
        if row is not None:
            found[str(row[0])] = sidecar.name[: -len(SIDECAR_SUFFIX)]
    return found


def _not_a_guess(chosen: Profile) -> Profile:
    """The default profile, unless the current folder holds another room's sidecar (and not
    the default's): then refuse, naming the profiles that are for the room here."""
    here = rooms_here(Path.cwd())
    if not here or chosen.data.get("workspace_id") in here:
        return chosen
    documents = ", ".join(sorted(here.values()))
    for_here = sorted(str(p.name) for p in all_profiles() if p.data.get("workspace_id") in here)
    advice = (f"give --profile {for_here[0]}, or `ce use {for_here[0]}`" if for_here else
              "join that room first (`ce join INVITATION --name NAME`), or give --profile NAME")
    raise click.UsageError(
        f"this folder holds the room of {documents}, but the default profile {chosen.name!r} is"
        f" for {room_label(chosen)}: not guessing which you mean; {advice}")


def session_argument(value: str) -> str:
    """The session a `--session` flag names: read from stdin for `-`, else warned about."""
    if value != FROM_STDIN:
        click.echo(VISIBLE_WARNING, err=True)
        return value
    line = sys.stdin.readline().strip()
    if not line:
        raise click.UsageError("--session -: no session id on stdin")
    return line


def invitation_argument(value: str) -> str:
    """An invitation argument: read from stdin for `-` (so it is not in `ps`)."""
    if value != FROM_STDIN:
        return value
    line = sys.stdin.readline().strip()
    if not line:
        raise click.UsageError("-: no invitation on stdin")
    return line


def select(profile: str | None = None, invitation: str | None = None,
           session: str | None = None, *, anonymous: bool = False) -> Profile:
    """The session a command runs as: flags, then the environment, then the default profile.

    With an invitation given and `anonymous`, no session is needed (`ce call`
    of a public route): the profile then has an empty session.
    """
    if invitation or session:
        if profile:
            raise click.UsageError("give --profile or --invitation/--session, not both")
        pair = (f"--invitation and --session go together (either may be {ENV_INVITATION} /"
                f" {ENV_SESSION})")
        invitation = invitation or os.environ.get(ENV_INVITATION)
        if not invitation:
            raise click.UsageError(pair)
        session = session_argument(session) if session else os.environ.get(ENV_SESSION)
        if not (session or anonymous):
            raise click.UsageError(pair)
        return Profile(None, {"invitation": invitation, "session_id": session or ""})
    if profile:
        return load(profile)
    env_invitation, env_session = os.environ.get(ENV_INVITATION), os.environ.get(ENV_SESSION)
    if env_invitation or env_session:
        if not (env_invitation and env_session):
            raise click.UsageError(f"set both {ENV_INVITATION} and {ENV_SESSION}, or neither")
        return Profile(None, {"invitation": env_invitation, "session_id": env_session})
    env_profile = os.environ.get(ENV_PROFILE)
    if env_profile:
        return load(env_profile)
    chosen = default()
    if chosen is None:
        raise click.UsageError(
            "no session: run `ce join INVITATION --name NAME` first (it saves a profile), or"
            f" give --profile, or set {ENV_PROFILE} / {ENV_INVITATION} and {ENV_SESSION}"
        )
    chosen = _not_a_guess(chosen)
    if len(all_profiles()) > 1:
        # More than one room to talk to: say which one this command uses (stderr, so
        # `--json` output stays one object).
        click.echo(f"(room {room_label(chosen)}, as {chosen.data.get('name')}: profile"
                   f" {chosen.name}; `ce profiles` lists them)", err=True)
    return chosen
