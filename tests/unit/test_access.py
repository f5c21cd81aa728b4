"""Joining, invitations, sessions, leaving (engine/access.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from commonroom.engine import dispatch, sessions
from commonroom.engine.dispatch import open_engine
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import ManualClock
from tests.conftest import Driver


def test_join_returns_the_session_shape(room: Driver) -> None:
    joined = room.join("writer")
    assert set(joined) >= {"session_id", "participant_id", "workspace_id", "kind", "name",
                           "capabilities", "expires_at"}
    assert joined["session_id"].startswith("ses_") and len(joined["session_id"]) >= 4 + 43
    assert joined["kind"] == "agent"
    assert "approve" not in joined["capabilities"]
    status = room.call("workspace.status", joined["session_id"])
    assert status["workspace_id"] == joined["workspace_id"]


def test_session_is_stored_hashed(room: Driver) -> None:
    bearer = room.join()["session_id"]
    dump = "\n".join(room.engine.conn.iterdump())
    assert bearer not in dump


def test_redemption_check_order(room: Driver) -> None:
    assert room.error("session.join", None, invite="nope", name="a").code == "unauthorized"
    inv = room.invite(expires_in_minutes=5)
    room.call("workspace.revoke_invitation", room.host, invite_id=inv["invite_id"])
    room.clock.advance(minutes=10)  # revoked AND expired: revoked is reported first
    assert room.error("session.join", None, invite=inv["invitation"], name="a").code == (
        "invitation_revoked"
    )
    inv2 = room.invite(expires_in_minutes=5, max_uses=1)
    room.call("session.join", None, invite=inv2["invitation"], name="a")
    room.clock.advance(minutes=10)  # used up AND expired: expired first
    assert room.error("session.join", None, invite=inv2["invitation"], name="b").code == (
        "invitation_expired"
    )
    inv3 = room.invite(max_uses=2)
    for name in ("a", "b"):
        room.call("session.join", None, invite=inv3["invitation"], name=name)
    assert room.error("session.join", None, invite=inv3["invitation"], name="c").code == (
        "invitation_redeemed"
    )


def test_unlimited_invitation(room: Driver) -> None:
    inv = room.invite(max_uses=None)
    for i in range(5):
        room.call("session.join", None, invite=inv["invitation"], name=f"a{i}")


def test_concurrent_redemption_gives_exactly_one_session(
    doc_path: Path, clock: ManualClock
) -> None:
    first = open_engine(doc_path, clock=clock)
    first.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    host = sessions.mint_host_session(first)
    invite = dispatch.execute(first, "workspace.invite", host, {"max_uses": 1}).result.invitation
    first.close()
    results: list[str] = []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        engine = open_engine(doc_path, clock=clock)  # its own connection, like another process
        barrier.wait()
        outcome = dispatch.execute(engine, "session.join", None, {"invite": invite, "name": f"n{i}"})
        results.append("ok" if outcome.error is None else outcome.error.code)
        engine.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["invitation_redeemed"] * 7 + ["ok"]


def test_invitation_never_grants_more_than_its_creator(room: Driver) -> None:
    inviter = room.join("inviter", caps=["read", "invite"])
    bearer = inviter["session_id"]
    assert room.error("workspace.invite", bearer, capabilities=["read", "approve"]).code == (
        "permission_denied"
    )
    ok = room.call("workspace.invite", bearer, capabilities=["read"])
    assert ok["capabilities"] == ["read"]
    assert room.error("workspace.invite", room.host, capabilities=["fly"]).code == (
        "invalid_request"
    )
    assert room.error("workspace.invite", room.host, capabilities=["*"]).code == (
        "invalid_request"
    )


def test_invitation_list_shows_state_not_secret(room: Driver) -> None:
    inv = room.invite()
    listed = room.call("workspace.invitations", room.host)["invitations"]
    assert listed[0]["invite_id"] == inv["invite_id"] and listed[0]["state"] == "active"
    secret = inv["invitation"]
    assert secret not in str(listed)


def test_session_expiry_and_sweep(room: Driver) -> None:
    bearer = room.join()["session_id"]
    room.clock.advance(hours=8, seconds=1)
    events, _ = room.engine.sweep()
    assert "session.expired" in [e.type for e in events]
    assert room.error("workspace.status", bearer).code == "session_expired"


def test_expired_session_refused_before_any_sweep(room: Driver) -> None:
    bearer = room.join()["session_id"]
    room.clock.advance(hours=8, seconds=1)
    assert room.error("workspace.status", bearer).code == "session_expired"


def test_sweep_reports_next_expiry_and_emits(room: Driver) -> None:
    agent = room.join()
    seen: list[str] = []
    # The due times come in order: presence (present at once, away after 90 s), then
    # the session's expiry; each sweep at its due time emits what was due.
    events, due = room.engine.sweep()
    for _ in range(4):
        seen += [e.type for e in events if e.participant() == agent["participant_id"]]
        if "session.expired" in seen:
            break
        assert due is not None
        room.clock.now = due
        events, due = room.engine.sweep()
    assert seen == ["participant.present", "participant.away", "session.expired"]


def test_leave_ends_sessions_and_releases_leases(room: Driver) -> None:
    agent = room.join()
    bearer = agent["session_id"]
    lease = room.call("workspace.checkout", bearer, region="Plan/Goals")
    left = room.call("workspace.leave", bearer)
    assert left == {"participant_id": agent["participant_id"], "left": True}
    assert room.error("workspace.status", bearer).code == "unauthorized"
    assert room.call("workspace.leases", room.host)["leases"] == []
    history = room.call("workspace.history", room.host, limit=10)["events"]
    released = [e for e in history if e["type"] == "lease.released"]
    assert released[0]["payload"]["lease_id"] == lease["lease_id"]
    assert released[0]["payload"]["reason"] == "left"


def test_admin_revokes_sessions(room: Driver) -> None:
    agent = room.join()
    assert room.error("session.revoke", agent["session_id"],
                      participant_id=agent["participant_id"]).code == "permission_denied"
    room.call("session.revoke", room.host, participant_id=agent["participant_id"])
    assert room.error("workspace.status", agent["session_id"]).code == "unauthorized"


def test_unknown_and_missing_bearer(room: Driver) -> None:
    assert room.error("workspace.status", None).code == "unauthorized"
    assert room.error("workspace.status", "ses_forged").code == "unauthorized"


def test_bad_params_name_the_field(room: Driver) -> None:
    err = room.error("session.join", None, invite="x", name=5)
    assert err.code == "invalid_request" and err.details["field"] == "name"
    err = room.error("workspace.read", room.host, region="Plan", bogus=1)
    assert err.details["field"] == "bogus"
    err = room.error("workspace.proposals", room.host, limit=0)
    assert err.code == "invalid_request" and err.details["field"] == "limit"
    err = room.error("workspace.proposals", room.host, limit=201)
    assert err.code == "invalid_request"


def test_participants_show_presence(room: Driver) -> None:
    agent = room.join("scout")
    people = room.call("workspace.participants", room.host)["participants"]
    me = next(p for p in people if p["participant_id"] == agent["participant_id"])
    assert me["present"] is True and me["name"] == "scout"
    room.clock.advance(seconds=91)
    people = room.call("workspace.participants", room.host)["participants"]
    me = next(p for p in people if p["participant_id"] == agent["participant_id"])
    assert me["present"] is False and me["last_seen"] is not None


def test_invitation_label_is_bounded(room: Driver) -> None:
    err = room.error("workspace.invite", room.host, label="x" * 65)
    assert err.code == "invalid_request" and err.details["field"] == "label"


def test_host_sessions_do_not_count_against_the_guest_limit(room: Driver) -> None:
    for _ in range(70):  # e.g. many room starts in a day, each minting one
        sessions.mint_host_session(room.engine)
    assert room.join("guest")["session_id"]
    for i in range(63):  # 64 guests in all
        room.join(f"g{i}")
    err = room.error("session.join", None, invite=room.invite()["invitation"], name="one too many")
    assert err.code == "limit_exceeded"


def test_ending_the_host_session(room: Driver) -> None:
    bearer = sessions.mint_host_session(room.engine)
    sessions.end_host_session(room.engine, bearer)
    assert room.error("workspace.status", bearer).code == "unauthorized"
    assert room.call("workspace.status", room.host)["version"] >= 1  # others unaffected
