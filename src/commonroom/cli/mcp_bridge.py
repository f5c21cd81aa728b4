"""`ce mcp`: a stdio MCP server that bridges local MCP clients to a room's `POST /mcp`.

Theory of operation
-------------------
Most stdio MCP clients still open with the legacy `initialize` handshake, so
the bridge answers `initialize`, `notifications/initialized` and `ping`
itself and forwards every other request to the room in the 2026-07-28
envelope: it adds `params._meta` (protocol version, client capabilities,
client info from `initialize`) to a bare request and the routing headers
(`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, base64-encoded when the
value is not plain ASCII) and the bearer; that envelope is sans-I/O, in
`mcp_envelope.py`. Each request runs in its own task on its own connection
(`commonroom.wire.aio`, `Connection: close`), so a long-poll never holds up
the others; each answer is written as one line on stdout. An SSE answer
(`subscriptions/listen`) is written message by message. The wire's timeouts
bound every exchange, and a stream silent past `Timeouts.silence` (a
half-open connection) fails instead of hanging.

A second task holds `GET /mcp` open and writes its notifications to stdout;
the wire's event-stream plan (`wire.plans.events`, with backoff) re-opens it
after a drop or a silence. The room keeps `resources/subscribe` state in
memory, so after a reconnect the bridge subscribes again to what the client
subscribed and tells the client every such resource may have changed (a
notification is a hint; the client rereads).

Without `--session`, the bridge joins once with the invitation and keeps
the session in a per-user profile (`mcp_profile`), so a client configured
once keeps working across its own restarts and the room's; a single-use
invitation is spent only once. A profile session the room no longer accepts
is replaced by joining again (when the invitation still allows it).

stdout carries only JSON-RPC; diagnostics go to stderr. EOF on stdin ends
the bridge with exit status 0, and so do SIGINT and SIGTERM, whatever
disposition the bridge inherited (`runtime.until_stopped`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, Final

import attrs
import trio

from commonroom import __version__
from commonroom.cli import mcp_profile, runtime
from commonroom.cli.mcp_envelope import (
    BRIDGE_ERROR,
    LEGACY_VERSIONS,
    VERSION,
    RoomAnswer,
    mcp_headers,
    with_meta,
)
from commonroom.client import errors
from commonroom.client.routes import ROUTES
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import Invitation, TransportHint
from commonroom.wire import aio, http11, plans
from commonroom.wire.http11 import NoResponse
from commonroom.wire.timeouts import Timeouts

# `GET /mcp` is re-opened after this long, doubling up to the most (the client's
# notifications are hints, so a quick first retry matters more than the room's `retry:`).
RECONNECT_BACKOFF: Final = (0.25, 5.0)
# `initialize` waits at most this long for the room's instructions (they are optional).
DISCOVER_SECONDS: Final = 10.0
SPARE_MAX_AGE: Final = 2.0  # seconds; the room's idle timeout for a connection is longer


def diag(message: str) -> None:
    print(f"ce mcp: {message}", file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def exchange(stream: aio.Streamlike, method: str, path: str, headers: dict[str, str],
                   body: bytes | None = None, *, timeouts: Timeouts | None = None,
                   ) -> AsyncIterator[tuple[int, dict[str, str], aio.BodyChunks]]:
    """One request whose answer may be long-lived (SSE) or not: status, headers, body chunks.

    The head must come within `timeouts.call`, each read of the body within
    `timeouts.silence`. A connection that ended before any byte of an answer
    raises `NoResponse` (the room did not take the request: safe to resend).
    """
    bounds = timeouts or runtime.timeouts()
    status, head, chunks = await aio.open_stream(
        stream, path, method=method, headers=headers, body=body, timeout=bounds.call,
        silence=bounds.silence)
    async with chunks:
        yield status, dict(head), chunks


@attrs.define
class Session:
    bearer: str
    from_profile: bool


class Bridge:
    def __init__(self, invitation: str, invite: Invitation, *, session: str | None,
                 name: str, profile_dir: os.PathLike[str] | str | None = None,
                 timeouts: Timeouts | None = None, channel: bool = False) -> None:
        self.invitation = invitation.strip()
        self.hint: TransportHint = invite.transport
        self.timeouts = timeouts or runtime.timeouts()
        self.room = aio.Connection(invite.transport.to_json(), timeouts=self.timeouts)
        self.workspace_id = invite.workspace_id
        self.name = name
        self.explicit_session = session
        self.profile_dir = profile_dir
        self.session: Session | None = None
        self.client_info: dict[str, Any] | None = None
        self.out_lock = trio.Lock()
        self.subscribed: set[str] = set()
        self.instructions: str | None = None
        self._rejoin_lock = trio.Lock()
        self._spare: tuple[aio.Stream, float] | None = None
        self._spare_wanted: trio.Event | None = None
        # stdout as a trio stream (no thread per line); set by `run`.
        self.stdout: trio.lowlevel.FdStream | None = None
        # `--channel`: Claude Code channel notifications (`mcp_channel.py`), set by `run`.
        self.channel_mode = channel
        self.channel: Any = None
        self.channel_ready = trio.Event()

    # -- output ---------------------------------------------------------------------

    async def write(self, message: Any) -> None:
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
        async with self.out_lock:
            await self._send_line(line.encode())

    async def _send_line(self, line: bytes) -> None:
        if self.stdout is None:
            await trio.to_thread.run_sync(_write_stdout, line)
        else:
            await self.stdout.send_all(line)

    async def write_raw(self, text: str) -> None:
        """A JSON-RPC message the room sent, re-serialized on one line."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            diag("the room sent a message that is not JSON; dropped")
            return
        await self.write(value)

    # -- sessions -------------------------------------------------------------------

    async def dial_for_request(self) -> tuple[aio.Stream, bool]:
        """A fresh connection for one request: the spare dialed ahead of time when it is young.

        Every request still has a connection of its own (`Connection: close`); dialing
        the next one while the client thinks takes the TCP connect off the round trip. A
        spare older than `SPARE_MAX_AGE` may be near the server's idle timeout: dropped.
        """
        spare, self._spare = self._spare, None
        if self._spare_wanted is not None:
            self._spare_wanted.set()  # dial the next one now
        if spare is not None:
            stream, born = spare
            if trio.current_time() - born < SPARE_MAX_AGE:
                return stream, True
            await stream.aclose()
        return await self.room.dial(), False

    async def keep_spare(self) -> None:
        """Keep one young pre-dialed connection ready while the client is busy (best effort:
        errors just mean no spare).

        A spare that aged unused is closed and *not* replaced until the next request: an
        idle bridge then holds only its `GET /mcp` stream and dials nothing (it used to
        re-dial a spare every second for ever, 24 `connect()` calls in 25 idle seconds).
        """
        while True:
            self._spare_wanted = trio.Event()
            if self._spare is None:
                with contextlib.suppress(CommonroomError):
                    self._spare = (await self.room.dial(), trio.current_time())
            with trio.move_on_after(SPARE_MAX_AGE / 2):
                await self._spare_wanted.wait()
            if self._spare is not None and trio.current_time() - self._spare[1] >= SPARE_MAX_AGE / 2:
                stream, _ = self._spare
                self._spare = None
                await stream.aclose()
                await self._spare_wanted.wait()  # idle: the next request asks for a spare again

    async def ensure_session(self, *, replace: str | None = None) -> Session:
        async with self._rejoin_lock:
            if self.session is not None and self.session.bearer != replace:
                return self.session
            if self.explicit_session is not None:
                self.session = Session(self.explicit_session, False)
                return self.session
            key = mcp_profile.profile_key(self.invitation, self.name)
            stored = mcp_profile.load(key, self.profile_dir)
            if stored is not None and stored.get("session_id") != replace:
                self.session = Session(str(stored["session_id"]), True)
                return self.session
            joined = await self.join()
            mcp_profile.save(key, {"session_id": joined["session_id"],
                                   "participant_id": joined.get("participant_id"),
                                   "workspace_id": joined.get("workspace_id"),
                                   "name": self.name}, self.profile_dir)
            diag(f"joined the room as {self.name!r}; the session is kept in your profile")
            self.session = Session(str(joined["session_id"]), True)
            return self.session

    async def join(self) -> dict[str, Any]:
        route = ROUTES["session.join"]
        answer = await self.room.call(route.method, route.path, {
            "invite": self.invitation, "name": self.name, "kind": "agent",
            "transport": self.hint.type})
        if not isinstance(answer, dict) or not isinstance(answer.get("session_id"), str):
            raise http11.transport_unavailable("the room's join answer has no session")
        return answer

    # -- forwarding -----------------------------------------------------------------

    async def post(self, message: dict[str, Any], bearer: str | None,
                   on_stream_message: Any = None) -> dict[str, Any] | None:
        """POST one message; its JSON answer (None for 202 or a streamed answer)."""
        answer = await self.post_raw(message, bearer, on_stream_message)
        return None if answer is None else answer.json()

    async def post_raw(self, message: dict[str, Any], bearer: str | None,
                       on_stream_message: Any = None) -> RoomAnswer | None:
        """POST one message; its answer's bytes (None for 202 or a streamed answer)."""
        stream, spare = await self.dial_for_request()
        try:
            return await self._post_on(stream, message, bearer, on_stream_message)
        except NoResponse:
            if not spare:
                raise
            # The spare was dead (the room restarted, or closed it): the room never saw
            # the request, so sending it again on a fresh connection is safe.
            return await self._post_on(await self.room.dial(), message, bearer, on_stream_message)

    async def _post_on(self, stream: aio.Stream, message: dict[str, Any], bearer: str | None,
                       on_stream_message: Any) -> RoomAnswer | None:
        body = json.dumps(message).encode()
        async with exchange(stream, "POST", "/mcp", mcp_headers(message, bearer), body,
                            timeouts=self.timeouts) as (status, headers, chunks):
            if status == 202:
                return None
            if "text/event-stream" in headers.get("content-type", ""):
                async with contextlib.aclosing(aio.iter_sse(chunks)) as messages:
                    async for sse in messages:
                        if not sse.is_comment and sse.data:
                            await (on_stream_message or self.write_raw)(sse.data)
                return None
            raw = await chunks.read_all()
        return RoomAnswer(status, raw)

    async def forward(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        try:
            session = await self.ensure_session()
            outbound = with_meta(message, self.client_info)
            answer = await self.post_raw(outbound, session.bearer)
            if answer is not None and session.from_profile and answer.session_dead():
                # The room no longer accepts the kept session: join again, once.
                session = await self.ensure_session(replace=session.bearer)
                answer = await self.post_raw(outbound, session.bearer)
            if answer is None:
                return
            if message.get("method") in ("resources/subscribe", "resources/unsubscribe"):
                self._track_subscription(message, answer.json())
            line = answer.line()
        except CommonroomError as error:
            if rid is not None:
                await self.write({"jsonrpc": "2.0", "id": rid, "error": {
                    "code": BRIDGE_ERROR, "message": error.message, "data": error.to_wire()}})
            return
        async with self.out_lock:
            await self._send_line(line)

    def _track_subscription(self, message: dict[str, Any], answer: dict[str, Any]) -> None:
        if "result" not in answer:
            return
        params = message.get("params")
        uri = params.get("uri") if isinstance(params, dict) else None
        if not isinstance(uri, str):
            return
        if message.get("method") == "resources/subscribe":
            self.subscribed.add(uri)
        elif message.get("method") == "resources/unsubscribe":
            self.subscribed.discard(uri)

    # -- what the bridge answers itself -----------------------------------------------

    async def initialize(self, message: dict[str, Any]) -> None:
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        assert isinstance(params, dict)
        info = params.get("clientInfo")
        self.client_info = info if isinstance(info, dict) else None
        asked = params.get("protocolVersion")
        version = asked if asked in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {}, "resources": {"subscribe": True}, "prompts": {}},
            "serverInfo": {"name": "commonroom", "version": __version__},
        }
        if self.channel_mode:
            from commonroom.cli.mcp_channel import CAPABILITIES

            result["capabilities"]["experimental"] = dict(CAPABILITIES)
        instructions = await self.discover_instructions()
        if instructions:
            result["instructions"] = instructions
        await self.write({"jsonrpc": "2.0", "id": message.get("id"), "result": result})

    async def discover_instructions(self) -> str | None:
        if self.instructions is None:
            try:
                with trio.move_on_after(DISCOVER_SECONDS):
                    answer = await self.post(with_meta(
                        {"jsonrpc": "2.0", "id": "ce-mcp-discover", "method": "server/discover"},
                        self.client_info), None)
                    result = (answer or {}).get("result") or {}
                    text = result.get("instructions")
                    self.instructions = text if isinstance(text, str) else None
            except CommonroomError as error:
                diag(f"server/discover failed: {error.message}")
        return self.instructions

    async def handle_line(self, line: bytes, nursery: trio.Nursery) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            await self.write({"jsonrpc": "2.0", "id": None,
                              "error": {"code": -32700, "message": "Parse error"}})
            return
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            if isinstance(message, dict) and ("result" in message or "error" in message):
                return  # a client's answer to a server request: the room sends none
            await self.write({"jsonrpc": "2.0", "id": None,
                              "error": {"code": -32600, "message": "Invalid Request"}})
            return
        method = message["method"]
        if message.get("id") is None:
            if self.channel_mode and method == "notifications/claude/channel/permission_request":
                nursery.start_soon(self.relay_permission, message.get("params"))
            return  # notifications (initialized, cancelled, ...) need no answer
        if method == "initialize":
            nursery.start_soon(self.initialize, message)
        elif method == "ping":
            await self.write({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        else:
            nursery.start_soon(self.forward, message)

    # -- --channel: attention as Claude Code channel notifications ----------------------

    async def hold_channel(self) -> None:
        from commonroom.cli.mcp_channel import Channel, participant_id_of

        while True:
            try:
                session = await self.ensure_session()
                me = await participant_id_of(self.room, session.bearer)
                self.channel = Channel(self.room, session.bearer, me, self.write, diag)
                self.channel_ready.set()
                await self.channel.follow()
            except CommonroomError as error:
                diag(f"channel: {error.message}")
            await trio.sleep(RECONNECT_BACKOFF[1])

    async def relay_permission(self, params: Any) -> None:
        await self.channel_ready.wait()
        await self.channel.relay_permission(params if isinstance(params, dict) else {})

    # -- GET /mcp ---------------------------------------------------------------------

    async def hold_notifications(self) -> None:
        """Hold `GET /mcp` for ever and write its notifications; re-subscribe after a reconnect.

        Drops and silences are the wire plan's (re-opened with backoff); what is
        left here is the session: 403 (no `observe`) ends the stream, 405 on a
        kept session (the room forgot it) joins again, anything else is said
        once and tried again.
        """
        last_note = ""
        session: Session | None = None
        while True:
            try:
                session = await self.ensure_session()
                runner = aio.Runner(self.room, bearer=session.bearer, routes=ROUTES)
                plan = plans.events("/mcp", headers={"MCP-Protocol-Version": VERSION},
                                    resume=False, persistent=True, backoff=RECONNECT_BACKOFF)
                async with contextlib.aclosing(runner.iterate(plan)) as items:
                    async for item in items:
                        if isinstance(item, plans.Connected):
                            if item.again:
                                await self.resubscribe(session.bearer)
                        elif isinstance(item, plans.SSEMessage) and item.data:
                            await self.write_raw(item.data)
            except errors.PermissionDenied:
                diag("this session may not observe: no change notifications")
                return
            except CommonroomError as error:
                if error.http_status == 405 and session is not None and session.from_profile:
                    await self.ensure_session(replace=session.bearer)
                    continue
                note = f"notification stream: {error.message}"
                if note != last_note:
                    diag(note)  # once per distinct problem, not once per retry
                last_note = note
            await trio.sleep(RECONNECT_BACKOFF[1])

    async def resubscribe(self, bearer: str) -> None:
        """After a reconnect (the room may have restarted): subscribe again, hint every URI."""
        for uri in sorted(self.subscribed):
            message = with_meta({"jsonrpc": "2.0", "id": "ce-mcp-resubscribe",
                                 "method": "resources/subscribe", "params": {"uri": uri}},
                                self.client_info)
            with contextlib.suppress(CommonroomError):
                await self.post(message, bearer)
            await self.write({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                              "params": {"uri": uri}})

    # -- main -------------------------------------------------------------------------

    async def run(self) -> None:
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        sys.stdout.flush()
        self.stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
        async with stdin, self.stdout, trio.open_nursery() as nursery:
            nursery.start_soon(self.hold_notifications)
            nursery.start_soon(self.keep_spare)
            if self.channel_mode:
                nursery.start_soon(self.hold_channel)
            buffer = b""
            while True:
                data = await stdin.receive_some(65536)
                if not data:
                    break
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    await self.handle_line(line, nursery)
            if buffer.strip():
                await self.handle_line(buffer, nursery)
            nursery.cancel_scope.cancel()


def _write_stdout(data: bytes) -> None:
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def run_bridge(invitation: str, invite: Invitation, *, session: str | None, name: str,
               channel: bool = False) -> None:
    """Run the bridge until EOF on stdin, SIGINT or SIGTERM (all exit 0)."""
    bridge = Bridge(invitation, invite, session=session, name=name, channel=channel)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(runtime.until_stopped, bridge.run)


def _session(flag: str | None, invitation: str) -> str | None:
    """The session to use instead of joining: `--session` (warned: `ps` shows it), else CE_SESSION.

    CE_SESSION goes with CE_INVITATION: it is used only when that is unset or names
    this invitation, so a session exported for another room is never sent here.
    """
    from commonroom.cli import profiles

    if flag == profiles.FROM_STDIN:
        import click

        raise click.UsageError("ce mcp: stdin is the MCP client's channel; put the session in"
                               f" {profiles.ENV_SESSION} instead of --session -")
    if flag:
        return profiles.session_argument(flag)
    paired = os.environ.get(profiles.ENV_INVITATION, "").strip()
    if paired and paired != invitation.strip():
        return None
    return os.environ.get(profiles.ENV_SESSION) or None


def command(invitation: str, *, session: str | None, name: str, explicit: bool = False,
            channel: bool = False) -> None:
    """`ce mcp`: errors are one line on stderr (stdout is the client's JSON-RPC channel).

    `explicit`: `session` is a saved profile's, used as it is (not a flag to warn about).
    `channel`: also push attention as Claude Code channel notifications (`--channel`)."""
    from commonroom.cli.output import guarded
    from commonroom.protocol.invitation import decode

    @guarded(interrupt_exit=0)
    def body(json_mode: bool = False) -> None:
        chosen = session if explicit else _session(session, invitation)
        invite = decode(invitation)
        run_bridge(invitation, invite, session=chosen, name=name, channel=channel)

    body(json_mode=False)
