"""The sidecar is private to the host user: it and its `-wal` / `-shm` are mode 0600.

The sidecar holds every message, handoff-private attachments and the hashes
of live sessions, so another local user must not read it (the sidecar is private to the user).
SQLite's unix VFS creates the `-wal` and `-shm` files with the mode of the
database file, so making the database 0600 *before* SQLite first opens it is
what keeps all three private. A sidecar an older commonroom created 0644 (and
whatever journal files it left) is narrowed on open, before any migration.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

MODE: Final = 0o600
JOURNAL_SUFFIXES: Final = ("-wal", "-shm", "-journal")


def make_private(sidecar: Path) -> None:
    """Create `sidecar` empty with mode 0600 if it is missing; narrow it (and its journals) to 0600."""
    try:
        fd = os.open(sidecar, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, MODE)
    except FileExistsError:
        pass
    else:
        os.close(fd)  # an empty file is an empty SQLite database
    for path in (sidecar, *(Path(f"{sidecar}{suffix}") for suffix in JOURNAL_SUFFIXES)):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_IMODE(path.stat().st_mode) != MODE:
                os.chmod(path, MODE)
