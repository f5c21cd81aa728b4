"""Shared fixtures: a real markdown file, a real sidecar, an injected clock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commonroom.engine import dispatch, sessions
from commonroom.engine.core import Engine
from commonroom.engine.dispatch import open_engine
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.timefmt import ManualClock

SAMPLE = """# Plan

Intro text.

## Goals

- ship it

## Risks

Nothing yet.

```python
# not a heading
```

# Appendix

The end.
"""


class Driver:
    """A test driver around one Engine: call operations, join agents."""

    def __init__(self, engine: Engine, clock: ManualClock) -> None:
        self.engine = engine
        self.clock = clock
        self.host = sessions.mint_host_session(engine)

    def call(self, op: str, bearer: str | None, /, **params: Any) -> Any:
        from commonroom.protocol.records import to_wire

        outcome = dispatch.execute(self.engine, op, bearer, params)
        if outcome.error is not None:
            raise outcome.error
        return to_wire(outcome.result)

    def error(self, op: str, bearer: str | None, /, **params: Any) -> CommonroomError:
        outcome = dispatch.execute(self.engine, op, bearer, params)
        assert outcome.error is not None, f"{op} unexpectedly succeeded: {outcome.result}"
        return outcome.error

    def invite(self, **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.call("workspace.invite", self.host, **params)
        return result

    def join(self, name: str = "agent", caps: list[str] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if caps is not None:
            params["capabilities"] = caps
        inv = self.invite(**params)
        result: dict[str, Any] = self.call(
            "session.join", None, invite=inv["invitation"], name=name
        )
        return result

    @property
    def version(self) -> int:
        return self.engine.current_version


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (tox) starts one worker more than there are cores.

    Much of the suite waits on real rooms, `ce` processes and Chromium, so a third
    worker on two cores fills the idle time: on the 2-core machine, 9 min 38 s with two
    workers (`--dist load`), 7 min 51 s with three, 8 min 10 s with four (worksteal;
    docs/reliability.md, "The suite's wall time"). PYTEST_XDIST_AUTO_NUM_WORKERS still
    decides when it is set (xdist's own reading of it).
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `slow` run first, in their collection order; the rest keep theirs.

    Under xdist (tox: `-n auto --dist worksteal`) a slow test that starts last is the
    run's tail: one worker finishes it while the others are idle. Started first, the
    slow ones (mostly waiting on real rooms and processes) overlap with everything else,
    and the idle workers steal the short tests from the end of the queues.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def doc_path(tmp_path: Path) -> Path:
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE)
    return path


@pytest.fixture
def room(doc_path: Path, clock: ManualClock) -> Iterator[Driver]:
    engine = open_engine(doc_path, clock=clock)
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    yield Driver(engine, clock)
    engine.close()
