"""Presence: who made a request or held a stream lately (PROTOCOL.md section 10).

A participant is present while any of its sessions made a request or held a
stream within the last `limits.PRESENCE_SECONDS` (90 s). It is a fact of the
room process, kept in memory (the sidecar gets `last_seen` when a participant
leaves), so touching it costs no write. Everything that reads or changes it
goes through `Presence`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from commonroom.protocol import limits


class Presence:
    def __init__(self, window_seconds: float = limits.PRESENCE_SECONDS) -> None:
        self.window = timedelta(seconds=window_seconds)
        self._last_seen: dict[str, datetime] = {}

    def touch(self, participant_id: str, now: datetime) -> None:
        """A request or a held stream of this participant, at `now`."""
        self._last_seen[participant_id] = now

    def forget(self, participant_id: str) -> None:
        """The participant left: it is not present any more."""
        self._last_seen.pop(participant_id, None)

    def last_seen(self, participant_id: str) -> datetime | None:
        return self._last_seen.get(participant_id)

    def is_present(self, participant_id: str, now: datetime) -> bool:
        seen = self._last_seen.get(participant_id)
        return seen is not None and seen >= now - self.window

    def present_ids(self, now: datetime) -> set[str]:
        horizon = now - self.window
        return {pid for pid, seen in self._last_seen.items() if seen >= horizon}
