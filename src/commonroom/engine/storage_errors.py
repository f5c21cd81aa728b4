"""The answers for a disk that refuses: `storage_unavailable`, never a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from commonroom.protocol.errors import CommonroomError


def write_refused(path: Path, exc: OSError) -> CommonroomError:
    """A server fault, not the client's: the file or its folder refused the write."""
    reason = exc.strerror or type(exc).__name__
    return CommonroomError(
        "storage_unavailable",
        f"could not write {path.name}: {reason}; nothing was committed"
        " (is the file or its folder read-only or full?)",
        {"file": path.name, "errno": exc.errno},
    )


# SQLite's primary result codes that mean the disk, not the statement, failed.
_STORAGE_FAULTS: Final = frozenset({
    sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN,
})


def is_storage_fault(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _STORAGE_FAULTS


def sidecar_refused(path: Path, exc: sqlite3.Error) -> CommonroomError:
    """The sidecar could not take the transaction (full disk, I/O error): it was rolled back."""
    return CommonroomError(
        "storage_unavailable",
        f"could not write the sidecar {path.name}: {exc}; nothing was committed"
        " (is its disk full or read-only?)",
        {"file": path.name},
    )
