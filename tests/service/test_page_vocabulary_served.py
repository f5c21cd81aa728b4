"""The vocabulary the page reads (`GET /owner/api/protocol`, on a real room) says what the
state machines' transitions do.

Each set is checked against the transitions themselves (who may still move a row, which
moves end it), not against the constant that produced it.
"""

from __future__ import annotations

from typing import Any

from commonroom.protocol.machines import DOCUMENT, MACHINES, PROPOSAL, Machine
from tests.service.conftest import LiveRoom


def _leaves(machine: Machine, status: str, *, but: frozenset[str] = frozenset()) -> bool:
    return any(status in moves for action, moves in machine.transitions.items()
               if action not in but)


async def test_the_page_vocabulary_is_what_the_machines_do(live: LiveRoom) -> None:
    headers = await live.owner_login()
    served = await live.raw("GET", "/owner/api/protocol", headers=headers,
                            port=live.ready.owner_port)
    assert served.status == 200
    words: dict[str, Any] = served.json()["vocabulary"]
    assert set(words["statuses"]) == set(MACHINES)

    for kind, machine in MACHINES.items():
        statuses, open_ = words["statuses"][kind], words["open_statuses"][kind]
        assert set(statuses) == {s for moves in machine.transitions.values()
                                 for move in moves.items() for s in move}
        for status in statuses:
            # Open: something other than a revival still moves it, and nothing made it wait.
            waiting = any(status in moves.values() for action, moves in
                          machine.transitions.items() if action in machine.rests)
            expected_open = _leaves(machine, status, but=machine.revivals) and not waiting
            assert (status in open_) == expected_open, (kind, status)
        assert statuses[0] in open_, f"a new {kind} starts open"

    # What the page offers a rebase on, a request for changes on, and marks stale.
    assert words["rebasable_statuses"]["proposal"] == list(PROPOSAL.transitions["rebase"])
    assert words["reviewable_statuses"]["proposal"] == [
        s for s in PROPOSAL.statuses if all(
            PROPOSAL.target(action, s) for action in ("approve", "reject", "request_changes"))]
    overtaken = words["overtaken_statuses"]["proposal"]
    assert set(overtaken) == {target for action, moves in PROPOSAL.transitions.items()
                              if PROPOSAL.actor[action] == DOCUMENT for target in moves.values()
                              if not _leaves(PROPOSAL, target, but=PROPOSAL.revivals)}
    # The words the page branches on are the ones the machines name.
    assert words["open_statuses"]["proposal"] == ["pending", "approved"]
    assert words["reviewable_statuses"]["proposal"] == ["pending"]
    assert set(overtaken) == {"superseded", "conflicted"}
