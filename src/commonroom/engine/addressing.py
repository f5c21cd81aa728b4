"""Which events are addressed to a participant (docs/spec/PROTOCOL.md 10.1 "Addressed").

Pure functions of an event and a participant id, so the streams (wait,
observe, MCP) all mark the same events the same way:

- `addressed`: a `message.sent` with the participant in `to`, a
  `handoff.requested` to the participant, or any other transition of a
  handoff the participant requested. Never an event the participant caused
  itself.
"""

from __future__ import annotations

from typing import Final

from commonroom.protocol import events as ev
from commonroom.protocol.events import Event

# Handoff transitions the target makes (the requester makes `requested` and `cancelled`).
_TARGET_MOVES: Final = frozenset({
    ev.HandoffAccepted.TYPE, ev.HandoffDeclined.TYPE, ev.HandoffCompleted.TYPE,
    ev.HandoffFailed.TYPE,
})


def addressed(event: Event, participant_id: str) -> bool:
    payload = event.payload
    if isinstance(payload, ev.MessageSent):
        return participant_id in payload.to and payload.participant_id != participant_id
    if isinstance(payload, ev.HandoffRequested):
        return payload.to_participant_id == participant_id
    if isinstance(payload, ev._HandoffPayload):
        # accepted / declined / completed / failed / cancelled of the caller's own request;
        # a cancellation is the requester's own doing, so it is not addressed to it.
        return (payload.from_participant_id == participant_id
                and not isinstance(payload, ev.HandoffCancelled))
    return False
