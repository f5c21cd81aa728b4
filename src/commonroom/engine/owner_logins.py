"""The owner page's logins in the sidecar: hashes and expiry times, nothing else.

The owner listener (`http/owner.py`) decides who is logged in; this module only
keeps its record across restarts, so an open tab of the host's page survives
`ce serve` stopping and starting again. A row is the sha256 of a page
credential (never the credential) and when it stops being valid; the listener
moves `expires_at` forward as the login is used. No events: a login is not
room activity, and nothing about it may reach a participant.
"""

from __future__ import annotations

from datetime import datetime

from commonroom.engine.core import Engine
from commonroom.protocol.timefmt import format_ts, parse_ts


def load(engine: Engine) -> dict[bytes, datetime]:
    """The logins still valid now (expired ones are deleted): hash -> expires_at."""
    with engine.transaction(engine.clock()) as tx:
        tx.conn.execute("DELETE FROM owner_logins WHERE expires_at <= ?", (tx.now_s,))
        rows = tx.conn.execute("SELECT login_hash, expires_at FROM owner_logins").fetchall()
    return {bytes(row[0]): parse_ts(str(row[1])) for row in rows}


def save(engine: Engine, login_hash: bytes, expires_at: datetime) -> None:
    """Record a new login, or move an existing one's expiry."""
    with engine.transaction(engine.clock()) as tx:
        tx.conn.execute(
            "INSERT INTO owner_logins (login_hash, created_at, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (login_hash) DO UPDATE SET expires_at = excluded.expires_at",
            (login_hash, tx.now_s, format_ts(expires_at)),
        )


def end_all(engine: Engine) -> int:
    """End every login (`ce open FILE --logout-all`); how many were valid."""
    with engine.transaction(engine.clock()) as tx:
        valid = tx.conn.execute(
            "SELECT count(*) FROM owner_logins WHERE expires_at > ?", (tx.now_s,)).fetchone()[0]
        tx.conn.execute("DELETE FROM owner_logins")
    return int(valid)
