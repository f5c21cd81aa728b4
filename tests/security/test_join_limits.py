"""Issue 24 item 5 (and item 10's rate-limit half): one shared anonymous window locked out every join.

Every loopback client (and every tailcat-forwarded one) has the address
127.0.0.1. On main, 61 requests to `/.well-known/agent-workspace` made every
`POST /session/join` answer 429. Now discovery has its own window, a join is
charged to its invitation's secret hash, and unknown secrets share one small
window. The attacks run against a real `ce serve` with the default limits.
"""

from __future__ import annotations

import pytest

from commonroom.engine.ids import hash_secret
from commonroom.http.guards import Gate
from commonroom.protocol.errors import CommonroomError
from tests.e2e.conftest import Room


def test_a_discovery_flood_does_not_lock_out_joins(served: Room) -> None:
    room = served
    codes = [room.call("GET", "/.well-known/agent-workspace")[0] for _ in range(70)]
    assert codes[:60] == [200] * 60 and set(codes[60:]) == {429}  # the flood is refused...
    status, answer = room.call("POST", "/session/join", None, {
        "invite": room.process.ready["invitation"], "name": "newcomer"})
    assert status == 200, answer  # ...and the join is not
    for path in ("/protocol", "/openapi.json", "/skills"):  # discovery shares its own window
        assert room.call("GET", path)[0] == 429


def test_guessing_secrets_never_locks_out_a_real_invitation(served: Room) -> None:
    room = served
    invite = room.invite(max_uses=5)["invitation"]
    guesses = [room.call("POST", "/session/join", None, {"invite": f"guess{i}", "name": "x"})[0]
               for i in range(25)]
    assert guesses[:20] == [401] * 20 and set(guesses[20:]) == {429}  # a small window for guesses
    malformed = room.call("POST", "/session/join", None, {"name": "no invite at all"})
    assert malformed[0] == 429 and malformed[1]["details"]["scope"] == "requests"
    for name in ("a", "b"):  # the real invitation has its own window
        status, answer = room.call("POST", "/session/join", None, {"invite": invite, "name": name})
        assert status == 200, answer
    # The bearer routes' anonymous window is untouched by both floods.
    assert room.call("GET", "/workspace/status", "ses_unknown")[0] == 401


def test_one_invitation_is_charged_in_its_own_window(served: Room) -> None:
    room = served
    spent = room.invite()["invitation"]
    other = room.invite()["invitation"]
    assert room.call("POST", "/session/join", None, {"invite": spent, "name": "first"})[0] == 200
    codes = [room.call("POST", "/session/join", None, {"invite": spent, "name": "again"})[0]
             for _ in range(62)]
    assert codes[:59] == [403] * 59 and set(codes[59:]) == {429}  # redeemed, then limited
    assert room.call("POST", "/session/join", None, {"invite": other, "name": "fresh"})[0] == 200


def test_a_participant_is_charged_across_its_sessions() -> None:
    """Item 10: two bearers of one participant share the participant's window too."""
    now = [0.0]
    sessions = {hash_secret("ses_one"): "pt_same", hash_secret("ses_two"): "pt_same",
                hash_secret("ses_other"): "pt_other"}
    gate = Gate(per_bearer_per_minute=4, per_address_per_minute=2, clock=lambda: now[0],
                session_participant=sessions.get)
    for bearer in ("ses_one", "ses_one", "ses_two", "ses_two"):
        gate.admit(bearer, "127.0.0.1")
    with pytest.raises(CommonroomError) as refused:
        gate.admit("ses_two", "127.0.0.1")  # its own window has room, its participant's not
    assert refused.value.code == "limit_exceeded" and refused.value.recovery["retry_after_seconds"] == 60
    gate.admit("ses_other", "127.0.0.1")  # another participant is not held up
    now[0] = 60.0
    gate.admit("ses_two", "127.0.0.1")
