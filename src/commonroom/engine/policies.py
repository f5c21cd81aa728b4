"""Scoped auto-approve policies (docs/spec/PROTOCOL.md section 18), the host's alone.

A policy names a participant (by id, or by the label of the host's invitation
it joined through: never by a display name, which is whatever a joiner chose),
a glob over region heading paths, the most lines a change may change, and
optionally when it expires. A new proposal is approved by the room
(`reviewer_id = "policy:po_…"`, `proposal.approved` with `policy_id`) when an
active policy matches its author, every section its change touches matches the
glob, it changes at most `max_changed_lines` lines, and no section it touches
is under a human-editing hold. Anything else waits for a person as usual.

Policies are narrow by construction (PROTOCOL section 18, "a policy never
approves"): whatever a policy says, the room never approves a whole-document
proposal, a change to the outline (any heading's level or title, or text that
moves where one is), a change to a link reference definition or an HTML block
(they act beyond where they stand), nor a revision: the room reviews a
proposal once, in the transaction that creates it, on the text it measured; a
revise goes to a person.

Every operation here needs `admin` (an agent never creates, changes, widens or
lists one). `workspace.policy_pause {all: true}` is the kill switch: it pauses
every policy in one transaction; `paused: false` resumes them.

Globs are `fnmatch` patterns matched case-sensitively over the whole heading
path: `*` matches any text, `/` included (`Notes/*` covers every depth under
`Notes`). The text before the first heading is the path "".
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Final

from commonroom.engine import linediff
from commonroom.engine.commonmark import special_blocks
from commonroom.engine.ids import new_id
from commonroom.engine.leases import HUMAN_EDITING, active_leases
from commonroom.engine.regions import WHOLE, Outline, related
from commonroom.engine.tx import Tx
from commonroom.protocol.capabilities import require
from commonroom.protocol.errors import invalid_request
from commonroom.protocol.records import (
    Policies,
    PoliciesPaused,
    Policy,
    PolicyApproval,
    PolicyRemoved,
)
from commonroom.protocol.requests import PauseParams, PolicyIdParams, PolicyParams
from commonroom.protocol.timefmt import format_ts, parse_ts

REVIEWER_PREFIX: Final = "policy:"
APPROVALS_SHOWN: Final = 20
_COLUMNS: Final = (
    "policy_id, participant_id, name_pattern, region_pattern, max_changed_lines, expires_at,"
    " paused, created_at, label"
)


def _host_only(tx: Tx) -> None:
    require(tx.actor.capabilities, "admin")


def _expiry(tx: Tx, expires_at: str | None) -> str | None:
    if expires_at is None:
        return None
    try:
        moment = datetime.fromisoformat(expires_at)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise invalid_request("expires_at must be an ISO 8601 time with its offset, e.g."
                              " 2026-12-01T18:00:00+00:00", "expires_at")
    if moment <= tx.now:
        raise invalid_request("expires_at is in the past", "expires_at")
    return format_ts(moment)


def add(tx: Tx, p: PolicyParams) -> Policy:
    _host_only(tx)
    if p.name_pattern is not None:
        error = invalid_request(
            "a policy never names participants by display name (anyone may join as any name):"
            " give participant_id, or a label you gave an invitation (ce invite --label)",
            "name_pattern")
        error.details["reason"] = "display_name_untrusted"
        raise error
    if (p.participant_id is None) == (p.label is None):
        raise invalid_request("give exactly one of participant_id or label", "participant_id")
    if p.participant_id is not None:
        row = tx.conn.execute("SELECT 1 FROM participants WHERE participant_id = ?",
                              (p.participant_id,)).fetchone()
        if row is None:
            raise invalid_request(f"no participant {p.participant_id!r}", "participant_id")
    pattern = p.region_pattern.strip()
    regions = tx.engine.current().outline.paths()
    if not any(fnmatchcase(path, pattern) for path in regions):
        error = invalid_request(
            f"region_pattern {pattern!r} matches no region of the document: see"
            " GET /workspace/regions for the heading paths", "region_pattern")
        error.details["reason"] = "pattern_matches_nothing"
        raise error
    policy_id = new_id("po_")
    tx.conn.execute(
        f"INSERT INTO policies ({_COLUMNS}) VALUES (?, ?, NULL, ?, ?, ?, 0, ?, ?)",
        (policy_id, p.participant_id, pattern, p.max_changed_lines,
         _expiry(tx, p.expires_at), tx.now_s, p.label.strip() if p.label else None),
    )
    return _one(tx, policy_id)


def remove(tx: Tx, p: PolicyIdParams) -> PolicyRemoved:
    _host_only(tx)
    _one(tx, p.policy_id)
    tx.conn.execute("UPDATE policies SET removed_at = ? WHERE policy_id = ?", (tx.now_s, p.policy_id))
    return PolicyRemoved(p.policy_id, True)


def pause(tx: Tx, p: PauseParams) -> PoliciesPaused:
    _host_only(tx)
    if p.all == (p.policy_id is not None):
        raise invalid_request("give all: true (every policy) or one policy_id", "all")
    if p.all:
        ids = [row[0] for row in tx.conn.execute(
            "SELECT policy_id FROM policies WHERE removed_at IS NULL ORDER BY created_at")]
    else:
        assert p.policy_id is not None
        ids = [_one(tx, p.policy_id).policy_id]
    tx.conn.executemany("UPDATE policies SET paused = ? WHERE policy_id = ?",
                        [(int(p.paused), policy_id) for policy_id in ids])
    return PoliciesPaused(p.paused, ids)


def list_policies(tx: Tx, p: Any) -> Policies:
    _host_only(tx)
    rows = tx.conn.execute(
        f"SELECT {_COLUMNS} FROM policies WHERE removed_at IS NULL ORDER BY created_at, policy_id"
    ).fetchall()
    return Policies([_record(tx, row) for row in rows])


def _one(tx: Tx, policy_id: str) -> Policy:
    row = tx.conn.execute(
        f"SELECT {_COLUMNS} FROM policies WHERE policy_id = ? AND removed_at IS NULL", (policy_id,)
    ).fetchone()
    if row is None:
        error = invalid_request(f"no policy {policy_id!r}", "policy_id")
        error.details["policy_id"] = policy_id
        raise error
    return _record(tx, row)


def _active(tx: Tx, paused: int, expires_at: str | None) -> bool:
    return not paused and (expires_at is None or parse_ts(expires_at) > tx.now)


def _record(tx: Tx, row: tuple[Any, ...]) -> Policy:
    policy_id, pid, name_pattern, pattern, most, expires_at, paused, created_at, label = row
    reviewer = REVIEWER_PREFIX + policy_id
    count = tx.conn.execute("SELECT count(*) FROM proposals WHERE reviewer_id = ?",
                            (reviewer,)).fetchone()[0]
    approved = [PolicyApproval(*found) for found in tx.conn.execute(
        "SELECT proposal_id, participant_id, region, summary, status, created_at FROM proposals"
        " WHERE reviewer_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?",
        (reviewer, APPROVALS_SHOWN))]
    # A policy stored by name (before names were refused) approves nothing: never active.
    active = _active(tx, paused, expires_at) and name_pattern is None
    return Policy(policy_id, pid, name_pattern, pattern, most, expires_at, bool(paused), created_at,
                  active, count, approved, label)


# -- the room's review -----------------------------------------------------------------


def _section_path(outline: Outline, position: int) -> str:
    k = bisect_right(outline._starts, position)
    return "" if k == 0 else outline._paths[k - 1]


def measure(outline: Outline, region: str, content: str) -> tuple[int, set[str]]:
    """A region proposal's changed lines (a replaced line counts once) and the sections it touches."""
    changed, touched, _ = _measure(outline, region, content)
    return changed, touched


def _outline_of(outline: Outline) -> list[tuple[int, str]]:
    return [(heading.level, heading.title) for heading in outline.headings]


def beyond_a_policy(outline: Outline, region: str, content: str) -> str | None:
    """Why no policy may approve this proposal, or None (PROTOCOL section 18, wave 4)."""
    if region == WHOLE:
        return "whole_document"
    span = outline.resolve(region)
    after = outline.replaced(span, content, text=outline.replace(span, content))
    if _outline_of(after) != _outline_of(outline):
        return "outline"
    if special_blocks(outline.region_text(span)) != special_blocks(content):
        return "reference_or_html"
    return None


def _measure(outline: Outline, region: str, content: str) -> tuple[int, set[str], Outline]:
    span = outline.resolve(region)
    old_text = outline.region_text(span)
    new_text = outline.replace(span, content)
    after = outline.replaced(span, content, text=new_text)
    old_lines = old_text.splitlines(keepends=True)
    new_lines = content.splitlines(keepends=True)
    old_at = [span.start, *(span.start + n for n in _ends(old_lines))]
    new_at = [span.start, *(span.start + n for n in _ends(new_lines))]
    changed = 0
    touched: set[str] = set()
    ops = linediff.opcodes(old_lines, new_lines, autojunk=False)
    if ops is None:  # too costly to measure: nobody measured it, a person reviews it
        return len(old_lines) + len(new_lines), {WHOLE}, after
    last = max(outline.text_length() - 1, 0)  # not `len(text)`: that would join or load it
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        changed += max(i2 - i1, j2 - j1)
        for i in range(i1, max(i2, i1 + 1)):
            touched.add(_section_path(outline, min(old_at[i], last)))
        for j in range(j1, j2):
            touched.add(_section_path(after, new_at[j]))
    return changed, touched, after


def _ends(lines: list[str]) -> list[int]:
    total, out = 0, []
    for line in lines:
        total += len(line)
        out.append(total)
    return out


def approving_policy(tx: Tx, participant_id: str, region: str, content: str) -> str | None:
    """The id of the active policy that approves this new proposal, or None (a person reviews).

    Called once, by `propose`, in the transaction that creates the proposal: a policy decides
    on the text it measured here and never on a later revision."""
    if participant_id == tx.engine.host_participant_id:
        return None
    rows = [row for row in tx.conn.execute(
        "SELECT policy_id, participant_id, label, region_pattern, max_changed_lines,"
        " expires_at, paused FROM policies WHERE removed_at IS NULL AND paused = 0"
        " AND name_pattern IS NULL ORDER BY created_at, policy_id").fetchall()
        if _active(tx, row[6], row[5])]
    if not rows:
        return None
    current = tx.engine.current()
    outline = current.outline
    assert isinstance(outline, Outline)
    if beyond_a_policy(outline, region, content) is not None:
        return None
    changed, touched = measure(outline, region, content)
    if not touched:
        return None
    holds = [lease.region for lease in active_leases(tx) if lease.reason == HUMAN_EDITING]
    if any(related(held, path) for held in holds for path in (*touched, region) if path):
        return None
    joined_as = tx.conn.execute("SELECT label FROM participants WHERE participant_id = ?",
                                (participant_id,)).fetchone()[0]
    for policy_id, pid, label, pattern, most, _, _ in rows:
        if pid is not None and pid != participant_id:
            continue
        if label is not None and label != joined_as:
            continue
        if changed <= most and all(fnmatchcase(path, pattern) for path in touched):
            return str(policy_id)
    return None
