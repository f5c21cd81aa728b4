"""`ce agent`: keep a coding agent present in the room, woken when addressed (PROTOCOL section 19).

Theory of operation
-------------------
One trio process, three tasks over one profile's session:

- **follow** holds the observe stream (`wire.plans.events` on `/workspace/observe`,
  re-opened after drops with `Last-Event-ID`, so the participant stays present) and
  sorts each event through `cli/attention.Attention`: a wake is queued (at most 20;
  the newest kept), a `runtime.interrupted` for the running turn cancels it, a
  `runtime.resumed` lifts a pause, a `permission.answered`/`expired` settles the
  relay waiting on it, an event of its own marks the turn as having acted.
- **turns** runs one turn at a time: every queued wake merged into one prompt
  (`attention.prompt_text`), one `session/prompt` (or, with `--exec`, the command
  once with the prompt on stdin and its stdout posted as room text to whoever woke
  it). Guards: `--turn-minutes` cancels a long turn (`session/cancel`), at most
  `--max-turns` turns start in any 10 minutes (the rest wait, queued), and three
  turns in a row that did nothing in the room pause the runtime until the host
  resumes it (`POST /workspace/runtime/resume`).
- **the agent** (ACP, `cli/acp.py`): `initialize`, `session/new` whose one MCP server is
  `ce mcp` on this session (the bearer in that server's environment, never in argv
  or a prompt), `session/update` shown as the turn's progress (the runtime report's
  `note`), `session/request_permission` relayed to the room as a permission request
  and answered with exactly the host's option, or `cancelled` when it expires, the
  turn ends, or the room cannot be asked (fail closed).

Exactly once across restarts: the profile keeps `resident: {cursor, queue, memory}`.
A wake is queued and the cursor moved in one profile write; a turn takes its wakes out
of the queue in one write *before* the prompt is written. So a runtime killed and
started again resumes the stream after the last event it handled, still has the
wakes it had queued, and never prompts a wake twice (a turn cut off by the kill is
not replayed: at most once for the wake in flight).

The agent's process gets this process's environment without `CE_SESSION`,
`CE_INVITATION` and `CE_PROFILE`; its stderr is kept (the last lines) for the one
line `ce agent` prints when the agent fails.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
import trio

from commonroom.cli import acp, attention, profiles
from commonroom.client import errors
from commonroom.client.routes import ROUTES
from commonroom.protocol.errors import CommonroomError
from commonroom.wire import aio, plans
from commonroom.wire.timeouts import Timeouts

QUEUE_MAX: Final = 20
TURN_WINDOW_SECONDS: Final = 600.0
IDLE_TURNS_PAUSE: Final = 3
# After a `session/cancel`, how long the agent has to end the turn before it is left behind.
CANCEL_GRACE_SECONDS: Final = 30.0
# After a turn, how long the runtime waits for the room's events of that turn (its actions).
SETTLE_SECONDS: Final = 2.0
# Progress notes go to the room at most this often.
NOTE_EVERY_SECONDS: Final = 1.0
# The relay's own bound past a permission request's expiry, in case its event never comes.
PERMISSION_GRACE_SECONDS: Final = 10.0
STDERR_KEPT_LINES: Final = 20
RECONNECT_BACKOFF: Final = (0.25, 5.0)
ROOM_TEXT_MAX: Final = 4096
_PRIVATE_ENV: Final = (profiles.ENV_SESSION, profiles.ENV_INVITATION, profiles.ENV_PROFILE)


class AgentFailed(Exception):
    """The agent cannot serve (it exited, broke the protocol, needs a sign-in): one line."""


@attrs.define
class Settings:
    command: list[str]
    harness: str
    exec_mode: bool = False
    turn_minutes: float = 15.0
    max_turns: int = 20
    cwd: str = attrs.field(factory=os.getcwd)
    label: str = "agent"
    """The agent's short name in messages (`gemini`, or the command's)."""


def diag(message: str) -> None:
    print(f"ce agent: {message}", file=sys.stderr, flush=True)


class Resident:
    def __init__(self, profile: profiles.Profile, settings: Settings, timeouts: Timeouts) -> None:
        self.profile = profile
        self.settings = settings
        self.room = aio.Connection(profile.hint, timeouts=timeouts)
        self.bearer = profile.session
        me = profile.participant_id
        if me is None:
            raise AgentFailed("the profile has no participant id; join again with `ce join`")
        self.me = me
        kept = profile.data.get("resident")
        kept = kept if isinstance(kept, dict) else {}
        cursor = kept.get("cursor")
        self.cursor: int | None = cursor if isinstance(cursor, int) else None
        self.queue: list[dict[str, Any]] = [w for w in kept.get("queue", []) if isinstance(w, dict)]
        self.attention = attention.Attention(me, kept.get("memory"))
        self.names: dict[str, str] = {}
        self.queue_changed = trio.Event()
        self.resumed = trio.Event()
        self.paused = bool(kept.get("paused"))
        self.turn = int(kept.get("turn") or 0)
        self.turn_scope: trio.CancelScope | None = None
        self.turn_cancelled = False
        self.turn_acted = False
        self.idle_turns = 0
        self.turn_starts: collections.deque[float] = collections.deque()
        self.permission_waiters: dict[str, trio.MemorySendChannel[str | None]] = {}
        self.note: str | None = None
        self.state = "idle"
        self.reported: tuple[Any, ...] | None = None
        self.report_wanted = trio.Event()
        self.followed = trio.Event()  # the stream is open (the first time)
        self.seen_event_id = 0
        self.seen_changed = trio.Event()
        # the agent (ACP)
        self.peer = acp.AcpPeer()
        self.process: trio.Process | None = None
        self.session_id: str | None = None
        self.answers: dict[int, trio.MemorySendChannel[acp.Answer]] = {}
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_KEPT_LINES)
        self.send_lock = trio.Lock()
        self.turn_text: list[str] = []

    # -- the profile -------------------------------------------------------------------------

    def save(self) -> None:
        """Cursor, queue and memory in one atomic profile write."""
        self.profile.data["resident"] = {
            "cursor": self.cursor, "queue": self.queue, "memory": self.attention.memory(),
            "paused": self.paused, "turn": self.turn}
        if self.profile.name is not None:
            profiles.save(self.profile)

    # -- the room ------------------------------------------------------------------------------

    async def call(self, op: str, params: Mapping[str, Any] | None = None) -> Any:
        route = ROUTES[op]
        return await self.room.call(str(route[0]), str(route[1]), params or {}, bearer=self.bearer)

    def set_state(self, state: str, note: str | None = None) -> None:
        self.state = state
        self.note = note
        self.report_wanted.set()

    async def reporter(self) -> None:
        """Report the runtime's state when it changed (a burst of changes is one report)."""
        last_error = ""
        while True:
            await self.report_wanted.wait()
            self.report_wanted = trio.Event()
            body: dict[str, Any] = {
                "state": self.state, "harness": self.settings.harness,
                "queued": min(len(self.queue), QUEUE_MAX), "turn": self.turn,
                "turn_started_at": self._turn_started_at if self.state == "running" else None,
                "note": (self.note or None) and self.note[:200]}
            key = tuple(sorted(body.items()))
            if key == self.reported:
                continue
            try:
                await self.call("workspace.runtime", body)
                self.reported = key
            except CommonroomError as error:
                if error.message != last_error:
                    diag(f"could not report the state: {error.message}")
                last_error = error.message
            await trio.sleep(NOTE_EVERY_SECONDS / 4)

    _turn_started_at: str | None = None

    async def load_names(self) -> None:
        with contextlib.suppress(CommonroomError):
            answer = await self.call("workspace.participants")
            for part in answer.get("participants", []):
                self.names[str(part.get("participant_id"))] = str(part.get("name"))

    # -- following the stream --------------------------------------------------------------------

    async def follow(self) -> None:
        if self.cursor is None:
            self.cursor = int((await self.call("workspace.room"))["latest_event_id"])
            self.save()
        runner = aio.Runner(self.room, bearer=self.bearer, routes=ROUTES)
        plan = plans.events("/workspace/observe", since=self.cursor, persistent=True,
                            backoff=RECONNECT_BACKOFF)
        async with contextlib.aclosing(runner.iterate(plan)) as items:
            async for item in items:
                if isinstance(item, plans.Connected):
                    self.followed.set()
                    if self.state == "reconnecting":
                        self.set_state("running" if self.turn_scope is not None else
                                       "paused" if self.paused else "idle")
                elif isinstance(item, plans.Reconnecting):
                    self.set_state("reconnecting", item.reason[:200])
                elif isinstance(item, plans.SSEMessage) and item.data:
                    if item.event == "resync":
                        diag("the room's event ring moved past this runtime's cursor; wakes in"
                             " the gap are lost")
                        with contextlib.suppress(CommonroomError):
                            self.cursor = int((await self.call("workspace.room"))["latest_event_id"])
                            self.save()
                        continue
                    with contextlib.suppress(ValueError):
                        self.handle(json.loads(item.data))

    def handle(self, event: Mapping[str, Any]) -> None:
        event_id = event.get("event_id")
        if not isinstance(event_id, int):
            return
        self.seen_event_id = max(self.seen_event_id, event_id)
        self.seen_changed.set()
        self.seen_changed = trio.Event()
        if self.cursor is not None and event_id <= self.cursor:
            return  # handled before (a replay after a restart or reconnect): never twice
        kind = event.get("type")
        payload = event.get("payload")
        payload = payload if isinstance(payload, Mapping) else {}
        if kind == "participant.joined":
            self.names[str(payload.get("participant_id"))] = str(payload.get("name"))
        if payload.get("participant_id") == self.me:
            if kind == "runtime.interrupted" and payload.get("turn") == self.turn:
                self.cancel_turn("the host interrupted the turn")
            elif kind == "runtime.resumed" and self.paused:
                self.paused = False
                self.idle_turns = 0
                self.resumed.set()
                self.set_state("idle")
            elif kind in ("permission.answered", "permission.expired"):
                waiter = self.permission_waiters.pop(str(payload.get("permission_id")), None)
                if waiter is not None:
                    option = payload.get("option_id") if kind == "permission.answered" else None
                    with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError):
                        waiter.send_nowait(str(option) if option is not None else None)
        if self.turn_scope is not None and self.attention.is_action(event):
            self.turn_acted = True
        wake = self.attention.wake(event)
        self.cursor = event_id
        if wake is not None:
            self.queue.append(wake)
            del self.queue[:-QUEUE_MAX]  # the newest 20; the prompt says when some were dropped
            self.save()
            self.queue_changed.set()
            self.report_wanted.set()
        elif event_id % 50 == 0:
            self.save()

    async def caught_up(self) -> None:
        """Wait (a bounded while) until the stream delivered every event the room has now."""
        with trio.move_on_after(SETTLE_SECONDS), contextlib.suppress(CommonroomError):
            latest = int((await self.call("workspace.room"))["latest_event_id"])
            while self.seen_event_id < latest:
                await self.seen_changed.wait()

    # -- turns ------------------------------------------------------------------------------------

    def cancel_turn(self, why: str) -> None:
        if self.turn_scope is not None and not self.turn_cancelled:
            self.turn_cancelled = True
            diag(f"turn {self.turn} cancelled: {why}")
            self.note = why
            self.turn_scope.cancel()

    async def turns(self) -> None:
        await self.followed.wait()
        self.set_state("paused" if self.paused else "idle",
                       "paused: resume it from the page" if self.paused else None)
        while True:
            while not self.queue or self.paused:
                if self.paused:
                    await self.resumed.wait()
                    self.resumed = trio.Event()
                else:
                    await self.queue_changed.wait()
                    self.queue_changed = trio.Event()
            await self.within_turn_budget()
            batch, self.queue = self.queue[:QUEUE_MAX], []
            self.turn += 1
            self.save()  # taken out of the queue before the prompt: never prompted twice
            await self.enrich(batch)
            text = attention.prompt_text(batch, self.names, me=self._me_named(),
                                         room=str(self.profile.data.get("workspace_id") or ""))
            await self.run_turn(batch, text)

    def _me_named(self) -> str:
        name = self.profile.data.get("name") or self.names.get(self.me)
        return f"{name} ({self.me})" if name else self.me

    async def within_turn_budget(self) -> None:
        window = TURN_WINDOW_SECONDS
        while True:
            now = trio.current_time()
            while self.turn_starts and now - self.turn_starts[0] >= window:
                self.turn_starts.popleft()
            if len(self.turn_starts) < self.settings.max_turns:
                self.turn_starts.append(now)
                return
            wait = self.turn_starts[0] + window - now
            self.set_state("idle", f"turn limit: {self.settings.max_turns} turns in 10 minutes;"
                                   f" the next in {int(wait) + 1} s")
            await trio.sleep(wait)

    async def enrich(self, batch: list[dict[str, Any]]) -> None:
        """Thread comments carry no text in their events: read it (one read per such wake)."""
        for wake in batch:
            if wake.get("type") not in ("thread.opened", "thread.replied") or wake.get("text"):
                continue
            with contextlib.suppress(CommonroomError):
                thread = await self.call("workspace.thread", {"thread_id": wake["thread_id"]})
                comments = thread.get("comments") or []
                wanted = wake.get("comment_id")
                chosen = next((c for c in comments if c.get("comment_id") == wanted), None)
                if chosen is None and comments:
                    chosen = comments[0] if wake.get("type") == "thread.opened" else comments[-1]
                if chosen is not None:
                    wake["text"] = chosen.get("body")

    async def run_turn(self, batch: list[dict[str, Any]], text: str) -> None:
        from commonroom.protocol.timefmt import format_ts, system_clock

        self.turn_acted = False
        self.turn_cancelled = False
        self.turn_text = []
        self._turn_started_at = format_ts(system_clock())
        self.set_state("running")
        limit = self.settings.turn_minutes * 60
        with trio.CancelScope() as scope:
            self.turn_scope = scope
            with trio.move_on_after(limit) as timer:
                if self.settings.exec_mode:
                    await self.exec_turn(batch, text)
                else:
                    await self.prompt_turn(text)
            if timer.cancelled_caught:
                self.turn_cancelled = True
                diag(f"turn {self.turn} took longer than {self.settings.turn_minutes:g} minutes;"
                     " cancelled")
        self.turn_scope = None
        if self.turn_cancelled and not self.settings.exec_mode:
            await self.end_cancelled_turn()
        await self.caught_up()
        if self.turn_acted:
            self.idle_turns = 0
        else:
            self.idle_turns += 1
        if self.idle_turns >= IDLE_TURNS_PAUSE:
            self.paused = True
            self.save()
            note = (f"paused: {IDLE_TURNS_PAUSE} turns in a row did nothing in the room; the"
                    " host resumes it")
            self.set_state("paused", note)
            await self.tell_host(note)
        else:
            self.set_state("idle", self.note if self.turn_cancelled else None)

    async def tell_host(self, text: str) -> None:
        with contextlib.suppress(CommonroomError):
            host = await self.host_id()
            await self.call("workspace.message", {"text": text, **({"to": [host]} if host else {})})

    async def host_id(self) -> str | None:
        parts = (await self.call("workspace.participants")).get("participants", [])
        return next((p["participant_id"] for p in parts if "*" in (p.get("capabilities") or [])),
                    None)

    # -- ACP ------------------------------------------------------------------------------------

    async def start_agent(self, nursery: trio.Nursery) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
        try:
            # Its own process group: an agent is often a launcher (node) over the real binary,
            # which starts the MCP bridge; stopping the runtime ends the whole group.
            self.process = await trio.lowlevel.open_process(
                self.settings.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=env, cwd=self.settings.cwd, start_new_session=True)
        except OSError as error:
            raise AgentFailed(f"cannot start {self.settings.command[0]!r}: {error.strerror}") from None
        nursery.start_soon(self.read_agent)
        nursery.start_soon(self.read_stderr)
        answer = await self.ask("initialize", acp.initialize_params())
        version = answer.get("protocolVersion") if isinstance(answer, dict) else None
        auth_methods = answer.get("authMethods") if isinstance(answer, dict) else None
        if version != acp.PROTOCOL_VERSION:
            raise AgentFailed(f"{self.settings.label} speaks ACP version {version!r}, not"
                              f" {acp.PROTOCOL_VERSION}")
        from commonroom.mcp.configs import running_ce

        mcp_env = {profiles.ENV_INVITATION: self.profile.invitation,
                   profiles.ENV_SESSION: self.bearer}
        params = acp.new_session_params(self.settings.cwd, running_ce(), ["mcp"], mcp_env)
        first = await self.ask_raw("session/new", params)
        if first.error is not None and first.error.code == acp.AUTH_REQUIRED:
            # An agent that takes its key from the environment (ACP `env_var` auth methods)
            # is told to use it; without one set, the user must sign in (one line).
            method = acp.env_auth_method(auth_methods, os.environ)
            if method is not None:
                await self.ask("authenticate", {"methodId": method})
                first = await self.ask_raw("session/new", params)
        if first.error is not None:
            raise AgentFailed(self.error_line("session/new", first.error))
        session = first.result
        session_id = session.get("sessionId") if isinstance(session, dict) else None
        if not isinstance(session_id, str):
            raise AgentFailed(f"{self.settings.label} answered session/new without a sessionId")
        self.session_id = session_id

    async def send(self, data: bytes) -> None:
        assert self.process is not None and self.process.stdin is not None
        async with self.send_lock:
            try:
                await self.process.stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise AgentFailed(self.exit_line()) from None

    async def ask(self, method: str, params: Mapping[str, Any]) -> Any:
        answer = await self.ask_raw(method, params)
        if answer.error is not None:
            raise AgentFailed(self.error_line(method, answer.error))
        return answer.result

    async def ask_raw(self, method: str, params: Mapping[str, Any]) -> acp.Answer:
        request_id, data = self.peer.request(method, params)
        send, receive = trio.open_memory_channel[acp.Answer](1)
        self.answers[request_id] = send
        try:
            await self.send(data)
            answer = await receive.receive()
        finally:
            self.answers.pop(request_id, None)
        return answer

    def error_line(self, method: str, error: acp.AcpError) -> str:
        text = f"{error.message} {json.dumps(error.data) if error.data else ''}".lower()
        if error.code == acp.AUTH_REQUIRED or any(word in text for word in (
                "auth", "sign in", "login", "log in", "api key", "credential")):
            label = self.settings.label
            return f"{label} needs you to sign in: run `{label}` once"
        return f"{self.settings.label} refused {method}: {error.message}"

    def exit_line(self) -> str:
        # one line, whatever the agent printed
        code = self.process.returncode if self.process is not None else None
        tail = next((line for line in reversed(self.stderr_tail) if line.strip()), "")
        status = f" (status {code})" if code is not None else ""
        return f"{self.settings.label} exited{status}" + (f": {tail[:300]}" if tail else "")

    async def read_agent(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        async with trio.open_nursery() as nursery:
            while True:
                data = await self.process.stdout.receive_some(65536)
                if not data:
                    break
                try:
                    messages = self.peer.receive(bytes(data))
                except acp.AcpError as error:
                    raise AgentFailed(f"{self.settings.label}: {error.message}") from None
                for message in messages:
                    await self.dispatch(message, nursery)
        await self.process.wait()
        raise AgentFailed(self.exit_line())

    async def read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        buffer = b""
        while data := await self.process.stderr.receive_some(65536):
            buffer = (buffer + data)[-65536:]
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self.stderr_tail.append(line.decode("utf-8", "replace"))

    async def dispatch(self, message: acp.Incoming, nursery: trio.Nursery) -> None:
        if isinstance(message, acp.Answer):
            waiter = self.answers.get(message.request_id)
            if waiter is not None:
                with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError):
                    waiter.send_nowait(message)
        elif isinstance(message, acp.Notification):
            if message.method == "session/update":
                update = message.params.get("update")
                if isinstance(update, Mapping):
                    self.turn_text.append(acp.message_text(update))
                    line = acp.progress_of(update)
                    if line is not None and self.turn_scope is not None:
                        self.note = line
                        self.report_wanted.set()
        elif message.method == "session/request_permission":
            nursery.start_soon(self.relay_permission, message)
        else:
            # No file system, no terminal: the agent acts in the room through MCP.
            await self.send(self.peer.respond_error(message.request_id, acp.METHOD_NOT_FOUND,
                                                    f"ce agent does not offer {message.method}"))

    async def relay_permission(self, message: acp.AgentRequest) -> None:
        """The agent's permission prompt as a room permission request; fail closed."""
        option: str | None = None
        body = acp.permission_request(message.params)
        if body["options"] and self.turn_scope is not None:
            send, receive = trio.open_memory_channel[str | None](1)
            try:
                asked = await self.call("permission.request", body)
            except CommonroomError as error:
                diag(f"could not ask the host for permission ({error.message}): cancelled")
                asked = None
            if asked is not None:
                permission_id = str(asked["permission_id"])
                self.permission_waiters[permission_id] = send
                self.note = f"waiting for the host: {body['title']}"[:200]
                self.report_wanted.set()
                scope = self.turn_scope
                ttl = 300.0 + PERMISSION_GRACE_SECONDS
                settled = False
                with trio.move_on_after(ttl):
                    # the turn's end (cancel, interrupt) also ends the wait: cancelled
                    while scope is self.turn_scope and scope is not None:
                        with trio.move_on_after(0.5):
                            option = await receive.receive()
                            settled = True
                            break
                if self.permission_waiters.pop(permission_id, None) is not None and not settled:
                    # nothing waits for it any more: the host's card goes away
                    with contextlib.suppress(CommonroomError):
                        await self.call("permission.withdraw", {"permission_id": permission_id})
        result = acp.selected(option) if option is not None else acp.CANCELLED
        await self.send(self.peer.respond(message.request_id, result))

    async def prompt_turn(self, text: str) -> None:
        assert self.session_id is not None
        try:
            answer = await self.ask("session/prompt", acp.prompt_params(self.session_id, text))
        except AgentFailed as failure:
            if "sign in" in str(failure):
                raise
            diag(f"turn {self.turn}: {failure}")
            return
        reason = answer.get("stopReason") if isinstance(answer, dict) else None
        if reason not in ("end_turn", None):
            diag(f"turn {self.turn} ended: {reason}")

    async def end_cancelled_turn(self) -> None:
        """`session/cancel`; the agent then answers its prompt (`cancelled`) within a grace."""
        if self.session_id is None:
            return
        await self.send(self.peer.notify("session/cancel", {"sessionId": self.session_id}))
        pending = [rid for rid, method in self.peer.pending.items() if method == "session/prompt"]
        if not pending:
            return
        send, receive = trio.open_memory_channel[acp.Answer](1)
        self.answers[pending[-1]] = send
        with trio.move_on_after(CANCEL_GRACE_SECONDS):
            await receive.receive()
        self.answers.pop(pending[-1], None)

    # -- --exec ---------------------------------------------------------------------------------

    async def exec_turn(self, batch: list[dict[str, Any]], text: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_ENV}
        try:
            done = await trio.run_process(self.settings.command, stdin=text.encode(),
                                          capture_stdout=True, capture_stderr=True, check=False,
                                          env=env, cwd=self.settings.cwd)
        except OSError as error:
            raise AgentFailed(f"cannot start {self.settings.command[0]!r}: {error.strerror}") from None
        output = done.stdout.decode("utf-8", "replace").strip()
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            diag(f"turn {self.turn}: {self.settings.label} exited with status {done.returncode}"
                 + (f": {tail[0][:300]}" if tail[0] else ""))
        if not output:
            return
        to = [str(w["from"]) for w in batch
              if isinstance(w.get("from"), str) and str(w["from"]).startswith("pt_")]
        body: dict[str, Any] = {"text": _room_text(output)}
        if to:
            body["to"] = list(dict.fromkeys(t for t in to if t != self.me))
        try:
            await self.call("workspace.message", body)
        except CommonroomError as error:
            diag(f"turn {self.turn}: could not post the answer: {error.message}")

    # -- main -------------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.load_names()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.reporter)
            if not self.settings.exec_mode:
                await self.start_agent(nursery)
            nursery.start_soon(self.follow)
            nursery.start_soon(self.turns)
            diag(f"{self.settings.label} is in the room as {self._me_named()}; it wakes when"
                 " addressed (Ctrl-C stops it)")


async def _end_group(process: trio.Process) -> None:
    """SIGTERM to the agent's process group, SIGKILL to what is left after 3 s."""
    import signal

    def signal_group(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)

    signal_group(signal.SIGTERM)
    with trio.move_on_after(3) as waited:
        waited.shield = True
        await process.wait()
    signal_group(signal.SIGKILL)  # the group's other members (the real binary, the bridge)
    if process.returncode is None:
        with trio.CancelScope(shield=True):
            await process.wait()


def _room_text(text: str) -> str:
    cleaned = "".join(ch if ch in "\t\n" or not (ord(ch) < 32 or 127 <= ord(ch) < 160) else " "
                      for ch in text)
    return cleaned if len(cleaned) <= ROOM_TEXT_MAX else cleaned[: ROOM_TEXT_MAX - 1] + "…"


def run(profile: profiles.Profile, settings: Settings, timeouts: Timeouts) -> None:
    """Run the runtime until a signal (exit 0) or the agent fails (AgentFailed, one line)."""
    from commonroom.cli import runtime

    resident = Resident(profile, settings, timeouts)

    async def work() -> None:
        try:
            await resident.run()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                resident.state, resident.note = "idle", "stopped"
                with contextlib.suppress(CommonroomError):
                    await resident.call("workspace.runtime", {
                        "state": "idle", "harness": settings.harness, "queued": len(resident.queue),
                        "turn": resident.turn, "note": "stopped"})
            if resident.process is not None:
                await _end_group(resident.process)

    try:
        trio.run(runtime.until_stopped, work)
    except BaseExceptionGroup as group:
        failed = group.subgroup(AgentFailed)
        if failed is not None:
            raise _first(failed) from None
        raise


def _first(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


__all__ = ["AgentFailed", "Resident", "Settings", "errors", "run"]


def shorthand(name: str, exec_mode: bool) -> tuple[list[str], str] | None:
    """A known agent's published command: (argv, the package that provides it)."""
    table = EXEC_SHORTHANDS if exec_mode else ACP_SHORTHANDS
    found = table.get(name)
    return (list(found[0]), found[1]) if found is not None else None


ACP_SHORTHANDS: Final[dict[str, tuple[Sequence[str], str]]] = {
    "gemini": (("gemini", "--acp"), "npm install -g @google/gemini-cli"),
    "claude": (("claude-agent-acp",), "npm install -g @zed-industries/claude-agent-acp"),
    "codex": (("codex-acp",), "npm install -g @zed-industries/codex-acp"),
    "goose": (("goose", "acp"), "install Block's goose CLI"),
    "opencode": (("opencode", "acp"), "npm install -g opencode-ai"),
}
EXEC_SHORTHANDS: Final[dict[str, tuple[Sequence[str], str]]] = {
    "claude": (("claude", "-p"), "npm install -g @anthropic-ai/claude-code"),
    "codex": (("codex", "exec", "-"), "npm install -g @openai/codex"),
    "gemini": (("gemini",), "npm install -g @google/gemini-cli"),  # stdin not a terminal: one prompt
}
