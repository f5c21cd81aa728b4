"""An idle `ce mcp` bridge dials nothing (cli/mcp_bridge.Bridge.keep_spare).

It used to close its aged spare connection and dial a new one every second for ever (strace:
24 `connect()` in 25 idle seconds). Now a spare is dialled while the client is busy and not
replaced once it aged unused, until the next request.
"""

from __future__ import annotations

import trio
import trio.testing

from commonroom.cli.mcp_bridge import Bridge
from commonroom.protocol.invitation import Invitation, TransportHint, encode

INVITATION = encode(Invitation(
    ("read",), "2026-12-01T10:00:00.000000+00:00", "s3cret",
    TransportHint("loopback", False, "private", "127.0.0.1", 9), "ws_test"))


class _Stream:
    async def aclose(self) -> None:
        return None


class _Room:
    def __init__(self) -> None:
        self.dials = 0

    async def dial(self) -> _Stream:
        self.dials += 1
        return _Stream()


async def test_an_idle_bridge_dials_nothing_and_a_request_dials_a_spare_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from commonroom.protocol.invitation import decode

    bridge = Bridge(INVITATION, decode(INVITATION), session="ses_x", name="t")
    room = _Room()
    bridge.room = room  # type: ignore[assignment]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bridge.keep_spare)
        await trio.sleep(60)  # a minute idle (autojump clock)
        assert room.dials == 1  # the first spare, closed once it aged, never replaced
        _stream, spare = await bridge.dial_for_request()  # the client asks for something
        assert not spare and room.dials == 2  # no young spare: a fresh connection
        await trio.sleep(0.01)
        assert room.dials == 3  # and a spare again for the next request
        await trio.sleep(60)
        assert room.dials == 3
        nursery.cancel_scope.cancel()
