"""A commit never lands over the host's save (engine/core.py, docs/spec/PROTOCOL.md section 16).

The host's editor saves in place at the worst moments of a commit: before the
sidecar's COMMIT, and after it, just before the rename. The commit is not
renamed over the save: nothing of it stands, the save is recorded once it has
settled, and the same commit then lands under the usual region rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from commonroom.engine import dispatch
from commonroom.engine.dispatch import open_engine
from commonroom.engine.txn import Transactions
from commonroom.protocol.records import to_wire
from tests.conftest import SAMPLE, Driver
from tests.editing import let_settle

HOST_SAVE = SAMPLE.replace("The end.", "The host's new end.")


def save_in_place(path: Any, text: str) -> None:
    """Truncate, then write: how many editors save."""
    with open(path, "r+b") as handle:
        handle.truncate(0)
        handle.write(text.encode())


def approved(room: Driver, region: str, content: str) -> tuple[str, str]:
    agent = room.join(caps=["read", "propose", "commit"])["session_id"]
    proposal = room.call("workspace.propose", agent, region=region, base_version=room.version,
                         summary="s", content=content)
    room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"],
            revision=proposal["revision"], decision="approve")
    return agent, proposal["proposal_id"]


def host_saves_during(monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> list[int]:
    """Make the host save `text` the first time `Engine.<name>` runs (once)."""
    original: Callable[..., Any] = getattr(Transactions, name)
    calls: list[int] = []

    def wrapped(self: Transactions, *args: Any) -> Any:
        if not calls:
            save_in_place(self.engine.path, text)
        calls.append(1)
        return original(self, *args)

    monkeypatch.setattr(Transactions, name, wrapped)
    return calls


@pytest.mark.parametrize("moment", ["_take_prepared", "_sync_journal"])
def test_a_save_at_the_last_moment_is_recorded_first_and_the_commit_follows(
    room: Driver, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    """`_take_prepared` runs just before COMMIT, `_sync_journal` after it, just before the rename."""
    agent, proposal_id = approved(room, "Goals", "## Goals\n\n- ship it twice\n\n")
    host_saves_during(monkeypatch, moment, HOST_SAVE)
    outcome = dispatch.execute(room.engine, "workspace.commit", agent, {"proposal_id": proposal_id})
    assert outcome.error is not None and outcome.error.details["reason"] == "file_changing"
    assert outcome.retry_at == room.clock.now + room.engine.settle.period
    assert outcome.events == []  # nothing of the commit stands, not even its events
    # The save is the file, untouched; the sidecar has no trace of the commit.
    assert room.engine.path.read_text() == HOST_SAVE
    assert room.engine.conn.execute("SELECT max(version) FROM versions").fetchone()[0] == 1
    assert room.call("workspace.proposal", agent, proposal_id=proposal_id)["status"] == "approved"
    assert sorted(p.name for p in room.engine.path.parent.iterdir()) == ["idea.md",
                                                                       "idea.md.commonroom.db",
                                                                       "idea.md.commonroom.db-shm",
                                                                       "idea.md.commonroom.db-wal"]
    # The room retries once the save settled: the save is a version, then the commit
    # (its region untouched by the save) lands on top of it; the file holds both.
    room.clock.advance(seconds=0.25)
    done = room.call("workspace.commit", agent, proposal_id=proposal_id)
    assert done["version"] == 3
    sources = [r[0] for r in room.engine.conn.execute("SELECT source FROM versions ORDER BY version")]
    assert sources == ["initial", "external", "proposal"]
    text = room.engine.path.read_text()
    assert "The host's new end." in text and "- ship it twice" in text


def test_a_save_that_changed_the_commits_region_makes_it_stale(
    room: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, proposal_id = approved(room, "Appendix", "# Appendix\n\nThe agent's end.\n")
    host_saves_during(monkeypatch, "_sync_journal", HOST_SAVE)
    outcome = dispatch.execute(room.engine, "workspace.commit", agent, {"proposal_id": proposal_id})
    assert outcome.retry_at is not None
    room.clock.advance(seconds=0.25)
    held = room.error("workspace.commit", agent, proposal_id=proposal_id)  # the host is typing there
    assert held.code == "lease_conflict" and held.details["reason"] == "human_editing"
    room.clock.advance(minutes=2)
    stale = room.error("workspace.commit", agent, proposal_id=proposal_id)
    assert stale.code == "stale_version" and stale.to_wire()["current_version"] == 2
    assert room.engine.path.read_text() == HOST_SAVE  # the host's words, not overwritten


def test_a_raw_commit_waits_for_a_save_in_progress_and_then_is_stale(room: Driver) -> None:
    save_in_place(room.engine.path, SAMPLE[: len(SAMPLE) // 2])  # half a save, so far
    outcome = dispatch.execute(room.engine, "workspace.commit", room.host,
                               {"base_version": 1, "summary": "x", "content": "# X\n"})
    assert outcome.retry_at is not None and room.engine.path.read_text() == SAMPLE[: len(SAMPLE) // 2]
    room.clock.advance(seconds=0.1)
    save_in_place(room.engine.path, HOST_SAVE)  # the rest of it
    assert dispatch.execute(room.engine, "workspace.commit", room.host,
                            {"base_version": 1, "summary": "x", "content": "# X\n"}).retry_at is not None
    let_settle(room.engine, room.clock)
    assert room.version == 2 and room.engine.current().text == HOST_SAVE  # one version: the whole save
    assert room.error("workspace.commit", room.host, base_version=1, summary="x",
                      content="# X\n").code == "stale_version"


def test_a_commit_right_after_the_rooms_own_write_is_not_taken_for_a_save(room: Driver) -> None:
    """The stamp of the room's write comes from its temp file: the next look is STEADY."""
    for n in range(3):
        done = room.call("workspace.commit", room.host, base_version=room.version, summary="x",
                         content=f"# X{n}\n")
        assert room.engine.file_state == "settled" and done["version"] == n + 2
    assert to_wire(dispatch.execute(room.engine, "workspace.status", room.host, {}).result)["file"] == (
        "settled")
    sources = [r[0] for r in room.engine.conn.execute("SELECT source FROM versions")]
    assert "external" not in sources


def test_a_room_opened_in_the_middle_of_a_save_records_the_settled_file(
    doc_path: Any, clock: Any
) -> None:
    """A room killed during a settle: the restart records what the file settles to."""
    open_engine(doc_path, clock=clock).close()
    save_in_place(doc_path, SAMPLE[:40])  # the room starts while the host's save is half done
    engine = open_engine(doc_path, clock=clock)
    try:
        assert engine.current_version == 1 and engine.file_state == "settling"
        save_in_place(doc_path, HOST_SAVE)
        let_settle(engine, clock)
        assert engine.current_version == 2 and engine.current().text == HOST_SAVE
        # Still saving after the room opened: someone is typing now, so it holds what changed.
        holds = engine.conn.execute("SELECT region, reason FROM leases").fetchall()
        assert holds == [("Appendix", "human_editing")]
    finally:
        engine.close()
