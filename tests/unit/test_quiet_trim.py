"""A room gives freed memory back once its document stopped changing (service.py)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from commonroom import service


class _Snapshot:
    def __init__(self, size: int) -> None:
        self.data = b"x" * size


class _Versions:
    current_version = 1
    snapshot = _Snapshot(service.TRIM_MIN_DOCUMENT_BYTES)

    def current(self) -> _Snapshot:
        return self.snapshot


async def test_freed_memory_is_given_back_once_per_quiet_period(
        autojump_clock: trio.testing.MockClock) -> None:
    trims: list[int] = []

    async def trim() -> None:
        trims.append(engine.current_version)
    engine = _Versions()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service._give_back_memory_when_quiet, engine, trim)
        await trio.sleep(5)
        assert trims == []  # nothing changed since the room opened: nothing to give back
        for _ in range(10):  # a version every 0.2 s: still committing, never trimmed
            engine.current_version += 1
            await trio.sleep(0.2)
        assert trims == []
        await trio.sleep(2)  # quiet: one trim, and only one
        assert len(trims) == 1
        engine.current_version += 1
        await trio.sleep(2)
        assert len(trims) == 2
        engine.snapshot = _Snapshot(10_000)  # a small document: its freed versions stay
        engine.current_version += 1
        await trio.sleep(2)
        assert len(trims) == 2
        nursery.cancel_scope.cancel()


def test_only_a_large_document_gets_the_fixed_heap_thresholds(tmp_path: Path) -> None:
    # (a small one keeps glibc's own, which give a freed upload or diff back at once: the
    # quiet trim, which would give them back otherwise, runs for a large document only)
    small, large = tmp_path / "small.md", tmp_path / "large.md"
    small.write_bytes(b"# S\n" * 100)
    large.write_bytes(b"x" * service.TRIM_MIN_DOCUMENT_BYTES)
    assert service._is_large(large) and not service._is_large(small)
    assert not service._is_large(tmp_path / "missing.md")
