"""`ce mcp --channel`: the room's attention as Claude Code channel notifications (PROTOCOL section 19).

Claude Code starts no turn on an ordinary MCP notification, but it does on a
*channel*: a stdio MCP server that declares the experimental capability
`claude/channel` in its `initialize` answer and writes
`notifications/claude/channel` (`params: {content, meta}`; each `meta` key, an
identifier, becomes an attribute of the `<channel>` tag the session sees). With
`claude/channel/permission` declared too, Claude Code sends the session's tool
permission prompts to the server as `notifications/claude/channel/permission_request`
(`params: {request_id, tool_name, description, input_preview}`) and applies the
verdict the server writes back as `notifications/claude/channel/permission`
(`params: {request_id, behavior: "allow" | "deny"}`); its own terminal dialog
stays open, and whichever answer comes first applies. (Claude Code's channels
reference, research preview, v2.1.80+ and v2.1.81+ for the permission relay.)

So the bridge, in channel mode, also holds the room's observe stream from the
moment it starts and writes each wake of `cli/attention.Attention` (the same
rules as `ce agent`) as a channel notification; a permission prompt becomes a
room permission request with the options Allow and Deny, and the host's answer
(or `deny` once it expires: fail closed) goes back as the verdict.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from commonroom.cli import attention
from commonroom.client.routes import ROUTES
from commonroom.protocol.errors import CommonroomError
from commonroom.wire import aio, plans

CAPABILITIES: Final[dict[str, dict[str, Any]]] = {"claude/channel": {}, "claude/channel/permission": {}}
NOTIFICATION: Final = "notifications/claude/channel"
PERMISSION_REQUEST: Final = "notifications/claude/channel/permission_request"
PERMISSION_VERDICT: Final = "notifications/claude/channel/permission"
OPTIONS: Final = [{"option_id": "allow", "name": "Allow", "kind": "allow_once"},
                  {"option_id": "deny", "name": "Deny", "kind": "reject_once"}]
RECONNECT_BACKOFF: Final = (0.25, 5.0)

Write = Callable[[Any], Awaitable[None]]


class Channel:
    """The channel half of a bridge: one observe stream, its wakes, the permission relay."""

    def __init__(self, room: aio.Connection, bearer: str, participant_id: str, write: Write,
                 diag: Callable[[str], None]) -> None:
        self.room = room
        self.bearer = bearer
        self.attention = attention.Attention(participant_id)
        self.write = write
        self.diag = diag
        self.names: dict[str, str] = {}
        self.waiting: dict[str, str] = {}  # permission_id -> Claude Code's request_id
        self.cursor: int | None = None

    async def call(self, op: str, params: Mapping[str, Any] | None = None) -> Any:
        route = ROUTES[op]
        return await self.room.call(str(route[0]), str(route[1]), params or {}, bearer=self.bearer)

    async def follow(self) -> None:
        with contextlib.suppress(CommonroomError):
            for part in (await self.call("workspace.participants")).get("participants", []):
                self.names[str(part.get("participant_id"))] = str(part.get("name"))
        self.cursor = int((await self.call("workspace.room"))["latest_event_id"])
        runner = aio.Runner(self.room, bearer=self.bearer, routes=ROUTES)
        plan = plans.events("/workspace/observe", since=self.cursor, persistent=True,
                            backoff=RECONNECT_BACKOFF)
        async with contextlib.aclosing(runner.iterate(plan)) as items:
            async for item in items:
                if isinstance(item, plans.Connected) and not item.again:
                    self.diag("channel open: what is addressed to you arrives as channel"
                              " notifications")
                if isinstance(item, plans.SSEMessage) and item.data and item.event != "resync":
                    with contextlib.suppress(ValueError):
                        await self.handle(json.loads(item.data))

    async def handle(self, event: Mapping[str, Any]) -> None:
        event_id = event.get("event_id")
        if not isinstance(event_id, int) or (self.cursor is not None and event_id <= self.cursor):
            return
        self.cursor = event_id
        kind = event.get("type")
        payload = event.get("payload")
        payload = payload if isinstance(payload, Mapping) else {}
        if kind == "participant.joined":
            self.names[str(payload.get("participant_id"))] = str(payload.get("name"))
        if kind in ("permission.answered", "permission.expired"):
            request_id = self.waiting.pop(str(payload.get("permission_id")), None)
            if request_id is not None:
                allowed = kind == "permission.answered" and payload.get("option_id") == "allow"
                await self.write({"jsonrpc": "2.0", "method": PERMISSION_VERDICT, "params": {
                    "request_id": request_id, "behavior": "allow" if allowed else "deny"}})
        wake = self.attention.wake(event)
        if wake is None:
            return
        meta = {"source": "commonroom", "event_id": str(event_id), "event_type": str(kind)}
        for key in ("proposal_id", "thread_id", "handoff_id", "message_id"):
            if isinstance(wake.get(key), str):
                meta[key] = str(wake[key])
        if isinstance(wake.get("from"), str):
            meta["from_participant"] = str(wake["from"])
            meta["from_name"] = self.names.get(str(wake["from"]), str(wake["from"]))
        await self.write({"jsonrpc": "2.0", "method": NOTIFICATION, "params": {
            "content": attention.describe(wake, self.names), "meta": meta}})

    async def relay_permission(self, params: Mapping[str, Any]) -> None:
        """A Claude Code permission prompt as a room permission request (deny if it cannot be)."""
        request_id = str(params.get("request_id") or "")
        if not request_id:
            return
        body = {"title": _cut(str(params.get("description") or params.get("tool_name")
                                  or "permission"), 200) or "permission",
                "tool": _cut(str(params.get("tool_name") or ""), 200),
                "input_preview": _cut(str(params.get("input_preview") or ""), 500),
                "options": OPTIONS}
        try:
            asked = await self.call("permission.request", body)
        except CommonroomError as error:
            self.diag(f"could not ask the host for permission ({error.message}): denied")
            await self.write({"jsonrpc": "2.0", "method": PERMISSION_VERDICT,
                              "params": {"request_id": request_id, "behavior": "deny"}})
            return
        self.waiting[str(asked["permission_id"])] = request_id


def _cut(text: str, limit: int) -> str:
    text = "".join(ch if ch in "\t\n" or not (ord(ch) < 32 or 127 <= ord(ch) < 160) else " "
                   for ch in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def participant_id_of(room: aio.Connection, bearer: str) -> str:
    """Who this session is (attention needs its own participant id): `workspace.ping`."""
    ping = ROUTES["workspace.ping"]
    answer = await room.call(str(ping[0]), str(ping[1]), {}, bearer=bearer)
    return str(answer["participant_id"])


