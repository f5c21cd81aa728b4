"""The host's terminal tells the truth: real `ce` processes against a real `ce serve`.

- a stale editor buffer saved over an agent's commit: the version records what it
  undid, `ce history FILE` says "undid ada's change (vN)", and `ce reapply FILE N`
  brings the agent's line back next to the host's own edit (docs/spec/PROTOCOL.md 16);
- the host forms of the read verbs: `ce history FILE`, `ce diff FILE`,
  `ce participants FILE`, `ce leases FILE`; `ce threads` names people, not ids.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import at_terminal, ce, ce_ok, start_room

pytestmark = pytest.mark.e2e

TEXT = """# Plan

The host's plan.

## Goals

- ship it

## Risks

Nothing yet.
"""


def join(doc: Path, name: str) -> dict[str, Any]:
    invitation = ce("invite", str(doc)).stdout.strip()
    joined: dict[str, Any] = ce_ok("join", invitation, "--name", name, "--no-hold",
                                   "--profile", name)
    return joined


def approve(doc: Path, proposal_id: str) -> None:
    """The host approves (the one place this module writes a review's parameters)."""
    ce_ok("review", str(doc), proposal_id, "--approve", "--yes")


def wait_for_version(doc: Path, version: int) -> None:
    deadline = time.monotonic() + 15
    while ce_ok("status", str(doc))["version"] < version:
        assert time.monotonic() < deadline, "the save was never recorded"
        time.sleep(0.1)


def test_a_stale_buffer_save_is_flagged_in_history_and_reapply_restores_the_line(
        tmp_path: Path) -> None:
    doc = tmp_path / "plan.md"
    doc.write_text(TEXT)
    stale = TEXT  # the host's editor opened the file now, and keeps this buffer
    room = start_room(doc, "--port-ingress", "0")
    try:
        join(doc, "ada")
        content = tmp_path / "goals.md"
        content.write_text("## Goals\n\n- ship it\n- ship it with tests\n\n")
        ce_ok("read", "Goals", "--profile", "ada")
        proposed = ce_ok("propose", "Goals", "--file", str(content), "--summary", "tests too",
                         "--profile", "ada")
        approve(doc, proposed["proposal_id"])
        committed = ce_ok("commit", proposed["proposal_id"], "--profile", "ada")["version"]
        assert "- ship it with tests" in doc.read_text()

        # The host saves the old buffer with an edit elsewhere, the way editors do.
        doc.write_text(stale.replace("Nothing yet.", "Rain in May."))
        wait_for_version(doc, committed + 1)
        saved = committed + 1
        assert "- ship it with tests" not in doc.read_text()  # the file is the host's
        history = ce("history", str(doc))
        assert history.returncode == 0, history.stderr
        line = next(row for row in history.stdout.splitlines() if row.startswith(f"v{saved} "))
        assert f"undid ada's change (v{committed})" in line
        events = ce_ok("history", str(doc))["events"]
        change = next(e for e in events if e["type"] == "change.committed"
                      and e["payload"]["version"] == saved)
        assert change["payload"]["undoes"] == [
            {"version": committed, "participant_id": change["payload"]["undoes"][0]["participant_id"]}]
        assert ce_ok("status", str(doc))["version"] == saved  # nothing happened by itself

        reapplied = ce("reapply", str(doc), str(saved))
        assert reapplied.returncode == 0, reapplied.stderr
        assert f"version {saved + 1}: re-applied" in reapplied.stdout
        final = doc.read_text()
        assert "- ship it with tests" in final and "Rain in May." in final
        again = ce("reapply", str(doc), str(saved), "--json")
        assert again.returncode != 0 and json.loads(again.stdout)["details"]["settled"] == "reapplied"
    finally:
        room.close()


def test_the_host_forms_of_the_read_verbs_and_names_in_threads(tmp_path: Path) -> None:
    doc = tmp_path / "plan.md"
    doc.write_text(TEXT)
    room = start_room(doc, "--port-ingress", "0")
    try:
        join(doc, "ada")
        ce_ok("checkout", "Risks", "--profile", "ada")
        ce_ok("ask", "Goals", "Which release?", "--profile", "ada")
        doc.write_text(TEXT.replace("- ship it", "- ship it in May"))
        wait_for_version(doc, 2)

        participants = ce("participants", str(doc))
        assert participants.returncode == 0 and " ada " in participants.stdout
        leases = ce("leases", str(doc))
        assert "Plan/Risks  by ada (agent)" in leases.stdout
        assert "Plan/Goals  by " in leases.stdout  # the host's save holds Goals
        diff = ce("diff", str(doc))
        assert diff.returncode == 0
        assert "-- ship it\n" in diff.stdout and "+- ship it in May\n" in diff.stdout
        history = ce("history", str(doc))
        assert history.returncode == 0 and "v2 whole document · the host's editor" in history.stdout
        threads = ce("threads", "--profile", "ada")
        assert "by ada (agent)" in threads.stdout and "  ada (agent): Which release?" in threads.stdout
        host_threads = ce("threads", str(doc)).stdout
        assert "  ada (agent): Which release?" in host_threads
    finally:
        room.close()


def test_a_stale_error_shows_its_diff_line_by_line_on_a_terminal(tmp_path: Path) -> None:
    doc = tmp_path / "plan.md"
    doc.write_text(TEXT)
    room = start_room(doc, "--port-ingress", "0", "--human-hold-minutes", "0")
    try:
        join(doc, "ada")
        ce_ok("read", "Goals", "--profile", "ada")
        doc.write_text(TEXT.replace("- ship it\n", "- ship it\n- ship it soon\n- ship it well\n"))
        wait_for_version(doc, 2)
        content = tmp_path / "goals.md"
        content.write_text("## Goals\n\n- ship it now\n\n")
        code, shown = at_terminal(["propose", "Goals", "--file", str(content), "--profile", "ada"])
        assert code == 4, shown
        lines = [line.strip() for line in shown.splitlines()]
        assert lines[0].startswith("error: stale_version: ")
        assert "diff=" not in lines[0]
        # Escapes aside (a terminal gets colours), each line of the diff is a line of its own.
        plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines]
        assert "+- ship it soon" in plain and "+- ship it well" in plain
        # Not on a terminal: the same lines, no colours.
        piped = ce("propose", "Goals", "--file", str(content), "--profile", "ada")
        assert piped.returncode == 4 and "\n+- ship it soon\n" in piped.stderr
        assert "\x1b[" not in piped.stderr
    finally:
        room.close()
