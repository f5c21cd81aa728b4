"""Presence is a fact of committed transactions: a refused COMMIT announces nobody."""

from __future__ import annotations

import sqlite3
from typing import Any

from commonroom.engine.facade import execute
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
