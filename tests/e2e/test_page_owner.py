"""The owner link (issue 8 item 11): `ce open FILE`, a stable owner port, the spent-link page."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.browser.conftest import Http
from tests.e2e.conftest import RoomProcess, ce, ce_err


def _serve(doc: Path) -> RoomProcess:
    room = RoomProcess(["serve", str(doc), "--json", "--port-ingress", "0"], doc.parent)
    try:
        room.wait_ready_json()
    except BaseException:
        room.close()
        raise
    return room


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
    path = answer["url"].split(str(room.ready["owner_port"]), 1)[1]
    status, _, headers = owner.call("GET", path)
    assert status == 303 and "commonroom_owner=" in headers["set-cookie"]
    # Used once: the second visit is a page that says how to get a new link, not JSON.
    status, body, headers = owner.call("GET", path)
    assert status == 401 and headers["content-type"].startswith("text/html")
    assert "already used" in body and "ce open idea.md" in body
    # The printed startup link still works once too: `ce open` does not spend it.
    status, _, _ = owner.call("GET", room.ready["human_url"].split(str(room.ready["owner_port"]), 1)[1])
    assert status == 303
    # Readable form: one line with the link.
    plain = ce("open", str(doc), "--no-browser")
    assert plain.returncode == 0 and plain.stdout.startswith("owner page (one-time link): http://127.0.0.1:")


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
