"""Stream slots: how many streams one session and one participant may hold open at once.

Every long-lived answer holds a connection (a file descriptor) and a task
until it ends: an SSE or WebSocket observe stream, a long-poll `wait`,
`GET /mcp`, `subscriptions/listen`, a legacy MCP session's GET stream. One
bearer that opened 1,000 of them took the room to EMFILE (the open-streams bound, docs/protocol.md),
so each adapter takes a *slot* before it answers and gives it back when the
answer is over:

    slot = room.stream_slots.acquire(start.actor)   # raises limit_exceeded (429)
    ...                                              # serve the stream
    slot.release()                                   # idempotent; or `with slot:`

Past the cap (8 per session and 8 per participant, `protocol.limits`) the
adapter answers `limit_exceeded` with `details.scope = "streams"` and a
Retry-After. The host's own participant (the owner page, the host CLI) is
counted but never refused: the host's machine is trusted, and its page
listener has its own connection cap. Keys are session hashes and participant
ids, never bearers. Everything here runs on the trio thread (no locks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container
from typing import Final

from commonroom.engine.facade import Actor
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError

# A refused stream may retry this much later: streams end when their readers leave.
RETRY_AFTER_SECONDS: Final = 5

_Key = tuple[str, bytes | str]  # ("session", session hash) | ("participant", participant id)


class StreamSlot:
    """One open stream's place in the counts; `release` gives it back (once)."""

    __slots__ = ("_keys", "_slots")

    def __init__(self, slots: StreamSlots | None, keys: tuple[_Key, ...]) -> None:
        self._slots = slots
        self._keys = keys

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots._give_back(self._keys)

    @property
    def held(self) -> bool:
        return self._slots is not None

    def __enter__(self) -> StreamSlot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def __aenter__(self) -> StreamSlot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class StreamSlots:
    """The open-stream counts of one room, per session hash and per participant."""

    def __init__(
        self,
        *,
        per_session: int = limits.STREAMS_PER_SESSION,
        per_participant: int = limits.STREAMS_PER_PARTICIPANT,
        uncapped: Container[str] = (),
    ) -> None:
        if per_session < 1 or per_participant < 1:
            raise ValueError("stream caps must be at least 1")
        self.per_session = per_session
        self.per_participant = per_participant
        self.uncapped = uncapped  # participant ids counted but never refused (the host)
        self._open: Counter[_Key] = Counter()

    def acquire(self, actor: Actor) -> StreamSlot:
        """A slot for one more stream of `actor`, or `limit_exceeded` (scope `streams`)."""
        refusal = self.refusal(actor.session_hash, actor.participant_id)
        if refusal is not None:
            raise refusal
        keys: tuple[_Key, ...] = (("session", actor.session_hash), ("participant", actor.participant_id))
        for key in keys:
            self._open[key] += 1
        return StreamSlot(self, keys)

    def refusal(self, session_hash: bytes, participant_id: str) -> CommonroomError | None:
        """The error `acquire` would raise for this session now, or None.

        Adapters may ask before authorizing a stream (from the engine's
        `session_participant`), so that a flood past the cap costs no store call;
        `acquire` after authorization is what counts.
        """
        if participant_id in self.uncapped:
            return None
        for key, cap, whose in ((("session", session_hash), self.per_session, "session"),
                                (("participant", participant_id), self.per_participant, "participant")):
            if self._open[key] >= cap:
                return CommonroomError(
                    "limit_exceeded",
                    f"this {whose} already has {cap} open streams (SSE, WebSocket, long-poll,"
                    " MCP); close one before opening another",
                    {"scope": "streams", "limit": cap, "per": whose},
                    retry_after_seconds=RETRY_AFTER_SECONDS,
                )
        return None

    def open_streams(self, actor: Actor) -> int:
        """How many streams `actor`'s session holds now."""
        return self._open[("session", actor.session_hash)]

    def __len__(self) -> int:
        """Open streams in all."""
        return sum(n for (kind, _), n in self._open.items() if kind == "session")

    def _give_back(self, keys: tuple[_Key, ...]) -> None:
        for key in keys:
            self._open[key] -= 1
            if self._open[key] <= 0:
                del self._open[key]
