"""Leases (engine/leases.py): conflicts, renew cap, release, expiry, region removal."""

from __future__ import annotations

from commonroom.protocol.timefmt import format_ts
from tests.conftest import Driver


def test_conflicts_on_same_ancestor_descendant_and_workspace(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    lease = room.call("workspace.checkout", a, region="Plan/Goals")
    assert lease["region"] == "Plan/Goals"
    for region in ("Plan/Goals", "Goals", "section:Plan/Goals", "Plan", "workspace", "*"):
        err = room.error("workspace.checkout", b, region=region)
        assert err.code == "lease_conflict", region
        wire = err.to_wire()
        assert wire["lease_id"] == lease["lease_id"] and wire["region"] == "Plan/Goals"
        assert err.details["participant_id"] == lease["participant_id"]
    # A sibling and an unrelated top-level region are free.
    assert room.call("workspace.checkout", b, region="Plan/Risks")["region"] == "Plan/Risks"
    assert room.call("workspace.checkout", b, region="Appendix")["region"] == "Appendix"


def test_descendant_blocks_ancestor(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    room.call("workspace.checkout", a, region="Plan")
    assert room.error("workspace.checkout", b, region="Plan/Risks").code == "lease_conflict"


def test_checkout_again_renews(room: Driver) -> None:
    a = room.join("a")["session_id"]
    first = room.call("workspace.checkout", a, region="Goals", minutes=10)
    room.clock.advance(minutes=5)
    again = room.call("workspace.checkout", a, region="Goals", minutes=10)
    assert again["lease_id"] == first["lease_id"] and again["expires_at"] > first["expires_at"]


def test_renew_is_capped_at_120_minutes_from_acquisition(room: Driver) -> None:
    a = room.join("a")["session_id"]
    lease = room.call("workspace.checkout", a, region="Goals", minutes=120)
    room.clock.advance(minutes=30)
    err = room.error("workspace.renew", a, lease_id=lease["lease_id"], minutes=120)
    assert err.code == "limit_exceeded" and err.http_status == 429
    assert err.to_wire()["retry_after_seconds"] > 0
    lease2 = room.call("workspace.checkout", a, region="Risks", minutes=100)
    room.clock.advance(minutes=90)
    renewed = room.call("workspace.renew", a, lease_id=lease2["lease_id"], minutes=120)
    # acquired + 120 min, not now + 120 min
    assert renewed["expires_at"] == lease2["acquired_at"].replace("T12:30", "T14:30")


def test_only_holder_renews_and_approve_releases(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    lease = room.call("workspace.checkout", a, region="Goals")
    assert room.error("workspace.renew", b, lease_id=lease["lease_id"]).code == "permission_denied"
    assert room.error("workspace.release", b, lease_id=lease["lease_id"]).code == (
        "permission_denied"
    )
    assert room.call("workspace.release", room.host, lease_id=lease["lease_id"]) == {
        "lease_id": lease["lease_id"], "released": True,
    }
    assert room.call("workspace.checkout", b, region="Goals")["region"] == "Plan/Goals"


def test_expired_lease_stops_blocking_and_is_swept(room: Driver) -> None:
    a = room.join("a")["session_id"]
    b = room.join("b")["session_id"]
    lease = room.call("workspace.checkout", a, region="Goals", minutes=1)
    _, due = room.engine.sweep()
    assert due is not None and format_ts(due) == lease["expires_at"]
    room.clock.advance(minutes=1)
    events, _ = room.engine.sweep()
    assert [e.type for e in events] == ["lease.expired"]
    assert events[0].payload.lease_id == lease["lease_id"]
    room.call("workspace.checkout", b, region="Goals")


def test_region_removed_by_commit_ends_its_leases(room: Driver) -> None:
    a = room.join("a")["session_id"]
    lease = room.call("workspace.checkout", a, region="Risks")
    # a's own lease on Plan/Risks does not block a's proposal on its ancestor Plan.
    proposal = room.call("workspace.propose", a, region="Plan", base_version=room.version,
                         summary="drop risks",
                         content="# Plan\n\nIntro text.\n\n## Goals\n\n- ship it\n\n")
    room.call("workspace.review", room.host, proposal_id=proposal["proposal_id"], revision=proposal["revision"],
              decision="approve")
    room.call("workspace.commit", a, proposal_id=proposal["proposal_id"])
    assert "Risks" not in room.call("workspace.read", room.host)["content"]
    assert room.call("workspace.leases", room.host)["leases"] == []
    released = next(e for e in room.call("workspace.history", room.host)["events"]
                if e["type"] == "lease.released")
    assert released["payload"]["reason"] == "region_removed"
    assert released["payload"]["lease_id"] == lease["lease_id"]


def test_lease_limit_per_participant(room: Driver) -> None:
    a = room.join("a")["session_id"]
    body = "".join(f"# S{i}\n\ntext\n\n" for i in range(20))
    room.call("workspace.commit", room.host, base_version=room.version, summary="many",
              content=body)
    for i in range(16):
        room.call("workspace.checkout", a, region=f"S{i}")
    err = room.error("workspace.checkout", a, region="S16")
    assert err.code == "limit_exceeded"


def test_unknown_region_and_ambiguous_title(room: Driver) -> None:
    a = room.join("a")["session_id"]
    err = room.error("workspace.checkout", a, region="Nowhere")
    assert err.code == "invalid_region" and err.to_wire()["region"] == "Nowhere"
    room.call("workspace.commit", room.host, base_version=room.version, summary="dups",
              content="# A\n## Notes\n# B\n## Notes\n")
    err = room.error("workspace.checkout", a, region="Notes")
    assert err.code == "invalid_region"
    assert sorted(err.details["candidates"]) == ["A/Notes", "B/Notes"]


def test_listed_leases_say_which_are_wide(room: Driver) -> None:
    # The page offers the host a release button on a wide lease (issue 21; issue 24 item 14).
    a = room.join("a")["session_id"]
    wide = room.call("workspace.checkout", room.host, region="workspace")
    assert [row["wide"] for row in room.call("workspace.leases", a)["leases"]] == [True]
    assert [row["wide"] for row in room.call("workspace.room", a)["leases"]] == [True]
    room.call("workspace.release", room.host, lease_id=wide["lease_id"])
    room.call("workspace.checkout", a, region="Appendix")
    assert [row["wide"] for row in room.call("workspace.leases", a)["leases"]] == [False]
