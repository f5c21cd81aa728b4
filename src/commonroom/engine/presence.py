"""Presence: who made a request or held a stream lately (docs/spec/PROTOCOL.md section 10).

A participant is present while any of its sessions made a request or held a
stream within the last `limits.PRESENCE_SECONDS` (90 s). It is a fact of the
room process, kept in memory (the sidecar gets `last_seen` when a participant
leaves), so touching it costs no write. Everything that reads or changes it
goes through `Presence`, which takes a lock: reads touch it from the read path's
thread while the writer's thread sweeps it (`engine.readpath`).

Transitions are announced, not computed by readers: `Presence` remembers who
was last announced present, and the sweep hooks (`access.presence_sweep`,
`access.presence_due`, run by the room's sweeper only, never by a read) emit
`participant.present` when a touched participant was not announced yet and
`participant.away` when an announced one's window ran out. A touch happens
inside an operation's transaction (`sessions.authenticate`), so `pending()`
tells the room to wake its sweeper for the new arrival; a touch from a held
stream is announced at the sweeper's next wake-up (at most 30 s later).
A participant that leaves is forgotten without an `away` (`participant.left`
says more).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from commonroom.protocol import limits


class Presence:
    def __init__(self, window_seconds: float = limits.PRESENCE_SECONDS) -> None:
        self.window = timedelta(seconds=window_seconds)
        self._last_seen: dict[str, datetime] = {}
        self._announced: set[str] = set()
        self._unannounced: set[str] = set()  # touched since the last `transitions`, not announced
        self._lock = threading.Lock()

    def touch(self, participant_id: str, now: datetime) -> None:
        """A request or a held stream of this participant, at `now`."""
        with self._lock:
            self._last_seen[participant_id] = now
            if participant_id not in self._announced:
                self._unannounced.add(participant_id)

    def forget(self, participant_id: str) -> None:
        """The participant left: it is not present any more."""
        with self._lock:
            self._last_seen.pop(participant_id, None)
            self._announced.discard(participant_id)
            self._unannounced.discard(participant_id)

    def last_seen(self, participant_id: str) -> datetime | None:
        with self._lock:
            return self._last_seen.get(participant_id)

    def is_present(self, participant_id: str, now: datetime) -> bool:
        with self._lock:
            seen = self._last_seen.get(participant_id)
            return seen is not None and seen > now - self.window

    def present_ids(self, now: datetime) -> set[str]:
        with self._lock:
            return self._present_ids(now)

    def _present_ids(self, now: datetime) -> set[str]:
        horizon = now - self.window
        return {pid for pid, seen in self._last_seen.items() if seen > horizon}

    def pending(self) -> bool:
        """A participant was touched that has not been announced present yet."""
        with self._lock:
            return bool(self._unannounced)

    def transitions(self, now: datetime) -> tuple[list[str], list[str]]:
        """(arrived, went away) since the last call; records them as announced."""
        with self._lock:
            present = self._present_ids(now)
            arrived = sorted(present - self._announced)
            gone = sorted(self._announced - present)
            self._announced = present
            self._unannounced.clear()
            return arrived, gone

    def next_change(self, now: datetime) -> datetime | None:
        """When the next transition is due: now for an unannounced arrival, else the
        earliest moment an announced participant's window runs out."""
        with self._lock:
            due: datetime | None = None
            if self._unannounced:
                return now
            for pid in self._announced:
                seen = self._last_seen[pid]
                lapse = seen + self.window
                if due is None or lapse < due:
                    due = lapse
            return due
