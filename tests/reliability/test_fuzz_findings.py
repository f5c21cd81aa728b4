"""What the property tests of issue 14 found, pinned at the room's door (real hypercorn on 127.0.0.1).

Both were the invitation decoder's: a payload nested deeper than the JSON
parser recurses answered `POST /session/join` with a 500 (RecursionError), and
a token with characters outside base64url decoded anyway (the standard
decoder drops them silently).
"""

from __future__ import annotations

import base64
from pathlib import Path

import trio

from commonroom.protocol.invitation import PREFIX
from tests.conftest import SAMPLE
from tests.service.conftest import start_room


async def test_join_refuses_broken_invitations_with_invalid_request(tmp_path: Path) -> None:
    path = tmp_path / "idea.md"
    path.write_text(SAMPLE, encoding="utf-8")
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, path)
        invite = (await live.call("POST", "/workspace/invite", live.host_session, {})).json()
        body = invite["invitation"][len(PREFIX):]
        deep = PREFIX + base64.urlsafe_b64encode(b"[" * 8000).decode().rstrip("=")
        # Four characters the standard decoder would drop, at a group boundary: it decoded exactly.
        damaged = PREFIX + body[:8] + "!*.:" + body[8:]
        for token in (deep, damaged):
            answer = await live.call("POST", "/session/join", None, {"invite": token, "name": "a"})
            assert answer.status == 400, answer.body
            assert answer.json()["error"] == "invalid_request"
            assert answer.json()["details"] == {"field": "invitation"}
        # The undamaged token still joins.
        joined = await live.call("POST", "/session/join", None,
                                 {"invite": invite["invitation"], "name": "a"})
        assert joined.status == 200, joined.body
        live.stop.set()
