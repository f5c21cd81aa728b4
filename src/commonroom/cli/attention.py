"""What wakes a resident agent, and the prompt a wake becomes (docs/spec/PROTOCOL.md section 19).

Pure: events (wire JSON, as the observe stream carries them) in, wakes out; no
I/O, no clock. `ce agent` (`cli/resident.py`) and `ce mcp --channel` use the same
rules, so an agent is woken alike whichever way it is kept.

Attention, never mere observation:
- room text whose `to` includes the participant;
- a handoff addressed to it;
- a reply (by someone else) on a thread it opened;
- a decision on its proposal (approved, rejected, changes requested, superseded);
- a comment (by someone else) on a thread of its proposal: a new thread on it, or a reply.

To know which proposals and threads are its own, `Attention` follows the stream:
`proposal.created` and `thread.opened` by the participant, and threads opened on
its proposals. That memory is small (bounded) and kept with the cursor, so a
restarted runtime still knows them.

A wake is a plain dict (JSON, so the runtime keeps its queue in the profile).
`prompt_text` merges the queued wakes into one prompt that says who (names and
ids), what (the text) and where (region, proposal, thread, handoff), and never
holds a secret: only what events and reads show every participant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

# The decisions on a proposal that wake its author.
DECISIONS: Final = {
    "proposal.approved": "approved",
    "proposal.rejected": "rejected",
    "proposal.changes_requested": "asked for changes to",
    "proposal.superseded": "superseded",
}
# Events that are something the participant did in the room (a turn that causes none
# "did nothing": three in a row pause the runtime).
_ACTIONS: Final = frozenset({
    "message.sent", "proposal.created", "proposal.revised", "thread.opened", "thread.replied",
    "thread.resolved", "handoff.requested", "handoff.accepted", "handoff.declined",
    "handoff.completed", "handoff.failed", "handoff.cancelled", "proposal.withdrawn",
})
# How many of its own proposals and threads the memory keeps (the newest).
REMEMBERED: Final = 200


def _payload(event: Mapping[str, Any]) -> Mapping[str, Any]:
    payload = event.get("payload")
    return payload if isinstance(payload, Mapping) else {}


class Attention:
    """Which events wake `participant_id`; follows its proposals and threads."""

    def __init__(self, participant_id: str, memory: Mapping[str, Any] | None = None) -> None:
        self.me = participant_id
        memory = memory or {}
        self.proposals: list[str] = [str(p) for p in memory.get("proposals", [])][-REMEMBERED:]
        self.threads: list[str] = [str(t) for t in memory.get("threads", [])][-REMEMBERED:]
        self.proposal_threads: dict[str, str] = {
            str(k): str(v) for k, v in dict(memory.get("proposal_threads", {})).items()}

    def memory(self) -> dict[str, Any]:
        return {"proposals": self.proposals, "threads": self.threads,
                "proposal_threads": self.proposal_threads}

    def _remember(self, into: list[str], item: str) -> None:
        if item not in into:
            into.append(item)
            del into[:-REMEMBERED]

    def is_action(self, event: Mapping[str, Any]) -> bool:
        """The event is something this participant did in the room."""
        kind = event.get("type")
        payload = _payload(event)
        if kind == "change.committed":
            return payload.get("participant_id") == self.me
        if kind in ("handoff.accepted", "handoff.declined", "handoff.completed", "handoff.failed"):
            return payload.get("to_participant_id") == self.me
        if kind in ("handoff.requested", "handoff.cancelled"):
            return payload.get("from_participant_id") == self.me
        if kind == "proposal.withdrawn":
            return payload.get("proposal_id") in self.proposals
        return kind in _ACTIONS and payload.get("participant_id") == self.me

    def wake(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """The wake this event is for the participant, or None (and learn what is its own)."""
        kind = event.get("type")
        payload = _payload(event)
        event_id = event.get("event_id")
        actor = payload.get("participant_id")
        base = {"event_id": event_id, "type": kind}
        if kind == "proposal.created" and actor == self.me:
            self._remember(self.proposals, str(payload.get("proposal_id")))
            return None
        if kind == "thread.opened":
            thread_id = str(payload.get("thread_id"))
            proposal_id = payload.get("proposal_id")
            if actor == self.me:
                self._remember(self.threads, thread_id)
                return None
            if proposal_id in self.proposals:
                self.proposal_threads[thread_id] = str(proposal_id)
                del_keys = list(self.proposal_threads)[:-REMEMBERED]
                for key in del_keys:
                    self.proposal_threads.pop(key, None)
                return {**base, "from": actor, "thread_id": thread_id,
                        "proposal_id": proposal_id, "region": payload.get("region")}
            return None
        if kind == "message.sent":
            if self.me in (payload.get("to") or []) and actor != self.me:
                return {**base, "from": actor, "text": payload.get("text"),
                        "message_id": payload.get("message_id"),
                        "handoff_id": payload.get("handoff_id")}
            return None
        if kind == "handoff.requested":
            if payload.get("to_participant_id") == self.me:
                return {**base, "from": payload.get("from_participant_id"),
                        "handoff_id": payload.get("handoff_id"), "text": payload.get("summary")}
            return None
        if kind == "thread.replied":
            thread_id = str(payload.get("thread_id"))
            if actor == self.me:
                return None
            if thread_id in self.threads or thread_id in self.proposal_threads:
                return {**base, "from": actor, "thread_id": thread_id,
                        "comment_id": payload.get("comment_id"), "region": payload.get("region"),
                        "proposal_id": self.proposal_threads.get(thread_id)}
            return None
        if kind in DECISIONS and payload.get("proposal_id") in self.proposals:
            return {**base, "from": payload.get("reviewer_id"),
                    "proposal_id": payload.get("proposal_id"), "text": payload.get("comment")}
        return None


def _name(names: Mapping[str, str], participant_id: Any) -> str:
    if not isinstance(participant_id, str):
        return "someone"
    name = names.get(participant_id)
    return f"{name} ({participant_id})" if name else participant_id


def describe(wake: Mapping[str, Any], names: Mapping[str, str]) -> str:
    """One wake as the lines of a prompt: who, what, where."""
    who = _name(names, wake.get("from"))
    kind = wake.get("type")
    text = wake.get("text")
    quoted = "\n> " + "\n> ".join(str(text).splitlines() or [""]) if text else ""
    if kind == "message.sent":
        where = f" in the thread of handoff {wake['handoff_id']}" if wake.get("handoff_id") else ""
        return f"{who} wrote to you{where} (message {wake.get('message_id')}):{quoted}"
    if kind == "handoff.requested":
        return (f"{who} handed you a task (handoff {wake.get('handoff_id')}); accept or decline"
                f" it:{quoted}")
    if kind in DECISIONS:
        return f"{who} {DECISIONS[str(kind)]} your proposal {wake.get('proposal_id')}.{quoted}"
    if kind == "thread.opened":
        return (f"{who} opened thread {wake.get('thread_id')} on your proposal"
                f" {wake.get('proposal_id')} (region {wake.get('region')!s}).{quoted}")
    if kind == "thread.replied":
        on = (f" on your proposal {wake['proposal_id']}" if wake.get("proposal_id")
              else " you opened")
        return (f"{who} replied in thread {wake.get('thread_id')}{on} (region"
                f" {wake.get('region')!s}).{quoted}")
    return f"{who}: {kind}{quoted}"


def prompt_text(wakes: Iterable[Mapping[str, Any]], names: Mapping[str, str], *,
                me: str, room: str) -> str:
    """The one prompt of a turn: every queued wake, oldest first."""
    items = list(wakes)
    head = (f"You are {me} in the commonroom room {room}. Act in the room only through its"
            " MCP tools (read, checkout, propose, commit, message, reply). Since your last turn:")
    body = "\n\n".join(f"{i}. {describe(w, names)}" for i, w in enumerate(items, 1))
    return f"{head}\n\n{body}\n"
