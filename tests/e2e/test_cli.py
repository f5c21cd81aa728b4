"""`ce` as a program: outputs, exit codes, and errors that are never tracebacks."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RoomProcess, ce, ce_err, ce_ok, fake_tailcat_env, start_room
from tests.editing import save_like_an_editor

pytestmark = pytest.mark.e2e

READY_KEYS = {"workspace_id", "human_url", "invitation", "transport", "owner_port", "ingress_port",
              "mcp_url"}


def _encode(payload: Mapping[str, Any]) -> str:
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return "commonroom://join/" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


INVITATION: dict[str, Any] = {
    "capabilities": ["read", "propose"],
    "expires_at": "2030-01-01T00:00:00.000000+00:00",
    "protocol": "commonroom",
    "secret": "s3cr3t-value-never-printed",
    "transport": {"type": "loopback", "address": "127.0.0.1", "port": 4711,
                  "encrypted": False, "mode": "private"},
    "version": "1",
    "workspace_id": "ws_abcdefghijklmnopqrstuvwxyz",
}


def test_decode() -> None:
    good = ce_ok("decode", _encode(INVITATION))
    assert good == {k: v for k, v in INVITATION.items() if k != "secret"}
    readable = ce("decode", _encode(INVITATION))
    assert readable.returncode == 0
    assert json.loads(readable.stdout)["workspace_id"] == INVITATION["workspace_id"]
    assert "s3cr3t" not in readable.stdout

    error, _ = ce_err("decode", _encode({**INVITATION, "version": "2"}))
    assert error["error"] == "unsupported_version"

    for broken in ("https://example.org/join/x", "commonroom://join/%%%",
                   "commonroom://join/" + base64.urlsafe_b64encode(b"[1,2]").decode(),
                   _encode({k: v for k, v in INVITATION.items() if k != "workspace_id"})):
        error, _ = ce_err("decode", broken)
        assert error["error"] == "invalid_request", broken

    readable = ce("decode", "not-an-invitation")
    assert readable.returncode == 1
    assert readable.stdout == ""
    assert readable.stderr.startswith("error: invalid_request: ")
    assert len(readable.stderr.strip().splitlines()) == 1


def test_serve_json_ready_line(room: RoomProcess, doc: Path) -> None:
    ready = room.ready
    assert set(ready) == READY_KEYS
    assert set(ready["transport"]) == {"type", "encrypted", "status"}
    assert ready["transport"] == {"type": "loopback", "encrypted": False, "status": "READY"}
    assert ready["invitation"].startswith("commonroom://join/")
    assert ready["human_url"].startswith(f"http://127.0.0.1:{ready['owner_port']}/")
    assert ready["ingress_port"] != ready["owner_port"]
    assert ready["mcp_url"] == f"http://127.0.0.1:{ready['ingress_port']}/mcp"
    decoded = ce_ok("decode", ready["invitation"])
    assert decoded["workspace_id"] == ready["workspace_id"]
    assert decoded["transport"]["port"] == ready["ingress_port"]

    assert room.stop() == 0
    assert len(room.stdout_lines) == 1  # one JSON line, then nothing else on stdout


def test_file_shorthand_serves(doc: Path) -> None:
    room = RoomProcess([str(doc), "--port-owner", "0", "--port-ingress", "0"], doc.parent)
    try:
        invitation = room.wait_for_line("commonroom://join/")
        output = "".join(room.stdout_lines)
        assert "http://127.0.0.1:" in output
        assert any(line.rstrip().endswith("READY") and line.startswith("transport:")
                   for line in room.stdout_lines)
        assert ce_ok("decode", invitation)["workspace_id"].startswith("ws_")
        joined = ce_ok("join", invitation, "--name", "shorthand-bot", "--no-hold")
        assert joined["session_id"].startswith("ses_")
    finally:
        code = room.stop()
        stderr = room.stderr()
        room.close()
    assert code == 0, stderr
    assert "Traceback" not in stderr


def test_tailcat_missing_is_transport_unavailable(doc: Path) -> None:
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    for extra in (["--json"], []):
        result = ce("serve", str(doc), "--transport", "tailcat", "--port-owner", "0",
                    "--port-ingress", "0", *extra, env=env, timeout=30)
        assert result.returncode != 0
        both = result.stdout + result.stderr
        assert "transport_unavailable" in both
        assert "commonroom://" not in both
        assert "Traceback" not in both
        if extra:
            assert json.loads(result.stdout)["error"] == "transport_unavailable"
        else:
            assert result.stderr.startswith("error: transport_unavailable")


def test_host_commands_with_and_without_a_room(doc: Path) -> None:
    # No room ever: a host command invents none (wave 4), it says how to open one.
    for args in (["status"], ["invitations"], ["proposals"], ["invite"]):
        error, _ = ce_err(args[0], str(doc))
        assert error["details"]["reason"] == "no_room" and "ce serve" in error["message"], args
    assert sorted(p.name for p in doc.parent.iterdir()) == [doc.name]

    room = start_room(doc, "--port-ingress", "0")
    try:
        online = ce_ok("status", str(doc))
        assert room.ready["workspace_id"] == online["workspace_id"]
        assert online["lifecycle"] == "open"
        made = ce("invite", str(doc), "--capabilities", "read,observe", "--max-uses", "2",
                  "--expires", "30")
        assert made.returncode == 0
        line = made.stdout.strip()
        assert line.startswith("commonroom://join/") and "\n" not in line
        assert ce_ok("decode", line)["capabilities"] == ["read", "observe"]
        listed = ce("invitations", str(doc))
        assert listed.returncode == 0 and "active" in listed.stdout
        # The room refuses what the host asks wrongly; the CLI prints it in one line.
        bad = ce("invite", str(doc), "--capabilities", "read,fly")
        assert bad.returncode == 1 and bad.stderr.startswith("error: invalid_request: ")
        missing = ce("review", str(doc), "pr_nope", "--approve")
        assert missing.returncode == 6 and missing.stderr.startswith("error: proposal_not_found")
        neither = ce("review", str(doc), "pr_nope")
        assert neither.returncode == 2
    finally:
        assert room.stop() == 0
        room.close()

    # The room is gone again: back to the sidecar, with what the room recorded.
    after = ce_ok("invitations", str(doc))["invitations"]
    assert len(after) == 2  # the room's own invitation and ours
    reinvite = ce_ok("invite", str(doc))  # the last transport hint is remembered
    assert ce_ok("decode", reinvite["invitation"])["transport"]["port"] == room.ready[
        "ingress_port"
    ]
    # Edited while no room runs: the command lets the edit settle and records it first.
    before = ce_ok("status", str(doc))["version"]
    doc.write_text(doc.read_text() + "\nAdded offline.\n")
    edited = ce_ok("status", str(doc))
    assert (edited["version"], edited["file"]) == (before + 1, "settled")


def test_usage_and_errors_never_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.md"
    result = ce("status", str(missing))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    as_json = ce("status", str(missing), "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"] == "invalid_request"
    unknown = ce(str(missing))
    assert unknown.returncode == 2
    # A room that is not there: transport_unavailable, one line, no secret in it.
    dead = _encode({**INVITATION, "transport": {**INVITATION["transport"], "port": 9}})
    for args in (["call", dead, "GET", "/workspace/status", "--session", "ses_secret123"],
                 ["join", dead, "--name", "x", "--no-hold"]):
        result = ce(*args)
        assert result.returncode == 9  # unavailable (the exit codes of `ce --help`)
        *warned, last = result.stderr.splitlines()
        assert last.startswith("error: transport_unavailable")
        assert warned == (["warning: --session on the command line is visible to other users of this"
                           " machine (ps); use the saved profile, CE_SESSION, or --session - (read"
                           " from stdin)"] if "--session" in args else [])
        assert "ses_secret123" not in result.stderr and "s3cr3t" not in result.stderr
    # Every command takes --json (here: --help lists it).
    for command in ("serve", "invite", "invitations", "revoke", "status", "proposals", "review",
                    "join", "call", "decode", "observe"):
        helped = ce(command, "--help")
        assert helped.returncode == 0 and "--json" in helped.stdout, command


def test_json_output_is_one_object(room: RoomProcess, doc: Path) -> None:
    for args in (["status", str(doc)], ["invitations", str(doc)], ["proposals", str(doc)]):
        result = ce(*args, "--json")
        assert result.returncode == 0
        assert len(result.stdout.strip().splitlines()) == 1
        assert isinstance(json.loads(result.stdout), dict)


def test_join_holds_until_interrupted(room: RoomProcess, doc: Path) -> None:
    invitation = ce_ok("invite", str(doc))["invitation"]
    holder = RoomProcess(["join", invitation, "--name", "holder", "--json"], doc.parent)
    try:
        session = json.loads(holder.next_line() or "{}")
        assert session["name"] == "holder"
        assert holder.proc.poll() is None  # still holding
        participants = ce_ok("call", invitation, "GET", "/workspace/participants",
                             "--session", session["session_id"])["participants"]
        me = next(p for p in participants if p["participant_id"] == session["participant_id"])
        assert me["present"] is True
    finally:
        code = holder.stop()
        holder.close()
    assert code == 0


def test_observe_prints_json_lines(room: RoomProcess, doc: Path) -> None:
    invitation = ce_ok("invite", str(doc))["invitation"]
    session = ce_ok("join", invitation, "--name", "watcher", "--no-hold")
    watcher = RoomProcess(["observe", invitation, "--session", session["session_id"],
                           "--since", "0", "--json"], doc.parent)
    try:
        first = json.loads(watcher.next_line() or "{}")
        assert first["type"] == "workspace.created" and first["event_id"] == 1
        ce_ok("invite", str(doc))
        seen: list[str] = []
        while "invitation.created" not in seen[-1:]:
            line = watcher.next_line(10)
            assert line is not None
            seen.append(json.loads(line)["type"])
    finally:
        code = watcher.stop()
        watcher.close()
    assert code == 0


def test_ce_module_runs_without_console_script() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from commonroom.cli.main import main; main()", "--help"],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 0 and "serve" in result.stdout


def test_restart_rebinds_last_port_or_says_so(doc: Path, tmp_path: Path) -> None:
    first = start_room(doc, "--port-ingress", "0")
    port = first.ready["ingress_port"]
    assert first.stop() == 0
    first.close()

    # Someone else holds the port now: the room binds another one and says so.
    other_doc = tmp_path / "other.md"
    other_doc.write_text("# Other\n\ntext\n")
    squatter = start_room(other_doc, "--port-ingress", str(port))
    try:
        assert squatter.ready["ingress_port"] == port
        moved = RoomProcess([str(doc), "--port-owner", "0"], doc.parent)
        try:
            invitation = moved.wait_for_line("commonroom://join/")
            notes = [line for line in moved.stdout_lines if line.startswith("note:")]
            assert notes and str(port) in notes[0], moved.stdout_lines
            assert ce_ok("decode", invitation)["transport"]["port"] != port
        finally:
            assert moved.stop() == 0
            moved.close()
        # A fixed --port-ingress that is taken is an error, with no invitation.
        taken = ce("serve", str(doc), "--port-ingress", str(port), "--port-owner", "0", "--json")
        assert taken.returncode == 9
        assert json.loads(taken.stdout)["error"] == "transport_unavailable"
        assert "commonroom://" not in taken.stdout + taken.stderr
    finally:
        assert squatter.stop() == 0
        squatter.close()


def test_call_prints_documents_as_text(room: RoomProcess) -> None:
    skill = ce("call", room.ready["invitation"], "GET", "/skills/commonroom")
    assert skill.returncode == 0 and "commonroom" in skill.stdout
    wrapped = ce_ok("call", room.ready["invitation"], "GET", "/skills/commonroom")
    assert wrapped["status"] == 200 and "commonroom" in wrapped["body"]


def test_ephemeral_leaves_no_sidecar(doc: Path) -> None:
    sidecar = doc.with_name(doc.name + ".commonroom.db")
    room = start_room(doc, "--ephemeral", "--port-ingress", "0")
    try:
        assert not sidecar.exists()
        assert ce_ok("status", str(doc))["workspace_id"] == room.ready["workspace_id"]
    finally:
        assert room.stop() == 0
        room.close()
    assert doc.exists() and not sidecar.exists()


def test_observe_survives_a_room_restart_without_gap_or_duplicate(doc: Path) -> None:
    first = start_room(doc)  # no --port-ingress: the restart rebinds the same port
    invitation = ce_ok("invite", str(doc))["invitation"]
    session = ce_ok("join", invitation, "--name", "watcher", "--no-hold")
    watcher = RoomProcess(["observe", invitation, "--session", session["session_id"],
                           "--since", "0", "--json"], doc.parent)
    second: RoomProcess | None = None
    try:
        ids: list[int] = []
        types: list[str] = []

        def read_until(kind: str, count: int) -> None:
            while types.count(kind) < count:
                line = watcher.next_line(20)
                assert line is not None, watcher.stderr()
                event = json.loads(line)
                ids.append(event["event_id"])
                types.append(event["type"])

        read_until("participant.joined", 1)
        assert first.stop() == 0
        first.close()
        second = start_room(doc)
        assert second.ready["ingress_port"] == first.ready["ingress_port"]
        ce_ok("invite", str(doc))  # an event after the restart
        read_until("workspace.started", 2)
        read_until("invitation.created", types.count("invitation.created") + 1)
        assert "workspace.stopped" in types
        assert ids == list(range(1, ids[-1] + 1))  # no gap, no duplicate across the restart
    finally:
        code = watcher.stop()
        watcher.close()
        if second is not None:
            assert second.stop() == 0
            second.close()
    assert code == 0


def test_a_whole_session_through_the_tailcat_transport(doc: Path, tmp_path: Path) -> None:
    """ce serve --transport tailcat with a (fake, really forwarding) tailcat on PATH."""
    env = fake_tailcat_env(tmp_path)
    room = start_room(doc, "--transport", "tailcat", "--port-ingress", "0", env=env)
    try:
        assert room.ready["transport"] == {"type": "tailcat", "encrypted": True, "status": "READY"}
        hint = ce_ok("decode", room.ready["invitation"])["transport"]
        assert hint["type"] == "tailcat" and hint["port"] != room.ready["ingress_port"]
        joined = ce("join", room.ready["invitation"], "--name", "far", "--json", "--no-hold", env=env)
        assert joined.returncode == 0, joined.stderr
        session = json.loads(joined.stdout)["session_id"]
        status = ce("call", room.ready["invitation"], "GET", "/workspace/status",
                    "--session", session, "--json", env=env)
        assert status.returncode == 0 and json.loads(status.stdout)["substrate"] == "markdown"
    finally:
        assert room.stop() == 0
        room.close()


def wait_for_version(doc: Path, version: int, timeout: float = 20.0) -> dict[str, Any]:
    """`ce status FILE` until the room is at `version` (a save settles first)."""
    deadline = time.monotonic() + timeout
    while True:
        status: dict[str, Any] = ce_ok("status", str(doc))
        if status["version"] >= version or time.monotonic() > deadline:
            assert status["version"] == version, status
            return status


def test_serve_settle_ms_reaches_the_room(doc: Path) -> None:
    """`ce serve --settle-ms N`: a save is still settling well within N ms, then recorded.
    (The waiting commit and its `file_changing` answer: tests/service/test_room.py.)"""
    process = start_room(doc, "--port-ingress", "0", "--settle-ms", "5000")
    try:
        save_like_an_editor(doc, doc.read_text().replace("## Risks\n", "## Risks\n\nTyped.\n"))
        status = ce_ok("status", str(doc))
        assert (status["version"], status["file"]) == (1, "settling")
        assert wait_for_version(doc, 2)["file"] == "settled"
    finally:
        process.close()
    for bad in ("49", "5001"):
        refused = ce("serve", str(doc), "--settle-ms", bad, "--json")
        assert refused.returncode == 2 and "--settle-ms" in refused.stdout  # the --json error line


def test_serve_human_hold_minutes_reaches_the_room(doc: Path) -> None:
    """`ce serve --human-hold-minutes N`: the host's own edit holds the section for N minutes."""
    process = start_room(doc, "--port-ingress", "0", "--human-hold-minutes", "7")
    try:
        invitation = ce_ok("invite", str(doc))["invitation"]
        session = ce_ok("join", invitation, "--name", "agent", "--no-hold")["session_id"]
        save_like_an_editor(doc, doc.read_text().replace("## Risks\n", "## Risks\n\nTyped by the host.\n"))
        wait_for_version(doc, 2)  # recorded once it settled
        error, _ = ce_err("call", invitation, "POST", "/workspace/checkout", "--session", session,
                          "--body", '{"region": "Risks"}')
        assert error["error"] == "lease_conflict" and error["details"]["reason"] == "human_editing"
        leases = ce_ok("call", invitation, "GET", "/workspace/leases", "--session", session)["leases"]
        (hold,) = [lease for lease in leases if lease["lease_id"] == error["lease_id"]]
        held = datetime.fromisoformat(hold["expires_at"]) - datetime.fromisoformat(hold["acquired_at"])
        assert held == timedelta(minutes=7)
    finally:
        process.close()
    bad = ce("serve", str(doc), "--human-hold-minutes", "-1", "--json")
    assert bad.returncode != 0 and "human-hold-minutes" in bad.stdout + bad.stderr
