"""Helpers for the room-rules attack tests (issue 24): a real `ce serve`, raw HTTP to its ports.

Test modules import the fixtures they use from here (`from tests.security.engine_support
import ...`), so this package needs no conftest of its own. Every room a test starts is
stopped by the test (`RoomProcess.close`, via the `served` fixture or a `finally`).
"""

from __future__ import annotations

import http.client
import json
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commonroom.credentials import read_credentials
from tests.e2e.conftest import SAMPLE, RoomProcess, start_room


@pytest.fixture(autouse=True)
def isolated_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every `ce` a test starts keeps its session profiles in a temp folder, never in ~."""
    home = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for name in ("CE_PROFILE", "CE_INVITATION", "CE_SESSION"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "idea.md"
    shutil.copyfile(SAMPLE, path)
    return path


class Room:
    """A running `ce serve` and JSON calls to its session ingress as the host or an agent."""

    def __init__(self, process: RoomProcess, doc: Path) -> None:
        self.process = process
        self.doc = doc
        self.port = int(process.ready["ingress_port"])
        credentials = read_credentials(doc)
        assert credentials is not None
        self.host = str(credentials.host_session)

    def call(self, method: str, path: str, bearer: str | None = None, body: Any = None,
             ) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Host": "commonroom"}
        data = None
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    def ok(self, method: str, path: str, bearer: str | None = None, body: Any = None) -> Any:
        status, answer = self.call(method, path, bearer, body)
        assert status == 200, (method, path, status, answer)
        return answer

    def invite(self, bearer: str | None = None, **params: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self.ok("POST", "/workspace/invite", bearer or self.host, params)
        return answer

    def join(self, name: str = "agent", capabilities: list[str] | None = None,
             invitation: str | None = None) -> dict[str, Any]:
        if invitation is None:
            params = {} if capabilities is None else {"capabilities": capabilities}
            invitation = self.invite(**params)["invitation"]
        joined: dict[str, Any] = self.ok("POST", "/session/join", None,
                                         {"invite": invitation, "name": name})
        return joined

    def read(self, bearer: str, region: str) -> dict[str, Any]:
        query = urllib.parse.quote(region)
        answer: dict[str, Any] = self.ok("GET", f"/workspace/read?region={query}", bearer)
        return answer


@pytest.fixture
def served(doc: Path) -> Iterator[Room]:
    process = start_room(doc, "--port-ingress", "0")
    try:
        yield Room(process, doc)
    finally:
        process.close()
