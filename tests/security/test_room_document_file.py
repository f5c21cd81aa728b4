"""Issue 31, finding 11 (low): a FIFO put in place of the document wedged the room.

The attack (another local user, or an agent with a shell in the folder): remove the
document and make a FIFO of its name. The room's next look at the file opened it for
reading, which waits for a writer: the store thread blocked in `open()`, and no status,
no join, nothing answered again. Now the document is opened without blocking and must be
a regular file: a FIFO is "unusable" like a file that is not UTF-8, the room keeps
answering, and a regular file put back is taken up again. `ce serve` on a FIFO refuses
at once, never waits.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.e2e.conftest import Room, ce


def _status(room: Room) -> dict[str, object]:
    answer: dict[str, object] = room.ok("GET", "/workspace/status", room.host_session)
    return answer


def _until(room: Room, file_state: str) -> dict[str, object]:
    """Poll status (each call answered within the client's timeout) until the file's state."""
    for _ in range(300):
        status = _status(room)
        if status["file"] == file_state:
            return status
        time.sleep(0.05)
    raise AssertionError(f"the file never became {file_state}: {status}")


def test_a_fifo_in_place_of_the_document_leaves_the_room_answering(served: Room) -> None:
    room = served
    version = _status(room)["version"]
    text = room.doc.read_text()
    room.doc.unlink()
    os.mkfifo(room.doc)
    _until(room, "unusable")
    # Still answering: status, a join, a read of the last version.
    agent = room.join("after-the-fifo")["session_id"]
    assert room.read(agent, "workspace")["content"] == text
    # A proposal (it writes the sidecar, not the document) is taken as ever.
    status, answer = room.call("POST", "/workspace/propose", agent, {
        "region": "Risks", "base_version": version, "summary": "s",
        "content": room.read(agent, "Risks")["content"] + "More.\n\n"})
    assert status == 200, answer
    # A regular file put back is taken up again, as a new version.
    room.doc.unlink()
    room.doc.write_text(text + "\nBack again.\n")
    status = _until(room, "settled")
    assert status["version"] == int(str(version)) + 1


def test_ce_serve_refuses_a_fifo_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "idea.md"
    os.mkfifo(fifo)
    result = ce("serve", str(fifo), "--json", "--port-owner", "0", "--port-ingress", "0",
                timeout=20)
    assert result.returncode != 0
    assert "not a regular file" in result.stdout + result.stderr
