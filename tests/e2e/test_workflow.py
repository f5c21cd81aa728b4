"""The whole workflow with real `ce` processes, then the ways it refuses.

serve -> ce invite -> ce join -> ce call (status, regions, read, checkout,
propose) -> ce proposals -> ce review --approve -> ce call commit -> the file
on disk changed. Then: refused invitations, anonymous calls, agents acting
beyond their capabilities, lease conflicts, stale versions with their
recovery fields, bad bodies, unknown routes, and a restart that keeps the
workspace, its sessions and its history.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from commonroom.engine import dispatch, sessions
from tests.e2e.conftest import RoomProcess, ce, ce_err, ce_ok, start_room

pytestmark = pytest.mark.e2e


class Agent:
    """A joined participant, driven through `ce call`."""

    def __init__(self, invitation: str, name: str) -> None:
        self.invitation = invitation
        joined = ce_ok("join", invitation, "--name", name, "--no-hold")
        self.session: str = joined["session_id"]
        self.participant_id: str = joined["participant_id"]
        self.joined = joined

    def ok(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return ce_ok("call", self.invitation, method, path, *self._args(body))

    def err(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        error, _ = ce_err("call", self.invitation, method, path, *self._args(body))
        return error

    def _args(self, body: dict[str, Any] | None) -> list[str]:
        args = ["--session", self.session]
        if body is not None:
            args += ["--body", json.dumps(body)]
        return args

    def version(self) -> int:
        return int(self.ok("GET", "/workspace/status")["version"])


def invite(doc: Path, *extra: str) -> dict[str, Any]:
    answer: dict[str, Any] = ce_ok("invite", str(doc), *extra)
    assert answer["invitation"].startswith("commonroom://join/")
    return answer


def region_named(agent: Agent, title: str) -> str:
    regions = agent.ok("GET", "/workspace/regions")["regions"]
    return str(next(r["region"] for r in regions if r["title"] == title))


def read_region(agent: Agent, region: str) -> str:
    answer = agent.ok("GET", f"/workspace/read?region={quote(region)}")
    assert answer["region"] == region
    return str(answer["content"])


def test_workflow_from_invite_to_commit(room: RoomProcess, doc: Path) -> None:
    answer = invite(doc)
    bot = Agent(answer["invitation"], "bot")
    assert bot.joined["workspace_id"] == room.ready["workspace_id"]
    assert bot.joined["kind"] == "agent"

    status = bot.ok("GET", "/workspace/status")
    assert status["workspace_id"] == room.ready["workspace_id"]
    base = int(status["version"])

    risks = region_named(bot, "Risks")
    text = read_region(bot, risks)
    assert "Spine recognition" in text

    lease = bot.ok("POST", "/workspace/checkout", {"region": risks})
    assert lease["region"] == risks and lease["participant_id"] == bot.participant_id

    new_text = text + "- Cold start: a street needs ten active members before it is useful.\n\n"
    proposal = bot.ok(
        "POST", "/workspace/propose",
        {"region": risks, "base_version": base, "summary": "add the cold-start risk",
         "content": new_text},
    )
    assert proposal["status"] == "pending"
    pr = proposal["proposal_id"]

    listed = ce_ok("proposals", str(doc))["proposals"]
    assert [p["proposal_id"] for p in listed] == [pr]
    readable = ce("proposals", str(doc))
    assert readable.returncode == 0 and pr in readable.stdout and "pending" in readable.stdout

    reviewed = ce_ok("review", str(doc), pr, "--approve", "--comment", "good catch")
    assert reviewed["proposal_id"] == pr and reviewed["status"] == "approved"

    committed = bot.ok("POST", "/workspace/commit", {"proposal_id": pr})
    assert committed["version"] == base + 1
    assert committed["proposal_id"] == pr

    assert "Cold start: a street needs ten active members" in doc.read_text()
    assert ce_ok("status", str(doc))["version"] == base + 1
    assert bot.ok("POST", "/workspace/release", {"lease_id": lease["lease_id"]})["released"]


def test_refusals(room: RoomProcess, doc: Path) -> None:
    # An invitation with max_uses 1 joins once.
    once = invite(doc, "--max-uses", "1")["invitation"]
    bot = Agent(once, "bot")
    error, result = ce_err("join", once, "--name", "again", "--no-hold")
    assert error["error"] == "invitation_redeemed"
    assert bot.session not in result.stdout + result.stderr

    # A revoked invitation never joins.
    revoked = invite(doc)
    ce_ok("revoke", str(doc), revoked["invite_id"])
    states = {i["invite_id"]: i["state"] for i in ce_ok("invitations", str(doc))["invitations"]}
    assert states[revoked["invite_id"]] == "revoked"
    error, _ = ce_err("join", revoked["invitation"], "--name", "late", "--no-hold")
    assert error["error"] == "invitation_revoked"

    # No session: unauthorized, exit non-zero (readable line on stderr without --json).
    anonymous = ce("call", once, "GET", "/workspace/status")
    assert anonymous.returncode != 0
    assert anonymous.stderr.startswith("error: unauthorized:")
    assert json.loads(anonymous.stdout)["error"] == "unauthorized"

    # An agent cannot approve, nor commit raw text (admin).
    other = Agent(invite(doc)["invitation"], "other")
    idea = region_named(bot, "The idea")
    base = bot.version()
    proposal = other.ok(
        "POST", "/workspace/propose",
        {"region": idea, "base_version": base, "summary": "shorter",
         "content": "## The idea\n\nSwap books with neighbours.\n\n"},
    )
    denied = bot.err(
        "POST", "/workspace/proposal/review",
        {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"},
    )
    assert denied["error"] == "permission_denied"
    raw = bot.err(
        "POST", "/workspace/commit",
        {"base_version": base, "summary": "raw", "content": "# gone\n"},
    )
    assert raw["error"] == "permission_denied"
    assert "Swap books with neighbours" not in doc.read_text()

    # Two agents want the same region: the second gets lease_conflict naming the lease.
    milestone = region_named(bot, "First milestone")
    lease = bot.ok("POST", "/workspace/checkout", {"region": milestone})
    conflict = other.err("POST", "/workspace/checkout", {"region": milestone})
    assert conflict["error"] == "lease_conflict"
    assert conflict["lease_id"] == lease["lease_id"]
    bot.ok("POST", "/workspace/release", {"lease_id": lease["lease_id"]})

    # A body that is not JSON never leaves the CLI; one with wrong types is refused by the room.
    bad, result = ce_err("call", once, "POST", "/workspace/checkout", "--session", bot.session,
                         "--body", "{region:")
    assert bad["error"] == "invalid_request"
    assert bot.session not in result.stdout + result.stderr
    typed = bot.err("POST", "/workspace/checkout", {"region": 7})
    assert typed["error"] == "invalid_request"

    # Unknown route: 404 with the protocol's error shape.
    unknown = bot.err("GET", "/workspace/no-such-thing")
    assert unknown["error"] == "invalid_request"
    readable = ce("call", once, "GET", "/no/such/route", env={**os.environ, "CE_SESSION": bot.session})
    assert readable.returncode != 0 and readable.stderr.startswith("error: invalid_request")
    assert "Traceback" not in readable.stderr


def test_stale_version_carries_recovery_fields(room: RoomProcess, doc: Path) -> None:
    answer = invite(doc, "--max-uses", "2")
    first, second = Agent(answer["invitation"], "first"), Agent(answer["invitation"], "second")
    base = first.version()
    problem = region_named(first, "Problem")
    whole_idea = region_named(first, "Shelf Swap: a neighbourhood book exchange app")
    problem_text = read_region(first, problem)
    parent_text = read_region(second, whole_idea)

    # Overlapping regions: a section, and the top-level region that contains it.
    small = first.ok(
        "POST", "/workspace/propose",
        {"region": problem, "base_version": base, "summary": "sharper problem",
         "content": problem_text.replace("for years", "for a decade")},
    )
    big = second.ok(
        "POST", "/workspace/propose",
        {"region": whole_idea, "base_version": base, "summary": "new title",
         "content": parent_text.replace("# Shelf Swap:", "# ShelfSwap:", 1)},
    )
    for proposal in (small, big):
        ce_ok("review", str(doc), proposal["proposal_id"], "--approve")

    assert first.ok("POST", "/workspace/commit", {"proposal_id": small["proposal_id"]})[
        "version"
    ] == base + 1
    stale = second.err("POST", "/workspace/commit", {"proposal_id": big["proposal_id"]})
    assert stale["error"] == "stale_version"
    for field in ("base_version", "current_version", "expected_version", "diff", "changes"):
        assert field in stale, (field, stale)
    assert stale["base_version"] == base
    assert stale["current_version"] == base + 1
    assert "for a decade" in doc.read_text() and "# ShelfSwap:" not in doc.read_text()


def test_restart_keeps_workspace_sessions_and_history(doc: Path) -> None:
    room = start_room(doc, "--port-ingress", "0")
    try:
        workspace_id = room.ready["workspace_id"]
        port = room.ready["ingress_port"]
        answer = invite(doc)
        bot = Agent(answer["invitation"], "bot")
        goals = region_named(bot, "Who it is for")
        lease = bot.ok("POST", "/workspace/checkout", {"region": goals})
    finally:
        assert room.stop() == 0
        room.close()

    # No room runs: host commands open the sidecar directly.
    assert ce_ok("status", str(doc))["workspace_id"] == workspace_id
    expired = _expired_invitation(doc)

    # Restart without --port-ingress: the same port (it is free), so old invitations dial.
    again = start_room(doc)
    try:
        assert again.ready["workspace_id"] == workspace_id
        assert again.ready["ingress_port"] == port
        status = bot.ok("GET", "/workspace/status")  # the old session, over the old invitation
        assert status["workspace_id"] == workspace_id
        leases = bot.ok("GET", "/workspace/leases")["leases"]
        assert [x["lease_id"] for x in leases] == [lease["lease_id"]]  # leases are kept
        types = [e["type"] for e in bot.ok("GET", "/workspace/history?limit=200")["events"]]
        for kind in ("workspace.created", "participant.joined", "lease.acquired",
                     "workspace.stopped", "workspace.started"):
            assert kind in types, (kind, types)
        error, _ = ce_err("join", expired, "--name", "late", "--no-hold")
        assert error["error"] == "invitation_expired"
    finally:
        assert again.stop() == 0
        again.close()


def _expired_invitation(doc: Path) -> str:
    """An invitation that expired an hour ago, made on the sidecar while no room runs.

    (`ce invite --expires 1` would need a test that waits a minute; the
    engine takes an injected clock instead.)
    """
    from commonroom.engine.dispatch import open_engine
    from commonroom.protocol.timefmt import ManualClock

    clock = ManualClock(datetime.now(UTC) - timedelta(hours=2))
    engine = open_engine(doc, clock=clock)
    try:
        host = sessions.mint_host_session(engine)
        outcome = dispatch.execute(engine, "workspace.invite", host, {"expires_in_minutes": 60})
        assert outcome.error is None, outcome.error
        invitation: str = outcome.result.invitation
    finally:
        engine.close()
    return invitation
