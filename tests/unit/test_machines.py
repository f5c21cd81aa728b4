"""The machines' derived sets: what the transitions say, as the protocol names them."""

from __future__ import annotations

import pytest

from commonroom.protocol.machines import HANDOFF, PROPOSAL, TASK, THREAD, Machine


def test_open_resting_terminal_and_overtaken_follow_from_the_transitions() -> None:
    assert PROPOSAL.open_states == ("pending", "approved")
    assert PROPOSAL.resting == ("changes_requested",)
    assert PROPOSAL.terminal == ("rejected", "committed", "conflicted", "withdrawn", "superseded")
    assert PROPOSAL.revivable == ("superseded",)
    assert set(PROPOSAL.overtaken) == {"superseded", "conflicted"}
    assert PROPOSAL.sources("revise") == ("pending", "changes_requested", "superseded")
    assert HANDOFF.open_states == ("requested", "accepted")
    assert HANDOFF.terminal == ("declined", "completed", "failed", "cancelled")
    assert HANDOFF.overtaken == ()  # abandoned by the room, not overtaken by the document
    assert TASK.open_states == ("working", "input_required")
    assert TASK.terminal == ("completed", "failed", "cancelled")
    assert THREAD.open_states == ("open",) and THREAD.terminal == ()
    assert THREAD.resting == ("resolved", "outdated")


def test_a_new_move_out_of_a_status_makes_it_no_longer_terminal() -> None:
    reopened = Machine(kind="proposal", statuses=PROPOSAL.statuses,
                       transitions={**PROPOSAL.transitions, "reopen": {"rejected": "pending"}},
                       actor={**PROPOSAL.actor, "reopen": "reviewer"},
                       revivals=PROPOSAL.revivals, rests=PROPOSAL.rests)
    assert "rejected" not in reopened.terminal and "rejected" in reopened.open_states


def test_a_machine_refuses_an_unknown_status_or_an_action_without_an_actor() -> None:
    with pytest.raises(ValueError, match="unknown status"):
        Machine(kind="x", statuses=("a", "b"), transitions={"go": {"a": "c"}}, actor={"go": "me"})
    with pytest.raises(ValueError, match="one actor"):
        Machine(kind="x", statuses=("a", "b"), transitions={"go": {"a": "b"}}, actor={})
