"""Sessions: the bearers (docs/spec/PROTOCOL.md section 4).

Everything that creates, checks or ends a session lives here. A session is
stored as the sha256 of its bearer, never the bearer; looking the hash up
(instead of comparing bearers) keeps a presented bearer from leaking through
timing. `authenticate` is the one place that turns a bearer into an `Actor`
and renews the caller's presence. `Engine.live` (what the ingress's
rate limiter reads without a store call) follows every session created or
ended here, once its transaction committed.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta
from functools import partial

from commonroom.engine.core import Engine
from commonroom.engine.ids import hash_secret
from commonroom.engine.tx import Actor, Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.capabilities import HOST
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.timefmt import format_ts


def authenticate(tx: Tx, bearer: str | None) -> Actor:
    """The caller of this transaction; `unauthorized` / `session_expired` otherwise."""
    if not bearer:
        raise CommonroomError("unauthorized", "a bearer session is required")
    session_hash = hash_secret(bearer)
    row = tx.conn.execute(
        "SELECT s.participant_id, s.capabilities, s.expires_at, s.ended_at, s.end_reason,"
        " p.kind, p.name FROM sessions s JOIN participants p USING (participant_id)"
        " WHERE s.session_hash = ?",
        (session_hash,),
    ).fetchone()
    if row is None:
        raise CommonroomError("unauthorized", "unknown or ended session")
    pid, caps, expires_at, ended_at, end_reason, kind, name = row
    if ended_at is not None:
        if end_reason == "expired":
            raise CommonroomError("session_expired", "the session has expired; join again")
        raise CommonroomError("unauthorized", "unknown or ended session")
    if expires_at <= tx.now_s:
        raise CommonroomError("session_expired", "the session has expired; join again")
    tx.touch_presence(pid)
    return Actor(pid, tuple(json.loads(caps)), session_hash, kind, name)


def create_session(
    tx: Tx, participant_id: str, capabilities: tuple[str, ...], minutes: int, *,
    invite_id: str | None = None,
) -> tuple[str, str]:
    """Returns (bearer, expires_at). Only the hash is stored; `invite_id`: joined through it."""
    host = tx.engine.host_participant_id
    # The limit is on guests: the room's own host sessions (one per start,
    # one per host command without a room) never lock anyone out.
    active = tx.conn.execute(
        "SELECT count(*) FROM sessions WHERE ended_at IS NULL AND expires_at > ?"
        " AND participant_id != ?",
        (tx.now_s, host),
    ).fetchone()[0]
    most = tx.engine.serving.max_sessions  # `ce serve --max-sessions`, 64 by default
    if participant_id != host and active >= most:
        raise CommonroomError(
            "limit_exceeded",
            f"the room already has {most} active sessions",
            {"limit": most},
            retry_after_seconds=60,
        )
    bearer = "ses_" + secrets.token_urlsafe(32)
    expires_at = format_ts(tx.now + timedelta(minutes=minutes))
    tx.conn.execute(
        "INSERT INTO sessions (session_hash, participant_id, capabilities, created_at,"
        " expires_at, invite_id) VALUES (?, ?, ?, ?, ?, ?)",
        (hash_secret(bearer), participant_id, json.dumps(list(capabilities)), tx.now_s,
         expires_at, invite_id),
    )
    tx.emit(ev.SessionCreated(participant_id=participant_id, expires_at=expires_at))
    tx.after_commit.append(
        partial(tx.engine.live.session_started, hash_secret(bearer), participant_id))
    return bearer, expires_at


def end_sessions(tx: Tx, participant_id: str, reason: str) -> int:
    """End every open session of a participant (`revoked`, `left`); how many ended."""
    ended = [
        bytes(row[0])
        for row in tx.conn.execute(
            "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE participant_id = ?"
            " AND ended_at IS NULL RETURNING session_hash",
            (tx.now_s, reason, participant_id),
        ).fetchall()
    ]
    tx.engine.sessions_ended(tx, ended)
    return len(ended)


def expire(tx: Tx) -> None:
    """The `on_expiry` hook: end sessions past `expires_at`, one event each."""
    for session_hash, pid in tx.conn.execute(
        "SELECT session_hash, participant_id FROM sessions "
        "WHERE ended_at IS NULL AND expires_at <= ? ORDER BY expires_at",
        (tx.now_s,),
    ).fetchall():
        tx.conn.execute(
            "UPDATE sessions SET ended_at = ?, end_reason = 'expired' WHERE session_hash = ?",
            (tx.now_s, session_hash),
        )
        tx.emit(ev.SessionExpired(participant_id=pid))
        tx.engine.sessions_ended(tx, [session_hash])


def next_expiry(tx: Tx) -> datetime | None:
    row = tx.conn.execute(
        "SELECT min(expires_at) FROM sessions WHERE ended_at IS NULL"
    ).fetchone()
    return datetime.fromisoformat(row[0]) if row[0] is not None else None


def session_alive(engine: Engine, session_hash: bytes) -> bool:
    """For the room's streams: is this session still usable right now?"""
    row = engine.conn.execute(
        "SELECT expires_at, ended_at FROM sessions WHERE session_hash = ?", (session_hash,)
    ).fetchone()
    return row is not None and row[1] is None and row[0] > format_ts(engine.clock())


def capabilities_of(engine: Engine, bearer: str) -> tuple[str, ...] | None:
    """A live session's capabilities, None when the bearer is not one (what MCP's
    `tools/list` shows a session: the tools it can use)."""
    try:
        with engine.transaction(engine.clock(), write=False) as tx:
            return authenticate(tx, bearer).capabilities
    except CommonroomError:
        return None


def check_streams(engine: Engine, touches: dict[bytes, str | None]) -> dict[bytes, bool]:
    """For the room's held streams, in one store call: is each session still usable?

    `touches` maps a session hash to the participant whose presence the stream
    renews (None: it renews none). Presence is renewed once the look committed,
    and never for a session that ended (leave clears presence).
    """
    with engine.transaction(engine.clock(), write=False) as tx:
        alive = {h: session_alive(engine, h) for h in touches}
        for session_hash, participant_id in touches.items():
            if participant_id is not None and alive[session_hash]:
                tx.touch_presence(participant_id)
    return alive


def mint_host_session(engine: Engine, minutes: int = limits.SESSION_MAX_MINUTES) -> str:
    """A `*` session for the owner page and the host CLI; never in an invitation."""
    with engine.transaction(engine.clock()) as tx:
        bearer, _ = create_session(tx, engine.host_participant_id, HOST, minutes)
    return bearer


def end_stale_host_sessions(engine: Engine) -> int:
    """A room starts: host sessions an earlier run left open end now; returns how many.

    A room ends its host session when it stops; one that was killed (SIGKILL,
    a power cut) could not, and its bearer would stay valid for a day in the
    sidecar although the credential file that carried it is replaced. Cookies
    of the owner page live in memory only, so nothing else of the host's
    survives a restart either.
    """
    with engine.transaction(engine.clock()) as tx:
        stale = [bytes(row[0]) for row in tx.conn.execute(
            "SELECT session_hash FROM sessions WHERE participant_id = ? AND ended_at IS NULL",
            (engine.host_participant_id,),
        )]
        tx.conn.execute(
            "UPDATE sessions SET ended_at = ?, end_reason = 'stopped'"
            " WHERE participant_id = ? AND ended_at IS NULL",
            (tx.now_s, engine.host_participant_id),
        )
        engine.sessions_ended(tx, stale)
    return len(stale)


def end_host_session(engine: Engine, bearer: str) -> None:
    """The room stops: its host session ends with it (the credential file is gone too)."""
    with engine.transaction(engine.clock()) as tx:
        tx.conn.execute(
            "UPDATE sessions SET ended_at = ?, end_reason = 'stopped'"
            " WHERE session_hash = ? AND participant_id = ? AND ended_at IS NULL",
            (tx.now_s, hash_secret(bearer), engine.host_participant_id),
        )
        engine.sessions_ended(tx, [hash_secret(bearer)])
