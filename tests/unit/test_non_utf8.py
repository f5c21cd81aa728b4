"""A file that is not UTF-8 text (issue 8, item 2): refused at open, never a 500 while running.

Decision (docs/protocol.md "Files that are not UTF-8"): commonroom serves UTF-8
markdown only. Opening a room on anything else is `invalid_request` "FILE is
not UTF-8 text". An edit that makes the file non-UTF-8 while the room runs is
not recorded as a version: reads keep serving the last version, proposals
still work, and commits are refused with `storage_unavailable` (they would
overwrite the edit) until the file is UTF-8 again, which is then an ordinary
external edit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from commonroom.engine.dispatch import open_engine
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.timefmt import ManualClock
from tests.conftest import SAMPLE, Driver
from tests.editing import let_settle

LATIN1 = "# Caf\xe9\n\nbonjour\n".encode("latin-1")


def test_opening_a_latin1_file_is_refused_and_leaves_no_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "latin.md"
    path.write_bytes(LATIN1)
    with pytest.raises(CommonroomError) as refused:
        open_engine(path, clock=ManualClock())
    assert refused.value.code == "invalid_request"
    assert refused.value.message.startswith("latin.md is not UTF-8 text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latin.md"]


def test_a_file_edited_offline_into_latin1_is_refused_at_reopen(doc_path: Path) -> None:
    open_engine(doc_path, clock=ManualClock()).close()
    doc_path.write_bytes(LATIN1)
    with pytest.raises(CommonroomError, match="not UTF-8 text"):
        open_engine(doc_path, clock=ManualClock())


def test_a_latin1_edit_while_running_is_not_a_version_and_blocks_only_commits(
    room: Driver,
) -> None:
    agent = room.join(caps=["read", "propose", "commit"])["session_id"]
    room.engine.path.write_bytes(LATIN1)
    events = let_settle(room.engine, room.clock)  # what the watcher does
    assert [e.type for e in events] == []  # no version
    assert room.call("workspace.status", agent)["file"] == "unusable"
    read = room.call("workspace.read", agent, region="Goals")
    assert read["version"] == 1 and "ship it" in read["content"]
    prop = room.call("workspace.propose", agent, region="Goals", base_version=1, summary="s",
                     content="## Goals\n\n- later\n\n")
    room.call("workspace.review", room.host, proposal_id=prop["proposal_id"],
            revision=prop["revision"], decision="approve")
    err = room.error("workspace.commit", agent, proposal_id=prop["proposal_id"])
    assert err.code == "storage_unavailable" and "not UTF-8 text" in err.message
    assert room.engine.path.read_bytes() == LATIN1  # the edit is not overwritten
    assert room.call("workspace.proposal", agent, proposal_id=prop["proposal_id"])["status"] == (
        "approved"
    )
    # Text again: an ordinary external edit, and commits work.
    room.engine.path.write_text(SAMPLE.replace("Intro text.", "Fixed by hand."))
    let_settle(room.engine, room.clock)
    status = room.call("workspace.status", agent)
    assert status["version"] == 2 and status["file"] == "settled"
    # The hand edit holds what it changed ("Plan") for a while (human editing, §10.1).
    assert room.error("workspace.commit", agent, proposal_id=prop["proposal_id"]).code == "lease_conflict"
    room.clock.advance(minutes=3)
    done = room.call("workspace.commit", agent, proposal_id=prop["proposal_id"])
    assert done["version"] == 3 and "Fixed by hand." in room.engine.path.read_text()
