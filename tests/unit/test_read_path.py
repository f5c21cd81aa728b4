"""The read path (engine/readpath.py): a read answers its own snapshot's version, never a
half-made one, and never writes; a refresh with work to do sends it the writer's way.

The writer runs on a real thread held at a fault point (`faults.holding`), the reads on
this one; nothing is timed: a read that must not wait is asked with `block=False`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from commonroom.engine import dispatch
from commonroom.engine.tx import Outcome
from commonroom.protocol.records import to_wire
from commonroom.store import faults
from tests.conftest import Driver

GUARD = 30.0  # a deadlock guard only


def _read(room: Driver, op: str, *, block: bool = True, **params: Any) -> Any:
    outcome = dispatch.read(room.engine, op, room.host, params, block=block)
    assert isinstance(outcome, Outcome), outcome
    assert outcome.error is None, outcome.error
    return to_wire(outcome.result)


@contextmanager
def held_commit(room: Driver, point: str, content: str) -> Iterator[tuple[threading.Event, list[Outcome]]]:
    """A host commit of `content` on a thread, held at `point` until the block ends; yields
    the event set once it is held and the list its outcome lands in."""
    entered, release = threading.Event(), threading.Event()
    outcomes: list[Outcome] = []

    def hold() -> None:
        entered.set()
        release.wait(GUARD)

    def commit() -> None:
        outcomes.append(dispatch.execute(room.engine, "workspace.commit", room.host, {
            "content": content, "base_version": room.version, "summary": "held"}))

    writer = threading.Thread(target=commit)
    with faults.holding(point, hold):
        writer.start()
        try:
            assert entered.wait(GUARD)
            yield entered, outcomes
        finally:
            release.set()
            writer.join(GUARD)
    assert not writer.is_alive()


def refuse_the_rename(room: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename of a new version onto the document fails (its commit is undone)."""
    real_replace = os.replace

    def refuse(src: Any, dst: Any) -> None:
        if Path(str(dst)) == room.engine.path:
            raise PermissionError(1, "Operation not permitted", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", refuse)


def test_a_read_answers_its_snapshot_while_a_commit_sits_in_its_fsync(room: Driver) -> None:
    before = room.engine.path.read_text()
    inserted = threading.Event()  # the store thread's memory holds version 2 (the temp file's
    # write runs beside it on the writer thread, its hash on the hash thread: either first)
    with faults.holding("after_version_row", inserted.set), \
            held_commit(room, "after_fsync", before + "\nadded\n"):
        assert inserted.wait(GUARD)
        # The writer's memory holds version 2 already; its transaction is not committed.
        assert room.engine.current_version == 2
        status = _read(room, "workspace.status", block=False)
        whole = _read(room, "workspace.read", block=False, region="workspace")
    assert status["version"] == 1 and whole["version"] == 1 and whole["content"] == before
    after = _read(room, "workspace.read", region="workspace")
    assert after["version"] == 2 and after["content"] == before + "\nadded\n"


def test_no_reader_begins_between_commit_and_rename_nor_sees_an_undone_version(
        room: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    before = room.engine.path.read_text()
    refuse_the_rename(room, monkeypatch)
    answers: list[Any] = []
    standby = room.engine.reads.standby
    standby.lock.acquire()  # in use: the writer pins no snapshot before its COMMIT
    with held_commit(room, "after_commit", before + "\nnever lands\n") as (_, outcomes):
        # COMMIT is done, the rename not yet: the gate is held, a read does not begin.
        assert dispatch.read(room.engine, "workspace.status", room.host, {},
                             block=False) is dispatch.NOT_READY
        waiting = threading.Thread(target=lambda: answers.append(
            _read(room, "workspace.read", region="workspace")))
        waiting.start()
        standby.lock.release()  # still nothing pinned: the reader waits for the gate
        assert standby.pinned is None
    waiting.join(GUARD)
    # The rename failed: the committed transaction was undone, and the waiting reader began
    # after that, on version 1.
    assert outcomes[0].error is not None and outcomes[0].error.code == "storage_unavailable"
    assert answers == [{"version": 1, "region": "workspace", "content": before, "truncated": False}]
    assert _read(room, "workspace.status")["version"] == 1 == room.engine.current_version


def test_a_light_read_during_a_landing_answers_the_version_before_it(
        room: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between COMMIT and rename a light read neither waits nor sees the new version: it
    answers from the snapshot the writer pinned before its COMMIT (`readpath.Standby`),
    the version whose file is still in place; a heavy read waits for the gate."""
    before = room.engine.path.read_text()
    refuse_the_rename(room, monkeypatch)
    with held_commit(room, "after_commit", before + "\nnever lands\n") as (_, outcomes):
        assert room.engine.reads.standby.pinned is not None
        status = _read(room, "workspace.status", block=False)
        whole = _read(room, "workspace.read", block=False, region="workspace")
        assert status["version"] == 1 and whole["version"] == 1 and whole["content"] == before
        assert dispatch.read(room.engine, "workspace.blame", room.host,
                             {"region": "workspace"}, block=False) is dispatch.NOT_READY
    assert outcomes[0].error is not None and outcomes[0].error.code == "storage_unavailable"
    assert room.engine.reads.standby.pinned is None  # ended with the landing
    assert not room.engine.reads.standby.conn.in_transaction
    monkeypatch.undo()  # the rename works again
    with held_commit(room, "after_commit", before + "\nlands\n"):
        assert _read(room, "workspace.status", block=False)["version"] == 1
    assert _read(room, "workspace.status", block=False)["version"] == 2


def test_a_read_that_finds_work_for_a_refresh_goes_the_writers_way(room: Driver) -> None:
    """An external edit not recorded yet, or a due expiry: the read path answers None and
    records nothing (a read never writes); the writer's path records it."""
    writes = room.engine.conn.total_changes
    room.engine.path.write_text(room.engine.path.read_text() + "\nsaved by the host\n")
    assert dispatch.read(room.engine, "workspace.status", room.host, {}) is None
    assert room.engine.conn.total_changes == writes and room.engine.current_version == 1
    settling = dispatch.execute(room.engine, "workspace.status", room.host, {})
    assert settling.result.version == 1 and settling.result.file == "settling"
    room.clock.advance(seconds=5)  # past the settle period
    assert dispatch.read(room.engine, "workspace.status", room.host, {}) is None
    outcome = dispatch.execute(room.engine, "workspace.status", room.host, {})
    assert outcome.error is None and outcome.result.version == 2
    assert _read(room, "workspace.status")["version"] == 2

    agent = room.join(caps=["read", "checkout"])["session_id"]
    room.call("workspace.checkout", agent, region="Goals", minutes=1)
    held = _read(room, "workspace.leases")["leases"]  # the agent's, and the host's edit's hold
    assert len(held) == 2 and _read(room, "workspace.status")["active_leases"] == 2
    room.clock.advance(minutes=3)  # both are due to expire
    writes = room.engine.conn.total_changes
    assert dispatch.read(room.engine, "workspace.leases", room.host, {}) is None
    assert room.engine.conn.total_changes == writes
    expired = dispatch.execute(room.engine, "workspace.leases", room.host, {})
    assert expired.error is None and to_wire(expired.result)["leases"] == []
    assert any(event.type == "lease.expired" for event in expired.events)


def test_a_read_on_the_read_path_touches_presence(room: Driver) -> None:
    agent = room.join(caps=["read"])
    pid = agent["participant_id"]
    room.engine.presence.forget(pid)
    touch: Callable[[], Any] = lambda: dispatch.read(  # noqa: E731
        room.engine, "workspace.status", agent["session_id"], {})
    assert isinstance(touch(), Outcome)
    assert room.engine.presence.is_present(pid, room.clock())
