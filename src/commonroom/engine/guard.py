"""The loop guard (docs/spec/PROTOCOL.md 10.1): agents cannot ping-pong forever unseen.

Per (sender -> target) pair, at most `GUARD_MAX_SENDS` addressed messages and
handoff requests together in any `GUARD_WINDOW_SECONDS`. The next one is
refused with `limit_exceeded` (429, `retry_after_seconds` = when the oldest
send in the window leaves it), nothing of it is stored, and the room emits
one `guard.tripped` so the host sees it. Repeated refusals of a pair while it
is still tripped emit no further events (a looping agent cannot flood the
ring with them). Other targets and unaddressed text are unaffected.

`admit` is called by a handler before it writes anything; on refusal it
commits only the trip (`tx.fail_after_commit`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta

from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.timefmt import format_ts


def admit(tx: Tx, sender: str, targets: Iterable[str], kind: str) -> None:
    """Count one send of `kind` (message | handoff) to each target, or refuse them all."""
    targets = sorted(set(targets))
    window = timedelta(seconds=limits.GUARD_WINDOW_SECONDS)
    horizon = format_ts(tx.now - window)
    tx.conn.execute("DELETE FROM guard_sends WHERE sent_at <= ?", (horizon,))
    for target in targets:
        rows = tx.conn.execute(
            "SELECT sent_at FROM guard_sends WHERE sender = ? AND target = ? AND sent_at > ?"
            " ORDER BY sent_at",
            (sender, target, horizon),
        ).fetchall()
        if len(rows) >= limits.GUARD_MAX_SENDS:
            oldest = datetime.fromisoformat(rows[len(rows) - limits.GUARD_MAX_SENDS][0])
            wait = max(1, math.ceil((oldest + window - tx.now).total_seconds()))
            _trip(tx, sender, target, kind, wait)
    tx.conn.executemany(
        "INSERT INTO guard_sends (sender, target, kind, sent_at) VALUES (?, ?, ?, ?)",
        [(sender, target, kind, tx.now_s) for target in targets],
    )


def _trip(tx: Tx, sender: str, target: str, kind: str, wait: int) -> None:
    active = tx.conn.execute(
        "SELECT 1 FROM guard_trips WHERE sender = ? AND target = ? AND until > ?",
        (sender, target, tx.now_s),
    ).fetchone()
    error = CommonroomError(
        "limit_exceeded",
        f"at most {limits.GUARD_MAX_SENDS} addressed messages and handoff requests to one"
        f" participant in {limits.GUARD_WINDOW_SECONDS // 60} minutes; try again in {wait} s",
        {"scope": "loop_guard", "target_participant_id": target, "kind": kind,
         "limit": limits.GUARD_MAX_SENDS, "window_seconds": limits.GUARD_WINDOW_SECONDS},
        retry_after_seconds=wait,
    )
    if active is not None:
        raise error
    tx.conn.execute(
        "INSERT INTO guard_trips (sender, target, until) VALUES (?, ?, ?)"
        " ON CONFLICT (sender, target) DO UPDATE SET until = excluded.until",
        (sender, target, format_ts(tx.now + timedelta(seconds=wait))),
    )
    tx.emit(ev.GuardTripped(sender, target, kind, wait))
    raise tx.fail_after_commit(error)
