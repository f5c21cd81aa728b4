"""The host's credential file: how host commands reach the running room.

`<file>.commonroom.host.json`, mode 0600, written by the room once it is
ready and removed when it stops. It holds the host session (a `*` bearer),
so only the host user may read it. Kept free of heavy imports: every host
command reads it first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs

CREDENTIALS_SUFFIX = ".commonroom.host.json"


@attrs.frozen
class Credentials:
    pid: int
    ingress_port: int
    owner_port: int
    host_session: str
    workspace_id: str


def credentials_path(doc: Path) -> Path:
    doc = Path(doc).resolve()
    return doc.with_name(doc.name + CREDENTIALS_SUFFIX)


def write_credentials(doc: Path, creds: Credentials) -> None:
    path = credentials_path(doc)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(attrs.asdict(creds), handle)
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
    path = credentials_path(doc)
    try:
        raw = json.loads(path.read_text())
        creds = Credentials(**raw)
    except (OSError, ValueError, TypeError):
        return None
    return creds if _pid_alive(creds.pid) else None


