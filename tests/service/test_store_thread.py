"""Which thread runs what: writes on the event loop, the document's writes and the WAL's
checkpoints on the store thread (`Room._runs_here`, `EngineConfig.caller_checkpoints`).

Real threads and the real clock: what is asserted is where the work ran.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from commonroom.engine import facade, sessions
from commonroom.engine.config import EngineConfig
from commonroom.engine.core import Engine
from commonroom.engine.dispatch import open_engine
from commonroom.protocol.invitation import TransportHint
from commonroom.room import core as room_core
from commonroom.room.core import Room


def _engine(doc_path: Path) -> Engine:
    engine = open_engine(doc_path, EngineConfig(caller_checkpoints=True))
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    return engine


async def _agent(room: Room, host: str) -> str:
    invite = await room.call("workspace.invite", host, {})
    joined = await room.call("session.join", None, {"invite": invite["invitation"], "name": "a"})
    return str(joined["session_id"])


@pytest.fixture
def ran_on(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[int]]:
    """Operation name -> the threads the room ran it on."""
    threads: dict[str, set[int]] = {}
    real_execute, real_read = facade.execute, facade.read

    def recording(engine: Engine, name: str, *args: Any, **kwargs: Any) -> Any:
        threads.setdefault(name, set()).add(threading.get_ident())
        return real_execute(engine, name, *args, **kwargs)

    def recording_read(engine: Engine, name: str, *args: Any, **kwargs: Any) -> Any:
        threads.setdefault(name, set()).add(threading.get_ident())
        return real_read(engine, name, *args, **kwargs)

    monkeypatch.setattr(room_core.facade, "execute", recording)
    monkeypatch.setattr(room_core.facade, "read", recording_read)
    return threads


async def test_small_writes_run_on_the_event_loop_and_a_commit_on_the_store_thread(
    doc_path: Path, ran_on: dict[str, set[int]]
) -> None:
    engine = _engine(doc_path)
    room = Room(engine)
    host = sessions.mint_host_session(engine)
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        agent = await _agent(room, host)
        lease = await room.call("workspace.checkout", agent, {"region": "Goals"})
        proposal = await room.call("workspace.propose", agent, {
            "region": "Goals", "base_version": 1, "summary": "s", "content": "## Goals\n\n- ship\n\n"})
        await room.call("workspace.review", host, {"proposal_id": proposal["proposal_id"],
                "revision": proposal["revision"],
                                                   "decision": "approve"})
        await room.call("workspace.commit", agent, {"proposal_id": proposal["proposal_id"]})
        await room.call("workspace.release", agent, {"lease_id": lease["lease_id"]})
        nursery.cancel_scope.cancel()
    loop = threading.get_ident()
    for name in ("session.join", "workspace.checkout", "workspace.propose", "workspace.review",
                 "workspace.release"):
        assert ran_on[name] == {loop}, name
    assert loop not in ran_on["workspace.commit"]
    assert doc_path.read_text().count("- ship\n") == 1
    engine.close()


async def test_the_wal_is_checkpointed_on_the_store_thread_and_stays_bounded(
    doc_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(doc_path)
    assert engine.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0  # never SQLite's own
    checkpoints_on: list[int] = []
    real_checkpoint = engine.checkpoint

    def recording() -> None:
        checkpoints_on.append(threading.get_ident())
        real_checkpoint()

    monkeypatch.setattr(engine, "checkpoint", recording)
    room = Room(engine)
    host = sessions.mint_host_session(engine)
    wal = Path(f"{engine.sidecar_path}-wal")
    largest = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(room.run)
        agent = await _agent(room, host)
        body = "## Goals\n\n" + "".join(f"- line {i} of a long proposal\n" for i in range(4000)) + "\n"
        for n in range(40):  # ~4.5 MiB of proposal text through the WAL, each on the loop
            proposal = await room.call("workspace.propose", agent, {
                "region": "Goals", "base_version": 1, "summary": f"p{n}", "content": body + f"{n}\n"})
            await room.call("workspace.withdraw", agent, {"proposal_id": proposal["proposal_id"]})
            await trio.sleep(0)  # the checkpointer's turn, as between requests
            largest = max(largest, wal.stat().st_size)
        nursery.cancel_scope.cancel()
    assert checkpoints_on, "no checkpoint ran"
    assert threading.get_ident() not in checkpoints_on
    assert largest < 3 * 1024 * 1024, largest  # 1 MiB, and what arrived while one was queued
    engine.close()


async def test_writes_on_a_large_document_keep_the_store_thread(
    tmp_path: Path, ran_on: dict[str, set[int]]
) -> None:
    doc = tmp_path / "big.md"
    doc.write_text("# Big\n\n" + "".join(f"## Part {i}\n\n{'x' * 2000}\n\n" for i in range(600)))
    assert doc.stat().st_size > room_core.INLINE_WRITES_MAX_BYTES
    engine = _engine(doc)
    room = Room(engine)
    host = sessions.mint_host_session(engine)
    agent = await _agent(room, host)
    lease = await room.call("workspace.checkout", agent, {"region": "Big/Part 7"})
    await room.call("workspace.status", agent, {})
    await room.call("workspace.release", agent, {"lease_id": lease["lease_id"]})
    loop = threading.get_ident()
    assert loop not in ran_on["workspace.checkout"] | ran_on["workspace.release"]
    assert ran_on["workspace.status"] == {loop}  # reads stay on the loop
    engine.close()
