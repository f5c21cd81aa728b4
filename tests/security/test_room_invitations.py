"""Items 9 and 10 (sessions half) of issue 24: invitations against a hostile invite holder.

Through a real `ce serve`:
- an `invite` holder's pre-minted invitation let it rejoin after the host revoked
  its sessions: revoking a participant now revokes the invitations it minted (and
  so does its leaving);
- any `invite` holder could revoke the host's invitations: only their creator or
  an `admin` may;
- an agent could mint an unlimited invitation for 7 days: one minted by anyone
  but the host lasts at most 60 minutes and 5 uses (and never grants more than
  its minter holds, as before);
- one multi-use invitation filled all 64 guest sessions: at most `max_sessions`
  (default 8, the host may set 1..64) of its sessions are active at once.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Room

INVITER = ["read", "observe", "checkout", "propose", "commit", "message", "handoff", "invite"]


def _join_status(room: Room, invitation: str, name: str) -> tuple[int, Any]:
    return room.call("POST", "/session/join", None, {"invite": invitation, "name": name})


def test_revoking_an_inviter_revokes_the_invitations_it_minted(served: Room) -> None:
    room = served
    inviter = room.join("inviter", INVITER)
    minted = room.invite(inviter["session_id"], max_uses=5)
    room.ok("POST", "/workspace/session/revoke", room.host_session,
            {"participant_id": inviter["participant_id"]})
    status, answer = _join_status(room, minted["invitation"], "inviter-again")
    assert (status, answer["error"]) == (403, "invitation_revoked"), answer
    listed = room.ok("GET", "/workspace/invitations", room.host_session)["invitations"]
    assert {i["invite_id"]: i["state"] for i in listed}[minted["invite_id"]] == "revoked"


def test_an_inviter_that_leaves_takes_its_invitations_along(served: Room) -> None:
    room = served
    inviter = room.join("inviter", INVITER)
    minted = room.invite(inviter["session_id"])
    room.ok("POST", "/workspace/leave", inviter["session_id"], {})
    status, answer = _join_status(room, minted["invitation"], "late")
    assert (status, answer["error"]) == (403, "invitation_revoked"), answer


def test_only_its_creator_or_an_admin_revokes_an_invitation(served: Room) -> None:
    room = served
    inviter = room.join("inviter", INVITER)
    hosts = room.invite(max_uses=3)
    status, answer = room.call("POST", "/workspace/invite/revoke", inviter["session_id"],
                               {"invite_id": hosts["invite_id"]})
    assert (status, answer["error"]) == (403, "permission_denied"), answer
    assert _join_status(room, hosts["invitation"], "guest")[0] == 200  # still usable
    own = room.invite(inviter["session_id"])
    revoked = room.ok("POST", "/workspace/invite/revoke", inviter["session_id"],
                      {"invite_id": own["invite_id"]})
    assert revoked["state"] == "revoked"
    admin = room.join("deputy", ["admin"])
    assert room.ok("POST", "/workspace/invite/revoke", admin["session_id"],
                   {"invite_id": hosts["invite_id"]})["state"] == "revoked"


def test_an_agents_invitation_is_capped(served: Room) -> None:
    room = served
    bearer = room.join("inviter", INVITER)["session_id"]

    def refused(params: dict[str, Any], field: str) -> None:
        status, answer = room.call("POST", "/workspace/invite", bearer, params)
        assert status == 400 and answer["error"] == "invalid_request", answer
        assert answer["details"]["field"] == field, answer

    refused({"max_uses": None, "expires_in_minutes": 7 * 24 * 60}, "expires_in_minutes")
    refused({"max_uses": None}, "max_uses")
    refused({"max_uses": 6}, "max_uses")
    refused({"expires_in_minutes": 61}, "expires_in_minutes")
    status, answer = room.call("POST", "/workspace/invite", bearer, {"capabilities": ["admin"]})
    assert (status, answer["error"]) == (403, "permission_denied"), answer
    best = room.invite(bearer, max_uses=5, expires_in_minutes=60)
    default = room.invite(bearer)
    assert best["max_uses"] == 5 and default["max_uses"] == 1
    listed = {i["invite_id"]: i for i in room.ok("GET", "/workspace/invitations", room.host_session)[
        "invitations"]}
    for invite in (best, default):
        info = listed[invite["invite_id"]]
        from datetime import datetime

        lasts = datetime.fromisoformat(info["expires_at"]) - datetime.fromisoformat(info["created_at"])
        assert lasts.total_seconds() == 60 * 60
    # The host's own invitations keep the protocol's bounds.
    assert room.invite(max_uses=None, expires_in_minutes=7 * 24 * 60)["max_uses"] is None


def test_one_multi_use_invitation_holds_at_most_its_sessions(served: Room) -> None:
    room = served
    unlimited = room.invite(max_uses=None)
    assert unlimited["max_sessions"] == 8
    joined = [room.join(f"crowd{n}", invitation=unlimited["invitation"]) for n in range(8)]
    status, answer = _join_status(room, unlimited["invitation"], "crowd8")
    assert status == 429 and answer["error"] == "limit_exceeded", answer
    assert answer["details"]["scope"] == "invitation_sessions" and answer["retry_after_seconds"] >= 1
    # Another invitation still lets people in: the room's 64 were never reached.
    assert _join_status(room, room.invite()["invitation"], "other")[0] == 200
    # A session that ends frees its place.
    room.ok("POST", "/workspace/leave", joined[0]["session_id"], {})
    assert _join_status(room, unlimited["invitation"], "crowd8")[0] == 200
    # The host may set the limit on a multi-use invitation of its own.
    wide = room.invite(max_uses=None, max_sessions=12)
    assert wide["max_sessions"] == 12
    for n in range(12):
        room.join(f"wide{n}", invitation=wide["invitation"])
    assert _join_status(room, wide["invitation"], "wide12")[0] == 429
