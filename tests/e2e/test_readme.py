"""The README's "Working in a room" walk, run as written against a real room.

The code blocks of that section are executed in order by one `bash -eu`, in
a fresh folder laid out like a clone (`samples/idea.md`, and `.venv` pointing
at the venv running the tests, so `. .venv/bin/activate` works), while a real
`ce serve samples/idea.md` runs there. If a command in the README stops
working, this test fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, SAMPLE, start_room

pytestmark = pytest.mark.e2e

README = REPO / "README.md"
SECTION = "## Working in a room"


def section(text: str, heading: str) -> str:
    """The lines from `heading` to the next level-2 heading outside a code fence."""
    lines = text.splitlines()
    start = lines.index(heading)
    fenced = False
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            return "\n".join(lines[start:index])
    return "\n".join(lines[start:])


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def test_working_in_a_room_runs_as_written(tmp_path: Path, config_home: Path) -> None:
    walk = section(README.read_text(), SECTION)
    blocks = shell_blocks(walk)
    assert len(blocks) >= 4 and "ce join" in walk and "ce wait" in walk
    clone = tmp_path / "clone"
    (clone / "samples").mkdir(parents=True)
    shutil.copyfile(SAMPLE, clone / "samples" / "idea.md")
    venv = Path(sys.prefix)
    assert (venv / "bin" / "activate").exists(), "the tests run from a venv"
    (clone / ".venv").symlink_to(venv, target_is_directory=True)
    room = start_room(clone / "samples" / "idea.md")
    try:
        env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
        env["PATH"] = "/usr/bin:/bin"  # only what `. .venv/bin/activate` adds finds `ce`
        script = "set -eu\n" + "\n".join(blocks)
        result = subprocess.run(["bash", "-c", script], cwd=clone, env=env,
                                capture_output=True, text=True, timeout=120,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        text = (clone / "samples" / "idea.md").read_text()
        assert "keep them for years, while the street" in text
        # The commands the README gives after the walk work on the text the walk left.
        readme = README.read_text()
        for quote in re.findall(r'--quote "([^"]+)"', readme):
            assert quote in text, quote
        ask = subprocess.run(["bash", "-c", ". .venv/bin/activate && ce ask samples/idea.md"
                              ' "Who it is for" "Which group first?" --quote "Small reading groups"'
                              " && ce blame samples/idea.md Problem && ce history samples/idea.md"],
                             cwd=clone, env=env, capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
        assert ask.returncode == 0, (ask.stdout, ask.stderr)
        assert "Traceback" not in ask.stdout + ask.stderr
        assert not list((config_home / "commonroom" / "profiles").glob("*.json"))  # ce leave
    finally:
        room.close()


def test_the_readme_names_real_sections_and_files() -> None:
    readme = README.read_text()
    walk = section(readme, SECTION)
    listed = re.search(r"The sample's sections are(.*?); a unique title", walk, re.DOTALL)
    assert listed is not None
    names = re.findall(r"`([^`]+)`", listed.group(1))
    headings = re.findall(r"^## (.+)$", SAMPLE.read_text(), flags=re.MULTILINE)
    assert names == headings
    for block in shell_blocks(walk):
        for title in re.findall(r"\bce (?:read|checkout|propose) (\w+)", block):
            assert title in headings, title
    # Paths the README mentions are in the repository (none outside it).
    for path in re.findall(r"`((?:docs|tools|samples|src|tests)/[\w./-]*)`", readme):
        assert (REPO / path).exists(), path
    assert "PROTOCOL.md" not in readme.replace("docs/spec/PROTOCOL.md", "").replace("docs/protocol.md", "")
    assert "*.commonroom.db*" in readme
