"""The owner link (issue 8 item 11): `ce open FILE`, a stable owner port, the spent-link page."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.e2e.conftest import Http, RoomProcess, ce, ce_err, start_room


def _serve(doc: Path) -> RoomProcess:
    """The room on the owner port it kept for `doc` (no --port-owner)."""
    return start_room(doc, "--port-ingress", "0", owner_port=None)


def test_the_owner_port_is_kept_across_restarts_and_moves_only_when_taken(doc: Path) -> None:
    first = _serve(doc)
    port = first.ready["owner_port"]
    assert first.stop() == 0
    first.close()

    second = _serve(doc)
    try:
        assert second.ready["owner_port"] == port
    finally:
        second.close()

    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        third = _serve(doc)
        try:
            assert third.ready["owner_port"] != port
            assert f"owner port {port} was taken" in third.stderr()
        finally:
            third.close()


def test_ce_open_prints_a_fresh_link_that_works_once(room: RoomProcess, doc: Path) -> None:
    owner = Http(room.ready["owner_port"])
    result = ce("open", str(doc), "--no-browser", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["opened"] is False
    prefix = f"http://127.0.0.1:{room.ready['owner_port']}/#token="
    assert answer["url"].startswith(prefix)  # the token rides in the fragment, never sent
    token = answer["url"].removeprefix(prefix)
    status, login, headers = owner.call("POST", "/owner/login", {"token": token})
    assert status == 200 and login["credential"].startswith("own_") and "set-cookie" not in headers
    # Used once: the second exchange is refused, saying how to get a new link.
    status, refused, _ = owner.call("POST", "/owner/login", {"token": token})
    assert status == 401 and refused["error"] == "unauthorized" and "ce open idea.md" in refused["message"]
    # The printed startup link still works once too: `ce open` does not spend it.
    printed = room.ready["human_url"].removeprefix(prefix)
    assert owner.call("POST", "/owner/login", {"token": printed})[0] == 200
    # Readable form: one line with the link.
    plain = ce("open", str(doc), "--no-browser")
    assert plain.returncode == 0 and plain.stdout.startswith("owner page (one-time link): http://127.0.0.1:")


def test_logout_all_ends_every_page_login_with_or_without_a_room(room: RoomProcess, doc: Path) -> None:
    owner = Http(room.ready["owner_port"])
    token = room.ready["human_url"].split("#token=", 1)[1]
    credential = owner.call("POST", "/owner/login", {"token": token})[1]["credential"]
    login = {"X-Commonroom-Owner": credential}
    assert owner.call("GET", "/owner/api/workspace/status", headers=login)[0] == 200
    result = ce("open", str(doc), "--logout-all")
    assert result.returncode == 0 and result.stdout.startswith("ended 1 page login;"), result.stdout
    assert owner.call("GET", "/owner/api/workspace/status", headers=login)[0] == 401
    # Without a room the sidecar's logins end too (none are left: 0).
    room.stop()
    assert json.loads(ce("open", str(doc), "--logout-all", "--json").stdout) == {"ended": 0}


def test_the_login_link_route_needs_the_host_bearer_and_is_owner_only(room: RoomProcess) -> None:
    owner = Http(room.ready["owner_port"])
    status, answer, _ = owner.call("POST", "/owner/login-link")
    assert status == 401 and answer["error"] == "unauthorized"
    status, answer, _ = owner.call("POST", "/owner/login-link", headers={"Authorization": "Bearer ses_nope"})
    assert status == 401 and answer["error"] == "unauthorized"
    status, _, _ = Http(room.ready["ingress_port"]).call("POST", "/owner/login-link")
    assert status == 404


def test_ce_open_without_a_room_says_so(doc: Path) -> None:
    error, result = ce_err("open", str(doc), "--no-browser")
    assert result.returncode == 9  # unavailable (README "Exit codes")
    assert error["error"] == "transport_unavailable" and "ce serve" in error["message"]
