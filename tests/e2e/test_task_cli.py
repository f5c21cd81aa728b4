"""`ce task view|app|ask|show` against a real `ce serve` (docs/spec/PROTOCOL.md 20): real `ce`
processes over a saved profile; the app request's `no_app_host` is exit 9 with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Room, ce, ce_err, ce_ok

pytestmark = pytest.mark.e2e

VIEW = {"surface_id": "steps", "revision": 1, "data": {"done": 1},
        "root": {"type": "Card", "title": "Goals", "children": [{"type": "Value", "path": "done"}]}}
BUNDLE = {"version": 1, "manifest": {"title": "Chooser", "networkOrigins": []},
          "html": "<button>A</button>", "css": "", "js": "", "initialState": None}


def accepted_task(served: Room, doc: Path) -> str:
    """An agent joined with `ce join` (its profile is the default) that accepted a task."""
    invitation = ce("invite", str(doc)).stdout.strip()
    joined = ce_ok("join", invitation, "--name", "drafter", "--no-hold")
    handoff = served.host.ok("POST", "/workspace/handoff",
                             {"to_participant_id": joined["participant_id"], "summary": "Goals"})
    task: dict[str, Any] = served.ok("POST", "/workspace/handoff/respond", joined["session_id"],
                                     {"handoff_id": handoff["handoff_id"], "decision": "accept"})
    return str(task["task_id"])


def test_the_task_verbs(served: Room, doc: Path, tmp_path: Path) -> None:
    task_id = accepted_task(served, doc)
    view_file = tmp_path / "view.json"
    view_file.write_text(json.dumps(VIEW))
    shown = ce("task", "view", task_id, "--file", str(view_file))
    assert shown.returncode == 0 and shown.stdout.strip() == "live view steps revision 1"
    error, refused = ce_err("task", "view", task_id, json.dumps(VIEW))  # the same revision again
    assert refused.returncode == 1 and error["error"] == "invalid_request"
    assert error["details"]["path"] == "revision"
    assert ce_ok("task", "app", task_id, json.dumps(BUNDLE))["revision"] == 1
    error, refused = ce_err("task", "ask", task_id, '{"question": "A?"}')
    assert refused.returncode == 9 and error["details"]["reason"] == "no_app_host"
    listed = ce("task", "show").stdout
    assert f"{task_id}: Goals · live view r1 · app 'Chooser' r1, state r0" in listed
    assert ce("task", "view", task_id, "--clear").stdout.strip() == "cleared"
    usage = ce("task", "view", task_id)
    assert usage.returncode == 2 and "exactly one of" in usage.stderr
