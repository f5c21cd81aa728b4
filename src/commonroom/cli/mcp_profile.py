"""The per-user profile where `ce mcp` keeps the session it joined with.

One JSON file, `$XDG_CONFIG_HOME/commonroom/mcp-sessions.json` (default
`~/.config/commonroom/`), never in the project folder: the folder is created
0700 and the file written 0600 (atomically, through a temporary file in the
same folder). Entries are keyed by a hash of the invitation and the name, so
the file holds no invitation secret; each entry holds the session bearer,
which is why only the user may read it.

Kept small and separate so the general session profiles of `ce join` can
absorb it (same folder, same modes).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

FILE_NAME = "mcp-sessions.json"


def profile_dir(override: os.PathLike[str] | str | None = None) -> Path:
    if override is not None:
        return Path(override)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "commonroom"


def profile_key(invitation: str, name: str) -> str:
    return hashlib.sha256(f"{invitation.strip()}\n{name}".encode()).hexdigest()[:32]


def _read_all(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / FILE_NAME).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def load(key: str, override: os.PathLike[str] | str | None = None) -> dict[str, Any] | None:
    entry = _read_all(profile_dir(override)).get(key)
    if isinstance(entry, dict) and isinstance(entry.get("session_id"), str):
        return entry
    return None


def save(key: str, entry: dict[str, Any], override: os.PathLike[str] | str | None = None) -> Path:
    folder = profile_dir(override)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    data = _read_all(folder)
    data[key] = entry
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".mcp-sessions-")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(tmp, folder / FILE_NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return folder / FILE_NAME
