"""`ce observe`: the room's events as JSON lines, resuming by itself.

Theory of operation: hold `GET /workspace/observe` and print each event's
JSON on its own line. When the connection drops (the room restarted, the
network blinked) dial again with `Last-Event-ID` = the last id printed, so the
output has no gap and no duplicate across the reconnect. A `resync` is printed
as `{"type": "resync", ...}` so a script can re-read the room; the stream then
continues from the latest event. A refused session (revoked, expired, left)
ends the command with the error object and a non-zero exit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import aclosing

import trio

from commonroom.cli import byteclient
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.transport import registry

FINAL_ERRORS = frozenset({"unauthorized", "session_expired", "permission_denied", "invalid_request"})
BACKOFF_START = 0.25
BACKOFF_MAX = 5.0


async def observe(
    hint: TransportHint,
    session: str,
    since: int | None,
    emit: Callable[[str], None],
    *,
    give_up_after: float | None = None,
) -> None:
    """Print events until the session is refused; raises that CommonroomError.

    `give_up_after`: seconds of failed dialing after which transport_unavailable
    is raised (None: keep trying, as a dashboard wants).
    """
    cursor = since
    backoff = BACKOFF_START
    failing_since: float | None = None
    while True:
        try:
            cursor = await _one_stream(hint, session, cursor, emit)
            backoff = BACKOFF_START
            failing_since = None
        except CommonroomError as error:
            if error.code in FINAL_ERRORS:
                raise
            now = trio.current_time()
            failing_since = failing_since if failing_since is not None else now
            if give_up_after is not None and now - failing_since > give_up_after:
                raise
        await trio.sleep(backoff)
        backoff = min(BACKOFF_MAX, backoff * 2)


async def _one_stream(
    hint: TransportHint, session: str, cursor: int | None, emit: Callable[[str], None]
) -> int | None:
    stream = await registry.dial(hint)
    headers = {"Authorization": f"Bearer {session}"}
    path = "/workspace/observe"
    if cursor is not None:
        headers["Last-Event-ID"] = str(cursor)
        path += f"?since_event_id={cursor}"
    status, _, chunks = await byteclient.open_stream(stream, path, headers=headers)
    if status != 200:
        body = await chunks.read_all()
        try:
            wire = json.loads(body)
            error = CommonroomError(wire["error"], wire.get("message", ""), wire.get("details") or {})
        except (ValueError, KeyError, TypeError):
            error = CommonroomError("transport_unavailable", f"observe answered HTTP {status}")
        raise error
    async with aclosing(byteclient.iter_sse(chunks)) as messages:
        async for message in messages:
            if message.comment is not None:
                continue
            if message.event == "resync":
                data = json.loads(message.data)
                emit(json.dumps({"type": "resync", **data}))
                cursor = int(data["latest_event_id"])
                continue
            if message.id:
                emit(message.data)
                cursor = int(message.id)
    return cursor
