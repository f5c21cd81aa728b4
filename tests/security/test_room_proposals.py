"""Item 7 of issue 24: terminal proposals must not grow the sidecar without bound.

The attack, on a real `ce serve`: 40 cycles of a 250 KiB propose followed by a
withdraw added 13.8 MiB to the sidecar in 0.8 s (about 75 MiB a minute per
bearer, until a full disk stops commits). Now only the newest 5 terminal
proposals of a participant (100 overall) keep their text, the rows and
summaries stay, a participant's stored proposal text is bounded by 2 MiB, and
the sidecar (database, `-wal`, `-shm`) grows by less than 5 MB under the attack.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from commonroom.engine.core import SIDECAR_SUFFIX
from tests.e2e.conftest import Room

KIB = 1024


def _sidecar_bytes(doc: Path) -> int:
    sidecar = doc.with_name(doc.name + SIDECAR_SUFFIX)
    return sum(f.stat().st_size for f in (Path(f"{sidecar}{s}") for s in ("", "-wal", "-shm"))
               if f.exists())


def _content(room: Room, bearer: str, size: int, tag: str = "") -> tuple[int, str]:
    read = room.read(bearer, "Risks")
    filler = (tag + "x" * size)[: size - len(read["content"]) - 4]
    return read["version"], read["content"].rstrip("\n") + "\n\n" + filler + "\n\n"


def test_propose_withdraw_churn_keeps_the_sidecar_small(served: Room) -> None:
    room = served
    bearer = room.join("churner")["session_id"]
    version, content = _content(room, bearer, 250 * KIB)
    before = _sidecar_bytes(room.doc)
    ids = []
    for n in range(40):
        proposal = room.ok("POST", "/workspace/propose", bearer, {
            "region": "Risks", "base_version": version, "summary": f"churn {n}", "content": content})
        room.ok("POST", "/workspace/proposal/withdraw", bearer, {"proposal_id": proposal["proposal_id"]})
        ids.append(proposal["proposal_id"])
    growth = _sidecar_bytes(room.doc) - before
    assert growth < 5_000_000, f"the sidecar grew by {growth} bytes"
    # Every row and summary is kept; only the newest five hold their text.
    listed = room.ok("GET", "/workspace/proposals?status=withdrawn&limit=200", bearer)["proposals"]
    assert sorted(p["summary"] for p in listed) == sorted(f"churn {n}" for n in range(40))
    oldest = room.ok("GET", f"/workspace/proposal?proposal_id={ids[0]}", bearer)
    assert (oldest["pruned"], oldest["content"], oldest["diff"]) == (True, "", "")
    assert oldest["summary"] == "churn 0" and oldest["status"] == "withdrawn"
    newest = room.ok("GET", f"/workspace/proposal?proposal_id={ids[-1]}", bearer)
    assert newest["pruned"] is False and newest["content"] == content
    room.process.close()
    with contextlib.closing(sqlite3.connect(room.doc.with_name(room.doc.name + SIDECAR_SUFFIX))) as conn:
        kept = conn.execute("SELECT count(*) FROM proposals WHERE length(content) > 0").fetchone()[0]
    assert kept == 5


def test_a_participants_open_proposals_hold_at_most_2_mib(served: Room) -> None:
    room = served
    bearer = room.join("hoarder")["session_id"]
    version, content = _content(room, bearer, 256 * KIB)
    for n in range(8):  # 8 x 256 KiB = 2 MiB
        room.ok("POST", "/workspace/propose", bearer, {
            "region": "Risks", "base_version": version, "summary": f"hold {n}", "content": content})
    status, answer = room.call("POST", "/workspace/propose", bearer, {
        "region": "Risks", "base_version": version, "summary": "one more", "content": content})
    assert status == 429 and answer["error"] == "limit_exceeded", answer
    assert answer["details"]["scope"] == "proposal_bytes" and answer["retry_after_seconds"] >= 1
    # Someone else is not affected, nor is the host.
    other = room.join("other")["session_id"]
    small_version, small = _content(room, other, 2 * KIB)
    assert room.call("POST", "/workspace/propose", other, {
        "region": "Risks", "base_version": small_version, "summary": "small", "content": small})[0] == 200
    assert room.call("POST", "/workspace/propose", room.host_session, {
        "region": "Risks", "base_version": version, "summary": "host", "content": content})[0] == 200
