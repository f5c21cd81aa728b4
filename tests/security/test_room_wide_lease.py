"""Item 14 of issue 24: one agent must not lock the whole document or flush the event ring.

Through a real `ce serve`:
- a lease on the root heading blocked everyone and could be taken again as soon
  as it lapsed: a lease on the whole document, on the root heading or on a
  region with more than 8 sub-sections now needs the `wide_lease` capability,
  which only an invitation can carry;
- unaddressed messages skipped the loop guard, so 300 messages of 4 KB a minute
  cycled the 2,000-event ring: every participant but the host has a budget of
  60 messages (addressed or not) in any 5 minutes.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Room

ROOT = "Shelf Swap: a neighbourhood book exchange app"


def _checkout(room: Room, bearer: str, region: str) -> tuple[int, Any]:
    return room.call("POST", "/workspace/checkout", bearer, {"region": region})


def test_a_lease_on_the_root_or_a_wide_region_needs_wide_lease(served: Room) -> None:
    room = served
    agent = room.join("greedy")["session_id"]
    for region in (ROOT, "workspace"):
        status, answer = _checkout(room, agent, region)
        assert status == 403 and answer["error"] == "permission_denied", answer
        assert answer["details"]["required_capability"] == "wide_lease"
    assert room.ok("GET", "/workspace/leases", agent)["leases"] == []
    # A region with 9 sub-sections is wide; one with 8 is not.
    whole = room.read(room.host_session, "workspace")
    wide = "## Wide\n\n" + "".join(f"### W{n}\n\nw\n\n" for n in range(9))
    narrow = "## Narrow\n\n" + "".join(f"### N{n}\n\nn\n\n" for n in range(8))
    room.ok("POST", "/workspace/commit", room.host_session, {
        "base_version": whole["version"], "summary": "two chapters",
        "content": whole["content"] + wide + narrow,
    })
    status, answer = _checkout(room, agent, "Wide")
    assert status == 403 and answer["details"]["subsections"] == 9, answer
    assert _checkout(room, agent, "Narrow")[0] == 200
    assert _checkout(room, agent, "Risks")[0] == 200
    # The host grants it through an invitation.
    granted = room.join("trusted", ["read", "checkout", "wide_lease"])["session_id"]
    status, answer = _checkout(room, granted, ROOT)
    assert status == 409 and answer["error"] == "lease_conflict"  # the greedy one's leases are inside
    status, lease = _checkout(room, granted, "Wide")
    assert status == 200, lease
    # An agent without it cannot hand it out either.
    inviter = room.join("inviter", ["read", "checkout", "invite"])["session_id"]
    status, answer = room.call("POST", "/workspace/invite", inviter, {"capabilities": ["wide_lease"]})
    assert status == 403 and answer["error"] == "permission_denied", answer


def test_unaddressed_text_cannot_cycle_the_event_ring(served: Room) -> None:
    room = served
    flooder = room.join("flooder")["session_id"]
    before = room.ok("GET", "/workspace/diagnostics", room.host_session)["events"]
    text = "x" * 4000
    answers = [room.call("POST", "/workspace/message", flooder, {"text": f"{n} {text}"})
               for n in range(300)]
    accepted = [status for status, _ in answers if status == 200]
    refused = [answer for status, answer in answers if status == 429]
    assert len(accepted) == 60 and len(refused) == 240
    assert {answer["details"]["scope"] for answer in refused} == {"message_budget"}
    assert all(1 <= answer["retry_after_seconds"] <= 300 for answer in refused)
    after = room.ok("GET", "/workspace/diagnostics", room.host_session)["events"]
    assert after["latest_event_id"] - before["latest_event_id"] < 80  # 60 messages, a few others
    # Others, and the host, still talk.
    other = room.join("other")["session_id"]
    assert room.call("POST", "/workspace/message", other, {"text": "hello"})[0] == 200
    assert room.call("POST", "/workspace/message", room.host_session, {"text": "noted"})[0] == 200
