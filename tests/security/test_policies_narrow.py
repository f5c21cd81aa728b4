"""Issue 31, findings 2 (high) and 4 (medium): what an auto-approve policy may approve,
and whom it trusts.

F2, the attack: a policy for one agent on one section (`Risks`, at most 3 lines). The
agent proposed the whole document (`region: "workspace"`, which skipped the outline
check) with one changed line in Risks: an unclosed code fence. The policy counted one
line in Risks and approved it; committed, the fence swallowed the sections after it,
superseded another agent's proposal there and outdated its thread, with no person
involved. Now a policy never approves a whole-document proposal, an outline change, a
change to a link reference definition or an HTML block, nor a revision
(PROTOCOL section 18); a plain small change still goes through.

F4, the attack: a policy by display name (`docs-bot`); any agent joined as `docs-bot` and
was approved. Now a policy names a participant id or a label the host set on an
invitation (`ce invite --label docs-bot`), carried by whoever joined through it; a name
is refused, and a label on an invitation some agent minted counts for nothing.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Room, ce_ok

TOP = "Shelf Swap: a neighbourhood book exchange app"
RISKS = f"{TOP}/Risks"
LAST_RISK = "  never addresses, until a request is accepted.\n"


def _policy(room: Room, **who: Any) -> dict[str, Any]:
    policy: dict[str, Any] = room.ok("POST", "/workspace/policy", room.host_session, {
        "region_pattern": RISKS, "max_changed_lines": 3, **who})
    return policy


def _propose(room: Room, bearer: str, region: str, content: str) -> dict[str, Any]:
    proposal: dict[str, Any] = room.ok("POST", "/workspace/propose", bearer, {
        "region": region, "base_version": room.version(), "summary": "small fix",
        "content": content})
    return proposal


def _risks(room: Room, bearer: str) -> str:
    return str(room.read(bearer, RISKS)["content"])


def test_a_narrow_policy_never_approves_a_whole_document_with_an_unclosed_fence(
        served: Room) -> None:
    room = served
    attacker = room.join("drafter")
    bearer = attacker["session_id"]
    other = room.join("planner")["session_id"]
    _policy(room, participant_id=attacker["participant_id"])
    milestone = room.read(other, f"{TOP}/First milestone")["content"]
    theirs = _propose(room, other, f"{TOP}/First milestone",
                      milestone.replace("six weeks", "eight weeks"))
    whole = room.read(bearer, "workspace")["content"]
    fenced = whole.replace(LAST_RISK, "```\n")  # one changed line, in Risks
    proposal = _propose(room, bearer, "workspace", fenced)
    assert proposal["status"] == "pending" and proposal["reviewer_id"] is None
    status, answer = room.call("POST", "/workspace/commit", bearer,
                               {"proposal_id": proposal["proposal_id"]})
    assert status == 409 and answer["error"] == "proposal_conflict"
    detail = room.ok("GET", f"/workspace/proposal?proposal_id={theirs['proposal_id']}", other)
    assert detail["status"] == "pending"
    assert "## First milestone" in room.doc.read_text()


def test_a_policy_never_approves_outline_reference_or_html_changes(served: Room) -> None:
    room = served
    agent = room.join("drafter")
    bearer = agent["session_id"]
    policy = _policy(room, participant_id=agent["participant_id"])
    risks = _risks(room, bearer)
    refused = {
        "a renamed heading": risks.replace("## Risks", "## Risks (none)"),
        "a deeper heading": risks.replace("## Risks", "### Risks"),
        "a new sub-heading": risks.rstrip("\n") + "\n\n### Costs\n\nNone.\n\n",
        "an unclosed fence at the end": risks.replace(LAST_RISK, LAST_RISK + "\n```\n"),
        "a link reference definition": risks.rstrip("\n")
        + "\n\n[pilot]: https://evil.example/pay\n\n",
        "an HTML block": risks.replace("- Privacy", "<div hidden>\n\n- Privacy"),
        "a comment hiding a line": risks.replace("- Books", "<!--\n- Books").replace(
            "heavier.\n", "heavier.\n-->\n"),
    }
    waiting = []
    for what, content in refused.items():
        status, proposal = room.call("POST", "/workspace/propose", bearer, {
            "region": RISKS, "base_version": room.version(), "summary": what,
            "content": content})
        if status == 400:  # the region's own outline rule refused it already
            assert proposal["details"]["reason"] == "outline_outside_region", (what, proposal)
            continue
        assert status == 200 and proposal["status"] == "pending", (what, proposal)
        waiting.append(what)
        room.ok("POST", "/workspace/proposal/withdraw", bearer,
                {"proposal_id": proposal["proposal_id"]})
    assert {"a renamed heading", "a new sub-heading", "a link reference definition",
            "an HTML block", "a comment hiding a line"} <= set(waiting)
    # A plain change of a line or two still goes through: the policy is narrow, not off.
    small = _propose(room, bearer, RISKS, risks.replace("must stay quick", "must stay fast"))
    assert small["status"] == "approved" and small["reviewer_id"] == "policy:" + policy["policy_id"]


def test_a_policy_never_approves_a_revision(served: Room) -> None:
    room = served
    agent = room.join("drafter")
    bearer = agent["session_id"]
    risks = _risks(room, bearer)
    big = risks.rstrip("\n") + "\n\n" + "".join(f"- risk {n}\n" for n in range(10)) + "\n"
    proposal = _propose(room, bearer, RISKS, big)  # too big for the policy below
    _policy(room, participant_id=agent["participant_id"])
    revised = room.ok("POST", "/workspace/proposal/revise", bearer, {
        "proposal_id": proposal["proposal_id"],
        "content": risks.replace("must stay quick", "must stay fast")})
    assert revised["status"] == "pending" and revised["reviewer_id"] is None


def test_a_policy_trusts_the_hosts_invitation_label_never_a_name(served: Room) -> None:
    room = served
    status, answer = room.call("POST", "/workspace/policy", room.host_session, {
        "region_pattern": RISKS, "max_changed_lines": 3, "name_pattern": "docs-bot"})
    assert status == 400 and answer["details"]["reason"] == "display_name_untrusted", answer
    policy = _policy(room, label="docs-bot")
    # The host's labelled invitation, through the real CLI.
    invitation = ce_ok("invite", str(room.doc), "--label", "docs-bot", "--json")["invitation"]
    bot = room.join("docs-bot", invitation=invitation)
    # An impostor: same name, an ordinary invitation.
    impostor = room.join("docs-bot")["session_id"]
    # An agent allowed to invite mints an invitation with the same label.
    inviter = room.join("inviter", ["read", "propose", "invite"])["session_id"]
    minted = room.ok("POST", "/workspace/invite", inviter, {
        "capabilities": ["read", "propose"], "label": "docs-bot", "max_uses": 1})
    laundered = room.join("helper", invitation=minted["invitation"])["session_id"]
    for bearer in (impostor, laundered):
        risks = _risks(room, bearer)
        proposal = _propose(room, bearer, RISKS, risks.replace("must stay quick", "is fine"))
        assert proposal["status"] == "pending"
        room.ok("POST", "/workspace/proposal/withdraw", bearer,
                {"proposal_id": proposal["proposal_id"]})
    participants = room.ok("GET", "/workspace/participants", room.host_session)["participants"]
    labels = {p["participant_id"]: p.get("label") for p in participants}
    assert labels[bot["participant_id"]] == "docs-bot"
    assert sum(1 for label in labels.values() if label == "docs-bot") == 1
    risks = _risks(room, bot["session_id"])
    approved = _propose(room, bot["session_id"], RISKS,
                        risks.replace("must stay quick", "must stay fast"))
    assert approved["status"] == "approved"
    assert approved["reviewer_id"] == "policy:" + policy["policy_id"]
