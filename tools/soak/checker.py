"""The soak's invariant checker: fed by the observe streams and the room's final state.

Pure (no network, no clock): `tools/soak/soak.py` feeds it what the streams
and the agents saw; the tests feed it hand-made histories to show that each
check can fail.

What it checks (issue 14, docs/spec/PROTOCOL.md sections 6-8):

- **streams**: every observer saw every event id after its start cursor
  exactly once and in order, or got a `resync` (after which it continues with
  a later id); two observers never saw different events under one id;
- **leases**: replaying the lease events in id order, a `lease.acquired` never
  overlaps (same region, ancestor or descendant, or `workspace`) another
  participant's lease that is still active at that moment, and
  `lease.expired` is never early and at most `expiry_slack_s` late;
- **versions**: `change.committed` versions rise by exactly 1 per commit, every
  version acknowledged to a client is one of them with the same region and
  author, and no version is acknowledged twice;
- **sessions**: a session lives at most 24 h (8 h for a join), and
  `session.expired` never comes before the expiry; sessions ended by leave or
  revoke are checked by the soak (their bearer is refused afterwards).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

WHOLE = ("workspace", "*")


def related(a: str, b: str) -> bool:
    """The lease conflict relation of docs/spec/PROTOCOL.md section 6 (regions are canonical paths)."""
    if a == b or a in WHOLE or b in WHOLE:
        return True
    return b.startswith(a + "/") if len(a) < len(b) else a.startswith(b + "/")


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def comparable(event: dict[str, Any]) -> str:
    """An event as every observer must see it (`addressed` is per reader, so it is left out)."""
    return json.dumps({k: v for k, v in event.items() if k != "addressed"}, sort_keys=True)


@dataclass
class ObserverLog:
    """What one observer's stream(s) delivered, in order."""

    name: str
    start_cursor: int  # the first stream resumed after this id (0: from the start)
    items: list[tuple[str, int, str]] = field(default_factory=list)
    # ("event", event_id, comparable JSON) or ("resync", latest_event_id, reason)

    def event(self, event: dict[str, Any]) -> None:
        self.items.append(("event", int(event["event_id"]), comparable(event)))

    def resync(self, latest_event_id: int, reason: str) -> None:
        self.items.append(("resync", latest_event_id, reason))

    @property
    def last_id(self) -> int:
        for kind, event_id, _ in reversed(self.items):
            if kind == "event":
                return event_id
        return self.start_cursor


@dataclass(frozen=True)
class Ack:
    """A commit the room acknowledged to a client."""

    version: int
    region: str
    participant_id: str


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    events_checked: int = 0
    resyncs: int = 0
    ids_missed_by_all: int = 0
    lease_acquisitions: int = 0
    lease_expiries: int = 0
    max_expiry_lateness_s: float = 0.0
    commits: int = 0

    def violate(self, text: str) -> None:
        if len(self.violations) < 200:  # enough to debug; the count below stays true
            self.violations.append(text)
        self.violation_count += 1

    violation_count: int = 0


class Checker:
    def __init__(self, *, expiry_slack_s: float = 2.0, first_version: int = 1) -> None:
        self.expiry_slack_s = expiry_slack_s
        self.first_version = first_version
        self.report = Report()
        self.events: dict[int, dict[str, Any]] = {}

    # -- streams ----------------------------------------------------------------------

    def check_streams(self, logs: Iterable[ObserverLog], latest_event_id: int) -> None:
        """Each log: exactly once, in order, or resync; all logs agree; merged into `events`."""
        seen: dict[int, str] = {}
        for log in logs:
            expected = log.start_cursor + 1
            for kind, event_id, data in log.items:
                if kind == "resync":
                    self.report.resyncs += 1
                    expected = event_id + 1  # the stream continues live after the latest
                    continue
                if event_id < expected:
                    self.report.violate(f"{log.name}: event {event_id} again or out of order"
                                        f" (expected {expected})")
                    continue
                if event_id > expected:
                    self.report.violate(f"{log.name}: events {expected}..{event_id - 1} missing"
                                        " without a resync")
                expected = event_id + 1
                other = seen.setdefault(event_id, data)
                if other != data:
                    self.report.violate(f"event {event_id} differs between observers")
            if expected <= latest_event_id:
                self.report.violate(f"{log.name}: stopped at {expected - 1} before the room's"
                                    f" latest event {latest_event_id}")
        for event_id, data in seen.items():
            self.events[event_id] = json.loads(data)
        if seen:
            first, last = min(seen), max(seen)
            self.report.ids_missed_by_all = (last - first + 1) - len(seen)
        self.report.events_checked = len(seen)

    # -- leases, versions, sessions ---------------------------------------------------

    def check_history(self, acks: Iterable[Ack]) -> None:
        """Replay the merged events in id order."""
        active: dict[str, tuple[str, str, datetime]] = {}  # lease_id -> (participant, region, expires)
        version = self.first_version
        committed: dict[int, dict[str, Any]] = {}
        session_expiries: dict[str, list[datetime]] = {}  # participant -> its sessions' expiries
        for event_id in sorted(self.events):
            event = self.events[event_id]
            kind, payload, at = event["type"], event["payload"], ts(event["created_at"])
            if kind == "lease.acquired":
                self.report.lease_acquisitions += 1
                for lease_id, (holder, region, expires) in active.items():
                    if (holder != payload["participant_id"] and expires > at
                            and related(region, payload["region"])):
                        self.report.violate(
                            f"event {event_id}: lease {payload['lease_id']} on {payload['region']!r}"
                            f" overlaps active lease {lease_id} on {region!r} of another participant")
                active[payload["lease_id"]] = (payload["participant_id"], payload["region"],
                                               ts(payload["expires_at"]))
            elif kind == "lease.renewed":
                lease = active.get(payload["lease_id"])
                if lease is None:
                    self.report.violate(f"event {event_id}: renewal of an inactive lease")
                else:
                    active[payload["lease_id"]] = (lease[0], lease[1], ts(payload["expires_at"]))
            elif kind in ("lease.released", "lease.expired"):
                lease = active.pop(payload["lease_id"], None)
                if lease is None:
                    self.report.violate(f"event {event_id}: {kind} of an inactive lease")
                elif kind == "lease.expired":
                    self.report.lease_expiries += 1
                    late = (at - lease[2]).total_seconds()
                    if late < 0:
                        self.report.violate(f"event {event_id}: lease expired {-late:.3f} s early")
                    self.report.max_expiry_lateness_s = max(self.report.max_expiry_lateness_s, late)
                    if late > self.expiry_slack_s:
                        self.report.violate(f"event {event_id}: lease expired {late:.3f} s late")
            elif kind == "change.committed":
                if payload["version"] != version + 1:
                    self.report.violate(f"event {event_id}: version {payload['version']} after"
                                        f" {version} (versions must rise by 1)")
                version = max(version, payload["version"])
                committed[payload["version"]] = payload
            elif kind == "session.created":
                life = ts(payload["expires_at"]) - at
                if life > timedelta(hours=24, seconds=1):
                    self.report.violate(f"event {event_id}: a session living {life}")
                session_expiries.setdefault(payload["participant_id"], []).append(
                    ts(payload["expires_at"]))
            elif kind == "session.expired":
                expiries = session_expiries.get(payload["participant_id"], [])
                if expiries and at < min(expiries):
                    self.report.violate(f"event {event_id}: a session expired before its expiry")
        self.last_version = version
        self.report.commits = len(committed)
        acked: set[int] = set()
        for ack in acks:
            if ack.version in acked:
                self.report.violate(f"version {ack.version} acknowledged twice")
            acked.add(ack.version)
            change = committed.get(ack.version)
            if change is None:
                self.report.violate(f"acknowledged version {ack.version} has no change.committed")
            elif (change["region"], change["participant_id"]) != (ack.region, ack.participant_id):
                self.report.violate(f"version {ack.version}: acknowledged for {ack.region!r} by"
                                    f" {ack.participant_id}, committed {change['region']!r} by"
                                    f" {change['participant_id']}")

    last_version: int = 0
