"""`ce serve`: one trio.run, one room nursery owning everything the room runs.

    room nursery
    ├─ signal watcher (SIGINT/SIGTERM -> stop event; see DESIGN "Known pitfalls" 5)
    ├─ Room.run: expiry sweeper + file watcher
    ├─ rate-limiter housekeeping
    ├─ transport plugin (loopback / tailcat process)
    └─ listeners nursery
       ├─ hypercorn serve(ingress app)  127.0.0.1:<ingress port>
       └─ hypercorn serve(owner app)    127.0.0.1:<owner port>

Stopping: the stop event ends every observe stream (hub.close_all), the
listeners drain and close, `workspace.stopped` is recorded, the credential
file (in the per-user runtime folder, see credentials.py) is removed, and
the nursery is cancelled. Leases are kept.

A room that owns its process (it installs the signal handlers: `ce serve`)
freezes its start-up heap once it is ready (`freeze_startup_heap`).

Environment failures are refused before the room opens, each as one
CommonroomError naming the cause and the fix: a file or folder the room
cannot write, a file that is not UTF-8, a sidecar that cannot be opened, a
port that is taken.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from commonroom.credentials import (
    Credentials,
    credentials_path,
    read_credentials,
    read_start_secret,
    write_credentials,
    write_start_secret,
)
from commonroom.engine.facade import (
    SIDECAR_SUFFIX,
    EngineConfig,
    EngineFace,
    GitOptions,
    check_git_work_tree,
    end_host_session,
    end_stale_host_sessions,
    load_owner_logins,
    mint_host_session,
    open_engine,
    unused_start_invitation,
)
from commonroom.http.guards import Gate
from commonroom.http.ingress import IngressSettings, create_ingress_app
from commonroom.http.owner import OwnerAuth, create_owner_app, owner_link
from commonroom.http.serving import (
    ServeConfig,
    connection_caps,
    raise_open_file_limit,
    serve,
    wait_for_stop_signal,
)
from commonroom.mcp.endpoint import register as register_mcp
from commonroom.mcp.endpoint import register_owner_configs
from commonroom.process_memory import (
    give_back_free_memory,
    keep_large_blocks_in_heap,
    use_one_malloc_arena,
)
from commonroom.protocol import events as ev
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.limits import (
    HUMAN_HOLD_MINUTES,
    MAX_ACTIVE_SESSIONS,
    MAX_SESSIONS_LIMIT,
    SETTLE_MS,
    STREAMS_PER_PARTICIPANT,
    STREAMS_PER_SESSION,
    ServingLimits,
)
from commonroom.protocol.operations import BODY_LIMITS
from commonroom.protocol.timefmt import Clock, system_clock
from commonroom.room.core import Room
from commonroom.room.slots import StreamSlots
from commonroom.store.document import DocumentFile
from commonroom.thread_priority import lower_this_thread, step_aside
from commonroom.transport import registry

RATE_SWEEP_SECONDS = 60.0
# How long the document must stay unchanged before the room gives freed memory back.
QUIET_TRIM_SECONDS = 0.5
# Below this the freed versions are not worth a trim: it holds the allocator's lock (every
# thread's allocations wait) for up to ~15 ms on a large heap.
TRIM_MIN_DOCUMENT_BYTES = 1024 * 1024
# How long a reader may take nothing before its connection is dropped. Long, so
# that an observer that stalls falls behind its 256-event buffer and is told
# `resync` when it drains (PROTOCOL §8) rather than being cut off; the stop is
# still prompt because shutdown shortens every write (http/connection.py).
STREAM_WRITE_TIMEOUT = 120.0


@attrs.frozen
class ServeOptions:
    path: Path
    transport: str = "loopback"
    owner_port: int | None = None  # None: the port used last time when free, else any
    ingress_port: int | None = None  # None: the port used last time when free, else any
    ephemeral: bool = False
    heartbeat_seconds: float = 15.0
    response_timeout: float = 60.0
    install_signal_handlers: bool = True
    requests_per_minute: int = 600
    anonymous_per_minute: int = 60
    human_hold_minutes: float = HUMAN_HOLD_MINUTES  # an external edit holds what it changed
    settle_ms: int = SETTLE_MS  # a changed file is read once it stayed still this long
    # A connection idle this long is closed; it also bounds how long a request's
    # head may take to arrive (slowloris). Tests shorten it.
    keep_alive_timeout: float = 5.0
    # Open streams at once (room/slots.py); benchmarks with 1,000 subscribers of one
    # session raise them.
    streams_per_session: int = STREAMS_PER_SESSION
    streams_per_participant: int = STREAMS_PER_PARTICIPANT
    # Connections the ingress serves at once; None: what the raised RLIMIT_NOFILE leaves
    # after the reserve (http/serving.connection_caps).
    max_connections: int | None = None
    # `--max-sessions N` (PROTOCOL §11): active guest sessions at once, 1..MAX_SESSIONS_LIMIT;
    # participants follow it past 256 (`ServingLimits.max_participants`).
    max_sessions: int = MAX_ACTIVE_SESSIONS
    # `--git` / `--git-all` (docs/spec/PROTOCOL.md 18): committed versions (and with all, the host's
    # saves too) become commits in the git work tree around the file.
    git: bool = False
    git_all: bool = False
    # `--mcp-legacy` (a deviation from the seed, docs/protocol.md): /mcp serves the initialize
    # eras too; by default only 2026-07-28.
    mcp_legacy: bool = False
    # Injected time for tests: the engine's wall clock and the rate limiter's monotonic one.
    clock: Clock = system_clock
    rate_clock: Callable[[], float] = trio.current_time


@attrs.frozen
class Ready:
    workspace_id: str
    human_url: str
    invitation: str
    transport: dict[str, Any]
    owner_port: int
    ingress_port: int
    notes: tuple[str, ...] = ()

    @property
    def mcp_url(self) -> str:
        """Where an MCP client on this machine connects (the ingress listens on loopback)."""
        return f"http://127.0.0.1:{self.ingress_port}/mcp"

    def ready_json(self) -> dict[str, Any]:
        """The one `--json` ready line of docs/spec/PROTOCOL.md section 13."""
        return {
            "workspace_id": self.workspace_id,
            "human_url": self.human_url,
            "invitation": self.invitation,
            "transport": self.transport,
            "owner_port": self.owner_port,
            "ingress_port": self.ingress_port,
            "mcp_url": self.mcp_url,
        }


def freeze_startup_heap() -> None:
    """Move what start-up made (modules, classes, the apps, the engine) out of the
    collector's sight, after one collection so no garbage is kept.

    The room lives on one event loop: a full collection stops every request and every
    stream while it walks all tracked objects, and start-up's are most of them (a
    gen-2 pause measured 15-25 ms in a room under 32 agents, `bench_agents.py`). Frozen
    objects are still freed by their reference counts; only cycles among them are not,
    and start-up's live as long as the process. Only for a room that owns its process:
    in a test's process it would freeze the tests' objects too.
    """
    gc.collect()
    gc.freeze()


def _unwrap(error: BaseException) -> BaseException:
    """A lone CommonroomError inside (nested) exception groups, else the error itself."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def serve_room(options: ServeOptions, *, on_ready: Callable[[Ready], None],
                     stop: trio.Event | None = None) -> None:
    try:
        await _serve_room(options, on_ready=on_ready, stop=stop if stop is not None else trio.Event())
    except BaseExceptionGroup as group:
        inner = _unwrap(group)
        if isinstance(inner, CommonroomError):
            raise inner from None
        raise


async def _serve_room(options: ServeOptions, *, on_ready: Callable[[Ready], None],
                      stop: trio.Event) -> None:
    doc = Path(options.path).resolve()
    serving = _serving_limits(options)
    open_files = raise_open_file_limit()
    use_one_malloc_arena()  # before the room's threads: one reserve of freed memory, not one a thread
    if _is_large(doc):
        # A version's blocks reuse the last one's pages, not fresh ones; the quiet trim (for
        # such a document only) gives them back. A small document keeps glibc's own thresholds,
        # which give a freed large block (an upload, a diff) back at once.
        keep_large_blocks_in_heap()
    try:
        credentials = credentials_path(doc)
    except OSError as exc:
        raise CommonroomError(
            "storage_unavailable", f"no safe folder for the host credential file: {exc}"
        ) from None
    if read_credentials(doc) is not None:
        # Two rooms on one file would fight over it (and over the credential file).
        raise CommonroomError("invalid_request", f"a room is already open on {doc.name}; stop it first")
    _check_document(doc)
    if options.git or options.git_all:
        check_git_work_tree(doc)  # outside a git work tree: refused before the room opens anything
    plugin = registry.load(options.transport)()
    temp_dir: str | None = None
    sidecar: Path | None = None
    if options.ephemeral:
        temp_dir = tempfile.mkdtemp(prefix="commonroom-")
        sidecar = Path(temp_dir) / (doc.name + SIDECAR_SUFFIX)
    try:
        config = EngineConfig(
            serving=serving,
            human_hold_minutes=options.human_hold_minutes,
            settle_ms=options.settle_ms,
            git=_git_options(options),
            # Most writes run on the event loop (`Room._runs_here`); checkpoints do not.
            caller_checkpoints=True,
            # The threads that answer reads keep the core.
            bulk_thread_start=lower_this_thread, bulk_step_aside=step_aside,
        )
        engine = open_engine(doc, config, sidecar=sidecar, clock=options.clock)
        try:
            room = Room(engine, stream_slots=StreamSlots(
                per_session=options.streams_per_session,
                per_participant=options.streams_per_participant,
                uncapped={engine.host_participant_id},
            ))
            streams = serving.max_sessions * options.streams_per_session
            await _run(room, plugin, options, doc, on_ready, stop,
                       connection_caps(open_files, streams), _streams_note(open_files, streams))
        finally:
            credentials.unlink(missing_ok=True)
            engine.close()
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _serving_limits(options: ServeOptions) -> ServingLimits:
    """The room's limits from its options; a session limit out of bounds is refused."""
    if not 1 <= options.max_sessions <= MAX_SESSIONS_LIMIT:
        raise CommonroomError(
            "invalid_request",
            f"--max-sessions must be 1 to {MAX_SESSIONS_LIMIT} (got {options.max_sessions})",
            {"field": "max_sessions", "limit": MAX_SESSIONS_LIMIT},
        )
    return ServingLimits(
        requests_per_minute=options.requests_per_minute,
        anonymous_per_minute=options.anonymous_per_minute,
        max_sessions=options.max_sessions,
    )


def _streams_note(open_files: int, streams: int) -> str | None:
    """What the host should know when the open-file limit cannot hold every stream the
    session limit allows (the listener then refuses the connections past its cap)."""
    ingress, _ = connection_caps(open_files, streams)
    if ingress >= streams:
        return None
    return (f"this process may open {open_files} files (ulimit -n), so the room serves at most"
            f" {ingress} agent connections, fewer than the {streams} streams its sessions may"
            " open; raise the hard limit (ulimit -Hn) to serve them all")


def _git_options(options: ServeOptions) -> GitOptions | None:
    """`--git` / `--git-all`: the room commits its versions in the work tree around the file."""
    if not (options.git or options.git_all):
        return None

    def report(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return GitOptions(all_saves=options.git_all, report=report)


def _check_document(doc: Path) -> None:
    """Refuse at start what the room could not serve: a file (or folder) it cannot write.

    Read-only rooms may come later; today a room that could not write its
    commits would fail every one of them, so it does not open.
    """
    try:
        DocumentFile(doc).check_writable()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CommonroomError(
            "storage_unavailable",
            f"cannot write {doc.name} or its folder ({reason}); the room needs both writable"
            " (check chattr/lsattr, permissions, a read-only mount)",
            {"file": doc.name},
        ) from None


async def _run(room: Room, plugin: Any, options: ServeOptions, doc: Path,
               on_ready: Callable[[Ready], None], stop: trio.Event,
               caps: tuple[int, int], streams_note: str | None) -> None:
    engine = room.engine
    ingress_cap, owner_cap = caps
    if options.max_connections is not None:
        ingress_cap = options.max_connections
    await room.run_sync(end_stale_host_sessions, engine)
    host_session = await room.run_sync(mint_host_session, engine)
    settings = IngressSettings(
        requests_per_minute=options.requests_per_minute,
        anonymous_per_minute=options.anonymous_per_minute,
        heartbeat_seconds=options.heartbeat_seconds,
        response_timeout=options.response_timeout,
        clock=options.rate_clock,
    )
    ingress_app = create_ingress_app(room, settings)
    # MCP on the ingress only, behind its guards and gate (the owner port answers /mcp with 404);
    # the legacy eras only with --mcp-legacy. Registered here, so http/ never imports mcp/.
    register_mcp(ingress_app, room, heartbeat_seconds=options.heartbeat_seconds,
                 legacy_eras=options.mcp_legacy)
    auth = OwnerAuth(host_session, clock=engine.clock, room=room)
    auth.restore(await room.run_sync(load_owner_logins, engine))  # logins survive a restart
    owner_app = create_owner_app(room, auth, heartbeat_seconds=options.heartbeat_seconds)
    register_owner_configs(owner_app, room)  # the MCP snippets for the page's invitation panel
    # The attachment and surface routes take bodies past the listeners' 1 MiB.
    ingress_app.config["BODY_LIMITS"] = dict(BODY_LIMITS)
    owner_app.config["BODY_LIMITS"] = {"/owner/api" + path: n for path, n in BODY_LIMITS.items()}
    notes: list[str] = [streams_note] if streams_note and options.max_connections is None else []

    async with trio.open_nursery() as nursery:
        if options.install_signal_handlers:
            await nursery.start(wait_for_stop_signal, stop)
        await nursery.start(room.run)
        nursery.start_soon(_sweep_rate_limits, ingress_app.extensions["commonroom.gate"])
        nursery.start_soon(_give_back_memory_when_quiet, room.engine)

        async with trio.open_nursery() as listeners:
            wanted = options.ingress_port
            if wanted is None:
                wanted = engine.ports.last_ingress_port() if engine.ports.transport_name == "loopback" else 0
                wanted = wanted or 0
            try:
                ingress_port = await listeners.start(partial(
                    serve, ingress_app, ServeConfig(port=wanted, write_timeout=STREAM_WRITE_TIMEOUT,
                                                keep_alive_timeout=options.keep_alive_timeout,
                                                max_connections=ingress_cap),
                    shutdown_trigger=stop.wait))
            except OSError:
                if options.ingress_port is not None and options.ingress_port != 0:
                    raise CommonroomError(
                        "transport_unavailable",
                        f"ingress port {options.ingress_port} is not free",
                    ) from None
                ingress_port = await listeners.start(partial(
                    serve, ingress_app, ServeConfig(port=0, write_timeout=STREAM_WRITE_TIMEOUT,
                                                keep_alive_timeout=options.keep_alive_timeout,
                                                max_connections=ingress_cap),
                    shutdown_trigger=stop.wait))
                notes.append(f"ingress port {wanted} was taken; bound {ingress_port}")
            owner_port = await _start_owner(listeners, owner_app, options, room, stop, notes,
                                            owner_cap)

            hint: TransportHint = await nursery.start(plugin.run, "127.0.0.1", ingress_port)
            await room.run_sync(engine.ports.set_transport, options.transport, hint)
            await room.record(ev.WorkspaceStarted(version=engine.current_version))
            invitation = await _start_invitation(room, doc, host_session)
            write_credentials(doc, Credentials(
                os.getpid(), ingress_port, owner_port, host_session, engine.workspace_id))
            on_ready(Ready(
                workspace_id=engine.workspace_id,
                human_url=owner_link(owner_port, auth.login_token),
                invitation=invitation,
                transport={"type": hint.type, "encrypted": hint.encrypted, "status": "READY"},
                owner_port=owner_port,
                ingress_port=ingress_port,
                notes=tuple(notes),
            ))
            if options.install_signal_handlers:
                freeze_startup_heap()
            await stop.wait()
            engine.begin_stopping()
            room.hub.close_all()
            room.app_hosts.close_all()  # the pages' app-host lines end like the event streams
        # Listeners have drained; record the stop and end the background work.
        with suppress(OSError):
            credentials_path(doc).unlink(missing_ok=True)
        with trio.CancelScope(shield=True):
            await room.run_sync(end_host_session, engine, host_session)
            await room.record(ev.WorkspaceStopped(version=engine.current_version))
        nursery.cancel_scope.cancel()


async def _start_invitation(room: Room, doc: Path, host_session: str) -> str:
    """The invitation to print: the last start's while nobody used it, else a new one (reprinted until used)."""
    from commonroom.protocol.invitation import decode

    uri = await room.run_sync(unused_start_invitation, room.engine, read_start_secret(doc))
    if uri is None:
        uri = str((await room.call("workspace.invite", host_session, {}))["invitation"])
        with suppress(OSError):  # unsaved: the next start mints a new one, as before
            write_start_secret(doc, decode(uri).secret)
    return str(uri)


async def _start_owner(listeners: trio.Nursery, owner_app: Any, options: ServeOptions, room: Room,
                       stop: trio.Event, notes: list[str], max_connections: int) -> int:
    """Bind the owner page where it was last time, so an open tab survives a restart."""
    wanted = options.owner_port
    if wanted is None:
        wanted = await room.run_sync(room.engine.ports.saved_port, "owner_port") or 0
    try:
        port: int = await listeners.start(partial(
            serve, owner_app, ServeConfig(port=wanted, keep_alive_timeout=options.keep_alive_timeout,
                                      max_connections=max_connections),
            shutdown_trigger=stop.wait))
    except OSError as exc:
        if options.owner_port:
            raise CommonroomError(
                "transport_unavailable",
                f"owner port {options.owner_port} is not free ({exc.strerror}); pick another"
                " with --port-owner, or 0 for any free port",
                {"port": options.owner_port},
            ) from None
        port = await listeners.start(partial(
            serve, owner_app, ServeConfig(port=0, keep_alive_timeout=options.keep_alive_timeout,
                                  max_connections=max_connections),
            shutdown_trigger=stop.wait))
        notes.append(f"owner port {wanted} was taken; bound {port} (open the new link)")
    await room.run_sync(room.engine.ports.save_port, "owner_port", port)
    return port


def _is_large(doc: Path) -> bool:
    """Is the document at least `TRIM_MIN_DOCUMENT_BYTES` (False if it cannot be looked at:
    the start's own checks say why)?"""
    try:
        return doc.stat().st_size >= TRIM_MIN_DOCUMENT_BYTES
    except OSError:
        return False


async def _trim_on_a_thread() -> None:
    await trio.to_thread.run_sync(give_back_free_memory)


async def _give_back_memory_when_quiet(
        engine: EngineFace, trim: Callable[[], Awaitable[None]] = _trim_on_a_thread) -> None:
    """Once a large document (`TRIM_MIN_DOCUMENT_BYTES`) stopped changing for
    `QUIET_TRIM_SECONDS`, give the memory its old versions held back to the system
    (`process_memory.give_back_free_memory`): a room holds one large document's reserve
    while it commits, not after (the RSS ratio of docs/benchmarks.md). The trim runs on a
    worker thread, but it holds the allocator's lock: every thread's allocations wait."""
    seen = trimmed = engine.current_version
    while True:
        await trio.sleep(QUIET_TRIM_SECONDS)
        version = engine.current_version
        if version != seen:
            seen = version  # still changing: look again after a quiet period
        elif version != trimmed:
            if len(engine.current().data) >= TRIM_MIN_DOCUMENT_BYTES:
                await trim()
            trimmed = version


async def _sweep_rate_limits(gate: Gate) -> None:
    while True:
        await trio.sleep(RATE_SWEEP_SECONDS)
        gate.sweep()
