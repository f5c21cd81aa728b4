"""What `Client` and `AsyncClient` share beyond the operation methods: state, calls, typed answers.

The shells (`sync.py`, `aio.py`) differ only where blocking and trio code
must: how a `Call` is carried, and the methods built on the wire's plans
(`observe`, `wait_for_review`) or returning context managers (`checkout`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterable, Iterator
from typing import Any, Final, NoReturn, TypeVar

import attrs

from commonroom.client import errors
from commonroom.client.operations import Call
from commonroom.client.routes import ROUTES
from commonroom.protocol import records
from commonroom.protocol.events import Event, from_dict
from commonroom.wire import calls, plans
from commonroom.wire.http11 import SSEMessage
from commonroom.wire.plans import DECIDED, WAIT_HOLD_SECONDS
from commonroom.wire.timeouts import DEFAULT, Timeouts

T = TypeVar("T")

__all__ = ["DECIDED", "ROUTES", "WAIT_HOLD_SECONDS", "ClientBase", "Resync"]

OBSERVE_PATH: Final = ROUTES["workspace.observe"].path


@attrs.frozen
class Resync:
    """The room could not replay from the cursor: read `room()` again, then go on."""

    reason: str
    oldest_event_id: int | None
    latest_event_id: int | None


class ClientBase:
    """A session in a room: who (`session`), where (`hint`), and within which `timeouts`.

    `timeout` is the bound of one call (`timeouts.call`); a long-poll adds its hold.
    """

    def __init__(self, invitation: str, *, session: str, timeout: float | None = None,
                 hint: dict[str, Any] | None = None, timeouts: Timeouts | None = None) -> None:
        self.invitation = invitation
        self.session = session
        self.timeouts = timeouts or DEFAULT
        if timeout is not None:
            self.timeouts = dataclasses.replace(self.timeouts, call=timeout)
        self.timeout = self.timeouts.call
        self.hint = hint if hint is not None else calls.hint_of(invitation)
        self.joined: records.Joined | None = None
        self._connection = self._open_connection()

    def _open_connection(self) -> Any:
        """The shell's `wire.*.Connection` to the room (its type is the shell's)."""
        raise NotImplementedError

    def _adopt(self, joined: records.Joined) -> None:
        self.session = joined.session_id
        self.joined = joined

    def _join_call(self, name: str, kind: str) -> Call[records.Joined]:
        return Call("session.join", records.Joined, {
            "invite": self.invitation.strip(), "name": name, "kind": kind,
            "transport": self.hint.get("type")})

    def _wire_call(self, call: Call[Any]) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
        """The arguments of `Connection.call` for `call`: method, path, params, keywords."""
        found = ROUTES[call.op]
        # A parameter typed as a record (a permission request's options) goes as its JSON.
        params = records.to_wire(call.params)
        return found.method, found.path, params, {"bearer": self.session, "hold": call.hold}


def checkout_call(region: str, minutes: int | None) -> Call[records.Lease]:
    return Call("workspace.checkout", records.Lease, {"region": region, "minutes": minutes})


LEAVE: Final = Call("workspace.leave", records.Left, {})


def lease_fields(taken: records.Lease) -> dict[str, Any]:
    return attrs.asdict(taken, recurse=False)


@contextlib.contextmanager
def releasing(exc: object) -> Iterator[None]:
    """Around a lease's release at the end of its `with` block: the failures that may go unsaid.

    A lease that had ended already (released by hand, expired, ended by the
    host) is fine; anything else is raised, unless the block is already failing
    with `exc` (its error matters more than the release).
    """
    try:
        yield
    except errors.InvalidRequest as gone:
        if gone.field != "lease_id":
            raise
    except errors.CommonroomError:
        if exc is None:
            raise


def events_of(items: Iterable[Any]) -> Iterator[Event | Resync]:
    """The events and resyncs among what the event-stream plan emitted."""
    for item in items:
        event = stream_item(item)
        if event is not None:
            yield event


def observe_plan(since: int | None, retry: float | None) -> plans.Plan[NoReturn]:
    return plans.events(OBSERVE_PATH, since=since, retry=retry)


def record(answer: Any, cls: type[T]) -> T:
    """`answer` as record `cls`; a malformed answer is `TransportUnavailable`, not a traceback."""
    try:
        return records.from_wire(answer, cls)
    except Exception as exc:  # cattrs raises several kinds; all mean "not the agreed shape"
        raise errors.TransportUnavailable(
            "transport_unavailable",
            f"the room's answer is not a {cls.__name__} ({type(exc).__name__})",
        ) from None


def thread_of(answer: Any) -> records.Thread:
    """A `workspace.thread` answer as its `Thread` record (what `wait_for_reply` returns)."""
    return record(answer, records.Thread)


def proposal_of(detail: Any) -> records.Proposal:
    """A `workspace.proposal` answer as the `Proposal` record `wait_for_review` returns."""
    fields = {field.name for field in attrs.fields(records.Proposal)}
    if not isinstance(detail, dict):
        return record(detail, records.Proposal)
    return record({key: value for key, value in detail.items() if key in fields}, records.Proposal)


def stream_item(item: Any) -> Event | Resync | None:
    """What `observe` yields for an item of the event-stream plan (None: nothing)."""
    if not isinstance(item, SSEMessage) or item.is_comment:
        return None
    try:
        data = json.loads(item.data)
    except json.JSONDecodeError:
        return None
    if item.event == "resync" and isinstance(data, dict):
        oldest, latest = data.get("oldest_event_id"), data.get("latest_event_id")
        return Resync(str(data.get("reason", "")), oldest if isinstance(oldest, int) else None,
                      latest if isinstance(latest, int) else None)
    try:
        return from_dict(data)
    except Exception:
        return None  # an event type newer than this client: skip it
