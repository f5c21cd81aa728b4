"""Issue 31, finding 9 (low): nine agents locked the host out of attachments.

The attack: nine default agents each put 10 x 768 KiB (under their 8 MiB quota) on a
handoff; together their handoff files filled the room's 64 MiB, and every upload of the
host's answered 429 for up to 24 h (a handoff's files live that long while it is open).
Now the host has a reserved share (16 MiB): everyone else's attachments, handoff files
counted against their uploader, stay within the other 48 MiB, so the agents are refused
(429 `scope: "attachments"`) and the host still uploads. A real `ce serve` over HTTP.
"""

from __future__ import annotations

from tests.e2e.conftest import Room
from tests.security.test_room_attachments import BIG, _upload

MIB = 1024 * 1024


def test_nine_agents_handoff_files_leave_the_host_its_share(served: Room) -> None:
    room = served
    accomplice = room.join("accomplice")
    refused = []
    accepted = 0
    for n in range(9):
        agent = room.join(f"filler{n}")["session_id"]
        handoff = room.ok("POST", "/workspace/handoff", agent, {
            "to_participant_id": accomplice["participant_id"], "summary": "hold these"})
        for k in range(10):
            status, answer = _upload(room, agent, f"junk{n}-{k}.txt", handoff["handoff_id"])
            if status == 200:
                accepted += 1
            else:
                assert status == 429, answer
                refused.append(answer)
    assert accepted * BIG <= 48 * MIB < (accepted + 1) * BIG
    assert refused and {a["details"]["scope"] for a in refused} == {"attachments"}
    # The host's share is whole: 16 MiB of its own uploads go in.
    for k in range(16 * MIB // BIG):
        status, answer = _upload(room, room.host_session, f"host{k}.txt")
        assert status == 200, (k, answer)
