"""A room's session and participant limits follow `ce serve --max-sessions` (PROTOCOL §11).

Active guest sessions: 64 by default, 1..4096 when the room is started with another
value; participants: 256, or the session limit when that is larger. The engine reads
the room's own limits (`EngineConfig.serving`), and diagnostics report them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
import trio

from commonroom.cli import host_serve
from commonroom.engine.config import EngineConfig
from commonroom.engine.core import Engine
from commonroom.engine.dispatch import open_engine
from commonroom.http import serving
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.protocol.limits import ServingLimits
from commonroom.protocol.timefmt import ManualClock
from commonroom.service import ServeOptions, serve_room
from tests.conftest import Driver

OpenRoom = Callable[[int], Driver]


@pytest.fixture
def open_room(doc_path: Path, clock: ManualClock) -> Iterator[OpenRoom]:
    """Rooms on copies of the sample, each started with its own session limit."""
    engines: list[Engine] = []

    def opened(max_sessions: int) -> Driver:
        path = doc_path.with_name(f"room{len(engines)}.md")
        path.write_text(doc_path.read_text())
        engine = open_engine(path, EngineConfig(serving=ServingLimits(max_sessions=max_sessions)),
                             clock=clock)
        engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
        engines.append(engine)
        return Driver(engine, clock)

    yield opened
    for engine in engines:
        engine.close()


def _fill(room: Driver, guests: int, name: str = "dashboard") -> list[dict[str, object]]:
    """`guests` joins through invitations of up to 64 sessions each (one invitation's most)."""
    joined: list[dict[str, object]] = []
    invitation = ""
    for index in range(guests):
        if index % limits.INVITATION_SESSIONS_MAX == 0:
            invitation = room.invite(max_uses=None, max_sessions=limits.INVITATION_SESSIONS_MAX,
                                     capabilities=["read", "observe"])["invitation"]
        joined.append(room.call("session.join", None, invite=invitation, name=name))
    return joined


def test_a_small_session_limit_refuses_the_next_guest(open_room: OpenRoom) -> None:
    room = open_room(2)
    _fill(room, 2)
    refused = room.error("session.join", None, invite=room.invite()["invitation"], name="third")
    assert refused.code == "limit_exceeded"
    assert refused.details == {"limit": 2}
    assert refused.recovery["retry_after_seconds"] == 60
    # The host's own sessions are not guests: the host still gets in.
    assert room.call("workspace.status", room.host)["version"] == 1


def test_a_raised_session_limit_seats_guests_past_the_default(open_room: OpenRoom) -> None:
    default = open_room(limits.MAX_ACTIVE_SESSIONS)
    _fill(default, limits.MAX_ACTIVE_SESSIONS)
    assert default.error("session.join", None, invite=default.invite()["invitation"],
                         name="one more").details == {"limit": limits.MAX_ACTIVE_SESSIONS}

    raised = open_room(80)
    _fill(raised, 80)
    refused = raised.error("session.join", None, invite=raised.invite()["invitation"],
                           name="one more")
    assert refused.details == {"limit": 80}


def test_participants_follow_a_session_limit_past_256(open_room: OpenRoom) -> None:
    room = open_room(300)
    # 258 dashboards of one name: past the protocol's 256 participants, and past the
    # 257 names the suffixes of a 256-participant room could give.
    joined = _fill(room, 258)
    names = [str(each["name"]) for each in joined]
    assert len(set(names)) == 258 and names[-1] == "dashboard-258"
    diagnostics = room.call("workspace.diagnostics", room.host)["limits"]
    assert (diagnostics["max_sessions"], diagnostics["max_participants"]) == (300, 300)


def test_diagnostics_report_the_rooms_limits(open_room: OpenRoom) -> None:
    small = open_room(2)
    reported = small.call("workspace.diagnostics", small.host)["limits"]
    assert (reported["max_sessions"], reported["max_participants"]) == (2, limits.MAX_PARTICIPANTS)


def test_a_session_limit_out_of_bounds_is_refused_before_the_room_opens(doc_path: Path) -> None:
    for wrong in (0, limits.MAX_SESSIONS_LIMIT + 1):
        with pytest.raises(ValueError):
            ServingLimits(max_sessions=wrong)
        options = ServeOptions(path=doc_path, max_sessions=wrong, install_signal_handlers=False)
        with pytest.raises(CommonroomError) as refused:
            trio.run(partial(serve_room, options, on_ready=lambda ready: None))
        assert refused.value.code == "invalid_request"
        assert refused.value.details == {"field": "max_sessions",
                                         "limit": limits.MAX_SESSIONS_LIMIT}
        assert "--max-sessions must be 1 to 4096" in str(refused.value.message)
    assert not list(doc_path.parent.glob("*.commonroom*"))  # nothing opened


def test_the_ingress_holds_the_streams_the_session_limit_allows() -> None:
    # The default room: the ingress's usual cap.
    assert serving.connection_caps(10**6, 64 * limits.STREAMS_PER_SESSION)[0] == (
        serving.MAX_INGRESS_CONNECTIONS)
    # 1,000 dashboards of 8 streams: every stream, and room for requests beside them.
    streams = 1000 * limits.STREAMS_PER_SESSION
    assert serving.connection_caps(10**6, streams)[0] == streams + serving.REQUEST_CONNECTIONS
    # Too few descriptors: as many as they allow.
    assert serving.connection_caps(4096, streams)[0] == (
        4096 - serving.FD_RESERVE - serving.OWNER_CONNECTIONS)


def test_the_cli_copies_of_the_session_bounds_are_the_protocols() -> None:
    assert (host_serve.MAX_SESSIONS, host_serve.MAX_SESSIONS_LIMIT) == (
        limits.MAX_ACTIVE_SESSIONS, limits.MAX_SESSIONS_LIMIT)


def test_the_host_is_told_when_open_files_cannot_hold_every_stream() -> None:
    from commonroom.service import _streams_note

    # 4,096 sessions × 8 streams on a shell's usual hard limit: said, with the fix.
    note = _streams_note(1024, 4096 * limits.STREAMS_PER_SESSION)
    assert note is not None
    assert "ulimit -Hn" in note and "32768 streams" in note
    assert f"at most {1024 - serving.FD_RESERVE - serving.OWNER_CONNECTIONS}" in note
    # The default room, or descriptors enough: nothing to say.
    assert _streams_note(1024, 64 * limits.STREAMS_PER_SESSION) is None
    assert _streams_note(10**6, 4096 * limits.STREAMS_PER_SESSION) is None
