"""The reliability tests' shared fixture: one fork server per worker for the crash tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tools.fault.forkserver import ForkServer


@pytest.fixture(scope="session")
def fork_server() -> Iterator[ForkServer]:
    """Forks `ce serve` for the crash harness's many restarts (tools/fault/forkserver.py)."""
    server = ForkServer()
    yield server
    server.close()
