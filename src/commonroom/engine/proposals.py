"""Proposals, review and commits (docs/spec/PROTOCOL.md section 7).

Status transitions are data, not scattered `if`s: `_state.PROPOSAL` lists
the statuses an action may move a proposal to, and `_state.move` writes them. A region proposal commits when
its base is current *or* when the region's text is byte-identical at the base
and at the current version (others changed other regions only); the new
version is the current document with that region replaced, so nothing anyone
wrote is overwritten. Anything else is `stale_version` with the recovery
fields, and the proposal becomes `conflicted`.

Proposal text is bounded (the stored-text quota: 40 cycles of a 250 KiB propose
and withdraw added 13.8 MiB to the sidecar in 0.8 s): a terminal proposal
keeps its row and summary, but only the newest `TERMINAL_TEXTS_PER_PARTICIPANT`
of each author and `TERMINAL_TEXTS_TOTAL` overall keep their text (`prune`,
after every move into a terminal status); and an author's stored text
(`content_bytes` of its proposals whose text is kept) stays within
`PROPOSAL_BYTES_PER_PARTICIPANT`: a propose past it first prunes the author's
oldest terminal texts, and is 429 `limit_exceeded` (`scope:
"proposal_bytes"`) when its open proposals alone fill it. The host is exempt
from the quota (not from pruning).
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from commonroom.engine import linediff, linkrefs, policies, threads
from commonroom.engine._state import PROPOSAL, move
from commonroom.engine.fitting import fit_region, fit_whole, misfit
from commonroom.engine.ids import new_id
from commonroom.engine.leases import raise_if_blocked
from commonroom.engine.proposal_texts import make_room, prune
from commonroom.engine.regions import WHOLE, Outline, region_digest, region_text
from commonroom.engine.revision_log import with_revisions
from commonroom.engine.snapshot import Snapshot
from commonroom.engine.text import encode_text
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits, vocabulary
from commonroom.protocol.capabilities import require
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import (
    Change,
    Committed,
    Proposal,
    ProposalDetail,
    Proposals,
    Reviewed,
    to_wire,
)
from commonroom.protocol.requests import (
    CommitParams,
    ProposalDetailParams,
    ProposalIdParams,
    ProposalsParams,
    ProposeParams,
    ReviewParams,
)

STATUSES: Final = vocabulary.PROPOSAL_STATUSES
TERMINAL: Final = vocabulary.PROPOSAL_TERMINAL
_TERMINAL_SQL: Final = PROPOSAL.terminal_sql



_COLUMNS = (
    "proposal_id, participant_id, region, base_version, summary, status, created_at, updated_at,"
    " reviewer_id, review_comment, committed_version"
)
_FIELDS: Final = tuple(name.strip() for name in _COLUMNS.split(","))
# Read after `_COLUMNS` wherever a `Proposal` is built from a row.
_REVISION_COLUMNS = "revision, rebased"


def _proposal(row: Any) -> Proposal:
    """A `Proposal` from a row of `_COLUMNS` then `_REVISION_COLUMNS`."""
    *columns, revision, rebased = row
    fields = dict(zip(_FIELDS, columns, strict=True))
    return Proposal(**fields, revision=revision, rebased=bool(rebased))


def fitted(region: str, region_text: str, content: str) -> str:
    """A proposal's `content` fitted to what it replaces, before any check (PROTOCOL section 7,
    "Agent text fits the document"; `engine/fitting.py`): the line breaks of `region_text`
    when it keeps to one kind (an agent's LF text in a CRLF file would leave the file mixed,
    and its diff would show every line changed), and for a region its own trailing blank
    lines (the next heading never glues to the text)."""
    if region == WHOLE:
        return fit_whole(region_text, content)
    return fit_region(region_text, content)


def unified_diff(before: str, after: str, from_label: str, to_label: str) -> str:
    """difflib's unified diff, bounded in cost: past the bound, both texts in full
    (engine/linediff.py; every diff the room answers comes from here)."""
    return linediff.unified_diff(before, after, from_label, to_label)


def _get(tx: Tx, proposal_id: str) -> Proposal:
    row = tx.conn.execute(
        f"SELECT {_COLUMNS}, {_REVISION_COLUMNS} FROM proposals WHERE proposal_id = ?",
        (proposal_id,),
    ).fetchone()
    if row is None:
        raise CommonroomError(
            "proposal_not_found", f"no proposal {proposal_id!r}", proposal_id=proposal_id
        )
    return _proposal(row)


def _move(tx: Tx, proposal: Proposal, action: str, **columns: Any) -> Proposal:
    """A move of `_state.PROPOSAL`; `proposal_conflict` naming the status when there is none."""
    def refuse() -> CommonroomError:
        return CommonroomError(
            "proposal_conflict",
            f"cannot {action} {_article(proposal.status)} {proposal.status} proposal",
            {"status": proposal.status},
            proposal_id=proposal.proposal_id,
        )

    target = move(tx, PROPOSAL, proposal.proposal_id, proposal.status, action, refuse=refuse, **columns)
    return attrs.evolve(proposal, status=target, updated_at=tx.now_s, **columns)


def _never() -> CommonroomError:
    raise AssertionError("the machine has this move")


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _check_summary(summary: str) -> str:
    summary = summary.strip()
    if not summary or len(summary) > limits.SUMMARY_MAX:
        raise invalid_request(f"summary must be 1 to {limits.SUMMARY_MAX} characters", "summary")
    return summary


def _check_size(content: str) -> None:
    size = len(encode_text(content))
    if size > limits.PROPOSAL_MAX_BYTES:
        raise CommonroomError(
            "limit_exceeded",
            f"content is {size} bytes; a proposal holds at most {limits.PROPOSAL_MAX_BYTES}",
            {"limit_bytes": limits.PROPOSAL_MAX_BYTES, "size_bytes": size},
            http_status=413,
        )


OUTLINE_OUTSIDE_REGION: Final = "outline_outside_region"


def check_outline(current: Snapshot, region: str, content: str) -> Outline | None:
    """A region proposal may change its own region only (the outline rule), at propose and commit.

    An unclosed code fence at the end of a one-region proposal shows as a
    one-line diff, yet once committed it swallowed the sections after it
    (their leases ended, their reads answered `invalid_region`).

    Returns the outline of the text with the region replaced (None for the
    whole document), so a commit builds the new text and its outline once; the
    current snapshot remembers the last one built (`Snapshot.replaced`), so a commit
    takes the one its propose built when no other change landed in between.
    """
    if region == WHOLE:
        return None
    outline = current.outline
    assert isinstance(outline, Outline)  # the current version's outline is always a full one
    span = outline.resolve(region)
    replaced = current.replaced(span, content)
    if outline.changes_outside(span, content, replaced):
        # One cause, its line in the text and its fix (PROTOCOL section 7), so an agent
        # knows what to change instead of guessing.
        why = misfit(outline, span, content, replaced)
        error = invalid_request(
            f"the proposed text of {region!r} changes the document's headings outside it:"
            f" {why.message}", "content",
        )
        error.details.update(reason=OUTLINE_OUTSIDE_REGION, region=region, cause=why.cause,
                             line=why.line)
        raise error
    return replaced


def check_pending_limit(tx: Tx, pid: str) -> None:
    pending = tx.conn.execute(
        "SELECT count(*) FROM proposals WHERE participant_id = ? AND status = 'pending'", (pid,)
    ).fetchone()[0]
    if pending >= limits.MAX_PENDING_PROPOSALS:
        raise CommonroomError(
            "limit_exceeded",
            f"a participant has at most {limits.MAX_PENDING_PROPOSALS} pending proposals",
            {"limit": limits.MAX_PENDING_PROPOSALS},
            retry_after_seconds=60,
        )


def propose(tx: Tx, p: ProposeParams) -> Proposal:
    summary = _check_summary(p.summary)
    _check_size(p.content)
    engine = tx.engine
    if p.base_version > engine.current_version:
        raise CommonroomError(
            "version_not_found",
            f"version {p.base_version} does not exist yet",
            {"version": p.base_version},
            current_version=engine.current_version,
        )
    base, span = engine.resolve(p.region, p.base_version)
    digest = region_digest(base, span.region)
    assert digest is not None
    base_text = region_text(base, span.region)
    content = fitted(span.region, base_text, p.content)
    # PROTOCOL section 7: a base whose region text has moved on is refused
    # with the recovery fields, and no proposal is created; an old base whose
    # region is unchanged is fine (it commits by the region-disjoint rule).
    if p.base_version < engine.current_version and region_digest(
        engine.current(), span.region
    ) != digest:
        raise stale_error(tx, span.region, p.base_version, None)
    if base_text == content:
        # PROTOCOL section 7: a proposal that changes nothing is refused, not queued.
        fitted_note = "" if content == p.content else (
            " once fitted (the region's line endings, final line break and blank lines before"
            " the next heading)")
        error = invalid_request(
            f"the proposed text of {span.region!r} equals its text at version {p.base_version}"
            f"{fitted_note}: there is nothing to review", "content")
        error.details.update(reason="no_change", region=span.region)
        raise error
    check_outline(engine.current(), span.region, content)
    pid = tx.actor.participant_id
    raise_if_blocked(tx, span.region, pid)
    check_pending_limit(tx, pid)
    size = len(encode_text(content))
    if pid != engine.host_participant_id:
        make_room(tx, pid, size)
    proposal = Proposal(
        new_id("pr_"), pid, span.region, p.base_version, summary, "pending", tx.now_s, tx.now_s,
        None, None, None,
    )
    tx.conn.execute(
        f"INSERT INTO proposals ({_COLUMNS}, content, base_region_hash, content_bytes)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*_stored(proposal), content, digest, size),
    )
    tx.emit(ev.ProposalCreated(proposal.proposal_id, pid, proposal.region,
                               proposal.base_version, summary))
    # provenance (docs/spec/PROTOCOL.md section 18): a matching auto-approve policy reviews it now
    policy_id = policies.approving_policy(tx, pid, proposal.region, content)
    if policy_id is not None:
        reviewer = policies.REVIEWER_PREFIX + policy_id
        proposal = _move(tx, proposal, "approve", reviewer_id=reviewer)
        tx.emit(ev.ProposalApproved(proposal.proposal_id, reviewer, None, policy_id=policy_id))
    return proposal


def proposal_detail(tx: Tx, p: ProposalDetailParams) -> ProposalDetail:
    """The proposal plus its content and the diff a reviewer sees: current region text -> proposed."""
    proposal = _get(tx, p.proposal_id)
    content, original, base_digest, pruned_at = tx.conn.execute(
        "SELECT content, original_content, base_region_hash, pruned_at FROM proposals"
        " WHERE proposal_id = ?",
        (p.proposal_id,),
    ).fetchone()
    current = tx.engine.current()
    # Additive fields (docs/protocol.md "The host's page"): `stale` says before
    # anyone reviews that the region's text moved on since the base, so the
    # commit would be refused; `original_content` is the author's text when a
    # reviewer amended it (edit before approve), else null.
    # A decided proposal is never stale: staleness warns before a commit that would fail.
    open_ = proposal.status in PROPOSAL.open_states
    stale = open_ and is_stale(current, proposal.region, proposal.base_version, base_digest)
    pruned = pruned_at is not None  # its text is gone: no diff to show (it would read as a deletion)
    diff = "" if pruned else linediff.later(
        region_text(current, proposal.region), content,
        f"{proposal.region}@{current.version}", f"{proposal.region}@proposed",
    )
    fields = attrs.asdict(proposal, recurse=False)
    del fields["stale"], fields["amended"]  # computed here, for any status
    # What the diff of one region does not show: links elsewhere it re-points.
    warnings = [] if pruned or not open_ else linkrefs.later_warnings(
        current.outline, proposal.region, content)
    detail = ProposalDetail(
        **fields, content=content,
        current_version=current.version, diff=diff, stale=stale, original_content=original,
        pruned=pruned, amended=original is not None, proposed_content=original,
        warnings=warnings,
    )
    return with_revisions(tx, proposal, detail, p.revision)


def _stored(proposal: Proposal) -> tuple[Any, ...]:
    """The proposal's `_COLUMNS` values (`stale` and `amended` are computed, never stored;
    the revision columns are written by their own statements)."""
    return attrs.astuple(proposal, filter=lambda field, _: field.name not in (
        "stale", "amended", "revision", "rebased"))


def is_stale(current: Snapshot, region: str, base_version: int, base_digest: str) -> bool:
    """The region's text moved on since the base: committing would be refused (`stale_version`)."""
    return base_version != current.version and (
        region == WHOLE or region_digest(current, region) != base_digest
    )


# What `_listed` reads: the record's columns, its revision, the base's region hash, whether
# it was amended.
_LISTED: Final = f"{_COLUMNS}, {_REVISION_COLUMNS}, base_region_hash, original_content IS NOT NULL"


def _listed(tx: Tx, rows: Any) -> list[Proposal]:
    """Proposal rows (`_LISTED` columns) with `stale` for open ones and `amended`."""
    current = tx.engine.current()
    out: list[Proposal] = []
    for *columns, base_digest, amended in rows:
        proposal = attrs.evolve(_proposal(columns), amended=bool(amended))
        if proposal.status in PROPOSAL.open_states:
            stale = is_stale(current, proposal.region, proposal.base_version, base_digest)
            proposal = attrs.evolve(proposal, stale=stale)
        out.append(proposal)
    return out


def list_proposals(tx: Tx, p: ProposalsParams) -> Proposals:
    if p.status is None:
        rows = tx.conn.execute(
            f"SELECT {_LISTED} FROM proposals"
            " ORDER BY created_at DESC, proposal_id LIMIT ?",
            (p.limit,),
        )
    else:
        rows = tx.conn.execute(
            f"SELECT {_LISTED} FROM proposals WHERE status = ?"
            " ORDER BY created_at DESC, proposal_id LIMIT ?",
            (p.status, p.limit),
        )
    return Proposals(_listed(tx, rows))


def open_proposals(tx: Tx) -> list[Proposal]:
    return _listed(tx, tx.conn.execute(
        f"SELECT {_LISTED} FROM proposals"
        f" WHERE {PROPOSAL.open_sql} ORDER BY created_at, proposal_id"
    ))


def review(tx: Tx, p: ReviewParams) -> Reviewed:
    proposal = _get(tx, p.proposal_id)
    check_reviewed_revision(proposal, p.decision, p.revision)
    reviewer = tx.actor.participant_id
    comment = p.comment if p.comment is not None and p.comment.strip() else None
    if p.decision == "request_changes" and comment is None:
        raise invalid_request("request_changes needs a comment: say what to change", "comment")
    if comment is not None:
        threads.check_body(comment, "comment")
    if p.content is not None:
        _amend(tx, proposal, p)
    moved = _move(tx, proposal, p.decision, reviewer_id=reviewer, review_comment=comment)
    # The comment reaches the author in the review event (PROTOCOL §7 "Review"), null when none.
    if moved.status == "approved":
        tx.emit(ev.ProposalApproved(moved.proposal_id, reviewer, comment))
    elif moved.status == "changes_requested":
        assert comment is not None
        tx.emit(ev.ProposalChangesRequested(moved.proposal_id, reviewer, comment))
    else:
        tx.emit(ev.ProposalRejected(moved.proposal_id, reviewer, comment))
        prune(tx, moved.participant_id)
    if comment is not None:
        # PROTOCOL §17: a review comment opens a thread on the region, linked to the proposal.
        threads.open_review_thread(tx, moved.region, moved.proposal_id, comment)
    return Reviewed(moved.proposal_id, moved.status, reviewer)


# The decisions that let a text land or ask its author to change it name the revision read.
BOUND_DECISIONS: Final = ("approve", "request_changes")


def check_reviewed_revision(proposal: Proposal, decision: str, revision: int | None) -> None:
    """The review binds to what the reviewer saw (PROTOCOL section 7): its author may revise
    a pending proposal at any moment, so a decision names the revision it was made on and
    decides nothing when the proposal moved on since."""
    if revision is None:
        if decision in BOUND_DECISIONS:
            error = invalid_request(
                f"{decision} needs the revision you reviewed: read the proposal"
                " (GET /workspace/proposal) and send its revision", "revision")
            error.details["reason"] = "revision_required"
            raise error
        return
    if revision != proposal.revision:
        raise CommonroomError(
            "proposal_conflict",
            f"{proposal.proposal_id} was revised: you reviewed revision {revision}, it is now"
            f" at revision {proposal.revision}; read it again before deciding",
            {"reason": "revised", "revision": revision, "current_revision": proposal.revision,
             "status": proposal.status},
            proposal_id=proposal.proposal_id,
        )


def _amend(tx: Tx, proposal: Proposal, p: ReviewParams) -> None:
    """Edit before approve: the reviewer's text becomes the proposal's; the author's is kept."""
    assert p.content is not None
    if p.decision != "approve":
        raise invalid_request("content amends a proposal only when approving it", "content")
    if proposal.status != "pending":
        _move(tx, proposal, "approve")  # raises proposal_conflict naming the status
    _check_size(p.content)
    content = fitted(proposal.region, region_text(tx.engine.snapshot(proposal.base_version),
                                                  proposal.region), p.content)
    # The first amendment keeps the author's text; a later one never overwrites it.
    tx.conn.execute(
        "UPDATE proposals SET original_content = coalesce(original_content, content), content = ?"
        " WHERE proposal_id = ?",
        (content, proposal.proposal_id),
    )
    tx.conn.execute(
        "UPDATE proposals SET content_bytes = length(CAST(content AS BLOB))"
        " + length(CAST(original_content AS BLOB)) WHERE proposal_id = ?",
        (proposal.proposal_id,),
    )
    tx.emit(ev.ProposalAmended(proposal.proposal_id, tx.actor.participant_id))


def withdraw(tx: Tx, p: ProposalIdParams) -> Proposal:
    proposal = _get(tx, p.proposal_id)
    if proposal.participant_id != tx.actor.participant_id:
        raise CommonroomError(
            "permission_denied", "only the author withdraws a proposal",
            proposal_id=proposal.proposal_id,
        )
    moved = _move(tx, proposal, "withdraw")
    tx.emit(ev.ProposalWithdrawn(moved.proposal_id))
    prune(tx, moved.participant_id)
    return moved


def _changes_since(tx: Tx, base_version: int) -> list[Change]:
    return [
        Change(*row)
        for row in tx.conn.execute(
            "SELECT version, summary, participant_id, created_at, region, source FROM versions"
            " WHERE version > ? ORDER BY version LIMIT ?",
            (base_version, limits.CHANGES_IN_STALE_ERROR),
        )
    ]


def stale_error(tx: Tx, region: str, base_version: int, proposal_id: str | None) -> CommonroomError:
    engine = tx.engine
    base, current = engine.snapshot(base_version), engine.current()
    extra: dict[str, Any] = {} if proposal_id is None else {"proposal_id": proposal_id}
    return CommonroomError(
        "stale_version",
        f"{region!r} changed since version {base_version}; the current version is"
        f" {current.version}: read it again and propose anew",
        {},
        base_version=base_version,
        expected_version=base_version,
        current_version=current.version,
        diff=unified_diff(
            region_text(base, region), region_text(current, region),
            f"{region}@{base_version}", f"{region}@{current.version}",
        ),
        changes=to_wire(_changes_since(tx, base_version)),
        region=region,
        **extra,
    )


def commit(tx: Tx, p: CommitParams) -> Committed:
    if p.proposal_id is not None:
        if p.content is not None or p.base_version is not None:
            raise invalid_request(
                "a proposal commit takes only proposal_id; a raw commit takes base_version,"
                " summary and content", "content",
            )
        return _commit_proposal(tx, p.proposal_id)
    return _commit_raw(tx, p)


def _commit_proposal(tx: Tx, proposal_id: str) -> Committed:
    engine = tx.engine
    proposal = _get(tx, proposal_id)
    if proposal.status != "approved":
        _move(tx, proposal, "commit")  # raises proposal_conflict naming the status
    raise_if_blocked(tx, proposal.region, tx.actor.participant_id)
    current = engine.current()
    content, base_digest = tx.conn.execute(
        "SELECT content, base_region_hash FROM proposals WHERE proposal_id = ?", (proposal_id,)
    ).fetchone()
    fresh = proposal.base_version == current.version or (
        proposal.region != WHOLE and region_digest(current, proposal.region) == base_digest
    )
    if not fresh:
        _move(tx, proposal, "conflict")
        tx.emit(ev.ProposalConflicted(proposal_id))
        prune(tx, proposal.participant_id)
        raise tx.fail_after_commit(
            stale_error(tx, proposal.region, proposal.base_version, proposal_id)
        )
    if proposal.region == WHOLE:
        snap = engine.versions.write_version(
            tx, content, summary=proposal.summary, participant_id=tx.actor.participant_id,
            region=proposal.region, source="proposal", proposal_id=proposal_id,
        )
    else:
        def checked_outline() -> Outline:
            # Again at commit: other regions may have changed since the propose (and a
            # reviewer's amendment too), and the text must stay inside its region here.
            # Run once the new bytes are being written: building the new text (the
            # whole document's) overlaps the write; a refusal only discards the temp file.
            replaced = check_outline(current, proposal.region, content)
            assert replaced is not None
            return replaced

        snap = engine.versions.write_replacement(
            tx, current.outline.resolve(proposal.region), content, summary=proposal.summary,
            participant_id=tx.actor.participant_id, region=proposal.region, source="proposal",
            proposal_id=proposal_id, outline=checked_outline,
        )
    _move(tx, proposal, "commit", committed_version=snap.version)
    tx.emit(ev.ProposalCommitted(proposal_id, snap.version))
    prune(tx, proposal.participant_id)  # the committed text is the version's now
    return Committed(snap.version, snap.content_hash, proposal.summary, proposal.region, proposal_id)


def _commit_raw(tx: Tx, p: CommitParams) -> Committed:
    require(tx.actor.capabilities, "admin")
    if p.base_version is None:
        raise invalid_request("base_version is required (or proposal_id)", "base_version")
    if p.content is None:
        raise invalid_request("content is required for a raw commit", "content")
    summary = _check_summary(p.summary or "")
    engine = tx.engine
    if p.base_version > engine.current_version:
        raise CommonroomError(
            "version_not_found", f"version {p.base_version} does not exist yet",
            {"version": p.base_version}, current_version=engine.current_version,
        )
    raise_if_blocked(tx, WHOLE, tx.actor.participant_id)
    if p.base_version != engine.current_version:
        raise stale_error(tx, WHOLE, p.base_version, None)
    snap = engine.versions.write_version(
        tx, p.content, summary=summary, participant_id=tx.actor.participant_id, region=WHOLE,
        source="raw",
    )
    return Committed(snap.version, snap.content_hash, summary, WHOLE, None)


def on_document_change(tx: Tx, before: Snapshot, after: Snapshot, committed: str | None) -> None:
    """Pending proposals whose region text moved on are superseded; others stay pending.

    Approved ones are left to meet `stale_version` at commit, which carries
    the recovery fields (docs/protocol.md).
    """
    authors: set[str] = set()
    for proposal_id, author, region, base_digest in tx.conn.execute(
        "SELECT proposal_id, participant_id, region, base_region_hash FROM proposals"
        " WHERE status = 'pending'"
    ).fetchall():
        if proposal_id != committed and region_digest(after, region) != base_digest:
            move(tx, PROPOSAL, proposal_id, "pending", "supersede", refuse=_never)
            tx.emit(ev.ProposalSuperseded(proposal_id))
            authors.add(author)
    for author in sorted(authors):
        prune(tx, author)
