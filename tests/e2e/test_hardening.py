"""Issue 8 through real `ce serve` processes: files the room cannot write or read.

The unwritable file is made immutable with `chattr +i`, which refuses even
root (the suite runs as root here, so mode bits would prove nothing).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from commonroom.credentials import read_credentials
from tests.e2e.conftest import ce, http_json, start_room


def _chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def _sidecar(doc: Path) -> tuple[int, list[str]]:
    with sqlite3.connect(doc.with_name(doc.name + ".commonroom.db")) as conn:
        versions = conn.execute("SELECT count(*) FROM versions").fetchone()[0]
        events = [r[0] for r in conn.execute("SELECT type FROM events ORDER BY event_id")]
    return versions, events


@pytest.fixture
def immutable_later(doc: Path) -> Any:
    if not _chattr("+i", doc):
        pytest.skip("chattr +i is not available on this filesystem")
    _chattr("-i", doc)
    yield doc
    _chattr("-i", doc)


def test_a_commit_the_file_refuses_commits_nothing_even_after_restart(
    immutable_later: Path,
) -> None:
    doc = immutable_later
    original = doc.read_bytes()
    room = start_room(doc, "--port-ingress", "0")
    try:
        port = room.ready["ingress_port"]
        creds = read_credentials(doc)
        assert creds is not None
        host = creds.host_session
        status, joined = http_json(port, "POST", "/session/join",
                                   body={"invite": room.ready["invitation"], "name": "writer"})
        assert status == 200, joined
        agent = joined["session_id"]
        _, regions = http_json(port, "GET", "/workspace/regions", agent)
        region = regions["regions"][1]["region"]
        _, text = http_json(port, "GET", "/workspace/read?" + urllib.parse.urlencode(
            {"region": region}), agent)
        heading = text["content"].splitlines()[0]
        status, proposal = http_json(port, "POST", "/workspace/propose", agent, {
            "region": region, "base_version": 1, "summary": "s",
            "content": heading + "\n\nrewritten\n"})
        assert status == 200, proposal
        pid = proposal["proposal_id"]
        status, _ = http_json(port, "POST", "/workspace/proposal/review", host,
                              {"proposal_id": pid, "revision": 1, "decision": "approve"})
        assert status == 200
        versions_before, events_before = _sidecar(doc)
        assert _chattr("+i", doc)
        status, error = http_json(port, "POST", "/workspace/commit", agent, {"proposal_id": pid})
        assert status == 503, error
        assert error["error"] == "storage_unavailable" and set(error) >= {"message", "details"}
        assert doc.read_bytes() == original
        assert _sidecar(doc) == (versions_before, events_before)
        assert [p.name for p in doc.parent.iterdir() if p.name.endswith(".tmp")] == []
        status, detail = http_json(port, "GET", f"/workspace/proposal?proposal_id={pid}", agent)
        assert status == 200 and detail["status"] == "approved"
        # The room keeps serving.
        status, answer = http_json(port, "GET", "/workspace/status", agent)
        assert status == 200 and answer["version"] == 1
    finally:
        code = room.stop()
        err = room.stderr()
        room.close()
    assert code == 0, err
    assert "Traceback" not in err
    # Still immutable: the room refuses to start, in one line, without a traceback.
    refused = ce("serve", str(doc), "--port-owner", "0", "--port-ingress", "0")
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "storage_unavailable" in lines[0] and doc.name in lines[0], lines
    as_json = ce("serve", str(doc), "--port-owner", "0", "--port-ingress", "0", "--json")
    assert as_json.returncode != 0 and json.loads(as_json.stdout)["error"] == "storage_unavailable"
    assert _chattr("-i", doc)
    # Writable again: it comes up, the refused commit did not land, and it commits now.
    room = start_room(doc, "--port-ingress", "0")
    try:
        port = room.ready["ingress_port"]
        assert doc.read_bytes() == original
        host = read_credentials(doc).host_session  # type: ignore[union-attr]
        _, status_now = http_json(port, "GET", "/workspace/status", host)
        assert status_now["version"] == 1
        status, done = http_json(port, "POST", "/workspace/commit", agent, {"proposal_id": pid})
        assert status == 200 and done["version"] == 2, done
        assert b"rewritten" in doc.read_bytes()
    finally:
        room.close()


def test_a_file_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    doc = tmp_path / "latin.md"
    doc.write_bytes("# Caf\xe9\n\nbonjour\n".encode("latin-1"))
    result = ce("serve", str(doc), "--port-owner", "0", "--port-ingress", "0")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: invalid_request: latin.md is not UTF-8 text;"
                     " commonroom serves UTF-8 markdown only"], lines
    assert not (tmp_path / "latin.md.commonroom.db").exists()


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "internal" not in lines[0] and "Errno" not in lines[0], lines[0]
    return lines[0]


def test_a_read_only_folder_is_one_readable_line(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    doc = folder / "idea.md"
    doc.write_text("# Idea\n")
    if not _chattr("+i", folder):
        pytest.skip("chattr +i is not available on this filesystem")
    try:
        line = _one_error_line(ce("serve", str(doc), "--port-owner", "0", "--port-ingress", "0"))
        assert line.startswith("error: storage_unavailable: cannot write idea.md or its folder")
        # A host command without a room and without a sidecar invents none: one line too.
        line = _one_error_line(ce("status", str(doc)))
        assert line.startswith("error: invalid_request: no room around"), line
        as_json = ce("status", str(doc), "--json")
        assert json.loads(as_json.stdout)["details"]["reason"] == "no_room"
    finally:
        _chattr("-i", folder)
    assert sorted(p.name for p in folder.iterdir()) == ["idea.md"]


def test_an_owner_port_in_use_is_one_readable_line(doc: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _one_error_line(ce("serve", str(doc), "--port-owner", str(port),
                                  "--port-ingress", "0"))
        assert line.startswith(f"error: transport_unavailable: owner port {port} is not free")
        assert "--port-owner" in line
        as_json = ce("serve", str(doc), "--port-owner", str(port), "--port-ingress", "0", "--json")
        error = json.loads(as_json.stdout)
        assert error["error"] == "transport_unavailable" and error["details"]["port"] == port
    assert read_credentials(doc) is None  # and a later start works
    room = start_room(doc, "--port-ingress", "0")
    room.close()


def test_ephemeral_writes_nothing_next_to_the_document(doc: Path) -> None:
    def beside() -> list[str]:
        return sorted(p.name for p in doc.parent.iterdir() if not p.name.startswith(".ce-serve-"))

    before = beside()
    room = start_room(doc, "--ephemeral", "--port-ingress", "0")
    try:
        assert beside() == before
        creds = read_credentials(doc)
        assert creds is not None  # host commands still find the room
        from commonroom.credentials import credentials_path

        path = credentials_path(doc)
        assert path.parent != doc.parent and (path.stat().st_mode & 0o777) == 0o600
        assert (path.parent.stat().st_mode & 0o777) == 0o700
        invited = ce("invite", str(doc), "--json")
        assert invited.returncode == 0 and json.loads(invited.stdout)["invitation"]
        assert beside() == before
    finally:
        assert room.stop() == 0
        room.close()
    assert beside() == before
    assert read_credentials(doc) is None


def test_a_folder_made_immutable_mid_run_refuses_commits_then_recovers(tmp_path: Path) -> None:
    """Issue 14: the folder turns immutable while an agent commits as fast as it can
    (the temp file cannot be created): each commit either lands whole (200) or
    commits nothing (503 storage_unavailable); once writable, commits resume."""
    folder = tmp_path / "room"
    folder.mkdir()
    doc = folder / "idea.md"
    doc.write_text("# Idea\n\n## Goals\n\nfirst\n")
    if not _chattr("+i", folder):
        pytest.skip("chattr +i is not available on this filesystem")
    _chattr("-i", folder)
    room = start_room(doc, "--port-ingress", "0")
    answers: list[tuple[int, Any, str]] = []
    stop = threading.Event()
    try:
        port = room.ready["ingress_port"]
        host = read_credentials(doc).host_session  # type: ignore[union-attr]
        _, joined = http_json(port, "POST", "/session/join",
                              body={"invite": room.ready["invitation"], "name": "writer"})
        agent = joined["session_id"]

        def commit_loop() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                _, read = http_json(port, "GET", "/workspace/read?region=Goals", agent)
                text = f"## Goals\n\ncommit {n}\n"
                status, proposal = http_json(port, "POST", "/workspace/propose", agent, {
                    "region": "Goals", "base_version": read["version"], "summary": f"c{n}",
                    "content": text})
                if status != 200:  # the sidecar's folder may refuse it too: 503, checked below
                    answers.append((status, proposal, "propose"))
                    continue
                http_json(port, "POST", "/workspace/proposal/review", host,
                          {"proposal_id": proposal["proposal_id"],
                                  "revision": proposal["revision"], "decision": "approve"})
                status, answer = http_json(port, "POST", "/workspace/commit", agent,
                                           {"proposal_id": proposal["proposal_id"]})
                answers.append((status, answer, text))

        def count(code: int) -> int:
            return sum(1 for status, _, _ in answers if status == code)

        def until(condition: Any) -> None:
            deadline = time.monotonic() + 20
            while not condition():
                assert thread.is_alive() and time.monotonic() < deadline, answers[-3:]
                time.sleep(0.01)

        thread = threading.Thread(target=commit_loop, daemon=True)
        thread.start()
        until(lambda: count(200) >= 3)
        assert _chattr("+i", folder)
        until(lambda: count(503) >= 3)
        assert _chattr("-i", folder)
        landed = count(200)
        until(lambda: count(200) >= landed + 3)
        stop.set()
        thread.join(20)
        assert {status for status, _, _ in answers} <= {200, 503}, answers
        for status, answer, text in answers:
            if text == "propose":  # refused by the sidecar's folder: named in details.file
                assert status == 503 and answer["error"] == "storage_unavailable", answer
                continue
            if status == 503:
                assert answer["error"] == "storage_unavailable" and answer["details"]["file"] == "idea.md"
                continue
            # every acknowledged commit is there, byte-exact
            _, whole = http_json(port, "GET", f"/workspace/read?region=workspace&version={answer['version']}",
                                 agent)
            assert hashlib.sha256(whole["content"].encode()).hexdigest() == answer["content_hash"]
            assert text in whole["content"]
        # versions are only the acknowledged ones (a refused commit left no row), file = current
        _, status_now = http_json(port, "GET", "/workspace/status", agent)
        assert status_now["version"] == 1 + count(200)
        assert hashlib.sha256(doc.read_bytes()).hexdigest() == status_now["content_hash"]
        assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []
    finally:
        stop.set()
        _chattr("-i", folder)
        code = room.stop()
        room.close()
    assert code == 0


def test_a_killed_rooms_host_session_ends_when_the_room_starts_again(doc: Path) -> None:
    """SIGKILL leaves no chance to end the host session; the next start ends it, so the
    old bearer (its credential file replaced) is not valid for the rest of its day."""
    room = start_room(doc, "--port-ingress", "0")
    try:
        creds = read_credentials(doc)
        assert creds is not None
        old_host = creds.host_session
        assert http_json(room.ready["ingress_port"], "GET", "/workspace/status", old_host)[0] == 200
        room.proc.kill()
        room.proc.wait()
    finally:
        room.close()
    again = start_room(doc, "--port-ingress", "0")
    try:
        port = again.ready["ingress_port"]
        creds = read_credentials(doc)
        assert creds is not None and creds.host_session != old_host
        status, error = http_json(port, "GET", "/workspace/status", old_host)
        assert status == 401, error
        assert http_json(port, "GET", "/workspace/status", creds.host_session)[0] == 200
    finally:
        again.close()
