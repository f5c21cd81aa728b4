"""Editing the room's file the way editors save it, for tests that edit a running room.

`Path.write_text` truncates the file and then writes it; many editors save
that way too (the room settles either, docs/spec/PROTOCOL.md section 16). Tests that
only need an edit save a temp file and rename it over the document.
"""

from __future__ import annotations

import os
from pathlib import Path

from commonroom.engine.core import Engine
from commonroom.protocol.events import Event
from commonroom.protocol.timefmt import ManualClock


def save_like_an_editor(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.editor-swap")
    temp.write_text(text)
    os.replace(temp, path)


def let_settle(engine: Engine, clock: ManualClock) -> list[Event]:
    """What the room's watcher does after a save, by hand on an injected clock.

    A look sees the change (the settle starts), the settle period passes, the
    next look reads and records it. Returns the events of both looks.
    """
    events = engine.watch()[0]
    clock.advance(seconds=engine.settle.period.total_seconds())
    return events + engine.watch()[0]
