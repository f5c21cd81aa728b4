"""Human-readable lines for `ce`: names (and kinds), not participant ids (people read names).

`--json` keeps the ids; these helpers only shape what a person reads. Each
takes the `workspace.participants` answer (a participant who left is still
listed, so their name stays readable in history).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from commonroom.cli.output import visible

# The payload fields that name a participant, in the order a line mentions them.
_PEOPLE_FIELDS: Final = ("participant_id", "reviewer_id", "from_participant_id",
                         "to_participant_id")


class Names:
    """Participant id -> name and kind, from one `workspace.participants` answer.

    A name that could mislead is never shown alone: one that is not plain ASCII (a
    Cyrillic "о" in "hоst"), or that folds to the host's or another listed participant's
    name (`access.folded_name`: case, width and punctuation aside), is followed by its
    kind and a short id, `hоst (agent pt_9lM0)`."""

    def __init__(self, participants: Any) -> None:
        rows = participants.get("participants") if isinstance(participants, dict) else None
        self._rows: dict[str, Mapping[str, Any]] = {
            str(p.get("participant_id")): p for p in rows or [] if isinstance(p, dict)}
        folds: dict[str, int] = {}
        for row in self._rows.values():
            key = _folded(str(row.get("name")))
            folds[key] = folds.get(key, 0) + 1
        self._shared = {key for key, count in folds.items() if count > 1} | {_folded("host")}

    def _kind(self, row: Mapping[str, Any]) -> str:
        return "host" if "*" in (row.get("capabilities") or []) else str(row.get("kind", "?"))

    def _misleading(self, row: Mapping[str, Any]) -> bool:
        name = str(row.get("name"))
        if self._kind(row) == "host":
            return not name.isascii()
        return not name.isascii() or _folded(name) in self._shared

    def name(self, pid: Any) -> str:
        """The name, or the id when the room does not know it (never empty)."""
        if pid is None:
            return "the host's editor"  # a version nobody in the room wrote: an external save
        row = self._rows.get(str(pid))
        if row is None:
            return str(pid)
        shown = visible(str(row.get("name")))
        if self._misleading(row):
            return f"{shown} ({self._kind(row)} {str(pid)[:7]})"
        return shown

    def who(self, pid: Any) -> str:
        """`name (kind)`, the way a person is introduced in a line."""
        row = self._rows.get(str(pid)) if pid is not None else None
        if row is None or self._misleading(row):
            return self.name(pid)
        return f"{self.name(pid)} ({self._kind(row)})"


def _folded(name: str) -> str:
    """As the room compares names (engine/access.py `folded_name`)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", name).casefold() if ch.isalnum())


def ago(iso: Any, now: datetime | None = None) -> str:
    """`12 s ago`, `3 min ago`, `2 h ago`, `4 d ago` (the raw text when it is not a time)."""
    try:
        then = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return str(iso)
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


def _short(region: Any) -> str:
    text = str(region)
    return "whole document" if text == "workspace" else text


def _quote(text: Any) -> str:
    return json.dumps(visible(str(text)), ensure_ascii=False)


def event_line(event: Mapping[str, Any], names: Names, now: datetime | None = None) -> str:
    """One history event as a sentence: `v7 Problem · bot (agent) · "A shorter problem" · 2 min ago`."""
    kind = str(event.get("type"))
    payload = event.get("payload") or {}
    when = ago(event.get("created_at"), now)
    if kind == "change.committed":
        undid = "".join(f" · undid {names.name(u.get('participant_id'))}'s change (v{u.get('version')})"
                        for u in payload.get("undoes") or [] if isinstance(u, dict))
        return (f"v{payload.get('version')} {_short(payload.get('region'))} · "
                f"{names.who(payload.get('participant_id'))} · {_quote(payload.get('summary', ''))}"
                f"{undid} · {when}")
    parts = [kind]
    for field in _PEOPLE_FIELDS:
        if field in payload:
            parts.append(names.who(payload[field]))
    for field in ("region", "summary", "status", "comment", "text", "version"):
        value = payload.get(field)
        if value is None or value == "":
            continue
        shown = _quote(value) if field in ("summary", "comment", "text") else (
            _short(value) if field == "region" else f"v{value}" if field == "version" else value)
        parts.append(str(shown))
    parts.append(when)
    return f"#{event.get('event_id')} " + " · ".join(parts)


def review_line(proposal: Mapping[str, Any], names: Names) -> str:
    """How a decision reads to its author: `pr_… approved with edits by Ada: keep it short`."""
    status = str(proposal.get("status"))
    edited = proposal.get("amended") and status in ("approved", "committed")
    line = f"{proposal.get('proposal_id')} {status}" + (" with edits" if edited else "")
    if proposal.get("reviewer_id"):
        line += f" by {names.name(proposal.get('reviewer_id'))}"
    if proposal.get("review_comment"):
        line += f": {visible(str(proposal.get('review_comment')))}"
    return line
