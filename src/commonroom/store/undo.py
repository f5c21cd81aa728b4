"""Undoing one committed transaction: the compensation for a document write that failed.

Why it exists: docs/spec/PROTOCOL.md section 15 orders a document change as *sidecar
COMMIT, then rename of the fsynced temp file over the document*, so that a
crash between the two is told apart on restart and rolled forward (the
version is in the sidecar, marked unwritten). A rename that *fails* while the
process lives (an immutable file, a folder made read-only) is different: its
client is told the commit failed, so the commit must not land later. The
engine then undoes the committed transaction with the inverse recorded here.

How: temporary triggers (connection-local, never stored in the sidecar) on
every table of the sidecar append, while armed, the SQL that reverses each
row change: an INSERT is undone by a DELETE of its rowid, an UPDATE by setting
back the columns it changed, a DELETE by inserting the old row again. The
engine arms the log for each write transaction and keeps it until the file
write succeeded. `undo` applies the steps newest first in one transaction.
Values are rendered with SQLite's `quote()`, exact for TEXT, INTEGER, BLOB
and NULL (the schema has no REAL columns, whose rendering could round).
AUTOINCREMENT counters are set back too, so undone event ids are reused and
the published ids stay gapless.
"""

from __future__ import annotations

import sqlite3


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class UndoLog:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.armed = False
        self.steps: list[str] = []
        conn.create_function("commonroom_undo_armed", 0, lambda: self.armed)
        conn.create_function("commonroom_undo", 1, self.steps.append)
        self._autoincrement: list[str] = []
        self._install_triggers()

    def _install_triggers(self) -> None:
        tables = [
            str(row[0])
            for row in self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in tables:
            sql = str(self.conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()[0]).upper()
            if "WITHOUT ROWID" in sql or sql.startswith("CREATE VIRTUAL"):
                # The inverse addresses rows by rowid, and triggers cannot watch
                # virtual tables: a schema change must keep to rowid tables.
                raise RuntimeError(f"sidecar table {table!r} is not a rowid table; store/undo.py"
                                   " cannot undo its changes")
            if "AUTOINCREMENT" in sql:
                self._autoincrement.append(table)
            columns = [str(row[1]) for row in self.conn.execute(f"PRAGMA table_info({_ident(table)})")]
            target = "main." + _ident(table)
            quoted = "'" + target.replace("'", "''") + "'"
            changed = " || ".join(
                f"CASE WHEN old.{_ident(c)} IS NOT new.{_ident(c)}"
                f" THEN ',{_ident(c)}=' || quote(old.{_ident(c)}) ELSE '' END"
                for c in columns
            )
            values = " || ',' || ".join(f"quote(old.{_ident(c)})" for c in columns)
            names = ",".join(_ident(c) for c in columns)
            guard = "WHEN commonroom_undo_armed()"
            script = f"""
            CREATE TEMP TRIGGER IF NOT EXISTS {_ident('undo_insert_' + table)}
            AFTER INSERT ON {target} {guard} BEGIN
                SELECT commonroom_undo('DELETE FROM ' || {quoted} || ' WHERE rowid=' || new.rowid);
            END;
            CREATE TEMP TRIGGER IF NOT EXISTS {_ident('undo_update_' + table)}
            AFTER UPDATE ON {target} {guard} BEGIN
                SELECT commonroom_undo('UPDATE ' || {quoted} || ' SET rowid=' || old.rowid
                    || {changed} || ' WHERE rowid=' || new.rowid);
            END;
            CREATE TEMP TRIGGER IF NOT EXISTS {_ident('undo_delete_' + table)}
            AFTER DELETE ON {target} {guard} BEGIN
                SELECT commonroom_undo('INSERT INTO ' || {quoted} || '(rowid,{names.replace("'", "''")})'
                    || ' VALUES(' || old.rowid || ',' || {values} || ')');
            END;
            """
            self.conn.executescript(script)

    def arm(self) -> None:
        """Start recording the inverse of the transaction that is beginning."""
        self.steps.clear()
        self.armed = True

    def disarm(self) -> None:
        """Stop recording; the steps are kept until `undo`, `forget` or the next `arm`."""
        self.armed = False

    def forget(self) -> None:
        """The transaction stands: drop its inverse."""
        self.steps.clear()

    def undo(self) -> None:
        """Reverse what the last armed transaction committed, in one transaction of its own."""
        steps = list(reversed(self.steps))
        self.steps.clear()
        self.armed = False
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for sql in steps:
                self.conn.execute(sql)
            for table in self._autoincrement:
                self.conn.execute(
                    "UPDATE sqlite_sequence SET seq = coalesce("
                    f"(SELECT max(rowid) FROM main.{_ident(table)}), seq) WHERE name = ?",
                    (table,),
                )
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
