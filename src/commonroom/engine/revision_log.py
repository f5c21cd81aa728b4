"""The revisions a proposal kept, as read (docs/spec/PROTOCOL.md section 17).

A proposal's row holds its latest revision; `proposal_revisions` the earlier
ones. This is the read side only: `proposals.proposal_detail` ends with
`with_revisions`, and `revisions.py` (revise, rebase) writes the rows. It sits
below both, so the detail read and the revision writes never import each other.
"""

from __future__ import annotations

from typing import Final

import attrs

from commonroom.engine import linediff
from commonroom.engine.regions import region_text
from commonroom.engine.tx import Tx
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.records import Proposal, ProposalDetail, RevisionInfo

# The `rebased` column: 0 not rebased, 1 rebased by its author or a reviewer, 2 rebased
# by the room onto a host's save (`by: host_editor`, PROTOCOL.md 16).
REBASED: Final = 1
REBASED_ON_HOST_SAVE: Final = 2

# Who rebased a proposal onto a host's save: the host's editor (as in blame).
HOST_EDITOR: Final = "host_editor"


def _revisions(tx: Tx, proposal: Proposal) -> list[RevisionInfo]:
    earlier = [
        RevisionInfo(revision, base_version, summary, created_at, bool(rebased),
                     _rebased_by(rebased))
        for revision, base_version, summary, created_at, rebased in tx.conn.execute(
            "SELECT revision, base_version, summary, created_at, rebased FROM proposal_revisions"
            " WHERE proposal_id = ? ORDER BY revision", (proposal.proposal_id,),
        )
    ]
    # The latest revision is the row itself; it was made when the row was last revised.
    made = proposal.created_at if proposal.revision == 1 else revised_at(tx, proposal)
    latest = tx.conn.execute("SELECT rebased FROM proposals WHERE proposal_id = ?",
                             (proposal.proposal_id,)).fetchone()[0]
    return [*earlier, RevisionInfo(proposal.revision, proposal.base_version, proposal.summary,
                                   made, proposal.rebased, _rebased_by(latest))]


def _rebased_by(rebased: int) -> str | None:
    return HOST_EDITOR if rebased == REBASED_ON_HOST_SAVE else None


def revised_at(tx: Tx, proposal: Proposal) -> str:
    """When the proposal's latest revision was made (its row's `revised_at`, else its update)."""
    row = tx.conn.execute("SELECT revised_at FROM proposals WHERE proposal_id = ?",
                          (proposal.proposal_id,)).fetchone()
    return str(row[0]) if row and row[0] else proposal.updated_at


def _revision_content(tx: Tx, proposal_id: str, revision: int) -> str | None:
    row = tx.conn.execute(
        "SELECT content FROM proposal_revisions WHERE proposal_id = ? AND revision = ?",
        (proposal_id, revision),
    ).fetchone()
    return None if row is None else str(row[0])


def with_revisions(tx: Tx, proposal: Proposal, detail: ProposalDetail, revision: int | None
                   ) -> ProposalDetail:
    """The detail answer's revision fields; `revision` N shows that revision's content."""
    listed = _revisions(tx, proposal)
    shown = proposal.revision if revision is None else revision
    if not 1 <= shown <= proposal.revision:
        raise CommonroomError(
            "invalid_request",
            f"proposal {proposal.proposal_id} has revisions 1 to {proposal.revision}",
            {"field": "revision", "revisions": proposal.revision},
            proposal_id=proposal.proposal_id,
        )
    content = detail.content
    diff = detail.diff
    if shown != proposal.revision:
        earlier = _revision_content(tx, proposal.proposal_id, shown)
        content = earlier if earlier is not None else ""
        current = tx.engine.current()
        diff = linediff.later(
            region_text(current, proposal.region), content,
            f"{proposal.region}@{current.version}", f"{proposal.region}@r{shown}",
        ) if earlier is not None else ""
    revision_diff = ""
    if shown > 1 and not detail.pruned:
        before = _revision_content(tx, proposal.proposal_id, shown - 1)
        if before is not None:
            revision_diff = linediff.later(
                before, content, f"{proposal.region}@r{shown - 1}", f"{proposal.region}@r{shown}")
    return attrs.evolve(
        detail, content=content, diff=diff, revision=proposal.revision,
        rebased=proposal.rebased, revisions=listed, content_revision=shown,
        revision_diff=revision_diff,
    )


__all__ = ["HOST_EDITOR", "REBASED", "REBASED_ON_HOST_SAVE", "revised_at", "with_revisions"]
