"""The host's credential file: how host commands reach the running room.

It holds the host session (a `*` bearer), written by the room once it is
ready (mode 0600) and removed when it stops. It lives in a per-user runtime
folder, never next to the document: a secret beside `idea.md` is one `git
add .` away from a repository, and `--ephemeral` must write nothing there.

    $XDG_RUNTIME_DIR/commonroom/       (when set: a per-user tmpfs, 0700)
    /tmp/commonroom-<uid>/             (otherwise; created 0700)
        <file name>-<sha256 of the document's absolute path>.host.json

The folder must be a real folder owned by this user with no access for
others; anything else (a symlink, someone else's folder planted in /tmp) is
refused rather than used. Kept free of heavy imports: every host command
reads it first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

import attrs

CREDENTIALS_SUFFIX = ".host.json"
START_INVITATION_SUFFIX = ".start-invitation"


class RuntimeDirError(OSError):
    """The per-user runtime folder is unsafe to keep a secret in."""


@attrs.frozen
class Credentials:
    pid: int
    ingress_port: int
    owner_port: int
    host_session: str
    workspace_id: str


def runtime_dir() -> Path:
    """The per-user folder for credential files; created 0700, checked every time."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg) and os.path.isdir(xdg):
        folder = Path(xdg) / "commonroom"
    else:
        folder = Path(tempfile.gettempdir()) / f"commonroom-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise RuntimeDirError(f"{folder} is not a folder of this user; remove it")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, 0o700)
    return folder


def credentials_path(doc: Path) -> Path:
    doc = Path(doc).resolve()
    key = hashlib.sha256(os.fsencode(doc)).hexdigest()[:32]
    return runtime_dir() / f"{doc.name}-{key}{CREDENTIALS_SUFFIX}"


def write_credentials(doc: Path, creds: Credentials) -> None:
    path = credentials_path(doc)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(attrs.asdict(creds), handle)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def start_invitation_path(doc: Path) -> Path:
    """Where `ce serve` keeps the secret of the invitation it printed, to print it again."""
    path = credentials_path(doc)
    return path.with_name(path.name[: -len(CREDENTIALS_SUFFIX)] + START_INVITATION_SUFFIX)


def read_start_secret(doc: Path) -> str | None:
    try:
        return start_invitation_path(doc).read_text().strip() or None
    except OSError:
        return None


def write_start_secret(doc: Path, secret: str) -> None:
    """0600 beside the credential file; it outlives the room (that is its use)."""
    path = start_invitation_path(doc)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_credentials(doc: Path) -> Credentials | None:
    """The running room's host credentials, or None when no room runs for `doc`."""
    try:
        path = credentials_path(doc)
        raw = json.loads(path.read_text())
        creds = Credentials(**raw)
    except (OSError, ValueError, TypeError):
        return None
    return creds if _pid_alive(creds.pid) else None


