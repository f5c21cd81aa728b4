"""What a client does over time, written once: stream reconnection and long-polls.

A plan is a sans-I/O generator (the h11 model): it yields *steps* — what it
needs done — and receives each step's result; a driver (`wire.aio.Runner`, or
`wire.sync.Runner` generated from it) performs them. A step that fails (the
room refused, the connection dropped, the room went silent) is thrown into the
plan at that `yield`, so a plan handles failures with a plain `try`. A plan
holds the policy — what to resend after a drop, how long to wait, when to give
up — and nothing else: no sockets, no clock of its own, no sleeping. That is
why `Client.observe`, `AsyncClient.observe`, `ce observe` and `ce mcp`'s
notification stream reconnect alike, and `wait_for_review` and `ce wait` wait (and
outlive a room restart) alike.

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
from collections.abc import Callable, Generator, Mapping
from typing import Any, Final, NoReturn, TypeAlias, TypeVar

from commonroom.protocol import vocabulary
from commonroom.wire import errors
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
# A wait for a person that lost the room tries again after these pauses (doubling to the most).
RECONNECT_BACKOFF: Final = (0.5, 5.0)


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
    """Wait until a proposal is decided (approved, rejected, superseded, ...); the proposal.

    Holds `workspace.proposal.wait` (the room answers once the proposal left pending,
    else after 25 s with `waiting: true`, and it is asked again). A room that cannot
    be reached (restarting, say) is tried again with `Reconnecting` emitted before each
    pause. Raises `commonroom.Timeout` after `timeout` seconds (None: no limit).
    """
    answer = yield from _wait_for_person(
        "workspace.proposal.wait", "proposal_id", proposal_id, timeout,
        lambda last: (f"proposal {proposal_id} is still {_status(last, 'proposal')}",
                      {"proposal_id": proposal_id, "status": _status(last, "proposal")}))
    proposal: dict[str, Any] = answer["proposal"]
    return proposal


def answered(thread: Mapping[str, Any]) -> bool:
    """A thread's question is answered: its newest comment is someone else's, or it is closed."""
    comments = thread.get("comments") or []
    if thread.get("status") != "open":
        return True
    return bool(comments) and comments[-1].get("participant_id") != thread.get("author_id")


def reply(thread_id: str, timeout: float | None = None) -> Plan[dict[str, Any]]:
    """Wait until someone other than the caller has a thread's last word (or it is resolved,
    outdated); the thread.

    The author of a blocking question waits here; nobody else is held. Holds
    `workspace.thread.wait` like `review` holds the proposal's wait, reconnecting alike.
    Raises `commonroom.Timeout` after `timeout` seconds (None: no limit).
    """
    answer = yield from _wait_for_person(
        "workspace.thread.wait", "thread_id", thread_id, timeout,
        lambda last: (f"thread {thread_id} has no answer",
                      {"thread_id": thread_id, "status": _status(last, "thread")}))
    thread: dict[str, Any] = answer["thread"]
    return thread


def _status(answer: Mapping[str, Any] | None, key: str) -> Any:
    record = answer.get(key) if answer is not None else None
    return record.get("status") if isinstance(record, Mapping) else None


def _wait_for_person(
    op: str, key: str, value: str, timeout: float | None,
    describe: Callable[[Mapping[str, Any] | None], tuple[str, dict[str, Any]]],
) -> Plan[dict[str, Any]]:
    """Ask `op` again and again until its answer is not `waiting`; survive the room's restarts.

    Only an unreachable room (or a rate limit) is waited out; any other refusal (no such
    record, an ended session) ends the plan with its error.
    """
    deadline = None if timeout is None else (yield Now()) + timeout
    last: dict[str, Any] | None = None
    delay = RECONNECT_BACKOFF[0]
    while True:
        hold = float(WAIT_HOLD_SECONDS)
        if deadline is not None:
            hold = min(hold, deadline - (yield Now()))
            if hold <= 0:
                message, details = describe(last)
                raise errors.Timeout(f"{message} after {timeout:g} s", details)
        try:
            answer = yield Call(op, {key: value, "timeout_seconds": hold}, hold)
        except errors.CommonroomError as error:
            if error.code not in ("transport_unavailable", "limit_exceeded"):
                raise
            retry = error.recovery.get("retry_after_seconds")
            pause = float(retry) if isinstance(retry, (int, float)) else delay
            yield Emit(Reconnecting(pause, error.message, ""))
            yield Sleep(pause)
            delay = min(RECONNECT_BACKOFF[1], delay * 2)
            continue
        delay = RECONNECT_BACKOFF[0]
        if isinstance(answer, dict) and not answer.get("waiting", True):
            return answer
        last = answer if isinstance(answer, dict) else last


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


__all__ = [
    "DECIDED", "WAIT_HOLD_SECONDS", "Call", "Connected", "Emit", "Next", "Now", "Open", "Plan",
    "Reconnecting", "SSEMessage", "Sleep", "Step", "Unreachable", "answered", "events", "presence",
    "reply", "review",
]
