"""Item 8 of issue 24: a one-region proposal must not remove other regions.

The attack, on a real `ce serve`: a proposal on "Risks" ending with an unclosed
code fence shows as a one-line diff; once committed it swallowed "First
milestone" and "Open questions" (another agent's lease there ended, its reads
answered `invalid_region`). Now a region proposal whose text changes the
outline outside its own span is `invalid_request` with
`details.reason = "outline_outside_region"`, at propose and again at commit.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Room

OUTSIDE = "outline_outside_region"


def _propose(room: Room, bearer: str, region: str, content: str) -> tuple[int, Any]:
    version = room.read(bearer, region)["version"]
    return room.call("POST", "/workspace/propose", bearer, {
        "region": region, "base_version": version, "summary": "tidy", "content": content,
    })


def test_an_unclosed_fence_cannot_swallow_the_sections_after_its_region(served: Room) -> None:
    room = served
    attacker = room.join("sly")["session_id"]
    bystander = room.join("milestones")["session_id"]
    lease = room.ok("POST", "/workspace/checkout", bystander, {"region": "First milestone"})
    risks = room.read(attacker, "Risks")["content"]
    status, answer = _propose(room, attacker, "Risks", risks + "```\n")
    assert status == 400 and answer["error"] == "invalid_request", answer
    assert answer["details"]["reason"] == OUTSIDE and answer["details"]["field"] == "content"
    # Nothing happened to the others: the lease holds and the sections read.
    leases = room.ok("GET", "/workspace/leases", bystander)["leases"]
    assert [each["lease_id"] for each in leases] == [lease["lease_id"]]
    for region in ("First milestone", "Open questions"):
        assert room.read(bystander, region)["content"].startswith(f"## {region}")


def test_other_ways_out_of_a_region_are_refused_and_its_own_changes_are_not(served: Room) -> None:
    room = served
    agent = room.join("writer")["session_id"]
    risks = room.read(agent, "Risks")["content"]
    body = risks.split("\n", 1)[1]
    refused = {
        "a higher heading adopts the next sections": (risks + "# Appendix\n\n",
                                                      "adopts_following_sections"),
        "text before its heading joins the region before it": ("Sneaked in.\n\n" + risks,
                                                               "text_before_heading"),
        "demoted under its previous sibling": ("### Risks\n" + body, "heading_level_changed"),
        "an HTML block left open": (risks + "<!--\n", "unclosed_html_block"),
        "a title that takes a later sibling's path": ("## Open questions\n" + body,
                                                      "heading_missing"),
    }
    for why, (content, cause) in refused.items():
        status, answer = _propose(room, agent, "Risks", content)
        assert status == 400 and answer["details"].get("reason") == OUTSIDE, (why, answer)
        assert answer["details"]["cause"] == cause, (why, answer)
    accepted = {
        # fitted (PROTOCOL section 7): the region's own separator follows the text
        "no newline before the next heading": risks.rstrip("\n") + " More.",
        "a closed fence": risks + "```\nmore risks\n```\n\n",
        "a new sub-section": risks + "### Legal\n\nNone known.\n\n",
        "a renamed heading": "## Dangers\n" + body,
        "the region deleted": "",
    }
    for why, content in accepted.items():
        status, answer = _propose(room, agent, "Risks", content)
        assert status == 200, (why, answer)
        room.ok("POST", "/workspace/proposal/withdraw", agent, {"proposal_id": answer["proposal_id"]})


def test_the_outline_is_checked_again_at_commit(served: Room) -> None:
    """Harmless where it was proposed, the fence would swallow a section added after it since."""
    room = served
    attacker = room.join("sly")["session_id"]
    last = room.read(attacker, "Open questions")
    status, proposal = _propose(room, attacker, "Open questions", last["content"] + "```\n")
    assert status == 200, proposal  # nothing follows the last section yet
    room.ok("POST", "/workspace/proposal/review", room.host_session,
            {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
    whole = room.read(room.host_session, "workspace")
    room.ok("POST", "/workspace/commit", room.host_session, {
        "base_version": whole["version"], "summary": "add a budget",
        "content": whole["content"] + "## Budget\n\nTen euros.\n",
    })
    status, answer = room.call("POST", "/workspace/commit", attacker,
                               {"proposal_id": proposal["proposal_id"]})
    assert status == 400 and answer["details"]["reason"] == OUTSIDE, answer
    assert room.read(attacker, "Budget")["content"] == "## Budget\n\nTen euros.\n"
    detail = room.ok("GET", f"/workspace/proposal?proposal_id={proposal['proposal_id']}", attacker)
    assert detail["status"] == "approved"  # refused like a lease conflict: nothing changed
