"""What a client does over time, written once: stream reconnection and long-polls.

A plan is a sans-I/O generator (the h11 model): it yields *steps* — what it
needs done — and receives each step's result; a driver (`wire.aio.Runner`, or
`wire.sync.Runner` generated from it) performs them. A step that fails (the
room refused, the connection dropped, the room went silent) is thrown into the
plan at that `yield`, so a plan handles failures with a plain `try`. A plan
holds the policy — what to resend after a drop, how long to wait, when to give
up — and nothing else: no sockets, no clock of its own, no sleeping. That is
why `Client.observe`, `AsyncClient.observe`, `ce observe` and `ce mcp`'s
notification stream reconnect alike, and `wait_for_review` and `ce wait` wait alike.

Steps and what the driver sends back:

- `Call(op, params, hold)`: the operation's JSON answer (the driver knows the routes;
  `hold` is how long the room may keep the request, added to `Timeouts.call`);
- `Open(path, headers)`: None once a 2xx event stream is open (it replaces one
  already open); a refusal is thrown as the error the room answered;
- `Next()`: the stream's next event (`http11.SSEMessage`; heartbeats are skipped) or
  None when the room ended the stream; silence past `Timeouts.silence` is thrown
  as `http11.TimedOut`;
- `Sleep(seconds)`: None; `Now()`: the driver's clock, in seconds;
- `Emit(item)`: None — the driver hands `item` to its consumer.

Answers are wire JSON (dicts), not records: `ce` uses these plans without cattrs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Mapping
from typing import Any, Final, NoReturn, TypeAlias, TypeVar

from commonroom.client import errors
from commonroom.protocol import vocabulary
from commonroom.wire.http11 import SSEMessage
from commonroom.wire.timeouts import DEFAULT

T = TypeVar("T")

# Proposal statuses after a review or instead of one: a review wait ends on these.
DECIDED: Final = frozenset(vocabulary.PROPOSAL_DECIDED)
# The room holds a long-poll at most 25 s.
WAIT_HOLD_SECONDS: Final = 25
# A session that may not observe keeps its presence by asking for the status this often.
STATUS_POLL_SECONDS: Final = 30.0
# After a failed request of a hold, when the room gives no retry_after_seconds.
RETRY_SECONDS: Final = 2.0


# -- steps ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Call:
    op: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    hold: float = 0.0


@dataclasses.dataclass(frozen=True)
class Open:
    path: str
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Next:
    pass


@dataclasses.dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclasses.dataclass(frozen=True)
class Now:
    pass


@dataclasses.dataclass(frozen=True)
class Emit:
    item: Any


Step: TypeAlias = Call | Open | Next | Sleep | Now | Emit
Plan: TypeAlias = Generator[Step, Any, T]


# -- what plans emit besides answers ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Connected:
    """The stream is open; `again` after a drop (a consumer may have state to restore)."""

    again: bool


@dataclasses.dataclass(frozen=True)
class Reconnecting:
    """The stream dropped (`reason`); it is re-opened after `delay` s from `last_event_id`."""

    delay: float
    reason: str
    last_event_id: str


@dataclasses.dataclass(frozen=True)
class Unreachable:
    """A hold lost the room (`reason`); it keeps trying (emitted once per outage)."""

    reason: str


# -- plans --------------------------------------------------------------------------------


def events(
    path: str, *, since: int | None = None, retry: float | None = None,
    headers: Mapping[str, str] | None = None, resume: bool = True, persistent: bool = False,
    backoff: tuple[float, float] | None = None,
) -> Plan[NoReturn]:
    """An event stream for ever: replayed after `since`, then live, re-opened after each drop.

    Emits every event (`SSEMessage`), `Connected` each time the stream opens and
    `Reconnecting` before each wait. A drop (the connection failed, the room ended
    the stream or went silent) re-opens it after the room's `retry:` delay — or the
    fixed `retry`, or an exponential `backoff=(first, most)` — with `Last-Event-ID`
    when `resume`, so nothing is skipped and nothing repeats. Any other refusal (an
    ended session, a missing capability) ends the plan with its error, and so does a
    failing first connection unless `persistent`.
    """
    last_id = "" if since is None else str(since)
    first_delay = retry if retry is not None else backoff[0] if backoff else DEFAULT.retry
    delay = first_delay
    connected = False
    while True:
        wanted = dict(headers or {})
        if resume and last_id:
            wanted["Last-Event-ID"] = last_id
        try:
            yield Open(path, wanted)
            yield Emit(Connected(again=connected))
            connected, delay = True, first_delay
            while (message := (yield Next())) is not None:
                if message.retry is not None and retry is None and backoff is None:
                    delay = first_delay = message.retry / 1000
                if message.id:
                    last_id = message.id
                yield Emit(message)
            reason = "the room ended the stream"
        except errors.TransportUnavailable as error:
            if not (connected or persistent):
                raise
            reason = error.message
        yield Emit(Reconnecting(delay, reason, last_id))
        yield Sleep(delay)
        if backoff is not None:
            delay = min(backoff[1], delay * 2)


def review(proposal_id: str, timeout: float | None = None) -> Plan[dict[str, Any]]:
    """Wait until a proposal is decided (approved, rejected, superseded, ...); its detail answer.

    Long-polls `workspace.wait` from the room's latest event and reads the
    proposal again only when an event names it (or the room lost the cursor).
    Raises `commonroom.Timeout` after `timeout` seconds (None: no limit).
    """
    deadline = None if timeout is None else (yield Now()) + timeout
    cursor = (yield Call("workspace.room"))["latest_event_id"]
    current: dict[str, Any] = yield Call("workspace.proposal", {"proposal_id": proposal_id})
    while current.get("status") not in DECIDED:
        hold = float(WAIT_HOLD_SECONDS)
        if deadline is not None:
            hold = min(hold, deadline - (yield Now()))
            if hold <= 0:
                raise errors.Timeout(
                    f"proposal {proposal_id} is still {current.get('status')} after {timeout:g} s",
                    {"proposal_id": proposal_id, "status": current.get("status")})
        answer = yield Call("workspace.wait", {"cursor": cursor, "timeout_seconds": hold}, hold)
        cursor = answer.get("cursor", cursor)
        if answer.get("resync") or any(_names(event, proposal_id) for event in answer.get("events", ())):
            current = yield Call("workspace.proposal", {"proposal_id": proposal_id})
    return current


def answered(thread: Mapping[str, Any]) -> bool:
    """A thread's question is answered: its newest comment is someone else's, or it is closed."""
    comments = thread.get("comments") or []
    if thread.get("status") != "open":
        return True
    return bool(comments) and comments[-1].get("participant_id") != thread.get("author_id")


def reply(thread_id: str, timeout: float | None = None) -> Plan[dict[str, Any]]:
    """Wait until someone other than its author answers a thread (or it is resolved, outdated).

    The author of a blocking question waits here; nobody else is held. Long-polls
    `workspace.wait` and reads the thread again only when an event names it.
    Raises `commonroom.Timeout` after `timeout` seconds (None: no limit).
    """
    deadline = None if timeout is None else (yield Now()) + timeout
    cursor = (yield Call("workspace.room"))["latest_event_id"]
    thread: dict[str, Any] = yield Call("workspace.thread", {"thread_id": thread_id})
    while not answered(thread):
        hold = float(WAIT_HOLD_SECONDS)
        if deadline is not None:
            hold = min(hold, deadline - (yield Now()))
            if hold <= 0:
                raise errors.Timeout(
                    f"thread {thread_id} has no answer after {timeout:g} s",
                    {"thread_id": thread_id, "status": thread.get("status")})
        answer = yield Call("workspace.wait", {"cursor": cursor, "timeout_seconds": hold}, hold)
        cursor = answer.get("cursor", cursor)
        if answer.get("resync") or any(_names(event, thread_id, "thread_id")
                                       for event in answer.get("events", ())):
            thread = yield Call("workspace.thread", {"thread_id": thread_id})
    return thread


def presence() -> Plan[NoReturn]:
    """Keep a session present for ever (`ce join`'s hold): any request renews presence.

    Long-polls `workspace.wait` (one request per 25 s); a session without
    `observe` asks for `workspace.status` every 30 s instead. An ended session
    (401) ends the plan with that error; an unreachable room (say, restarting)
    is tried again, after `Unreachable` is emitted once.
    """
    cursor: int | None = None
    use_wait = True
    warned = False
    while True:
        try:
            if use_wait:
                if cursor is None:
                    cursor = yield from _latest_event_id()
                answer = yield Call("workspace.wait", {"cursor": cursor,
                                                       "timeout_seconds": WAIT_HOLD_SECONDS},
                                    WAIT_HOLD_SECONDS)
                cursor = _next_cursor(answer, cursor)
            else:
                yield Call("workspace.status")
                yield Sleep(STATUS_POLL_SECONDS)
            warned = False
        except errors.CommonroomError as error:
            if error.code in ("unauthorized", "session_expired"):
                raise
            if error.code == "permission_denied":
                if use_wait:
                    use_wait = False
                else:
                    yield Sleep(STATUS_POLL_SECONDS)  # a refused request still counts
                continue
            if error.code == "transport_unavailable" and not warned:
                yield Emit(Unreachable(error.message))
                warned = True
            delay = error.recovery.get("retry_after_seconds", RETRY_SECONDS)
            yield Sleep(float(delay) if isinstance(delay, (int, float)) else RETRY_SECONDS)


def _latest_event_id() -> Plan[int]:
    """Where to long-poll from: the room's latest event (0 when the session cannot read)."""
    try:
        room = yield Call("workspace.room")
    except errors.PermissionDenied:
        return 0
    latest = room.get("latest_event_id") if isinstance(room, dict) else None
    return latest if isinstance(latest, int) else 0


def _next_cursor(answer: Any, cursor: int) -> int | None:
    if not isinstance(answer, dict):
        return cursor
    new = answer.get("cursor")
    if answer.get("resync"):
        return new if isinstance(new, int) else None
    if isinstance(new, int):
        return new
    ids = [e.get("event_id") for e in answer.get("events") or [] if isinstance(e, dict)]
    return max((i for i in ids if isinstance(i, int)), default=cursor)


def _names(event: Any, value: str, key: str = "proposal_id") -> bool:
    payload = event.get("payload") if isinstance(event, dict) else None
    return isinstance(payload, dict) and payload.get(key) == value


__all__ = [
    "DECIDED", "WAIT_HOLD_SECONDS", "Call", "Connected", "Emit", "Next", "Now", "Open", "Plan",
    "Reconnecting", "SSEMessage", "Sleep", "Step", "Unreachable", "answered", "events", "presence",
    "reply", "review",
]
