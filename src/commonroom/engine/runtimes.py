"""Each participant's last runtime report: the `participant_runtimes` rows (docs/spec/PROTOCOL.md 19).

`resident.py` writes them (`workspace.runtime`); `access.list_participants` shows them as
`runtime`. Both read them here, so participants never import the resident feature above them.
"""

from __future__ import annotations

from commonroom.engine.tx import Tx
from commonroom.protocol.records import Runtime

_RUNTIME_COLUMNS = "state, harness, queued, turn, turn_started_at, note, updated_at"


def runtimes(tx: Tx) -> dict[str, Runtime]:
    """Every participant's last runtime report (participants shows them)."""
    return {
        row[0]: Runtime(*row[1:])
        for row in tx.conn.execute(f"SELECT participant_id, {_RUNTIME_COLUMNS} FROM participant_runtimes")
    }


def runtime_of(tx: Tx, participant_id: str) -> Runtime | None:
    row = tx.conn.execute(
        f"SELECT {_RUNTIME_COLUMNS} FROM participant_runtimes WHERE participant_id = ?",
        (participant_id,),
    ).fetchone()
    return Runtime(*row) if row is not None else None


__all__ = ["runtime_of", "runtimes"]
