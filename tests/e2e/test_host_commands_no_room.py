"""Host commands never invent a room (docs/spec/PROTOCOL.md 13; wave 4).

`ce blame idea.md Problem`, typed in a folder with no `idea.md`, made an empty
`idea.md` and a 278 KB sidecar, and `ce status idea.md` then reported that
phantom room as `open`. A host command on a missing file, or on a file with no
room running and no sidecar, now says so and creates nothing; `ce status` on a
room that is not running says `stopped`, with the last version.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import ce, start_room

pytestmark = pytest.mark.e2e


def test_a_host_command_on_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    for args in (["blame", "idea.md", "Problem"], ["status", "idea.md"],
                 ["history", "idea.md"]):
        result = ce(*args, cwd=tmp_path)
        assert result.returncode != 0, args
        assert "idea.md" in result.stdout + result.stderr
        assert list(tmp_path.iterdir()) == [], (args, list(tmp_path.iterdir()))


def test_a_host_command_on_a_file_without_a_room_creates_nothing(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    doc.write_text("# Idea\n\n## Problem\n\nBooks.\n")
    result = ce("blame", "idea.md", "Problem", "--json", cwd=tmp_path)
    assert result.returncode != 0
    error = json.loads(result.stdout.strip().splitlines()[-1])
    assert error["error"] == "invalid_request" and error["details"]["reason"] == "no_room"
    assert "ce serve idea.md" in error["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idea.md"]
    human = ce("status", "idea.md", cwd=tmp_path)
    assert human.returncode != 0 and "no room around idea.md" in human.stdout + human.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idea.md"]


def test_status_says_stopped_with_the_last_version_once_the_room_stopped(tmp_path: Path) -> None:
    doc = tmp_path / "idea.md"
    doc.write_text("# Idea\n\n## Problem\n\nBooks.\n")
    room = start_room(doc)
    try:
        running = json.loads(ce("status", str(doc), "--json").stdout)
        assert running["lifecycle"] == "open"
    finally:
        room.close()
    stopped = ce("status", str(doc), "--json")
    assert stopped.returncode == 0, stopped.stderr
    answer = json.loads(stopped.stdout)
    assert answer["lifecycle"] == "stopped" and answer["version"] == 1
    human = ce("status", str(doc)).stdout
    assert "lifecycle: stopped" in human and "version: 1" in human
