"""The live sessions and minted invitations the ingress's gates ask about, without a store call.

The rate limiter charges a bearer to its own window (and its participant's)
from its first request, and the join gate charges an attempt to its
invitation's window when the secret is one this room minted (used up, expired
and revoked ones too), else to the small window of unknown secrets. Both ask on
the event loop while the store thread changes the sets, so every access holds
a lock: the answer never depends on the interpreter's lock. Entries change only
once the transaction that creates or ends a session, or mints an invitation,
committed (`Tx.after_commit`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from datetime import datetime

from commonroom.protocol.timefmt import format_ts


class LiveKeys:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[bytes, str] = {}  # session hash -> participant id
        self._invitations: set[bytes] = set()  # secret hashes

    def load(self, conn: sqlite3.Connection, now: datetime) -> None:
        """What the sidecar holds when the engine opens."""
        sessions = [(bytes(row[0]), str(row[1])) for row in conn.execute(
            "SELECT session_hash, participant_id FROM sessions"
            " WHERE ended_at IS NULL AND expires_at > ?", (format_ts(now),))]
        invitations = [bytes(row[0]) for row in conn.execute("SELECT secret_hash FROM invitations")]
        with self._lock:
            self._sessions.update(sessions)
            self._invitations.update(invitations)

    def session_participant(self, session_hash: bytes) -> str | None:
        """The participant of a session that is not ended (None: no such live session)."""
        with self._lock:
            return self._sessions.get(session_hash)

    def knows_invitation(self, secret_hash: bytes) -> bool:
        """Whether this room minted the invitation whose secret hashes to `secret_hash`."""
        with self._lock:
            return secret_hash in self._invitations

    def session_started(self, session_hash: bytes, participant_id: str) -> None:
        with self._lock:
            self._sessions[session_hash] = participant_id

    def sessions_ended(self, hashes: Iterable[bytes]) -> None:
        with self._lock:
            for session_hash in hashes:
                self._sessions.pop(session_hash, None)

    def invitation_minted(self, secret_hash: bytes) -> None:
        with self._lock:
            self._invitations.add(secret_hash)
