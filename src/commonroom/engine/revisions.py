"""Revisions and rebase of a proposal (docs/spec/PROTOCOL.md section 17).

A proposal's row holds its latest revision (`content`, `base_version`,
`summary`, `revision`, `rebased`); each revise first copies that revision
into `proposal_revisions`, so the earlier ones stay readable
(`GET /workspace/proposal?revision=N`) and the page can show the diff between
the last two. The copies count against the author's stored-text quota
(`content_bytes`) and go when the proposal's text is pruned.

`revise` is the author's: allowed from `pending`, `changes_requested` and
`superseded` (the proposal machine's `revise` row), the new content is
checked like a proposal's (size, base, region, outline, leases), and the
proposal goes back to `pending` with `proposal.revised`.

`rebase` is a three-way merge of the region: the region's text at the
proposal's base, the proposal's content, and the region's text now. It costs
the region, not the document: the base's region is read from its blocks
(the heading index) and the merge runs over the region's lines only. A clean
merge answers the merged content; only `apply: true` makes it a new revision
based on the current version (`rebased: true`), never without being asked.
Conflicting hunks are answered as `{base, ours, theirs}` and nothing changes.
The merge is `merge3` (breezy's three-way merge, the algorithm of `diff3`, on
difflib's matcher): a well-kept, pure-Python library of one module, where a
hand-written diff3 would be ours to get right.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final, cast

import attrs
import merge3

from commonroom.engine import linediff
from commonroom.engine import proposals as pr
from commonroom.engine._state import PROPOSAL, move
from commonroom.engine.leases import HUMAN_EDITING, active_leases, raise_if_blocked
from commonroom.engine.proposal_texts import make_room
from commonroom.engine.regions import WHOLE, region_digest, region_text
from commonroom.engine.revision_log import HOST_EDITOR, REBASED, REBASED_ON_HOST_SAVE, revised_at
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.text import encode_text
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.capabilities import require
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import (
    Proposal,
    RebaseConflict,
    Rebased,
)
from commonroom.protocol.requests import RebaseParams, ReviseParams
from commonroom.protocol.timefmt import format_ts

# A rebase whose merged text equals the region's current text changes nothing.
NO_CHANGE: Final = "no_change"
# `Rebased.note` of a merge past its cost bound (as `linediff.TOO_LARGE` labels a diff).
MERGE_TOO_LARGE: Final = "too large to merge: the three texts in full, as one conflict"


def _new_revision(tx: Tx, proposal: Proposal, action: str, content: str, base_version: int,
                  summary: str, rebased: bool) -> Proposal:
    """Keep the latest revision as an earlier one, write the new one; back to pending."""
    target = PROPOSAL.target(action, proposal.status)
    if target is None:
        raise CommonroomError(
            "proposal_conflict",
            f"cannot {action} a proposal that is {proposal.status}",
            {"status": proposal.status}, proposal_id=proposal.proposal_id,
        )
    if proposal.revision >= limits.PROPOSAL_REVISIONS_MAX:
        raise CommonroomError(
            "limit_exceeded",
            f"a proposal has at most {limits.PROPOSAL_REVISIONS_MAX} revisions: propose anew",
            {"scope": "revisions", "limit": limits.PROPOSAL_REVISIONS_MAX},
            proposal_id=proposal.proposal_id,
        )
    engine = tx.engine
    pr._check_size(content)
    if proposal.status != "pending" and target == "pending":
        pr.check_pending_limit(tx, proposal.participant_id)  # a revived proposal counts again
    if base_version > engine.current_version:
        raise CommonroomError(
            "version_not_found", f"version {base_version} does not exist yet",
            {"version": base_version}, current_version=engine.current_version,
        )
    base = engine.snapshot(base_version)
    digest = region_digest(base, proposal.region)
    if digest is None:
        raise CommonroomError(
            "invalid_region", f"{proposal.region!r} does not exist at version {base_version}",
            region=proposal.region,
        )
    content = pr.fitted(proposal.region, region_text(base, proposal.region), content)
    current = engine.current()
    # The same rule as a propose: a base whose region text moved on is refused.
    if base_version < current.version and region_digest(current, proposal.region) != digest:
        raise pr.stale_error(tx, proposal.region, base_version, proposal.proposal_id)
    if not current.outline.has_path(proposal.region):
        raise CommonroomError(
            "invalid_region", f"{proposal.region!r} is gone from the current version",
            region=proposal.region, current_version=current.version,
        )
    pr.check_outline(current, proposal.region, content)
    if action == "rebase":
        # A rebase writes nothing to the file: the host's human-editing hold, which
        # protects the host's editor buffer from the room's writes, never blocks it.
        raise_if_blocked(tx, proposal.region, tx.actor.participant_id, [
            lease for lease in active_leases(tx) if lease.reason != HUMAN_EDITING])
    else:
        raise_if_blocked(tx, proposal.region, tx.actor.participant_id)
    revision = _store_revision(tx, proposal, content, base_version, digest, summary,
                               REBASED if rebased else 0)
    move(tx, PROPOSAL, proposal.proposal_id, proposal.status, action, refuse=_checked_above)
    tx.emit(ev.ProposalRevised(proposal.proposal_id, tx.actor.participant_id, revision,
                               base_version, summary, rebased))
    return pr._get(tx, proposal.proposal_id)


def _store_revision(tx: Tx, proposal: Proposal, content: str, base_version: int, digest: str,
                    summary: str, rebased: int) -> int:
    """Keep the latest revision as an earlier one and write `content` as the new one;
    the status is the caller's. Raises (quota) before it writes anything."""
    old_content, stored = tx.conn.execute(
        "SELECT content, pruned_at FROM proposals WHERE proposal_id = ?", (proposal.proposal_id,)
    ).fetchone()
    size = len(encode_text(content))
    kept = len(encode_text(old_content)) if stored is None else 0
    author = proposal.participant_id
    if author != tx.engine.host_participant_id:
        make_room(tx, author, size)
    if stored is None:
        previous = tx.conn.execute("SELECT rebased FROM proposals WHERE proposal_id = ?",
                                   (proposal.proposal_id,)).fetchone()[0]
        tx.conn.execute(
            "INSERT INTO proposal_revisions (proposal_id, revision, base_version, summary,"
            " content, rebased, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (proposal.proposal_id, proposal.revision, proposal.base_version, proposal.summary,
             old_content, int(previous), revised_at(tx, proposal)),
        )
    revision = proposal.revision + 1
    tx.conn.execute(
        "UPDATE proposals SET content = ?, original_content = NULL, base_version = ?,"
        " base_region_hash = ?, summary = ?, revised_at = ?,"
        " reviewer_id = NULL, review_comment = NULL, revision = ?, rebased = ?, pruned_at = NULL,"
        " content_bytes = content_bytes - length(CAST(content AS BLOB))"
        " - coalesce(length(CAST(original_content AS BLOB)), 0) + ? + ?"
        " WHERE proposal_id = ?",
        (content, base_version, digest, summary, tx.now_s, revision,
         rebased, kept, size, proposal.proposal_id),
    )
    return revision


def rebase_on_host_save(tx: Tx, before: Snapshot, after: Snapshot, committed: str | None) -> None:
    """The `on_document_change` hook (before the proposals hook, which supersedes what is
    left stale): a host's save rebases the pending and changes-requested proposals whose
    region it changed, when the three-way merge is clean (PROTOCOL.md 16, wave 4).

    The new revision is based on the saved version, so its diff is taken against the
    saved text; the status stays what it was. A conflicting merge, a region that is
    gone, a merge that is already the saved text, or a revision the proposal may not
    take (size, quota, the outline rule, the revisions limit) is left to the proposals
    hook: a pending proposal is then superseded as before.

    A save seen half-way supersedes the proposals on the sections its first piece cut
    off; when the whole save follows within `TORN_SAVE_SECONDS`, the proposals that
    piece superseded are merged again the same way and, when clean, pending again.
    """
    row = tx.conn.execute("SELECT source FROM versions WHERE version = ?",
                          (after.version,)).fetchone()
    if row is None or row[0] != "external":
        return
    engine = tx.engine
    host = engine.host_participant_id
    cut = _superseded_by_a_piece(tx, before)
    marks = ", ".join("?" * len(cut))
    revived_sql = f" OR proposal_id IN ({marks})" if cut else ""
    for proposal_id, region, base_digest, status in tx.conn.execute(
        "SELECT proposal_id, region, base_region_hash, status FROM proposals"
        f" WHERE (status IN ('pending', 'changes_requested'){revived_sql}) AND pruned_at IS NULL",
        tuple(cut),
    ).fetchall():
        if region != WHOLE and not after.outline.has_path(region):
            continue
        digest = region_digest(after, region)
        if digest is None or (digest == base_digest and status != "superseded"):
            continue
        proposal = pr._get(tx, proposal_id)
        if proposal.revision >= limits.PROPOSAL_REVISIONS_MAX:
            continue
        ours = tx.conn.execute("SELECT content FROM proposals WHERE proposal_id = ?",
                               (proposal_id,)).fetchone()[0]
        theirs = region_text(after, region)
        base = engine.snapshot(proposal.base_version)
        merged, _ = merge_region(region_text(base, region), str(ours), theirs)
        if merged is None or merged == theirs:
            continue
        try:
            pr._check_size(merged)
            pr.check_outline(after, region, merged)
            if status == "superseded":
                pr.check_pending_limit(tx, proposal.participant_id)  # it counts again
            revision = _store_revision(tx, proposal, merged, after.version, digest,
                                       proposal.summary, REBASED_ON_HOST_SAVE)
        except CommonroomError:
            continue
        if status == "superseded":
            move(tx, PROPOSAL, proposal_id, status, "rebase", refuse=_checked_above)
        tx.emit(ev.ProposalRevised(proposal_id, host, revision, after.version, proposal.summary,
                                   True, by=HOST_EDITOR))


def _superseded_by_a_piece(tx: Tx, before: Snapshot) -> list[str]:
    """The proposals superseded by `before` when it is a host's save recorded less than
    `TORN_SAVE_SECONDS` ago: perhaps the first piece of the save now recorded whole."""
    row = tx.conn.execute("SELECT source, created_at FROM versions WHERE version = ?",
                          (before.version,)).fetchone()
    since = format_ts(tx.now - timedelta(seconds=limits.TORN_SAVE_SECONDS))
    if row is None or row[0] != "external" or row[1] < since:
        return []
    return [str(pid) for (pid,) in tx.conn.execute(
        "SELECT proposal_id FROM proposals WHERE status = 'superseded' AND updated_at >= ?"
        " AND pruned_at IS NULL LIMIT 100", (row[1],))]


def _checked_above() -> CommonroomError:
    raise AssertionError("the move was checked before any write")


def revise(tx: Tx, p: ReviseParams) -> Proposal:
    proposal = pr._get(tx, p.proposal_id)
    if proposal.participant_id != tx.actor.participant_id:
        raise CommonroomError(
            "permission_denied", "only the author revises a proposal",
            proposal_id=proposal.proposal_id,
        )
    summary = proposal.summary if p.summary is None else pr._check_summary(p.summary)
    base_version = proposal.base_version if p.base_version is None else p.base_version
    return _new_revision(tx, proposal, "revise", p.content, base_version, summary, False)


def _split(text: str) -> list[str]:
    return text.splitlines(keepends=True)


@attrs.frozen
class Merge:
    """A three-way merge: `content` when clean, else its `conflicts`; `too_large` when the
    merge stopped at its cost bound and `conflicts` is the one of the three texts in full."""

    content: str | None
    conflicts: list[RebaseConflict]
    too_large: bool = False


def merge(base: str, ours: str, theirs: str, *, work: int = linediff.WORK_MAX) -> Merge:
    """Three-way merge by lines, bounded like a diff (`linediff`).

    Every match the merge makes (merge3 runs difflib's matcher base->ours, base->theirs
    and inside each conflicting stretch) is charged to one budget of `work`; past it
    the merge stops and answers one conflict holding the three texts in full.
    Deterministic (work, not time).
    """
    # (difflib's matcher is merge3's default; its `list[Match]` is typed apart from the
    # protocol's `list[tuple]`, the same values.)
    matcher = cast("type[merge3.SequenceMatcherProtocol[str]]",
                   linediff.charged_matcher(linediff.Budget(work)))
    merge3_ = merge3.Merge3(_split(base), _split(ours), _split(theirs), sequence_matcher=matcher)
    try:
        groups = list(merge3_.merge_groups())
    except linediff.TooLarge:
        return Merge(None, [RebaseConflict(base, ours, theirs)], too_large=True)
    merged: list[str] = []
    conflicts: list[RebaseConflict] = []
    for group in groups:
        if group[0] == "conflict":
            base_lines, our_lines, their_lines = group[1], group[2], group[3]
            conflicts.append(RebaseConflict("".join(base_lines), "".join(our_lines),
                                            "".join(their_lines)))
        else:
            merged.extend(group[1])
    return Merge(None, conflicts) if conflicts else Merge("".join(merged), [])


def merge_region(base: str, ours: str, theirs: str) -> tuple[str | None, list[RebaseConflict]]:
    """Three-way merge by lines: (merged text, []) when clean, else (None, conflicts)."""
    merged = merge(base, ours, theirs)
    return merged.content, merged.conflicts


def rebase(tx: Tx, p: RebaseParams) -> Rebased:
    proposal = pr._get(tx, p.proposal_id)
    actor = tx.actor
    if proposal.participant_id != actor.participant_id:
        require(actor.capabilities, "approve")  # a reviewer may rebase someone's proposal
    if PROPOSAL.target("rebase", proposal.status) is None:
        raise CommonroomError(
            "proposal_conflict", f"cannot rebase a proposal that is {proposal.status}",
            {"status": proposal.status}, proposal_id=proposal.proposal_id,
        )
    ours, pruned_at = tx.conn.execute(
        "SELECT content, pruned_at FROM proposals WHERE proposal_id = ?", (proposal.proposal_id,)
    ).fetchone()
    if pruned_at is not None:
        raise CommonroomError(
            "proposal_conflict", "the room no longer keeps this proposal's text: propose anew",
            {"status": proposal.status, "reason": "pruned"}, proposal_id=proposal.proposal_id,
        )
    engine = tx.engine
    current = engine.current()
    region = proposal.region
    if region != WHOLE and not current.outline.has_path(region):
        raise CommonroomError(
            "invalid_region", f"{region!r} is gone from the current version: nothing to rebase"
            " onto", region=region, current_version=current.version,
        )
    base_text = region_text(engine.snapshot(proposal.base_version), region)
    theirs = region_text(current, region)
    merged = merge(base_text, ours, theirs)
    content, conflicts = merged.content, merged.conflicts
    applied = False
    revision = proposal.revision
    status = proposal.status
    if content is not None and p.apply:
        if content == theirs:
            error = invalid_request(
                "the merged text equals the region's current text: the proposal's change is"
                " already there (withdraw it)", "apply")
            error.details.update(reason=NO_CHANGE)
            raise error
        if current.version == proposal.base_version:
            raise invalid_request("the proposal is based on the current version already",
                                  "apply")
        moved = _new_revision(tx, proposal, "rebase", content, current.version,
                              proposal.summary, True)
        applied, revision, status = True, moved.revision, moved.status
    return Rebased(proposal.proposal_id, content is not None, content, current.version,
                   conflicts, applied, revision, status,
                   note=MERGE_TOO_LARGE if merged.too_large else None)


__all__ = ["MERGE_TOO_LARGE", "Merge", "merge", "merge_region", "rebase", "rebase_on_host_save", "revise"]
