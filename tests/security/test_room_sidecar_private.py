"""Item 11 of issue 24: another local user must not read the sidecar.

The sidecar holds every message and the handoff-private attachments; it and
SQLite's `-wal` and `-shm` beside it used to be created 0644. A real `ce serve`
under the usual umask 022 must leave all three 0600, for a new sidecar and for
an older one (schema 3, created 0644) that the room migrates on open.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from commonroom.engine.core import SIDECAR_SUFFIX
from commonroom.store.schema import MIGRATIONS, SCHEMA_VERSION
from tests.e2e.conftest import start_room


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, under which SQLite's default file mode 0644 reaches the disk."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _modes(sidecar: Path) -> dict[str, int]:
    return {
        suffix or "db": stat.S_IMODE(Path(f"{sidecar}{suffix}").stat().st_mode)
        for suffix in ("", "-wal", "-shm")
    }


def test_a_new_sidecar_and_its_wal_and_shm_are_0600(doc: Path, umask_022: None) -> None:
    sidecar = doc.with_name(doc.name + SIDECAR_SUFFIX)
    room = start_room(doc, "--port-ingress", "0")
    try:
        # The room is serving: it has written (the host session, workspace.started),
        # so the -wal and -shm files exist beside the database.
        assert _modes(sidecar) == {"db": 0o600, "-wal": 0o600, "-shm": 0o600}
    finally:
        room.close()
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600


def test_an_older_0644_sidecar_is_narrowed_to_0600_when_migrated(doc: Path, umask_022: None) -> None:
    sidecar = doc.with_name(doc.name + SIDECAR_SUFFIX)
    # A schema-3 sidecar, as an older commonroom left it: 0644, in WAL mode, with its
    # -wal and -shm present (this connection stays open, so SQLite keeps them).
    older = sqlite3.connect(sidecar, isolation_level=None)
    try:
        older.execute("PRAGMA journal_mode=WAL")
        for index in range(3):
            older.executescript("BEGIN IMMEDIATE;" + MIGRATIONS[index] + f"PRAGMA user_version = {index + 1}; COMMIT;")
        older.execute("INSERT INTO meta (key, value) VALUES ('probe', 'written by an older room')")
        assert _modes(sidecar) == {"db": 0o644, "-wal": 0o644, "-shm": 0o644}
        room = start_room(doc, "--port-ingress", "0")
        try:
            assert _modes(sidecar) == {"db": 0o600, "-wal": 0o600, "-shm": 0o600}
            assert older.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            assert older.execute("SELECT value FROM meta WHERE key = 'probe'").fetchone()[0] == (
                "written by an older room")
        finally:
            room.close()
    finally:
        older.close()
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
