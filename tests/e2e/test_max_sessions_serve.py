"""`ce serve --max-sessions N` on a real room: the limit it starts with is the one it keeps.

The engine-level checks of the caps are in tests/unit/test_max_sessions.py; here the
option itself, through a real `ce serve` and HTTP joins.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import ce, serving

pytestmark = pytest.mark.e2e


def test_a_room_started_with_two_sessions_refuses_the_third_join(doc: Path) -> None:
    with serving(doc, "--max-sessions", "2") as room:
        invitation = room.invite(max_uses=None)["invitation"]
        room.join("first", invitation=invitation)
        room.join("second", invitation=invitation)
        status, refused = room.call("POST", "/session/join", None,
                                    {"invite": invitation, "name": "third"})
        assert status == 429
        assert refused["error"] == "limit_exceeded" and refused["details"] == {"limit": 2}
        assert refused["retry_after_seconds"] == 60
        limits = room.ok("GET", "/workspace/diagnostics", room.host_session)["limits"]
        assert (limits["max_sessions"], limits["max_participants"]) == (2, 256)


def test_a_room_started_with_a_raised_limit_reports_it_and_lets_guests_in(doc: Path) -> None:
    with serving(doc, "--max-sessions", "300") as room:
        limits = room.ok("GET", "/workspace/diagnostics", room.host_session)["limits"]
        assert (limits["max_sessions"], limits["max_participants"]) == (300, 300)
        invitation = room.invite(max_uses=None)["invitation"]
        assert room.join("first", invitation=invitation)["session_id"].startswith("ses_")


@pytest.mark.parametrize("wrong", ["0", "4097", "many"])
def test_a_bad_session_limit_is_a_usage_error(doc: Path, wrong: str) -> None:
    result = ce("serve", str(doc), "--max-sessions", wrong)
    assert result.returncode == 2
    assert "--max-sessions" in result.stderr
    assert "1<=x<=4096" in result.stderr or "is not a valid integer" in result.stderr
    assert not list(doc.parent.glob("*.commonroom*"))
