"""A document write the disk refuses commits nothing and never lands later (issue 8, item 1).

The refusal is real: `chattr +i` makes the file immutable, which stops even
root (the suite runs as root here; mode bits would not). Where chattr is not
available the fault is injected at `os.replace` instead, the one call that
renames the temp file over the document.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from commonroom.engine import dispatch, sessions
from commonroom.engine.core import Engine
from commonroom.engine.dispatch import open_engine
from commonroom.protocol.timefmt import ManualClock
from tests.conftest import SAMPLE, Driver


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@contextlib.contextmanager
def immutable(path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The file refuses to be replaced while inside the block."""
    if _chattr("+i", path):
        try:
            yield
        finally:
            _chattr("-i", path)
        return
    real_replace = os.replace

    def refuse(src: object, dst: object) -> None:
        if Path(str(dst)) == path:
            raise PermissionError(1, "Operation not permitted", str(dst))
        real_replace(src, dst)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", refuse)
        yield


def _approved(room: Driver) -> tuple[str, str]:
    agent = room.join(caps=["read", "propose", "commit", "checkout"])["session_id"]
    prop = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                     summary="goals", content="## Goals\n\n- ship it twice\n")
    room.call("workspace.review", room.host, proposal_id=prop["proposal_id"],
            revision=prop["revision"], decision="approve")
    return agent, prop["proposal_id"]


def _state(engine: Engine) -> tuple[int, int, str]:
    versions = engine.conn.execute("SELECT count(*) FROM versions").fetchone()[0]
    events = engine.conn.execute("SELECT max(event_id) FROM events").fetchone()[0]
    return versions, events, engine.path.read_text()


def test_refused_rename_commits_nothing_and_never_lands(
    room: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, proposal_id = _approved(room)
    before = _state(room.engine)
    with immutable(room.engine.path, monkeypatch):
        outcome = dispatch.execute(room.engine, "workspace.commit", agent, {"proposal_id": proposal_id})
        assert outcome.error is not None
        assert outcome.error.code == "storage_unavailable" and outcome.error.http_status == 503
        assert "idea.md" in outcome.error.message and "nothing was committed" in outcome.error.message
        assert outcome.events == []  # nothing to publish
        assert _state(room.engine) == before  # no version row, no event, file untouched
        status = room.call("workspace.proposal", agent, proposal_id=proposal_id)["status"]
        assert status == "approved"
        assert room.engine.current_version == 1
        assert [p.name for p in room.engine.path.parent.iterdir() if p.name.endswith(".tmp")] == []
        # The room keeps serving reads meanwhile.
        assert room.call("workspace.read", agent, region="Goals")["version"] == 1
    # Writable again: the same commit succeeds, with gapless event ids.
    done = room.call("workspace.commit", agent, proposal_id=proposal_id)
    assert done["version"] == 2 and "ship it twice" in room.engine.path.read_text()
    ids = [e["event_id"] for e in room.call("workspace.history", room.host, limit=200)["events"]]
    assert ids == list(range(max(ids), max(ids) - len(ids), -1))


def test_a_refused_commit_is_not_rolled_forward_on_restart(
    doc_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(doc_path, clock=clock)
    host = sessions.mint_host_session(engine)
    with immutable(doc_path, monkeypatch):
        outcome = dispatch.execute(engine, "workspace.commit", host,
                                 {"base_version": 1, "summary": "x", "content": "# Lost\n"})
        assert outcome.error is not None and outcome.error.code == "storage_unavailable"
    engine.close()
    reopened = open_engine(doc_path, clock=clock)
    assert reopened.current_version == 1 and doc_path.read_text() == SAMPLE
    reopened.close()


def test_undo_restores_superseded_proposals_and_released_leases(
    room: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = room.join("other", caps=["read", "propose", "checkout"])["session_id"]
    pending = room.call("workspace.propose", other, region="Risks", base_version=1,
                        summary="risks", content="## Risks\n\nSome.\n")
    # The host's own lease does not block its commit; the commit removes the
    # region, so it would end that lease (region_removed) and supersede the proposal.
    room.call("workspace.checkout", room.host, region="Risks")
    tables = ("proposals", "leases", "versions", "events", "blocks", "sessions", "participants")

    def dump() -> dict[str, list[tuple[object, ...]]]:
        return {t: room.engine.conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
                for t in tables}

    before = dump()
    with immutable(room.engine.path, monkeypatch):
        outcome = dispatch.execute(
            room.engine,
            "workspace.commit", room.host,
            {"base_version": 1, "summary": "drop risks", "content": "# Plan\n\nOnly this.\n"},
        )
        assert outcome.error is not None and outcome.error.code == "storage_unavailable"
    assert dump() == before
    seq = room.engine.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
    assert seq.fetchone()[0] == before["events"][-1][0]
    assert room.call("workspace.proposal", other, proposal_id=pending["proposal_id"])["status"] == "pending"


def test_undo_log_reverses_inserts_updates_and_deletes_exactly(tmp_path: Path) -> None:
    import sqlite3

    from commonroom.store.undo import UndoLog

    conn = sqlite3.connect(tmp_path / "u.db", isolation_level=None)
    conn.executescript(
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, b BLOB, s TEXT, n INTEGER);"
        "CREATE TABLE k (key BLOB PRIMARY KEY, v TEXT);"
    )
    conn.executemany("INSERT INTO t (b, s, n) VALUES (?, ?, ?)",
                     [(b"\x00\xff'", "it's", None), (None, "x", 2**63 - 1), (b"", "", -5)])
    conn.execute("INSERT INTO k VALUES (?, ?)", (b"\x01" * 32, "v'1"))
    log = UndoLog(conn)

    def dump() -> list[object]:
        return [conn.execute("SELECT rowid, * FROM t ORDER BY rowid").fetchall(),
                conn.execute("SELECT rowid, * FROM k ORDER BY rowid").fetchall(),
                conn.execute("SELECT * FROM sqlite_sequence").fetchall()]

    before = dump()
    conn.execute("BEGIN IMMEDIATE")
    log.arm()
    conn.execute("UPDATE t SET s = 'changed', b = NULL WHERE id = 1")
    conn.execute("DELETE FROM t WHERE id = 2")
    conn.execute("INSERT INTO t (b, s, n) VALUES (x'00', 'new', 1)")
    conn.execute("UPDATE k SET v = NULL")
    conn.execute("INSERT INTO k VALUES (x'02', 'two')")
    conn.execute("DELETE FROM k WHERE key = ?", (b"\x01" * 32,))
    conn.execute("COMMIT")
    log.disarm()
    assert dump() != before
    log.undo()
    assert dump() == before
    conn.close()


def test_an_edit_recorded_before_a_refused_expiry_still_reaches_the_outcome(
    room: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """refresh commits an external edit, then the expiry after it is refused (say a full
    disk): the caller's outcome is the refusal *and* the edit's committed events, so
    the room publishes them instead of leaving them to the next stream's ring read."""
    agent = room.join(caps=["read", "checkout"])["session_id"]
    room.call("workspace.checkout", agent, region="Goals")
    path = room.engine.path
    path.write_text(path.read_text() + "\nAn external line.\n")
    room.engine.watch()  # the watcher sees the save: it settles from here
    room.clock.advance(hours=1)  # the lease is due (and the save long settled)

    def refuse(_self: Engine, _tx: object) -> None:
        from commonroom.protocol.errors import CommonroomError
        raise CommonroomError("storage_unavailable", "the sidecar's disk is full")

    monkeypatch.setattr(Engine, "_expire", refuse)
    outcome = dispatch.execute(room.engine, "workspace.status", agent, {})
    assert outcome.error is not None and outcome.error.code == "storage_unavailable"
    committed = [e for e in outcome.events if e.type == "change.committed"]
    assert [e.payload.source for e in committed] == ["external"]  # type: ignore[attr-defined]


def test_a_folder_made_immutable_between_commit_and_rename_commits_nothing(
    room: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temp file is written, the sidecar commits, then the folder turns immutable:
    the rename fails and so does removing the temp file. The commit must still be
    undone (was: the failed unlink escaped as a 500 and the version stayed)."""
    from commonroom.store import faults

    folder = room.engine.path.parent
    if not _chattr("+i", folder):
        pytest.skip("chattr +i is not available on this filesystem")
    _chattr("-i", folder)
    agent, proposal_id = _approved(room)
    version, original = room.version, room.engine.path.read_bytes()
    real_reached = faults.reached

    def lock_the_folder(point: str) -> None:
        if point == "after_commit":
            assert _chattr("+i", folder)
        real_reached(point)

    monkeypatch.setattr(faults, "reached", lock_the_folder)
    try:
        error = room.error("workspace.commit", agent, proposal_id=proposal_id)
    finally:
        _chattr("-i", folder)
    assert error.code == "storage_unavailable"
    assert room.version == version and room.engine.path.read_bytes() == original
    monkeypatch.setattr(faults, "reached", real_reached)
    assert room.call("workspace.commit", agent, proposal_id=proposal_id)["version"] == version + 1
    # The temp file the immutable folder kept went with the next write.
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


def test_only_a_transaction_that_may_write_the_document_stages_a_write(room: Driver) -> None:
    # Only `writes_document` transactions record their inverse (the undo log), so any other
    # that stages a write is refused before COMMIT: its rename could not be undone.
    before = _state(room.engine)
    _, span = room.engine.resolve("Goals")
    with pytest.raises(RuntimeError, match="writes_document"), \
            room.engine.transaction(room.clock()) as tx:
        room.engine.versions.write_replacement(tx, span, "## Goals\n\n- sneaked in\n", summary="sneak",
                                      participant_id=None, region="Goals", source="agent")
    assert _state(room.engine) == before  # no version, no event, the file untouched
    assert room.engine.current_version == 1
    assert [p.name for p in room.engine.path.parent.iterdir() if p.name.endswith(".tmp")] == []
    # The same write where it may be made lands.
    with room.engine.transaction(room.clock(), writes_document=True) as tx:
        room.engine.versions.write_replacement(tx, span, "## Goals\n\n- landed\n", summary="land",
                                      participant_id=None, region="Goals", source="agent")
    assert "- landed" in room.engine.path.read_text() and room.engine.current_version == 2
