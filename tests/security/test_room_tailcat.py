"""Item 13 of issue 24: an invitation must not inject options into `tailcat`.

A room's invitation carries a transport hint, and `ce join` hands its
`address` to `tailcat forward` on a command line. An invitation whose address
is `--proxy-command=...` used to reach the program as an option. Now the
address must be a host name or an IP address (`invalid_request` naming
`transport.address`, before anything is started), and the address and port
follow `--`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import TransportHint
from commonroom.transport.tailcat import TailcatTransport
from tests.e2e.conftest import ce, fake_tailcat_env, start_room

HOSTILE_ADDRESS = "--proxy-command=touch PWNED"


@pytest.fixture
def tailcat_env(tmp_path: Path) -> dict[str, str]:
    """PATH with the fake `tailcat` first; it logs every `forward` command line."""
    return {**fake_tailcat_env(tmp_path), "FAKE_TAILCAT_ARGV_LOG": str(tmp_path / "argv.log")}


def _invitation(address: str) -> str:
    payload = {
        "capabilities": ["read"], "expires_at": "2099-01-01T00:00:00.000000+00:00",
        "protocol": "commonroom", "secret": "s3cret", "version": "1", "workspace_id": "ws_x",
        "transport": {"type": "tailcat", "address": address, "port": 4711, "encrypted": True,
                      "mode": "private"},
    }
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return "commonroom://join/" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_an_option_as_address_never_reaches_tailcat(tailcat_env: dict[str, str], tmp_path: Path) -> None:
    result = ce("join", _invitation(HOSTILE_ADDRESS), "--name", "victim", "--no-hold", "--json",
                env=tailcat_env, cwd=tmp_path)
    assert result.returncode != 0
    error = json.loads(result.stdout)
    assert error["error"] == "invalid_request"
    assert error["details"]["field"] == "transport.address"
    assert "proxy-command" not in result.stdout + result.stderr  # never quoted back
    assert not (tmp_path / "argv.log").exists(), "tailcat was started"
    assert not (tmp_path / "PWNED").exists()


async def test_a_hint_built_without_the_codec_is_checked_at_dial(
    tailcat_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("PATH", "FAKE_TAILCAT_ARGV_LOG"):
        monkeypatch.setenv(key, tailcat_env[key])
    hint = TransportHint("tailcat", True, "private", HOSTILE_ADDRESS, 4711)
    with pytest.raises(CommonroomError) as caught:
        await TailcatTransport.dial(hint)
    assert caught.value.code == "invalid_request"
    assert not (tmp_path / "argv.log").exists()


def test_the_address_follows_a_double_dash(doc: Path, tailcat_env: dict[str, str], tmp_path: Path) -> None:
    room = start_room(doc, "--transport", "tailcat", "--port-ingress", "0", env=tailcat_env)
    try:
        joined = ce("join", room.ready["invitation"], "--name", "far", "--json", "--no-hold",
                    env=tailcat_env)
        assert joined.returncode == 0, joined.stderr
        decoded = json.loads(ce("decode", room.ready["invitation"], "--json").stdout)["transport"]
        lines = (tmp_path / "argv.log").read_text().splitlines()
        assert lines and set(lines) == {f"forward -- {decoded['address']} {decoded['port']}"}
    finally:
        room.close()
