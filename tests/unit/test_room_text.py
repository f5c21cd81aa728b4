"""Room text, the loop guard, advertised tokens, attachments, surfaces, addressing, presence
and the human-editing hold, on the engine (docs/spec/PROTOCOL.md 10, 10.1)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from commonroom.engine import addressing
from commonroom.engine.presence import Presence
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from tests.conftest import Driver
from tests.editing import let_settle

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 40
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 40


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def events_of(room: Driver, kind: str) -> list[dict[str, Any]]:
    history = room.call("workspace.history", room.host, limit=200)["events"]
    return [e for e in reversed(history) if e["type"] == kind]


# -- messages -----------------------------------------------------------------------


def test_messages_page_in_seq_order(room: Driver) -> None:
    a, b = room.join("a"), room.join("b")
    sent = [room.call("workspace.message", a["session_id"], text=f"m{i}") for i in range(5)]
    assert [m["seq"] for m in sent] == [1, 2, 3, 4, 5]
    assert set(sent[0]) == {"message_id", "seq", "participant_id", "to", "handoff_id", "text",
                            "created_at"}
    page = room.call("workspace.messages", b["session_id"], after=2, limit=2)
    assert [m["text"] for m in page["messages"]] == ["m2", "m3"]
    assert page["latest_seq"] == 5
    assert room.call("workspace.messages", b["session_id"], after=5)["messages"] == []
    assert room.error("workspace.messages", b["session_id"], limit=201).code == "invalid_request"


def test_message_limits_count_characters_not_bytes(room: Driver) -> None:
    a = room.join("a")["session_id"]
    assert room.call("workspace.message", a, text="é" * 4096)["text"] == "é" * 4096
    err = room.error("workspace.message", a, text="x" * 4097)
    assert err.code == "invalid_request" and err.details["field"] == "text"
    assert room.error("workspace.message", a, text="  ").code == "invalid_request"
    reader = room.join("r", ["read"])["session_id"]
    assert room.error("workspace.message", reader, text="hi").code == "permission_denied"


def test_to_marks_an_addressed_turn_and_at_names_never_do(room: Driver) -> None:
    a, b = room.join("alice"), room.join("bob")
    plain = room.call("workspace.message", a["session_id"], text="@bob please look")
    assert plain["to"] == []
    turn = room.call("workspace.message", a["session_id"], text="look", to=[b["participant_id"]])
    assert turn["to"] == [b["participant_id"]]
    sent = [ev.from_dict(e) for e in events_of(room, "message.sent")]
    assert [addressing.addressed(e, b["participant_id"]) for e in sent] == [False, True]
    assert not any(addressing.addressed(e, a["participant_id"]) for e in sent)
    for bad in (["pt_nobody"], [a["participant_id"]]):
        err = room.error("workspace.message", a["session_id"], text="x", to=bad)
        assert err.code == "invalid_request" and err.details["field"] == "to"


def test_threads(room: Driver) -> None:
    a, b, c = room.join("a"), room.join("b"), room.join("c")
    handoff = room.call("handoff.request", a["session_id"], to_participant_id=b["participant_id"],
                        summary="x")
    hid = handoff["handoff_id"]
    room.call("workspace.message", a["session_id"], text="in thread", handoff_id=hid)
    room.call("workspace.message", b["session_id"], text="reply", handoff_id=hid)
    room.call("workspace.message", room.host, text="host too", handoff_id=hid)
    room.call("workspace.message", c["session_id"], text="outside")
    err = room.error("workspace.message", c["session_id"], text="me too", handoff_id=hid)
    assert err.code == "permission_denied"
    assert room.error("workspace.message", a["session_id"], text="x",
                      handoff_id="ho_nope").code == "handoff_not_found"
    thread = room.call("workspace.messages", c["session_id"], handoff_id=hid)["messages"]
    assert [m["text"] for m in thread] == ["in thread", "reply", "host too"]
    everything = room.call("workspace.messages", c["session_id"])["messages"]
    assert len(everything) == 4  # thread messages are visible to every reader
    assert room.error("workspace.messages", c["session_id"], handoff_id="ho_x").code == \
        "handoff_not_found"


def test_the_newest_messages_are_kept(room: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    assert limits.MESSAGES_KEPT == 5000
    monkeypatch.setattr(limits, "MESSAGES_KEPT", 3)
    a = room.join("a")["session_id"]
    for i in range(5):
        room.call("workspace.message", a, text=f"m{i}")
    kept = room.call("workspace.messages", a)["messages"]
    assert [(m["seq"], m["text"]) for m in kept] == [(3, "m2"), (4, "m3"), (5, "m4")]
    assert room.call("workspace.message", a, text="next")["seq"] == 6  # seq never repeats


# -- the loop guard -------------------------------------------------------------------


def test_loop_guard_per_pair(room: Driver) -> None:
    a, b, c = room.join("a"), room.join("b"), room.join("c")
    sa, pb, pc = a["session_id"], b["participant_id"], c["participant_id"]
    for i in range(10):
        room.call("workspace.message", sa, text=f"turn {i}", to=[pb])
        room.clock.advance(seconds=1)
    for i in range(10):  # handoff requests count together with addressed messages
        room.call("handoff.request", sa, to_participant_id=pb, summary=f"h{i}")
        room.clock.advance(seconds=1)
    messages_before = room.call("workspace.messages", sa)["latest_seq"]
    err = room.error("workspace.message", sa, text="21st", to=[pb])
    assert err.code == "limit_exceeded" and err.http_status == 429
    # The oldest send in the window was at t=0; now is t=20 s: it leaves the window at 300 s.
    assert err.to_wire()["retry_after_seconds"] == 280
    assert err.details["target_participant_id"] == pb
    assert room.call("workspace.messages", sa)["latest_seq"] == messages_before  # nothing stored
    tripped = events_of(room, "guard.tripped")
    assert [e["payload"] for e in tripped] == [{
        "participant_id": a["participant_id"], "target_participant_id": pb, "kind": "message",
        "retry_after_seconds": 280}]
    # Refused again while tripped: no second event; a handoff is refused too.
    assert room.error("handoff.request", sa, to_participant_id=pb, summary="again").code == \
        "limit_exceeded"
    assert len(events_of(room, "guard.tripped")) == 1
    assert len(room.call("workspace.handoffs", room.host)["handoffs"]) == 10
    # Other targets and unaddressed text are unaffected; nor is the other direction.
    room.call("workspace.message", sa, text="to c", to=[pc])
    room.call("workspace.message", sa, text="to everyone")
    room.call("workspace.message", b["session_id"], text="back", to=[a["participant_id"]])
    # A message to b and c together is refused whole.
    assert room.error("workspace.message", sa, text="both", to=[pc, pb]).code == "limit_exceeded"
    # Once the oldest sends leave the window, the pair may talk again.
    room.clock.advance(seconds=281)
    room.call("workspace.message", sa, text="later", to=[pb])


# -- advertised tokens ------------------------------------------------------------------


def test_advertised_tokens_are_hints_never_authority(room: Driver) -> None:
    a = room.join("a")
    sa = a["session_id"]
    me = room.call("workspace.advertise", sa, capabilities=["approve", "admin", "python"])
    assert me["advertised"] == ["approve", "admin", "python"]
    listed = {p["participant_id"]: p for p in room.call("workspace.participants", sa)["participants"]}
    assert listed[a["participant_id"]]["advertised"] == ["approve", "admin", "python"]
    assert listed[a["participant_id"]]["capabilities"] == list(
        room.call("session.join", None, invite=room.invite()["invitation"], name="x")["capabilities"])
    proposal = room.call("workspace.propose", sa, region="Goals", base_version=1, summary="s",
                         content="## Goals\n\nnew\n\n")
    err = room.error("workspace.review", sa, proposal_id=proposal["proposal_id"],
            revision=proposal["revision"], decision="approve")
    assert err.code == "permission_denied"
    assert room.error("workspace.commit", sa, base_version=1, summary="raw", content="x").code == \
        "permission_denied"
    assert room.call("workspace.advertise", sa, capabilities=["t"] * 40)["advertised"] == ["t"]
    assert room.call("workspace.advertise", sa, capabilities=[f"t{i}" for i in range(32)])
    for bad in ([f"t{i}" for i in range(33)], ["x" * 65], [""]):
        err = room.error("workspace.advertise", sa, capabilities=bad)
        assert err.code == "invalid_request" and err.details["field"] == "capabilities"
    assert room.call("workspace.advertise", sa, capabilities=["x" * 64])["advertised"] == ["x" * 64]


# -- attachments -------------------------------------------------------------------------


def test_attachment_types_are_sniffed(room: Driver) -> None:
    sa = room.join("a")["session_id"]

    def add(data: bytes, mime: str, name: str = "f") -> Any:
        return room.call("attachment.add", sa, file_name=name, mime_type=mime, data_base64=b64(data))

    def refused(data: bytes, mime: str) -> str:
        err = room.error("attachment.add", sa, file_name="f", mime_type=mime, data_base64=b64(data))
        assert err.code == "invalid_request", err
        return str(err.details.get("field"))

    png = add(PNG, "text/plain", "picture.txt")
    assert png["mime_type"] == "image/png" and png["file_name"] == "picture.txt"
    assert add(JPEG, "image/png")["mime_type"] == "image/jpeg"
    assert add(WEBP, "application/octet-stream")["mime_type"] == "image/webp"
    assert add(b"# Notes\n", "text/markdown")["mime_type"] == "text/markdown"
    assert add(b"a,b\n1,2\n", "text/csv; charset=utf-8")["mime_type"] == "text/csv"
    assert add(b'{"a": 1}', "application/json")["mime_type"] == "application/json"
    assert add(b"a: 1\n", "text/yaml")["mime_type"] == "application/yaml"
    assert refused(b"just text", "image/png") == "mime_type"
    assert refused(b"\x00\x01\x02binary", "text/plain") == "mime_type"
    assert refused(b"\xff\xfe not utf-8", "text/plain") == "mime_type"
    assert refused(b"%PDF-1.7", "application/pdf") == "mime_type"
    assert refused(b"{not json", "application/json") == "data_base64"
    err = room.error("attachment.add", sa, file_name="f", mime_type="text/plain", data_base64="@@@")
    assert err.code == "invalid_request" and err.details["field"] == "data_base64"
    for name in ("", "a/b", "x" * 256):
        assert room.error("attachment.add", sa, file_name=name, mime_type="text/plain",
                          data_base64=b64(b"x")).details["field"] == "file_name"
    got = room.call("attachment.get", sa, attachment_id=png["attachment_id"])
    assert base64.b64decode(got["data_base64"]) == PNG and got["size"] == len(PNG)
    assert got["sha256"] == __import__("hashlib").sha256(PNG).hexdigest()
    added = events_of(room, "attachment.added")
    assert added[0]["payload"]["mime_type"] == "image/png" and added[0]["payload"]["size"] == len(PNG)


def test_attachment_size(room: Driver) -> None:
    sa = room.join("a")["session_id"]
    limit = limits.ATTACHMENT_MAX_BYTES
    assert limit == 786_432
    full = room.call("attachment.add", sa, file_name="big.txt", mime_type="text/plain",
                     data_base64=b64(b"a" * limit))
    assert full["size"] == limit
    err = room.error("attachment.add", sa, file_name="big.txt", mime_type="text/plain",
                     data_base64=b64(b"a" * (limit + 1)))
    assert err.code == "limit_exceeded" and err.http_status == 413


def test_handoff_attachments_are_for_its_two_participants_and_the_host(room: Driver) -> None:
    a, b, c = room.join("a"), room.join("b"), room.join("c")
    handoff = room.call("handoff.request", a["session_id"], to_participant_id=b["participant_id"],
                        summary="x")
    hid = handoff["handoff_id"]
    att = room.call("attachment.add", b["session_id"], file_name="n.txt", mime_type="text/plain",
                    data_base64=b64(b"notes"), handoff_id=hid)
    assert att["handoff_id"] == hid
    for bearer in (a["session_id"], b["session_id"], room.host):
        assert room.call("attachment.get", bearer, attachment_id=att["attachment_id"])["size"] == 5
    assert room.error("attachment.get", c["session_id"],
                      attachment_id=att["attachment_id"]).code == "permission_denied"
    assert room.error("attachment.add", c["session_id"], file_name="n", mime_type="text/plain",
                      data_base64=b64(b"x"), handoff_id=hid).code == "permission_denied"
    no_handoff = room.join("m", ["read", "message"])["session_id"]
    assert room.error("attachment.add", no_handoff, file_name="n", mime_type="text/plain",
                      data_base64=b64(b"x"), handoff_id=hid).code == "permission_denied"
    assert room.error("attachment.get", c["session_id"], attachment_id="att_x").code == \
        "attachment_not_found"
    assert room.error("attachment.add", a["session_id"], file_name="n", mime_type="text/plain",
                      data_base64=b64(b"x"), handoff_id="ho_x").code == "handoff_not_found"


def test_attachment_store_bound_removes_oldest_room_scoped(
    room: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "ATTACHMENTS_TOTAL_BYTES", 30)
    monkeypatch.setattr(limits, "ATTACHMENT_HOST_RESERVED_BYTES", 0)  # the host's share aside
    a, b = room.join("a"), room.join("b")
    hid = room.call("handoff.request", a["session_id"], to_participant_id=b["participant_id"],
                    summary="x")["handoff_id"]

    def add(n: int, handoff_id: str | None = None) -> str:
        return str(room.call("attachment.add", a["session_id"], file_name="f", mime_type="text/plain",
                             data_base64=b64(b"x" * n), handoff_id=handoff_id)["attachment_id"])

    scoped = add(10, hid)
    first, second = add(10), add(10)
    third = add(5)  # 35 > 30: the oldest room-scoped one goes
    removed = events_of(room, "attachment.removed")
    assert [e["payload"] for e in removed] == [{"attachment_id": first, "reason": "room_bound"}]
    assert room.error("attachment.get", a["session_id"], attachment_id=first).code == \
        "attachment_not_found"
    for kept in (scoped, second, third):
        room.call("attachment.get", a["session_id"], attachment_id=kept)
    add(20, hid)  # needs second and third gone
    assert [e["payload"]["attachment_id"] for e in events_of(room, "attachment.removed")] == [
        first, second, third]
    err = room.error("attachment.add", a["session_id"], file_name="f", mime_type="text/plain",
                     data_base64=b64(b"x"))
    assert err.code == "limit_exceeded"  # handoff attachments alone fill the bound


# -- surfaces ----------------------------------------------------------------------------


def test_surfaces(room: Driver) -> None:
    a, b = room.join("a"), room.join("b")
    sa, sb = a["session_id"], b["session_id"]
    none = room.call("surface.read", sb, participant_id=a["participant_id"])
    assert none["published"] is False and none["data_base64"] is None
    first = room.call("surface.publish", sa, data_base64=b64(PNG), mime_type="image/jpeg")
    assert first["mime_type"] == "image/png"
    room.call("surface.publish", sa, data_base64=b64(JPEG))  # replaces, no history
    seen = room.call("surface.read", sb, participant_id=a["participant_id"])
    assert seen["published"] and seen["mime_type"] == "image/jpeg"
    assert base64.b64decode(seen["data_base64"]) == JPEG
    assert room.call("surface.read", sa)["mime_type"] == "image/jpeg"  # default: your own
    assert room.error("surface.publish", sa, data_base64=b64(b"text")).code == "invalid_request"
    big = PNG + b"\x00" * limits.SURFACE_MAX_BYTES
    assert room.error("surface.publish", sa, data_base64=b64(big)).http_status == 413
    assert room.error("surface.read", sa, participant_id="pt_x").code == "invalid_request"
    assert room.call("surface.clear", sa) == {"participant_id": a["participant_id"], "cleared": True}
    assert room.call("surface.clear", sa)["cleared"] is False
    room.call("surface.publish", sb, data_base64=b64(WEBP))
    room.call("workspace.leave", sb)
    assert room.call("surface.read", sa, participant_id=b["participant_id"])["published"] is False
    kinds = [e["type"] for e in room.call("workspace.history", room.host, limit=200)["events"]
             if e["type"].startswith("surface.")]
    assert list(reversed(kinds)) == ["surface.published", "surface.published", "surface.cleared",
                                     "surface.published", "surface.cleared"]


# -- addressing (pure) -------------------------------------------------------------------


def _event(payload: ev.Payload) -> ev.Event:
    return ev.make(1, "2026-11-30T12:00:00.000000+00:00", payload)


def test_addressed_rule() -> None:
    msg = _event(ev.MessageSent("msg_1", "pt_a", ["pt_b"], "hi", None))
    assert addressing.addressed(msg, "pt_b") and not addressing.addressed(msg, "pt_a")
    assert not addressing.addressed(msg, "pt_c")
    req = _event(ev.HandoffRequested("ho_1", "pt_a", "pt_b", "s"))
    assert addressing.addressed(req, "pt_b") and not addressing.addressed(req, "pt_a")
    for kind in (ev.HandoffAccepted, ev.HandoffDeclined, ev.HandoffCompleted, ev.HandoffFailed):
        move = _event(kind("ho_1", "pt_a", "pt_b", "s"))
        assert addressing.addressed(move, "pt_a") and not addressing.addressed(move, "pt_b")
    cancelled = _event(ev.HandoffCancelled("ho_1", "pt_a", "pt_b", "s"))
    assert not addressing.addressed(cancelled, "pt_a")
    lease = _event(ev.LeaseAcquired("ls_1", "pt_a", "Goals", "x"))
    assert not addressing.addressed(lease, "pt_a")
    marked = [e.addressed_copy() if addressing.addressed(e, "pt_b") else e for e in (msg, req, lease)]
    assert [e.addressed for e in marked] == [True, True, False]
    assert json.loads(marked[0].wire)["addressed"] is True
    assert "addressed" not in json.loads(marked[2].wire)


# -- presence ----------------------------------------------------------------------------


def test_presence_flips_on_the_sweep_with_an_injected_clock(room: Driver) -> None:
    a = room.join("a")
    pid = a["participant_id"]

    def sweep() -> list[tuple[str, str | None]]:
        events, _ = room.engine.sweep()
        # The host is touched too (it invited a); follow a alone.
        return [(e.type, e.participant()) for e in events
                if e.type.startswith("participant.") and e.participant() == pid]

    assert room.engine.presence.pending()
    assert sweep() == [("participant.present", pid)]
    assert not room.engine.presence.pending()
    room.clock.advance(seconds=60)
    room.call("workspace.status", a["session_id"])  # renews; reads never announce
    assert sweep() == []
    room.clock.advance(seconds=89)
    assert sweep() == []
    mine = {p["participant_id"]: p for p in room.call("workspace.participants", room.host)["participants"]}
    assert mine[pid]["present"] is True
    room.clock.advance(seconds=1)  # 90 s since the last request
    assert sweep() == [("participant.away", pid)]
    mine = {p["participant_id"]: p for p in room.call("workspace.participants", room.host)["participants"]}
    assert mine[pid]["present"] is False and mine[pid]["last_seen"] is not None
    room.call("workspace.status", a["session_id"])
    assert sweep() == [("participant.present", pid)]


def test_presence_window_edges() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 11, 30, tzinfo=UTC)
    presence = Presence()
    presence.touch("pt_a", now)
    assert presence.next_change(now) == now
    assert presence.transitions(now) == (["pt_a"], [])
    assert presence.next_change(now) == now + timedelta(seconds=90)
    assert presence.transitions(now + timedelta(seconds=89.9)) == ([], [])
    assert presence.transitions(now + timedelta(seconds=90)) == ([], ["pt_a"])
    assert presence.next_change(now + timedelta(seconds=90)) is None


# -- the human-editing hold ----------------------------------------------------------------


def _edit(room: Driver, old: str, new: str) -> None:
    path = room.engine.path
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))  # recorded once it settled (`let_settle`)


def test_an_external_edit_holds_the_innermost_regions_it_changed(room: Driver) -> None:
    a = room.join("a")["session_id"]
    mine = room.call("workspace.checkout", a, region="Goals")
    waiting = room.call("workspace.propose", a, region="Goals", base_version=1, summary="s",
                        content="## Goals\n\n- ship it twice\n\n")
    other = room.call("workspace.propose", a, region="Appendix", base_version=1, summary="s",
                      content="# Appendix\n\nmore.\n")
    b = room.join("b")["session_id"]
    approved = room.call("workspace.propose", b, region="Risks", base_version=1, summary="s",
                         content="## Risks\n\nSome.\n\n")
    room.call("workspace.review", room.host, proposal_id=approved["proposal_id"],
            revision=approved["revision"], decision="approve")
    _edit(room, "- ship it\n", "- ship it now\n")
    _edit(room, "Nothing yet.", "Plenty.")  # one external edit touching two sections
    let_settle(room.engine, room.clock)
    status = room.call("workspace.status", room.host)
    assert status["version"] == 2
    leases = room.call("workspace.leases", b)["leases"]
    holds = [lease for lease in leases if lease["reason"] == "human_editing"]
    assert sorted(h["region"] for h in holds) == ["Plan/Goals", "Plan/Risks"]
    assert {h["participant_id"] for h in holds} == {room.engine.host_participant_id}
    hold = {h["region"]: h for h in holds}
    # The agent's own lease stays; its pending proposal there is superseded; elsewhere untouched.
    assert any(lease["lease_id"] == mine["lease_id"] for lease in leases)
    states = {p["proposal_id"]: p["status"] for p in room.call("workspace.proposals", b)["proposals"]}
    assert states[waiting["proposal_id"]] == "superseded"
    assert states[other["proposal_id"]] == "pending"
    # checkout / propose / commit on a held region -> lease_conflict naming the hold.
    err = room.error("workspace.checkout", b, region="Risks")
    assert err.code == "lease_conflict" and err.to_wire()["lease_id"] == hold["Plan/Risks"]["lease_id"]
    assert err.details["reason"] == "human_editing"
    err = room.error("workspace.propose", b, region="Risks", base_version=2, summary="s",
                     content="## Risks\n\nx\n\n")
    assert err.code == "lease_conflict" and err.to_wire()["lease_id"] == hold["Plan/Risks"]["lease_id"]
    err = room.error("workspace.commit", b, proposal_id=approved["proposal_id"])
    assert err.code == "lease_conflict" and err.to_wire()["lease_id"] == hold["Plan/Risks"]["lease_id"]
    # The ancestor conflicts by the ancestor rule; an untouched top-level region is free.
    assert room.error("workspace.checkout", b, region="Plan").code == "lease_conflict"
    assert room.call("workspace.checkout", b, region="Appendix")["region"] == "Appendix"
    # Two minutes later the hold lapses.
    room.clock.advance(minutes=2)
    assert room.call("workspace.checkout", b, region="Risks")["reason"] is None
    expired = [e["payload"]["lease_id"] for e in events_of(room, "lease.expired")]
    assert hold["Plan/Risks"]["lease_id"] in expired


def test_edits_through_the_room_and_a_zero_hold_place_no_hold(room: Driver) -> None:
    a = room.join("a")["session_id"]
    p = room.call("workspace.propose", a, region="Goals", base_version=1, summary="s",
                  content="## Goals\n\n- ship\n\n")
    room.call("workspace.review", room.host, proposal_id=p["proposal_id"], revision=p["revision"], decision="approve")
    room.call("workspace.commit", a, proposal_id=p["proposal_id"])
    assert room.call("workspace.leases", a)["leases"] == []
    room.engine.human_hold_minutes = 0
    _edit(room, "Nothing yet.", "Plenty.")
    let_settle(room.engine, room.clock)
    assert room.call("workspace.status", a)["version"] == 3
    assert room.call("workspace.leases", a)["leases"] == []


def test_edited_regions_names_own_text_changes_only() -> None:
    from commonroom.engine.leases import edited_regions
    from commonroom.engine.regions import Outline

    before = Outline("pre\n# A\na\n## B\nb\n## C\nc\n# D\nd\n")
    assert edited_regions(before, Outline("pre\n# A\na\n## B\nbb\n## C\nc\n# D\nd\n")) == ["A/B"]
    assert edited_regions(before, Outline("pre\n# A\naa\n## B\nb\n## C\nc\n# D\nd\n")) == ["A"]
    assert edited_regions(before, Outline("PRE\n# A\na\n## B\nb\n## C\nc\n# D\nd\n")) == []
    assert edited_regions(before, Outline("pre\n# A\na\n## B\nb\n## C\nc\n## E\ne\n# D\nd\n")) == [
        "A/E"]


def test_an_edit_made_while_no_room_ran_holds_nothing(doc_path: Any, clock: Any) -> None:
    from commonroom.engine.dispatch import open_engine

    engine = open_engine(doc_path, clock=clock)
    engine.close()
    doc_path.write_text(doc_path.read_text().replace("Nothing yet.", "Edited offline."))
    engine = open_engine(doc_path, clock=clock)
    try:
        let_settle(engine, clock)
        assert engine.current_version == 2  # the file won
        rows = engine.conn.execute("SELECT count(*) FROM leases").fetchone()[0]
        assert rows == 0
        assert engine.human_hold_minutes == limits.HUMAN_HOLD_MINUTES  # live edits hold again
    finally:
        engine.close()


def test_retrying_a_request_id_is_not_another_send(room: Driver) -> None:
    a, b = room.join("a"), room.join("b")
    first = room.call("handoff.request", a["session_id"], to_participant_id=b["participant_id"],
                      summary="take it", request_id="once")
    for _ in range(limits.GUARD_MAX_SENDS + 5):
        again = room.call("handoff.request", a["session_id"], to_participant_id=b["participant_id"],
                          summary="take it", request_id="once")
        assert again["handoff_id"] == first["handoff_id"]
    assert events_of(room, "guard.tripped") == []
