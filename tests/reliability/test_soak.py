"""The soak in CI size (issue 14): a real `ce serve`, agents for one minute, the checker, the audit.

The long form is `tools/soak/soak.py --agents 32 --minutes 10` (docs/reliability.md).
The checker and the audit are also fed hand-made histories here, to show that
each check fails when its invariant breaks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tools.soak.checker import Ack, Checker, ObserverLog
from tools.soak.secrets_audit import Secret, find_secrets
from tools.soak.soak import SoakConfig, run_soak


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_one_minute_soak_keeps_every_invariant_and_leaks_no_secret() -> None:
    result = await run_soak(SoakConfig(agents=24, minutes=1, observers=3, drain_s=4.0,
                                       revoke_every_s=8.0))
    assert result["violation_list"] == [] and result["violations"] == 0
    assert result["secrets_found"] == 0, result["secret_hits"]
    assert result["room_exit"] == 0
    figures = result["figures"]
    # Everything the soak is meant to exercise happened, so the checks above were not vacuous.
    assert result["commits"] >= 50 and result["final_version"] == result["commits"] + 1
    assert result["checker"]["events_checked"] >= result["last_event_id"]
    for name in ("rejected", "amended", "lease_conflicts", "messages", "handoffs_requested",
                 "handoffs_answered", "leaves", "revokes", "reconnects"):
        assert figures[name] > 0, name
    assert result["checker"]["lease_acquisitions"] > 0
    assert result["checker"]["resyncs"] >= 1  # the observer that stopped reading was dropped to resync
    assert result["secrets_handed_out"] > 50 and result["texts_audited"] > 1000
    for op in ("workspace.checkout", "workspace.propose", "workspace.commit", "workspace.review",
               "session.join"):
        assert result["p99_ms"][op] > 0
    assert result["rss_slope_kb_per_min"] is not None


# -- the checker fails when an invariant breaks -----------------------------------------------


def event(event_id: int, kind: str, at: str = "2026-12-01T10:00:00.000000+00:00",
          **payload: Any) -> dict[str, Any]:
    return {"event_id": event_id, "type": kind, "created_at": at, "payload": payload}


def lease(event_id: int, lease_id: str, pid: str, region: str, expires: str = "10:01:00",
          at: str = "10:00:00") -> dict[str, Any]:
    return event(event_id, "lease.acquired", f"2026-12-01T{at}.000000+00:00", lease_id=lease_id,
                 participant_id=pid, region=region, expires_at=f"2026-12-01T{expires}.000000+00:00")


def commit(event_id: int, version: int, region: str = "A", pid: str = "pt_a") -> dict[str, Any]:
    return event(event_id, "change.committed", version=version, summary="s", participant_id=pid,
                 region=region, source="proposal")


def checked(events: list[dict[str, Any]], acks: tuple[Ack, ...] = ()) -> list[str]:
    log = ObserverLog("observer", 0)
    for item in events:
        log.event(item)
    checker = Checker()
    checker.check_streams([log], len(events))
    checker.check_history(acks)
    return checker.report.violations


def test_the_checker_accepts_a_clean_history() -> None:
    events = [lease(1, "ls_1", "pt_a", "A/B"), lease(2, "ls_2", "pt_b", "A/C"),
              commit(3, 2), commit(4, 3, "A/C", "pt_b"),
              event(5, "lease.released", lease_id="ls_1", participant_id="pt_a", region="A/B",
                    reason="released"),
              lease(6, "ls_3", "pt_b", "A")]
    assert checked(events, (Ack(2, "A", "pt_a"), Ack(3, "A/C", "pt_b"))) == []


@pytest.mark.parametrize("second", [
    ("pt_b", "A/B"),  # the same region
    ("pt_b", "A"),  # an ancestor
    ("pt_b", "A/B/C"),  # a descendant
    ("pt_b", "workspace"),  # the whole document
])
def test_the_checker_sees_two_overlapping_leases(second: tuple[str, str]) -> None:
    violations = checked([lease(1, "ls_1", "pt_a", "A/B"), lease(2, "ls_2", *second)])
    assert len(violations) == 1 and "overlaps" in violations[0]


def test_an_expired_lease_does_not_count_as_active_even_before_its_expiry_event() -> None:
    events = [lease(1, "ls_1", "pt_a", "A", expires="10:01:00"),
              lease(2, "ls_2", "pt_b", "A", at="10:01:00", expires="10:02:00"),
              event(3, "lease.expired", "2026-12-01T10:01:00.500000+00:00", lease_id="ls_1",
                    participant_id="pt_a", region="A")]
    assert checked(events) == []


def test_the_checker_sees_a_late_or_early_expiry() -> None:
    late = event(2, "lease.expired", "2026-12-01T10:01:05.000000+00:00", lease_id="ls_1",
                 participant_id="pt_a", region="A")
    assert "late" in checked([lease(1, "ls_1", "pt_a", "A"), late])[0]
    early = event(2, "lease.expired", "2026-12-01T10:00:30.000000+00:00", lease_id="ls_1",
                  participant_id="pt_a", region="A")
    assert "early" in checked([lease(1, "ls_1", "pt_a", "A"), early])[0]


def test_the_checker_sees_a_version_gap_a_lost_ack_and_a_double_ack() -> None:
    assert "rise by 1" in checked([commit(1, 2), commit(2, 4)])[0]
    assert "no change.committed" in checked([commit(1, 2)], (Ack(3, "A", "pt_a"),))[0]
    assert "twice" in checked([commit(1, 2)], (Ack(2, "A", "pt_a"), Ack(2, "A", "pt_a")))[0]
    assert "acknowledged for" in checked([commit(1, 2)], (Ack(2, "B", "pt_a"),))[0]


def test_the_checker_sees_gaps_duplicates_and_disagreeing_observers() -> None:
    events = [commit(1, 2), commit(2, 3), commit(3, 4)]

    def run(*logs: ObserverLog) -> list[str]:
        checker = Checker()
        checker.check_streams(logs, 3)
        return checker.report.violations

    gap = ObserverLog("gap", 0)
    for item in (events[0], events[2]):
        gap.event(item)
    assert "missing without a resync" in run(gap)[0]
    twice = ObserverLog("twice", 0)
    for item in (events[0], events[1], events[1], events[2]):
        twice.event(item)
    assert "again" in run(twice)[0]
    resynced = ObserverLog("resynced", 0)
    resynced.event(events[0])
    resynced.resync(2, "lagged")
    resynced.event(events[2])
    assert run(resynced) == []
    short = ObserverLog("short", 0)
    short.event(events[0])
    assert "stopped at 1" in run(short)[0]
    one, other = ObserverLog("one", 0), ObserverLog("other", 0)
    for item in events:
        one.event(item)
        other.event(item | {"type": "change.other"} if item["event_id"] == 2 else item)
    assert "differs" in run(one, other)[0]
    addressed = ObserverLog("addressed", 0)
    for item in events:
        addressed.event(item | {"addressed": True})  # per reader: not a difference
    assert run(one, addressed) == []


def test_the_checker_sees_a_session_expiring_early_or_living_too_long() -> None:
    created = event(1, "session.created", participant_id="pt_a",
                    expires_at="2026-12-01T18:00:00.000000+00:00")
    early = event(2, "session.expired", "2026-12-01T17:59:00.000000+00:00", participant_id="pt_a")
    assert "before its expiry" in checked([created, early])[0]
    forever = event(1, "session.created", participant_id="pt_a",
                    expires_at="2026-12-03T10:00:00.000000+00:00")
    assert "living" in checked([forever])[0]


# -- the secrets audit ---------------------------------------------------------------------


SESSION = "ses_" + "q" * 20 + "Z9_-" + "w" * 19
INVITE = "inv" + "a1B2" * 8


def test_the_audit_finds_each_secret_wherever_it_hides_and_never_prints_it() -> None:
    secrets = [Secret("session", SESSION), Secret("invitation_secret", INVITE)]
    texts = [
        ("log", f"GET /workspace/status Authorization: Bearer {SESSION}"),
        ("event 7", json.dumps({"payload": {"note": f"x{INVITE}y"}})),  # inside a longer token
        ("clean", "ses_ and inv prefixes alone are not secrets " + SESSION[:-1]),
    ]
    hits = find_secrets(secrets, texts)
    assert {(hit.kind, hit.source) for hit in hits} == {("session", "log"),
                                                        ("invitation_secret", "event 7")}
    assert all(SESSION not in repr(hit) and INVITE not in repr(hit) for hit in hits)


def test_the_audit_refuses_secrets_it_could_not_find_reliably() -> None:
    with pytest.raises(ValueError):
        find_secrets([Secret("short", "abc")], [])
    with pytest.raises(ValueError):
        find_secrets([Secret("spaced", "a secret with spaces in it")], [])
