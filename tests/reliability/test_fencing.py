"""Leases hold like fencing tokens (issue 14): an old holder cannot write past the new one.

Jepsen's lock checks: a lease can expire (or be released by an approver)
while its holder still acts. Once another participant has taken the region,
the old holder's propose and commit on it are `lease_conflict` naming the new
lease, and nothing of theirs reaches the file. In the race the old holder's
call and the new holder's checkout are in flight at once over real HTTP; the
room may order them either way, but the event log must show the order it
chose: a write of the old holder is accepted only before the new lease exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from commonroom.protocol.timefmt import ManualClock
from tests.reliability.abuse_support import (
    abuse_doc_fixture,  # noqa: F401  (the abuse_doc fixture)
    approved_proposal,
    events,
    ok,
    version_of,
)
from tests.service.conftest import LiveRoom, start_room

GOALS = "Plan/Goals"
ROUNDS = 12


async def take_away(live: LiveRoom, clock: ManualClock, lease_id: str, how: str) -> None:
    """End the old holder's lease the way `how` names, without telling the holder."""
    if how == "expired":
        clock.advance(minutes=2)  # the lease was for one minute
    else:
        await ok(live, "POST", "/workspace/release", live.host_session, {"lease_id": lease_id})


def assert_fenced(answer: Any, new_lease_id: str) -> None:
    assert answer.status == 409, answer.body
    wire = answer.json()
    assert wire["error"] == "lease_conflict", wire
    assert wire["lease_id"] == new_lease_id and wire["region"] == GOALS, wire


@pytest.mark.parametrize("how", ["expired", "released"])
async def test_a_holder_whose_lease_was_taken_can_no_longer_write(abuse_doc: Path, how: str) -> None:
    clock = ManualClock()
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, abuse_doc, clock=clock)
        old = (await live.join("old"))["session_id"]
        new = (await live.join("new"))["session_id"]
        lease = await ok(live, "POST", "/workspace/checkout", old, {"region": "Goals", "minutes": 1})
        proposal_id = await approved_proposal(live, old, "Goals", "## Goals\n\n- old holder\n\n")
        await take_away(live, clock, lease["lease_id"], how)
        taken = await ok(live, "POST", "/workspace/checkout", new, {"region": "Goals", "minutes": 30})
        before = abuse_doc.read_bytes()

        commit = await live.call("POST", "/workspace/commit", old, {"proposal_id": proposal_id})
        assert_fenced(commit, taken["lease_id"])
        propose = await live.call("POST", "/workspace/propose", old, {
            "region": "Goals", "base_version": await version_of(live), "summary": "s",
            "content": "## Goals\n\n- again\n\n"})
        assert_fenced(propose, taken["lease_id"])
        # A sub-region is covered too (a lease holds its descendants).
        checkout = await live.call("POST", "/workspace/checkout", old, {"region": "Goals"})
        assert_fenced(checkout, taken["lease_id"])
        # The old lease id is dead: it neither comes back to life nor ends the new one.
        renew = await live.call("POST", "/workspace/renew", old, {"lease_id": lease["lease_id"]})
        assert renew.status == 400 and renew.json()["error"] == "invalid_request", renew.body
        release = await live.call("POST", "/workspace/release", old, {"lease_id": lease["lease_id"]})
        assert release.status == 400 and release.json()["error"] == "invalid_request", release.body
        held = (await ok(live, "GET", "/workspace/leases", new))["leases"]
        assert [(x["lease_id"], x["participant_id"]) for x in held] == [
            (taken["lease_id"], taken["participant_id"])]

        assert abuse_doc.read_bytes() == before
        refused = await ok(live, "GET", f"/workspace/proposal?proposal_id={proposal_id}", old)
        assert refused["status"] == "approved"  # refused, not spent: it may commit once free
        await ok(live, "POST", "/workspace/release", new, {"lease_id": taken["lease_id"]})
        committed = await ok(live, "POST", "/workspace/commit", old, {"proposal_id": proposal_id})
        assert "- old holder" in abuse_doc.read_text() and committed["version"] == 2
        live.stop.set()


def event_id_of(log: list[dict[str, Any]], kind: str, **payload: Any) -> int | None:
    for event in log:
        if event["type"] == kind and all(event["payload"].get(k) == v for k, v in payload.items()):
            return int(event["event_id"])
    return None


async def send(live: LiveRoom, answers: dict[str, Any], name: str, bearer: str, path: str,
               body: Any) -> None:
    answers[name] = await live.call("POST", path, bearer, body)


@pytest.mark.parametrize("how", ["expired", "released"])
@pytest.mark.parametrize("write", ["commit", "propose"])
async def test_the_old_holders_write_races_the_new_checkout(abuse_doc: Path, how: str, write: str) -> None:
    clock = ManualClock()
    orders = {"old first": 0, "new first": 0}
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, abuse_doc, clock=clock, requests_per_minute=100_000)
        old = (await live.join("old"))["session_id"]
        new = (await live.join("new"))["session_id"]
        for round_number in range(ROUNDS):
            lease = await ok(live, "POST", "/workspace/checkout", old, {"region": "Goals", "minutes": 1})
            text = f"## Goals\n\n- old holder, round {round_number}\n\n"
            body: dict[str, Any]
            if write == "commit":
                proposal_id = await approved_proposal(live, old, "Goals", text)
                path, body = "/workspace/commit", {"proposal_id": proposal_id}
            else:
                path, body = "/workspace/propose", {
                    "region": "Goals", "base_version": await version_of(live), "summary": "s",
                    "content": text}
            await take_away(live, clock, lease["lease_id"], how)
            answers: dict[str, Any] = {}
            async with trio.open_nursery() as race:
                # Alternate who leaves first so both orders get their chance.
                calls = [("write", old, path, body),
                         ("checkout", new, "/workspace/checkout", {"region": "Goals", "minutes": 30})]
                for name, bearer, call_path, call_body in (
                        calls if round_number % 2 else reversed(calls)):
                    race.start_soon(send, live, answers, name, bearer, call_path, call_body)

            taken = answers["checkout"]
            assert taken.status == 200, taken.body  # the old lease was gone before the race
            new_lease = taken.json()["lease_id"]
            log = await events(live)
            acquired = event_id_of(log, "lease.acquired", lease_id=new_lease)
            assert acquired is not None
            written = answers["write"]
            if written.status == 200:
                if write == "commit":
                    landed = event_id_of(log, "proposal.committed", proposal_id=body["proposal_id"])
                else:
                    landed = event_id_of(log, "proposal.created",
                                         proposal_id=written.json()["proposal_id"])
                assert landed is not None and landed < acquired, (landed, acquired)
                orders["old first"] += 1
            else:
                assert_fenced(written, new_lease)
                assert text not in abuse_doc.read_text()
                orders["new first"] += 1
            await ok(live, "POST", "/workspace/release", new, {"lease_id": new_lease})
            if write == "propose" and written.status == 200:
                await ok(live, "POST", "/workspace/proposal/withdraw", old,
                         {"proposal_id": written.json()["proposal_id"]})
        live.stop.set()
    assert sum(orders.values()) == ROUNDS
    print(f"{how}/{write}: {orders}")
