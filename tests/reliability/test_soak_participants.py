"""A bug the soak's leave-and-rejoin loop runs into: the participant limit counted everyone ever.

docs/spec/PROTOCOL.md section 11 caps a room at 256 participants. The join counted
every participant row, also those who had left, so a room where agents
leave and rejoin became unjoinable for ever after 256 joins (and said
"retry after 60 s", which never helped).
"""

from __future__ import annotations

from commonroom.protocol import limits
from tests.conftest import Driver


def test_participants_who_left_do_not_count_against_the_room_limit(room: Driver) -> None:
    for index in range(limits.MAX_PARTICIPANTS):
        joined = room.join(f"agent {index}")
        room.call("workspace.leave", joined["session_id"])
    again = room.join("one more")  # only the host is in the room
    assert again["participant_id"].startswith("pt_")


def test_the_limit_still_holds_for_participants_in_the_room(room: Driver) -> None:
    for index in range(limits.MAX_PARTICIPANTS):
        joined = room.join(f"agent {index}")
        if index >= limits.MAX_ACTIVE_SESSIONS - 1:
            # Stay in the room without a session: the session limit is another limit.
            room.call("session.revoke", room.host, participant_id=joined["participant_id"])
    invitation = room.invite()["invitation"]
    refused = room.error("session.join", None, invite=invitation, name="too many")
    assert refused.code == "limit_exceeded"
    assert refused.details == {"limit": limits.MAX_PARTICIPANTS}
