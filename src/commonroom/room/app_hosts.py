"""App requests: which of the host's pages hosts which task's app, and the requests in flight.

docs/spec/PROTOCOL.md section 20 (the seed peer's `room_app_request`): an agent's
`task.app_request` goes to *one* current page that hosts that task's app and
waits for the app's reply, at most `APP_REQUEST_TIMEOUT_SECONDS` (15 s). Nothing
is queued, retried or kept: a request exists only while its caller waits, and
only here, in the room's memory (the engine checked it and forgot it).

A page that runs apps holds one host line (`open`: the owner listener's
`GET /owner/app-host` event stream carries its requests) and says which tasks'
apps it runs now (`host`). The request goes to the page that started hosting
that task's app last (the newest tab). The page answers through
`POST /owner/app-host/reply` (`answer`). Refusals, all 503
`transport_unavailable` with `details.reason`:

- `no_app_host`: no page hosts the task's app, or the page hosting it went away
  while the request waited (its line closed): at once, never after a wait;
- `app_timeout`: no answer within 15 s;
- `app_error`: the app had no `onRequest` handler, its handler failed, or its
  reply was not JSON within `APP_REPLY_MAX_BYTES` (docs/protocol.md).

A page has at most `LINE_BUFFER` requests waiting on it; one more is 429
`limit_exceeded` (`details.scope: "app_requests"`), never queued.
"""

from __future__ import annotations

import itertools
import re
import secrets
from typing import Any, Final

import attrs
import trio

from commonroom.engine.facade import AppRequestStart
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.task_surfaces import bounded_json

NO_APP_HOST: Final = "no_app_host"
APP_TIMEOUT: Final = "app_timeout"
APP_ERROR: Final = "app_error"
LINE_BUFFER: Final = 32  # requests written to one page and not yet taken by its stream
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def unavailable(reason: str, task_id: str, message: str) -> CommonroomError:
    return CommonroomError("transport_unavailable", message, {"reason": reason, "task_id": task_id})


@attrs.frozen
class AppRequestItem:
    """One request as the page's line carries it."""

    request_id: str
    task_id: str
    app_revision: int
    payload: Any

    def wire(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class _Pending:
    host_id: str
    task_id: str
    done: trio.Event = attrs.field(factory=trio.Event)
    reply: Any = None
    error: CommonroomError | None = None

    def finish(self, reply: Any = None, error: CommonroomError | None = None) -> None:
        if not self.done.is_set():
            self.reply, self.error = reply, error
            self.done.set()


@attrs.define
class AppHostLine:
    """One page's line: its id (the page names it in `host` and `answer`) and its requests."""

    host_id: str
    send: trio.MemorySendChannel[AppRequestItem]
    receive: trio.MemoryReceiveChannel[AppRequestItem]
    hosted: dict[str, int] = attrs.field(factory=dict)  # task_id -> when it started hosting it
    pending: dict[str, _Pending] = attrs.field(factory=dict)


class AppHosts:
    def __init__(self, timeout_seconds: float = limits.APP_REQUEST_TIMEOUT_SECONDS) -> None:
        self.timeout_seconds = timeout_seconds
        self._lines: dict[str, AppHostLine] = {}
        self._order = itertools.count(1)

    def open(self) -> AppHostLine:
        send, receive = trio.open_memory_channel[AppRequestItem](LINE_BUFFER)
        line = AppHostLine("aph_" + secrets.token_urlsafe(18), send, receive)
        self._lines[line.host_id] = line
        return line

    def close(self, host_id: str) -> None:
        """The page's line ended: it hosts nothing, and its requests in flight fail at once."""
        line = self._lines.pop(host_id, None)
        if line is None:
            return
        line.send.close()
        for pending in line.pending.values():
            pending.finish(error=unavailable(
                NO_APP_HOST, pending.task_id, "the page hosting the task's app went away"))
        line.pending.clear()

    def close_all(self) -> None:
        for host_id in list(self._lines):
            self.close(host_id)

    def host(self, host_id: str, task_ids: list[str]) -> list[str]:
        """The tasks whose apps the page runs now; a newly hosted one makes it that app's newest host."""
        line = self._line(host_id)
        line.hosted = {task_id: line.hosted.get(task_id) or next(self._order)
                       for task_id in dict.fromkeys(task_ids)}
        return list(line.hosted)

    def hosts_of(self, task_id: str) -> int:
        return sum(1 for line in self._lines.values() if task_id in line.hosted)

    def _line(self, host_id: str) -> AppHostLine:
        line = self._lines.get(host_id)
        if line is None:
            raise CommonroomError("invalid_request", "no such app host line (it ended): open"
                                  " /owner/app-host again", {"field": "host_id"})
        return line

    def _newest_host(self, task_id: str) -> AppHostLine | None:
        hosting = [line for line in self._lines.values() if task_id in line.hosted]
        return max(hosting, key=lambda line: line.hosted[task_id], default=None)

    async def ask(self, start: AppRequestStart) -> Any:
        """Carry one request to the newest page hosting its app; its reply, or the refusal."""
        task_id = start.task_id
        line = self._newest_host(task_id)
        if line is None:
            raise unavailable(NO_APP_HOST, task_id,
                              "no page hosts the task's app now: the host has to open it")
        if len(line.pending) >= LINE_BUFFER:
            raise CommonroomError(
                "limit_exceeded", f"the page hosting the task's app has {LINE_BUFFER} requests"
                " waiting already; ask again when one is answered",
                {"scope": "app_requests", "task_id": task_id},
                retry_after_seconds=int(self.timeout_seconds))
        request_id = "apr_" + secrets.token_urlsafe(12)
        pending = _Pending(line.host_id, task_id)
        line.pending[request_id] = pending
        try:
            try:
                # Never blocks: a line holds at most LINE_BUFFER requests, all of them pending.
                line.send.send_nowait(AppRequestItem(request_id, task_id, start.app_revision,
                                                     start.payload))
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                raise unavailable(NO_APP_HOST, task_id,
                                  "the page hosting the task's app went away") from None
            with trio.move_on_after(self.timeout_seconds):
                await pending.done.wait()
        finally:
            line.pending.pop(request_id, None)
        if not pending.done.is_set():
            raise unavailable(APP_TIMEOUT, task_id, f"the task's app did not answer within"
                              f" {self.timeout_seconds:g} s")
        if pending.error is not None:
            raise pending.error
        return pending.reply

    def answer(self, host_id: str, request_id: str, reply: Any = None,
               error: str | None = None) -> None:
        """The page's answer to a request it was sent; raises `invalid_request` when there is no
        such request waiting (answered, timed out) or the reply is not within bounds."""
        line = self._line(host_id)
        pending = line.pending.get(request_id)
        if pending is None:
            raise CommonroomError("invalid_request", "no such request is waiting (it was"
                                  " answered or timed out)", {"field": "request_id"})
        if error is not None:
            pending.finish(error=unavailable(APP_ERROR, pending.task_id,
                                             "the task's app could not answer: "
                                             + _CONTROL.sub("", error[:200])))
            return
        try:
            bounded_json(reply, "reply", limits.APP_REPLY_MAX_BYTES)
        except CommonroomError as refused:
            pending.finish(error=unavailable(APP_ERROR, pending.task_id,
                                             f"the task's app answered no valid reply: {refused.message}"))
            raise
        pending.finish(reply=reply)
