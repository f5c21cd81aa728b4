"""How the room is reached: its transport, and the listeners' ports kept across restarts.

Kept in the sidecar's `meta` table, so that `ce invite` can print a
reachable invitation while no room runs and open tabs survive a restart.
"""

from __future__ import annotations

import json
import sqlite3

from commonroom.protocol.invitation import TransportHint


def read_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _write_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


class Ports:
    """The transport the room is reached by now, and the saved listener ports."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.transport_hint: TransportHint | None = None
        self.transport_name = "none"
        saved_hint = read_meta(conn, "transport_hint")
        if saved_hint and saved_hint != "null":
            self.transport_hint = TransportHint(**json.loads(saved_hint))
            self.transport_name = self.transport_hint.type

    def set_transport(self, name: str, hint: TransportHint | None) -> None:
        """Remember how the room is reached now (and for `ce invite` while no room runs)."""
        self.transport_name = name
        self.transport_hint = hint
        _write_meta(self.conn, "transport_hint", json.dumps(hint.to_json() if hint is not None else None))

    def last_ingress_port(self) -> int | None:
        raw = read_meta(self.conn, "transport_hint")
        hint = json.loads(raw) if raw else None
        port = hint.get("port") if isinstance(hint, dict) else None
        return port if isinstance(port, int) else None

    def saved_port(self, key: str) -> int | None:
        """A listener's port from last time (`owner_port`), kept so open tabs survive restarts."""
        raw = read_meta(self.conn, key)
        return int(raw) if raw is not None and raw.isdigit() else None

    def save_port(self, key: str, port: int) -> None:
        _write_meta(self.conn, key, str(port))
