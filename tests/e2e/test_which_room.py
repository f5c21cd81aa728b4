"""The room a command talks to is never a guess; agents talk in the room (wave 4).

With two rooms, `ce participants` silently listed the other room's people and
`ce read "Who it is for"` failed with "no heading matches": nothing named the
room. Now a command without --profile, run in a folder holding another room's
sidecar, refuses and names the profile for the room there; `ce use NAME` makes
a profile the default, `ce profiles` lists them, and with more than one profile
every command says on stderr which room it uses. Agents have `ce say` and
`ce messages`, as the host has them with the file first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ce, start_room

pytestmark = pytest.mark.e2e


def join(doc: Path, name: str, profile: str) -> dict[str, Any]:
    invitation = ce("invite", str(doc)).stdout.strip()
    result = ce("join", invitation, "--name", name, "--no-hold", "--profile", profile, "--json")
    assert result.returncode == 0, result.stderr
    joined: dict[str, Any] = json.loads(result.stdout)
    return joined


def test_a_command_in_another_rooms_folder_refuses_to_guess(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    idea, plan = first / "idea.md", second / "plan.md"
    idea.write_text("# Idea\n\n## Who it is for\n\nReaders.\n")
    plan.write_text("# Plan\n\n## Steps\n\nFirst.\n")
    rooms = [start_room(idea), start_room(plan)]
    try:
        join(idea, "ada", "idea")
        join(plan, "bob", "plan")  # the last joined: the default so far

        refused = ce("participants", cwd=first)
        assert refused.returncode == 2
        assert "idea.md" in refused.stderr and "--profile idea" in refused.stderr
        assert "not guessing" in refused.stderr
        in_json = ce("read", "Who it is for", "--json", cwd=first)
        assert in_json.returncode == 2 and json.loads(in_json.stdout)["error"] == "invalid_request"

        used = ce("use", "idea")
        assert used.returncode == 0 and "room idea.md" in used.stdout
        listed = json.loads(ce("profiles", "--json").stdout)["profiles"]
        assert {(p["profile"], p["room"], p["default"]) for p in listed} == {
            ("idea", "idea.md", True), ("plan", "plan.md", False)}
        assert "* idea  room idea.md  as ada (agent)" in ce("profiles").stdout

        read = ce("read", "Who it is for", cwd=first)
        assert read.returncode == 0 and "Readers." in read.stdout
        assert "(room idea.md, as ada: profile idea" in read.stderr  # two profiles: it says which
        elsewhere = ce("participants", cwd=second)
        assert elsewhere.returncode == 2 and "--profile plan" in elsewhere.stderr
        assert ce("participants", "--profile", "plan", cwd=second).returncode == 0

        # Agents talk in the room; the host reads it with the file first.
        said = ce("say", "Readers first, then shops.", "--profile", "idea")
        assert said.returncode == 0 and said.stdout.startswith("said #")
        heard = ce("messages", "--profile", "idea")
        assert "ada" in heard.stdout and "Readers first, then shops." in heard.stdout
        assert "Readers first, then shops." in ce("messages", str(idea)).stdout
        assert ce("say", str(idea), "Agreed.", "--to", "ada").returncode == 0
        assert "Agreed." in ce("messages", "--profile", "idea").stdout
        assert "Readers first" not in ce("messages", "--profile", "plan").stdout
    finally:
        for room in rooms:
            room.close()
