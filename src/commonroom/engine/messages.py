"""Room text (docs/spec/PROTOCOL.md 10 and 10.1).

A message is visible to every reader; `to` marks an addressed turn for those
participants (they must be in the room; `@Name` inside the text addresses
nobody, only `to` does); `handoff_id` keeps it in that handoff's thread, where
only the handoff's two participants and the host may post. `seq` increases by
1 per room and never repeats (AUTOINCREMENT); the sidecar keeps the newest
`MESSAGES_KEPT` (5,000). Addressed messages count against the loop guard.

Every participant but the host has a room-text budget (the message budget):
at most `MESSAGE_BUDGET` (60) messages, addressed or not, in any
`MESSAGE_BUDGET_WINDOW_SECONDS` (5 minutes); the next is 429
`limit_exceeded` with `details.scope: "message_budget"` and nothing is
stored. Unaddressed text skipped the loop guard, so 300 messages of 4 KB a
minute cycled the 2,000-event ring that every observer resumes from. A new
thread and a reply to one (engine/threads.py) are room text too: they count
against the same budget (`within_budget`).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any

from commonroom.engine import guard, handoffs
from commonroom.engine.ids import new_id
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import Message, Messages
from commonroom.protocol.requests import MessageParams, MessagesParams
from commonroom.protocol.timefmt import format_ts

_COLUMNS = "message_id, seq, participant_id, recipients, handoff_id, text, created_at"


def _row(row: tuple[Any, ...]) -> Message:
    message_id, seq, participant_id, recipients, handoff_id, text, created_at = row
    return Message(message_id, seq, participant_id, json.loads(recipients), handoff_id, text,
                   created_at)


def send(tx: Tx, p: MessageParams) -> Message:
    pid = tx.actor.participant_id
    if not p.text.strip():
        raise invalid_request("text must not be empty", "text")
    if len(p.text) > limits.MESSAGE_MAX_CHARS:
        raise invalid_request(
            f"text is {len(p.text)} characters; a message holds at most"
            f" {limits.MESSAGE_MAX_CHARS}", "text",
        )
    if p.handoff_id is not None:
        handoffs.require_party_or_host(tx, handoffs.get(tx, p.handoff_id), "post in its thread")
    if pid != tx.engine.host_participant_id:
        within_budget(tx, pid)
    to = list(dict.fromkeys(p.to or []))
    for target in to:
        if target == pid:
            raise invalid_request("a message is not addressed to its own sender", "to")
        handoffs.check_participant(tx, target, "to")
    if to:
        guard.admit(tx, pid, to, "message")
    message_id = new_id("msg_")
    cur = tx.conn.execute(
        "INSERT INTO messages (message_id, participant_id, recipients, handoff_id, text,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (message_id, pid, json.dumps(to), p.handoff_id, p.text, tx.now_s),
    )
    seq = cur.lastrowid
    assert seq is not None
    tx.conn.execute("DELETE FROM messages WHERE seq <= ?", (seq - limits.MESSAGES_KEPT,))
    tx.emit(ev.MessageSent(message_id, pid, to, p.text, p.handoff_id))
    return Message(message_id, seq, pid, to, p.handoff_id, p.text, tx.now_s)


def within_budget(tx: Tx, pid: str) -> None:
    """Refuse room text (a message, a thread, a reply) past the sender's budget (see the
    module docstring): its messages and thread comments in the window count together."""
    window = timedelta(seconds=limits.MESSAGE_BUDGET_WINDOW_SECONDS)
    since = format_ts(tx.now - window)
    sent = tx.conn.execute(
        "SELECT created_at FROM (SELECT created_at FROM messages WHERE participant_id = ?"
        " AND created_at > ? UNION ALL SELECT created_at FROM thread_comments"
        " WHERE participant_id = ? AND created_at > ?) ORDER BY created_at DESC LIMIT ?",
        (pid, since, pid, since, limits.MESSAGE_BUDGET),
    ).fetchall()
    if len(sent) < limits.MESSAGE_BUDGET:
        return
    oldest = datetime.fromisoformat(sent[-1][0])
    wait = max(1, math.ceil((oldest + window - tx.now).total_seconds()))
    raise CommonroomError(
        "limit_exceeded",
        f"at most {limits.MESSAGE_BUDGET} messages in {limits.MESSAGE_BUDGET_WINDOW_SECONDS // 60}"
        f" minutes; try again in {wait} s",
        {"scope": "message_budget", "limit": limits.MESSAGE_BUDGET,
         "window_seconds": limits.MESSAGE_BUDGET_WINDOW_SECONDS},
        retry_after_seconds=wait,
    )


def list_messages(tx: Tx, p: MessagesParams) -> Messages:
    if p.handoff_id is not None:
        handoffs.get(tx, p.handoff_id)  # handoff_not_found for an unknown thread
        rows = tx.conn.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE handoff_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?",
            (p.handoff_id, p.after, p.limit),
        ).fetchall()
    else:
        rows = tx.conn.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE seq > ? ORDER BY seq LIMIT ?",
            (p.after, p.limit),
        ).fetchall()
    latest = tx.conn.execute("SELECT coalesce(max(seq), 0) FROM messages").fetchone()[0]
    return Messages([_row(row) for row in rows], int(latest))
