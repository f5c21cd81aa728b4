"""Item 6 of issue 24: handoff attachments must not fill the store for good.

The attack: a default agent uploaded 85 x 768 KiB to a handoff, cancelled it and
topped the store up on the cancelled handoff; other agents' attachments were
evicted and every upload, the host's included, answered 429, also after a
restart. Now (real `ce serve`, and a real room with an injected clock for the
times): an ended handoff takes no attachments, a handoff's attachments go an
hour after it ended (24 h at most while it stays open), one participant holds
at most 8 MiB, and `attachment.delete` removes one.
"""

from __future__ import annotations

import base64
from pathlib import Path

import trio

from commonroom.protocol.timefmt import ManualClock
from tests.e2e.conftest import Room
from tests.service.conftest import LiveRoom, start_room

BIG = 768 * 1024


def _upload(room: Room, bearer: str, name: str, handoff_id: str | None = None,
            size: int = BIG) -> tuple[int, dict[str, object]]:
    body: dict[str, object] = {"file_name": name, "mime_type": "text/plain",
                               "data_base64": base64.b64encode(b"a" * size).decode()}
    if handoff_id is not None:
        body["handoff_id"] = handoff_id
    return room.call("POST", "/workspace/attachment", bearer, body)


def test_one_agent_cannot_fill_the_store_through_a_handoff(served: Room) -> None:
    room = served
    bystander = room.join("bystander")["session_id"]
    status, kept = _upload(room, bystander, "keep.txt", size=1000)
    assert status == 200, kept
    attacker = room.join("filler")["session_id"]
    accomplice = room.join("accomplice")
    handoff = room.ok("POST", "/workspace/handoff", attacker, {
        "to_participant_id": accomplice["participant_id"], "summary": "hold these"})
    answers = [_upload(room, attacker, f"junk{n}.txt", handoff["handoff_id"]) for n in range(12)]
    accepted = [status for status, _ in answers if status == 200]
    assert len(accepted) == 10  # 10 x 768 KiB fit 8 MiB; the 11th does not
    status, refused = answers[10]
    assert status == 429 and refused["error"] == "limit_exceeded", refused
    assert refused["details"]["scope"] == "attachment_quota"
    room.ok("POST", "/workspace/handoff/cancel", attacker, {"handoff_id": handoff["handoff_id"]})
    status, answer = _upload(room, attacker, "more.txt", handoff["handoff_id"], size=10)
    assert status == 409 and answer["error"] == "handoff_conflict", answer
    # Nobody else lost anything or is locked out: the bystander's file is there, the host uploads.
    assert room.ok("GET", f"/workspace/attachment?attachment_id={kept['attachment_id']}",
                   bystander)["size"] == 1000
    assert _upload(room, room.host_session, "host.txt")[0] == 200
    assert _upload(room, bystander, "again.txt")[0] == 200


def test_attachment_delete_is_the_uploaders_or_the_hosts(served: Room) -> None:
    room = served
    owner = room.join("owner")["session_id"]
    other = room.join("other")["session_id"]
    ids = [str(_upload(room, owner, f"f{n}.txt", size=10)[1]["attachment_id"]) for n in range(2)]
    status, answer = room.call("POST", "/workspace/attachment/delete", other, {"attachment_id": ids[0]})
    assert status == 403 and answer["error"] == "permission_denied", answer
    assert room.ok("POST", "/workspace/attachment/delete", owner, {"attachment_id": ids[0]}) == {
        "attachment_id": ids[0], "deleted": True}
    assert room.ok("POST", "/workspace/attachment/delete", room.host_session,
                   {"attachment_id": ids[1]})["deleted"] is True
    for attachment_id in ids:
        status, answer = room.call("GET", f"/workspace/attachment?attachment_id={attachment_id}", owner)
        assert status == 404 and answer["error"] == "attachment_not_found"
    removed = [e["payload"] for e in room.ok("GET", "/workspace/history?limit=200", room.host_session)["events"]
               if e["type"] == "attachment.removed"]
    assert {(p["attachment_id"], p["reason"]) for p in removed} == {(i, "deleted") for i in ids}


async def _live_upload(live: LiveRoom, bearer: str, handoff_id: str | None) -> str:
    body: dict[str, object] = {"file_name": "f.txt", "mime_type": "text/plain",
                               "data_base64": base64.b64encode(b"hello").decode()}
    if handoff_id is not None:
        body["handoff_id"] = handoff_id
    answer = await live.call("POST", "/workspace/attachment", bearer, body)
    assert answer.status == 200, answer.body
    return str(answer.json()["attachment_id"])


async def _exists(live: LiveRoom, bearer: str, attachment_id: str) -> bool:
    answer = await live.call("GET", f"/workspace/attachment?attachment_id={attachment_id}", bearer)
    assert answer.status in (200, 404), answer.body
    return answer.status == 200


async def test_a_handoffs_attachments_go_an_hour_after_it_ended_even_across_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "idea.md"
    path.write_text("# Plan\n\n## Goals\n\nship\n")
    clock = ManualClock()
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, path, clock=clock)
        a, b = await live.join("a"), await live.join("b")
        handoff = (await live.call("POST", "/workspace/handoff", a["session_id"], {
            "to_participant_id": b["participant_id"], "summary": "look"})).json()
        ended = await _live_upload(live, a["session_id"], handoff["handoff_id"])
        room_scoped = await _live_upload(live, a["session_id"], None)
        other = (await live.call("POST", "/workspace/handoff", a["session_id"], {
            "to_participant_id": b["participant_id"], "summary": "keep open"})).json()
        open_one = await _live_upload(live, a["session_id"], other["handoff_id"])
        assert (await live.call("POST", "/workspace/handoff/cancel", a["session_id"],
                                {"handoff_id": handoff["handoff_id"]})).status == 200
        clock.advance(minutes=59)
        assert await _exists(live, a["session_id"], ended)
        live.stop.set()
    # A restart does not keep them: the times are in the sidecar.
    clock.advance(minutes=2)
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, path, clock=clock)
        assert not await _exists(live, live.host_session, ended)
        assert await _exists(live, live.host_session, room_scoped)
        assert await _exists(live, live.host_session, open_one)
        # An open handoff's attachments last 24 h at most.
        clock.advance(hours=23)  # 24 h and a minute after the upload; the host session lives on
        assert not await _exists(live, live.host_session, open_one)
        assert await _exists(live, live.host_session, room_scoped)
        history = (await live.call("GET", "/workspace/history?limit=200", live.host_session)).json()
        reasons = {e["payload"]["attachment_id"]: e["payload"]["reason"]
                   for e in history["events"] if e["type"] == "attachment.removed"}
        assert reasons == {ended: "handoff_ended", open_one: "expired"}
        live.stop.set()


