"""Handoffs, tasks, room text, attachments, surfaces, the loop guard, presence and the
human-editing hold through a real room: real hypercorn on 127.0.0.1, real file edits."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import trio
import trio.testing

from commonroom.engine import sessions
from commonroom.engine.dispatch import open_engine
from commonroom.protocol import limits
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import ManualClock, parse_ts
from commonroom.room.core import Room
from tests.editing import save_like_an_editor
from tests.service.conftest import LiveRoom, start_room
from tests.service.test_room import mock_wall_clock

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _three(live: LiveRoom) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return await live.join("alice"), await live.join("bob"), await live.join("carol")


async def test_a_handoff_over_http(live: LiveRoom) -> None:
    a, b, c = await _three(live)
    sa, sb, sc = a["session_id"], b["session_id"], c["session_id"]
    body = {"to_participant_id": b["participant_id"], "summary": "take Risks", "region": "Risks",
            "request_id": "r-1"}
    first = await live.call("POST", "/workspace/handoff", sa, body)
    assert first.status == 200
    handoff = first.json()
    assert handoff["status"] == "requested" and handoff["region"] == "Plan/Risks"
    again = await live.call("POST", "/workspace/handoff", sa, body)
    assert again.json() == handoff
    clash = await live.call("POST", "/workspace/handoff", sa, {**body, "summary": "other"})
    assert clash.status == 409 and clash.json()["error"] == "handoff_conflict"
    hid = handoff["handoff_id"]
    third = await live.call("POST", "/workspace/handoff/respond", sc,
                            {"handoff_id": hid, "decision": "accept"})
    assert third.status == 403 and third.json()["error"] == "permission_denied"
    unknown = await live.call("POST", "/workspace/handoff/respond", sb,
                              {"handoff_id": "ho_none", "decision": "accept"})
    assert unknown.status == 404 and unknown.json()["error"] == "handoff_not_found"
    early = await live.call("POST", "/workspace/handoff/result", sb,
                            {"handoff_id": hid, "status": "completed", "summary": "x"})
    assert early.status == 409 and early.json()["error"] == "handoff_conflict"
    accepted = (await live.call("POST", "/workspace/handoff/respond", sb,
                                {"handoff_id": hid, "decision": "accept"})).json()
    task_id = accepted["task_id"]
    update = await live.call("POST", "/workspace/task/update", sb,
                             {"task_id": task_id, "status": "input_required",
                              "status_message": "which risks?"})
    assert update.json()["status"] == "input_required"
    got = (await live.call("GET", f"/workspace/task?task_id={task_id}", sa)).json()
    assert got["status"] == "input_required" and got["status_message"] == "which risks?"
    done = (await live.call("POST", "/workspace/handoff/result", sb,
                            {"handoff_id": hid, "status": "completed", "summary": "three"})).json()
    assert done["status"] == "completed"
    got = (await live.call("GET", f"/workspace/task?task_id={task_id}", sa)).json()
    assert got["status"] == "completed" and got["result"] == {"summary": "three", "details": None}
    late = await live.call("POST", "/workspace/handoff/cancel", sa, {"handoff_id": hid})
    assert late.status == 409 and late.json()["error"] == "handoff_conflict"
    ack = await live.call("POST", "/workspace/task/cancel", sa, {"task_id": task_id})
    assert ack.status == 200 and ack.json()["status"] == "completed"
    one = (await live.call("GET", f"/workspace/handoff?handoff_id={hid}", sc)).json()
    assert one["status"] == "completed" and one["task_id"] == task_id
    listed = (await live.call("GET", "/workspace/handoffs?status=completed&limit=5", sc)).json()
    assert [h["handoff_id"] for h in listed["handoffs"]] == [hid]
    bad = await live.call("GET", "/workspace/handoffs?status=nope", sc)
    assert bad.status == 400 and bad.json()["details"]["field"] == "status"
    room = (await live.call("GET", "/workspace/room", sc)).json()
    assert room["handoffs"] == []


async def test_wait_marks_addressed_events_for_the_caller_only(live: LiveRoom) -> None:
    a, b, c = await _three(live)
    sa, sb, sc = a["session_id"], b["session_id"], c["session_id"]
    cursor = (await live.call("GET", "/workspace/room", sa)).json()["latest_event_id"]
    await live.call("POST", "/workspace/message", sa, {"text": "@bob hello everyone"})
    await live.call("POST", "/workspace/message", sb, {"text": "your turn", "to": [a["participant_id"]]})

    async def marks(bearer: str, since: int, prefix: str) -> list[tuple[str, bool]]:
        got = (await live.call("GET", f"/workspace/wait?cursor={since}", bearer)).json()["events"]
        return [(e["type"], e.get("addressed", False)) for e in got if e["type"].startswith(prefix)]

    # Alice: addressed by bob's turn, not by her own text. Bob: `@bob` addressed nobody,
    # and his own turn is not addressed to him. Carol sees both, addressed to neither.
    assert await marks(sa, cursor, "message.") == [("message.sent", False), ("message.sent", True)]
    assert await marks(sb, cursor, "message.") == [("message.sent", False), ("message.sent", False)]
    assert await marks(sc, cursor, "message.") == [("message.sent", False), ("message.sent", False)]
    # A handoff request is addressed to its target, its acceptance to its requester.
    cursor = (await live.call("GET", "/workspace/room", sa)).json()["latest_event_id"]
    handoff = (await live.call("POST", "/workspace/handoff", sa, {
        "to_participant_id": b["participant_id"], "summary": "review"})).json()
    await live.call("POST", "/workspace/handoff/respond", sb,
                    {"handoff_id": handoff["handoff_id"], "decision": "accept"})
    assert await marks(sb, cursor, "handoff.") == [("handoff.requested", True),
                                                   ("handoff.accepted", False)]
    assert await marks(sa, cursor, "handoff.") == [("handoff.requested", False),
                                                   ("handoff.accepted", True)]
    assert await marks(sc, cursor, "handoff.") == [("handoff.requested", False),
                                                   ("handoff.accepted", False)]


async def test_a_held_wait_is_not_answered_by_your_own_events(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    from commonroom.engine import addressing
    from commonroom.engine.ids import hash_secret
    from commonroom.protocol.records import to_wire
    from commonroom.room import streams

    engine = open_engine(doc_path, clock=mock_wall_clock(autojump_clock))  # type: ignore[arg-type]
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    room = Room(engine, watch_interval=10**7, max_sweep_sleep=10**7, inline_store=True)
    host = sessions.mint_host_session(engine)
    people = []
    for name in ("alice", "bob"):
        invite = await room.call("workspace.invite", host, {})
        people.append(await room.call("session.join", None, {"invite": invite["invitation"],
                                                             "name": name}))
    a, b = people
    cursor = room.hub.latest_event_id
    answers: list[dict[str, Any]] = []

    async def held() -> None:
        answer = await streams.wait_for_events(
            room, session_hash=hash_secret(a["session_id"]), participant_id=a["participant_id"],
            cursor=cursor, timeout_seconds=20, addressed=addressing.addressed)
        answers.append(to_wire(answer))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(held)
        await trio.sleep(1)  # the wait subscribed, read the ring, and holds
        assert room.hub.subscriber_count == 1 and answers == []
        await room.call("workspace.message", a["session_id"], {"text": "mine"})
        await room.call("workspace.checkout", a["session_id"], {"region": "Goals"})
        await trio.sleep(1)
        assert answers == []  # her own message and lease did not end the hold
        await room.call("workspace.message", b["session_id"], {"text": "yours",
                                                              "to": [a["participant_id"]]})
    (answer,) = answers
    got = [(e["type"], e.get("addressed", False)) for e in answer["events"]]
    assert got == [("message.sent", False), ("lease.acquired", False), ("message.sent", True)]
    assert autojump_clock.current_time() < 20
    engine.close()


async def test_messages_and_the_loop_guard_over_http(live: LiveRoom) -> None:
    a, b, _ = await _three(live)
    sa = a["session_id"]
    for i in range(limits.GUARD_MAX_SENDS):
        sent = await live.call("POST", "/workspace/message", sa,
                               {"text": f"ping {i}", "to": [b["participant_id"]]})
        assert sent.status == 200 and sent.json()["seq"] == i + 1
    refused = await live.call("POST", "/workspace/message", sa,
                              {"text": "ping 21", "to": [b["participant_id"]]})
    assert refused.status == 429
    wire = refused.json()
    assert wire["error"] == "limit_exceeded" and wire["retry_after_seconds"] >= 1
    assert refused.header("retry-after") == str(wire["retry_after_seconds"])
    page = (await live.call("GET", "/workspace/messages?after=18", sa)).json()
    assert [m["text"] for m in page["messages"]] == ["ping 18", "ping 19"]
    history = (await live.call("GET", "/workspace/history?limit=20", live.host_session)).json()
    assert [e["type"] for e in history["events"]].count("guard.tripped") == 1
    long = await live.call("POST", "/workspace/message", sa, {"text": "x" * 4097})
    assert long.status == 400 and long.json()["details"]["field"] == "text"
    unknown = await live.call("POST", "/workspace/message", sa, {"text": "x", "to": ["pt_nobody"]})
    assert unknown.status == 400 and unknown.json()["details"]["field"] == "to"
    thread = await live.call("POST", "/workspace/message", sa, {"text": "x", "handoff_id": "ho_x"})
    assert thread.status == 404 and thread.json()["error"] == "handoff_not_found"


async def test_attachments_over_http(live: LiveRoom) -> None:
    a, b, c = await _three(live)
    sa, sc = a["session_id"], c["session_id"]
    full = b"a" * limits.ATTACHMENT_MAX_BYTES
    body = {"file_name": "big.txt", "mime_type": "text/plain", "data_base64": b64(full)}
    assert len(str(body)) > 1024 * 1024  # past the other routes' 1 MiB body limit
    added = await live.call("POST", "/workspace/attachment", sa, body)
    assert added.status == 200, added.body[:200]
    assert added.json()["size"] == limits.ATTACHMENT_MAX_BYTES
    got = (await live.call("GET", f"/workspace/attachment?attachment_id={added.json()['attachment_id']}",
                           sc)).json()
    assert base64.b64decode(got["data_base64"]) == full
    over = await live.call("POST", "/workspace/attachment", sa,
                           {**body, "data_base64": b64(full + b"a")})
    assert over.status == 413 and over.json()["error"] == "limit_exceeded"
    huge = await live.raw("POST", "/workspace/attachment", raw_body=b"x" * (1536 * 1024 + 1),
                          headers={"Authorization": f"Bearer {sa}"})
    assert huge.status == 413 and huge.json()["error"] == "limit_exceeded"
    # Only this route is larger: a message body over 1 MiB is still refused before the app.
    message = await live.raw("POST", "/workspace/message", raw_body=b"x" * (1024 * 1024 + 1),
                             headers={"Authorization": f"Bearer {sa}"})
    assert message.status == 413
    png = (await live.call("POST", "/workspace/attachment", sa, {
        "file_name": "shot.txt", "mime_type": "text/plain", "data_base64": b64(PNG)})).json()
    assert png["mime_type"] == "image/png"
    fake = await live.call("POST", "/workspace/attachment", sa, {
        "file_name": "x.png", "mime_type": "image/png", "data_base64": b64(b"plain text")})
    assert fake.status == 400 and fake.json()["error"] == "invalid_request"
    handoff = (await live.call("POST", "/workspace/handoff", sa, {
        "to_participant_id": b["participant_id"], "summary": "look"})).json()
    private = (await live.call("POST", "/workspace/attachment", sa, {
        "file_name": "n.md", "mime_type": "text/markdown", "data_base64": b64(b"# n\n"),
        "handoff_id": handoff["handoff_id"]})).json()
    path = f"/workspace/attachment?attachment_id={private['attachment_id']}"
    assert (await live.call("GET", path, sc)).status == 403
    assert (await live.call("GET", path, b["session_id"])).status == 200
    assert (await live.call("GET", path, live.host_session)).status == 200
    missing = await live.call("GET", "/workspace/attachment?attachment_id=att_x", sc)
    assert missing.status == 404 and missing.json()["error"] == "attachment_not_found"


async def test_surfaces_and_advertised_tokens_over_http(live: LiveRoom) -> None:
    a, b, _ = await _three(live)
    sa, sb = a["session_id"], b["session_id"]
    published = await live.call("POST", "/workspace/surface", sa, {"data_base64": b64(PNG)})
    assert published.status == 200 and published.json()["mime_type"] == "image/png"
    read = (await live.call("GET", f"/workspace/surface?participant_id={a['participant_id']}", sb)).json()
    assert read["published"] and base64.b64decode(read["data_base64"]) == PNG
    cleared = await live.call("POST", "/workspace/surface/clear", sa, {})
    assert cleared.json()["cleared"] is True
    adv = await live.call("POST", "/workspace/capabilities", sa, {"capabilities": ["approve", "sql"]})
    assert adv.json()["advertised"] == ["approve", "sql"]
    people = (await live.call("GET", "/workspace/participants", sb)).json()["participants"]
    mine = next(p for p in people if p["participant_id"] == a["participant_id"])
    assert mine["advertised"] == ["approve", "sql"] and "approve" not in mine["capabilities"]
    status = (await live.call("GET", "/workspace/status", sa)).json()
    prop = (await live.call("POST", "/workspace/propose", sb, {
        "region": "Goals", "base_version": status["version"], "summary": "s",
        "content": "## Goals\n\nnew\n"})).json()
    review = await live.call("POST", "/workspace/proposal/review", sa,
                             {"proposal_id": prop["proposal_id"], "revision": prop["revision"], "decision": "approve"})
    assert review.status == 403 and review.json()["error"] == "permission_denied"
    too_many = await live.call("POST", "/workspace/capabilities", sa,
                               {"capabilities": [f"t{i}" for i in range(33)]})
    assert too_many.status == 400 and too_many.json()["details"]["field"] == "capabilities"


async def test_the_human_editing_hold_through_a_real_file_edit(doc: Path) -> None:
    clock = ManualClock()
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, clock=clock, human_hold_minutes=3)
        agent = await live.join("agent")
        bearer = agent["session_id"]
        lease = (await live.call("POST", "/workspace/checkout", bearer, {"region": "Goals"})).json()
        pending = (await live.call("POST", "/workspace/propose", bearer, {
            "region": "Goals", "base_version": 1, "summary": "s",
            "content": "## Goals\n\n- ship it twice\n\n"})).json()
        # The host types in their editor: a real write to the real file.
        save_like_an_editor(doc, doc.read_text().replace("Nothing yet.", "The person typing.")
                       .replace("- ship it\n", "- ship it today\n"))
        # It settles first (reads answer the last version meanwhile), then it is a version.
        status = (await live.call("GET", "/workspace/status", bearer)).json()
        assert (status["version"], status["file"]) == (1, "settling")
        clock.advance(seconds=0.25)
        refused = await live.call("POST", "/workspace/checkout", bearer, {"region": "Risks"})
        assert refused.status == 409
        wire = refused.json()
        assert wire["error"] == "lease_conflict" and wire["region"] == "Plan/Risks"
        leases = (await live.call("GET", "/workspace/leases", bearer)).json()["leases"]
        holds = {x["region"]: x for x in leases if x["reason"] == "human_editing"}
        assert set(holds) == {"Plan/Goals", "Plan/Risks"}
        host_id = next(p["participant_id"] for p in (await live.call(
            "GET", "/workspace/participants", bearer)).json()["participants"] if p["name"] == "host")
        assert {x["participant_id"] for x in holds.values()} == {host_id}
        assert wire["lease_id"] == holds["Plan/Risks"]["lease_id"]
        assert parse_ts(holds["Plan/Risks"]["expires_at"]) - clock.now == __import__(
            "datetime").timedelta(minutes=3)
        # The agent's lease on Goals stays; its pending proposal there is superseded.
        assert lease["lease_id"] in {x["lease_id"] for x in leases}
        proposal = (await live.call("GET", f"/workspace/proposal?proposal_id={pending['proposal_id']}",
                                    bearer)).json()
        assert proposal["status"] == "superseded"
        version = (await live.call("GET", "/workspace/status", bearer)).json()["version"]
        propose = await live.call("POST", "/workspace/propose", bearer, {
            "region": "Risks", "base_version": version, "summary": "s",
            "content": "## Risks\n\nMine.\n\n"})
        assert propose.status == 409 and propose.json()["lease_id"] == holds["Plan/Risks"]["lease_id"]
        free = await live.call("POST", "/workspace/checkout", bearer, {"region": "Appendix"})
        assert free.status == 200
        clock.advance(minutes=3)
        after = await live.call("POST", "/workspace/checkout", bearer, {"region": "Risks"})
        assert after.status == 200 and after.json()["reason"] is None
        live.stop.set()


async def test_presence_flips_on_the_rooms_sweeper(
    doc_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """participant.present when an agent arrives, participant.away 90 s after its last call,
    with nobody calling: the sweeper does it, on the injected clock."""
    engine = open_engine(doc_path, clock=mock_wall_clock(autojump_clock))  # type: ignore[arg-type]
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    room = Room(engine, watch_interval=10**7, max_sweep_sleep=10**7, inline_store=True)
    host = sessions.mint_host_session(engine)
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        sub = room.hub.subscribe()
        invite = await room.call("workspace.invite", host, {})
        joined = await room.call("session.join", None, {"invite": invite["invitation"], "name": "a"})
        pid = joined["participant_id"]

        pending: list[Any] = []

        async def next_about(kind: str) -> Any:
            while True:
                while pending:
                    event = pending.pop(0)
                    if event.type == kind and event.participant() == pid:
                        return event
                pending.extend(await sub.next_batch())

        with trio.fail_after(5):
            present = await next_about("participant.present")
        t_last = autojump_clock.current_time()
        with trio.fail_after(600):
            away = await next_about("participant.away")
        # Away 90 s after its last request, within a second, with nobody calling.
        waited = autojump_clock.current_time() - t_last
        assert 90 <= waited <= 91
        assert parse_ts(away.created_at) > parse_ts(present.created_at)
        await room.call("workspace.status", joined["session_id"], {})
        with trio.fail_after(5):
            await next_about("participant.present")
        nursery.cancel_scope.cancel()
    engine.close()


async def test_the_owner_api_takes_a_full_attachment_too(live: LiveRoom) -> None:
    port = live.ready.owner_port
    headers = {**await live.owner_login(), "Content-Type": "application/json"}
    full = {"file_name": "big.md", "mime_type": "text/markdown",
            "data_base64": b64(b"#" * limits.ATTACHMENT_MAX_BYTES)}
    added = await live.raw("POST", "/owner/api/workspace/attachment", port=port, body=full,
                           headers=headers)
    assert added.status == 200 and added.json()["size"] == limits.ATTACHMENT_MAX_BYTES
    other = await live.raw("POST", "/owner/api/workspace/message", port=port,
                           raw_body=b"x" * (1024 * 1024 + 1), headers=headers)
    assert other.status == 413
