"""Threads: conversations anchored to a region and an optional exact quote (docs/spec/PROTOCOL.md 17).

A thread belongs to a region (its canonical heading path at the version it
was opened on) and may carry a quote, an exact span of that region's text.
After every recorded version (`on_document_change`) each open thread is
re-anchored: its region by heading path, its quote by exact match inside the
region's new text; when either is gone the thread becomes `outdated`, and when
both are back it is open again. It is kept and listed like any other: nothing
here ever deletes a thread.

A *blocking* thread is a question that blocks its author only: the room holds
nobody. The author's wait (`ce wait THREAD`, the client's `wait_for_reply`,
or a plain `workspace.wait`) wakes on `thread.replied`, the event of the
first reply from someone else; every other participant carries on.

A review comment (reject, request changes, approve with a comment) opens a
thread on the proposal's region linked to it (`open_review_thread`).

Status moves are the thread machine's (`engine/_state.THREAD`); the parameter
records are `protocol/requests.py`'s.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

from commonroom.engine import messages
from commonroom.engine._state import THREAD, move
from commonroom.engine.ids import new_id
from commonroom.engine.regions import WHOLE, region_text
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.text import encode_text, line_ending, with_line_endings
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits, vocabulary
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import Comment, Thread, Threads
from commonroom.protocol.requests import (
    OpenThreadParams,
    ReplyParams,
    ResolveParams,
    ThreadIdParams,
    ThreadsParams,
)
from commonroom.protocol.timefmt import format_ts, parse_ts

STATUSES: Final = vocabulary.THREAD_STATUSES
# A quote that does not occur in its region's text.
QUOTE_NOT_FOUND: Final = "quote_not_found"


_COLUMNS: Final = (
    "thread_id, region, quote, blocking, status, author_id, proposal_id, created_at, updated_at"
)


def check_body(body: str, field: str = "body") -> str:
    """A comment body: not blank, at most `THREAD_BODY_MAX_BYTES` bytes of UTF-8."""
    if not body.strip():
        raise invalid_request(f"{field} must not be empty", field)
    size = len(encode_text(body))
    if size > limits.THREAD_BODY_MAX_BYTES:
        raise CommonroomError(
            "limit_exceeded",
            f"{field} is {size} bytes; a comment holds at most {limits.THREAD_BODY_MAX_BYTES}",
            {"field": field, "limit_bytes": limits.THREAD_BODY_MAX_BYTES, "size_bytes": size},
            http_status=413,
        )
    return body


def _anchored(snap: Snapshot, region: str, quote: str | None) -> bool:
    """Does the region still exist by its heading path, and its quote inside its text?"""
    if not snap.outline.has_path(region):
        return False
    if quote is None:
        return True
    return quote in region_text(snap, region)


def _comments(tx: Tx, thread_ids: list[str]) -> dict[str, list[Comment]]:
    out: dict[str, list[Comment]] = {thread_id: [] for thread_id in thread_ids}
    for start in range(0, len(thread_ids), 500):  # SQLite's host-parameter bound
        chunk = thread_ids[start:start + 500]
        marks = ", ".join("?" * len(chunk))
        for thread_id, *fields in tx.conn.execute(
            "SELECT thread_id, comment_id, participant_id, body, created_at FROM thread_comments"
            f" WHERE thread_id IN ({marks}) ORDER BY rowid", chunk,
        ):
            out[thread_id].append(Comment(*fields))
    return out


def _threads(tx: Tx, rows: list[tuple[Any, ...]]) -> list[Thread]:
    comments = _comments(tx, [row[0] for row in rows])
    return [
        Thread(thread_id, region, quote, bool(blocking), status, author_id, proposal_id,
               created_at, updated_at, comments[thread_id])
        for (thread_id, region, quote, blocking, status, author_id, proposal_id, created_at,
             updated_at) in rows
    ]


def get(tx: Tx, thread_id: str) -> Thread:
    row = tx.conn.execute(
        f"SELECT {_COLUMNS} FROM threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if row is None:
        raise CommonroomError("thread_not_found", f"no thread {thread_id!r}",
                              {"thread_id": thread_id})
    return _threads(tx, [row])[0]


def _insert(tx: Tx, region: str, quote: str | None, blocking: bool, body: str,
            proposal_id: str | None, status: str = "open") -> Thread:
    author = tx.actor.participant_id
    thread_id = new_id("th_")
    tx.conn.execute(
        f"INSERT INTO threads ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (thread_id, region, quote, int(blocking), status, author, proposal_id, tx.now_s,
         tx.now_s),
    )
    _add_comment(tx, thread_id, body)
    tx.emit(ev.ThreadOpened(thread_id, region, author, blocking, proposal_id))
    return get(tx, thread_id)


def _add_comment(tx: Tx, thread_id: str, body: str) -> str:
    comment_id = new_id("cm_")
    cur = tx.conn.execute(
        "INSERT INTO thread_comments (comment_id, thread_id, participant_id, body, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (comment_id, thread_id, tx.actor.participant_id, body, tx.now_s),
    )
    newest = cur.lastrowid
    assert newest is not None
    if newest > limits.THREAD_COMMENTS_KEPT:
        # The room keeps its newest comments, like its room text; a thread keeps its question.
        tx.conn.execute(
            "DELETE FROM thread_comments WHERE rowid <= ? AND rowid NOT IN"
            " (SELECT min(rowid) FROM thread_comments GROUP BY thread_id)",
            (newest - limits.THREAD_COMMENTS_KEPT,))
    return comment_id


def _within_budget(tx: Tx) -> None:
    """A new thread or a reply is room text: the author's budget (the host has none)."""
    if tx.actor.participant_id != tx.engine.host_participant_id:
        messages.within_budget(tx, tx.actor.participant_id)


def open_thread(tx: Tx, p: OpenThreadParams) -> Thread:
    body = check_body(p.body)
    current, span = tx.engine.resolve(p.region)  # invalid_region names the candidates
    quote = p.quote
    if quote is not None:
        if not quote.strip():
            raise invalid_request("quote must not be blank (leave it out instead)", "quote")
        if len(quote) > limits.THREAD_QUOTE_MAX:
            raise invalid_request(
                f"quote is {len(quote)} characters; at most {limits.THREAD_QUOTE_MAX}", "quote")
        # A selection across lines has LF breaks: quote the region's own (CRLF) ones.
        text = region_text(current, span.region)
        quote = with_line_endings(quote, line_ending(text))
        if quote not in text:
            error = invalid_request(
                f"the quote does not occur in {span.region!r} at version {current.version}:"
                " quote an exact span of the region's current text", "quote")
            error.details.update(reason=QUOTE_NOT_FOUND, region=span.region,
                                 version=current.version)
            raise error
    author = tx.actor.participant_id
    _within_budget(tx)
    if author != tx.engine.host_participant_id:
        held = tx.conn.execute(
            "SELECT count(*) FROM threads WHERE status = 'open' AND author_id = ?", (author,)
        ).fetchone()[0]
        if held >= limits.OPEN_THREADS_PER_PARTICIPANT:
            raise CommonroomError(
                "limit_exceeded",
                f"a participant has at most {limits.OPEN_THREADS_PER_PARTICIPANT} open threads:"
                " resolve one first",
                {"scope": "open_threads", "limit": limits.OPEN_THREADS_PER_PARTICIPANT},
                retry_after_seconds=60,
            )
    return _insert(tx, span.region, quote, p.blocking, body, None)


def open_review_thread(tx: Tx, region: str, proposal_id: str, comment: str) -> None:
    """A review comment opens a thread on the proposal's region, linked to the proposal."""
    status = "open" if tx.engine.current().outline.has_path(region) else "outdated"
    _insert(tx, region, None, False, comment, proposal_id, status)


def reply(tx: Tx, p: ReplyParams) -> Thread:
    body = check_body(p.body)
    thread = get(tx, p.thread_id)
    who = tx.actor.participant_id
    if thread.status == "resolved" and who not in (thread.author_id,
                                                    tx.engine.host_participant_id):
        raise CommonroomError(
            "permission_denied",
            "this thread is resolved: only its author or the host may reopen it and reply",
            {"thread_id": thread.thread_id, "status": thread.status},
        )
    _within_budget(tx)
    if len(thread.comments) >= limits.THREAD_COMMENTS_MAX:
        raise CommonroomError(
            "limit_exceeded",
            f"a thread holds at most {limits.THREAD_COMMENTS_MAX} comments: open a new one",
            {"scope": "thread_comments", "limit": limits.THREAD_COMMENTS_MAX},
        )
    comment_id = _add_comment(tx, thread.thread_id, body)
    tx.conn.execute("UPDATE threads SET updated_at = ? WHERE thread_id = ?",
                    (tx.now_s, thread.thread_id))
    tx.emit(ev.ThreadReplied(thread.thread_id, thread.region, tx.actor.participant_id,
                             comment_id))
    return get(tx, thread.thread_id)


def _never() -> CommonroomError:
    raise AssertionError("an open thread can be outdated")


def _move(tx: Tx, thread: Thread, action: str) -> str:
    """A move of `_state.THREAD`; `invalid_request` naming the status when there is none."""
    def refuse() -> CommonroomError:
        return CommonroomError(
            "invalid_request", f"cannot {action} a thread that is {thread.status}",
            {"status": thread.status, "thread_id": thread.thread_id},
        )

    return move(tx, THREAD, thread.thread_id, thread.status, action, refuse=refuse)


def resolve(tx: Tx, p: ResolveParams) -> Thread:
    thread = get(tx, p.thread_id)
    who = tx.actor.participant_id
    if who not in (thread.author_id, tx.engine.host_participant_id):
        raise CommonroomError(
            "permission_denied", "only the thread's author or the host resolves or reopens it",
            {"thread_id": thread.thread_id},
        )
    if p.resolved:
        _move(tx, thread, "resolve")
    else:
        _move(tx, thread, "reopen")
    tx.emit(ev.ThreadResolved(thread.thread_id, thread.region, who, p.resolved))
    if not p.resolved and not _anchored(tx.engine.current(), thread.region, thread.quote):
        # Reopened on text that is gone: it is outdated at once, like after a version.
        _outdate(tx, get(tx, thread.thread_id), tx.engine.current().version)
    return get(tx, thread.thread_id)


def _outdate(tx: Tx, thread: Thread, version: int) -> None:
    _move(tx, thread, "outdate")
    tx.emit(ev.ThreadOutdated(thread.thread_id, thread.region, version))


def thread_one(tx: Tx, p: ThreadIdParams) -> Thread:
    return get(tx, p.thread_id)


def list_threads(tx: Tx, p: ThreadsParams) -> Threads:
    where: list[str] = []
    args: list[Any] = []
    if p.region is not None:
        region = p.region.strip()
        if region.startswith("section:"):
            region = region[len("section:"):].strip()
        outline = tx.engine.current().outline
        # A region that is gone: its (outdated) threads are still listed by path.
        with contextlib.suppress(CommonroomError):
            region = outline.resolve(region).region
        where.append("region = ?")
        args.append(region)
    if p.status is not None:
        where.append("status = ?")
        args.append(p.status)
    if p.proposal_id is not None:
        where.append("proposal_id = ?")
        args.append(p.proposal_id)
    if p.since is not None:
        where.append("updated_at >= ?")
        args.append(_since(p.since))
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = tx.conn.execute(
        f"SELECT {_COLUMNS} FROM threads{clause} ORDER BY created_at DESC, rowid DESC LIMIT ?",
        (*args, p.limit),
    ).fetchall()
    return Threads(_threads(tx, rows))


def _since(value: str) -> str:
    """`since` as the room writes its times, so it compares as text."""
    try:
        return format_ts(parse_ts(value))
    except ValueError:
        raise invalid_request("since must be a time as the room writes them, e.g. a thread's"
                              " updated_at", "since") from None


def on_document_change(tx: Tx, before: Snapshot, after: Snapshot, committed: str | None) -> None:
    """Re-anchor every open or outdated thread on the new version: an open one whose
    anchor is gone goes outdated, an outdated one whose region and quote are back is
    open again (`thread.reanchored`: a save seen half-way cut the section, the next
    one brought it back).

    A thread whose region text is byte-identical before and after is skipped
    without looking at its quote: most versions touch one region.
    """
    rows = tx.conn.execute(
        f"SELECT {_COLUMNS} FROM threads WHERE status IN ('open', 'outdated') ORDER BY rowid"
    ).fetchall()
    unchanged: dict[str, bool] = {}
    for row in rows:
        thread_id, region, quote, status = row[0], row[1], row[2], row[4]
        if region not in unchanged:
            unchanged[region] = (
                region != WHOLE and before.outline.has_path(region)
                and after.outline.has_path(region)
                and before.outline.region_text(before.outline.resolve(region))
                == after.outline.region_text(after.outline.resolve(region))
            )
        if unchanged[region]:
            continue
        anchored = _anchored(after, region, quote)
        if status == "open" and not anchored:
            move(tx, THREAD, thread_id, "open", "outdate", refuse=_never)
            tx.emit(ev.ThreadOutdated(thread_id, region, after.version))
        elif status == "outdated" and anchored:
            move(tx, THREAD, thread_id, "outdated", "reanchor", refuse=_never)
            tx.emit(ev.ThreadReanchored(thread_id, region, after.version))
