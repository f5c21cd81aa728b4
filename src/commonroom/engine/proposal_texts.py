"""How much proposal text the sidecar keeps: per-author quotas, and the pruning of old texts.

A terminal proposal's text (and its earlier revisions) is dropped past the
newest `TERMINAL_TEXTS_PER_PARTICIPANT` of its author and `TERMINAL_TEXTS_TOTAL`
overall; the rows stay, so the history still names them. An author's stored
text stays within `PROPOSAL_BYTES_PER_PARTICIPANT`: a new revision first prunes
that author's oldest terminal texts, and is refused when open ones alone fill it.
"""

from __future__ import annotations

from typing import Any, Final

from commonroom.engine._state import PROPOSAL
from commonroom.engine.tx import Tx
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError

_TERMINAL_SQL: Final = PROPOSAL.terminal_sql


def _prune_where(tx: Tx, where: str, args: tuple[Any, ...], keep: int, *, index: str = "") -> None:
    pruned = tx.conn.execute(
        "UPDATE proposals SET content = '', original_content = NULL, content_bytes = 0,"
        f" pruned_at = ? WHERE proposal_id IN (SELECT proposal_id FROM proposals {index}"
        f" WHERE {_TERMINAL_SQL} AND pruned_at IS NULL {where}"
        " ORDER BY updated_at DESC, rowid DESC LIMIT -1 OFFSET ?) RETURNING proposal_id",
        (tx.now_s, *args, keep),
    ).fetchall()
    # A pruned proposal's earlier revisions go with its text (their rows hold text only).
    tx.conn.executemany("DELETE FROM proposal_revisions WHERE proposal_id = ?", pruned)


def prune(tx: Tx, author: str) -> None:
    """Drop the text of terminal proposals past the newest of `author` and overall (rows stay)."""
    _prune_where(tx, "AND participant_id = ?", (author,), limits.TERMINAL_TEXTS_PER_PARTICIPANT)
    # Without the hint SQLite takes the status index and reads every terminal
    # proposal ever made; the partial index holds only those with text left.
    _prune_where(tx, "", (), limits.TERMINAL_TEXTS_TOTAL, index="INDEXED BY proposals_unpruned")


def make_room(tx: Tx, author: str, size: int) -> None:
    """Keep `author`'s stored proposal text within its quota, pruning its oldest terminal texts."""
    quota = limits.PROPOSAL_BYTES_PER_PARTICIPANT
    rows = tx.conn.execute(
        f"SELECT proposal_id, content_bytes, {_TERMINAL_SQL} FROM proposals"
        " WHERE participant_id = ? AND pruned_at IS NULL ORDER BY updated_at, rowid", (author,),
    ).fetchall()
    held = sum(row[1] for row in rows)
    if held + size <= quota:
        return
    terminal = [row for row in rows if row[2]]
    if held - sum(row[1] for row in terminal) + size > quota:
        raise CommonroomError(
            "limit_exceeded",
            f"a participant's open proposals hold at most {quota} bytes of text: withdraw one,"
            " or wait for a review",
            {"scope": "proposal_bytes", "limit_bytes": quota, "held_bytes": held},
            retry_after_seconds=60,
        )
    for proposal_id, stored, _ in terminal:
        if held + size <= quota:
            break
        _prune_where(tx, "AND proposal_id = ?", (proposal_id,), 0)
        held -= stored
