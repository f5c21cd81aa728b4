"""Presence is a fact of committed transactions: a refused COMMIT announces nobody."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from commonroom.engine.dispatch import open_engine
from commonroom.engine.facade import execute
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import ManualClock
from tests.conftest import Driver


class _RefusingCommit:
    """The sidecar connection, except that COMMIT fails the way a full disk makes it fail."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT":
            full = sqlite3.OperationalError("database or disk is full")
            full.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise full
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_join_whose_commit_is_refused_announces_nobody(room: Driver) -> None:
    invitation = room.invite(capabilities=["read"])["invitation"]
    engine = room.engine
    before = engine.presence.present_ids(room.clock())  # the host, who just invited
    real = engine.conn
    engine.conn = _RefusingCommit(real)  # type: ignore[assignment]
    try:
        outcome = execute(engine, "session.join", None, {"invite": invitation, "name": "ghost"})
    finally:
        engine.conn = real
    assert outcome.error is not None and outcome.result is None
    assert engine.presence.present_ids(room.clock()) == before
    # The sweeper has nobody new to announce: no participant.present for one never stored.
    arrived, _ = engine.presence.transitions(room.clock())
    assert set(arrived) <= before
    assert real.execute("SELECT count(*) FROM participants WHERE name = 'ghost'").fetchone()[0] == 0
    # The same join, committed, is present at once.
    joined = execute(engine, "session.join", None, {"invite": invitation, "name": "real"})
    assert joined.error is None
    assert engine.presence.is_present(joined.result.participant_id, room.clock())


def test_a_call_whose_commit_is_refused_renews_no_presence(room: Driver) -> None:
    agent = room.join("agent", caps=["read"])
    pid, bearer = agent["participant_id"], agent["session_id"]
    room.clock.advance(minutes=5)  # the join's presence has lapsed
    assert not room.engine.presence.is_present(pid, room.clock())
    real = room.engine.conn
    room.engine.conn = _RefusingCommit(real)  # type: ignore[assignment]
    try:
        outcome = execute(room.engine, "workspace.status", bearer, {})
    finally:
        room.engine.conn = real
    assert outcome.error is not None
    assert not room.engine.presence.is_present(pid, room.clock())
    assert execute(room.engine, "workspace.status", bearer, {}).error is None
    assert room.engine.presence.is_present(pid, room.clock())


class _TickingClock(ManualClock):
    """A clock that moves on by a microsecond at every reading, as the real one does."""

    def __call__(self) -> datetime:
        self.now += timedelta(microseconds=1)
        return self.now


def test_a_sweep_announces_an_arrival_when_the_clock_moves_between_readings(doc_path: Path) -> None:
    """The sweep's "due now" and its own "now" are one reading: with two, an arrival
    was due a microsecond after the sweep's now, never announced, and the room's
    sweeper spun every 10 ms (found by counting sweeps under a write load)."""
    clock = _TickingClock()
    engine = open_engine(doc_path, clock=clock)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    try:
        driver = Driver(engine, clock)
        agent = driver.join("ticking")
        engine.sweep()  # the host and the agent are announced
        driver.call("workspace.status", agent["session_id"])
        _, due = engine.sweep()
        assert not engine.presence.pending(), "an arrival was left unannounced"
        assert due is None or due > clock.now + timedelta(seconds=1), (
            f"the sweeper is asked back at once ({due} for now {clock.now})")
    finally:
        engine.close()
