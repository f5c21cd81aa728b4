"""Editing the room's file the way editors save it, for tests that edit a running room.

`Path.write_text` truncates the file and then writes it: a watcher that looks
in between sees an empty file and records it as a version of its own. Editors
save a temp file and rename it over the document, which is what this does.
"""

from __future__ import annotations

import os
from pathlib import Path


def save_like_an_editor(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.editor-swap")
    temp.write_text(text)
    os.replace(temp, path)
