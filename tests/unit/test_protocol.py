"""protocol/: the invitation codec, errors, capabilities, timestamps."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from commonroom.protocol import capabilities as caps
from commonroom.protocol.errors import STATUS, CommonroomError, body_too_large
from commonroom.protocol.invitation import (
    MAX_RAW_BYTES,
    PREFIX,
    Invitation,
    TransportHint,
    decode,
    encode,
    secret_from,
)
from commonroom.protocol.timefmt import format_ts, parse_ts

HINT = TransportHint("loopback", False, "private", "127.0.0.1", 4321)


def make(**over: Any) -> Invitation:
    base: dict[str, Any] = {
        "capabilities": ("read", "propose"),
        "expires_at": "2026-11-30T17:09:23.000123+00:00",
        "secret": "s3cret",
        "transport": HINT,
        "workspace_id": "ws_abc",
    }
    base.update(over)
    return Invitation(**base)


def raw_token(obj: Any, pad: bool = False) -> str:
    data = base64.urlsafe_b64encode(json.dumps(obj).encode()).decode()
    return PREFIX + (data if pad else data.rstrip("="))


def good_json() -> dict[str, Any]:
    return make().to_json()


def test_round_trip_and_sorted_compact_keys() -> None:
    inv = make()
    uri = encode(inv)
    assert uri.startswith(PREFIX) and "=" not in uri
    raw = base64.urlsafe_b64decode(uri[len(PREFIX):] + "==")
    assert list(json.loads(raw)) == sorted(json.loads(raw))
    assert b" " not in raw
    assert decode(uri) == inv


def test_padding_and_numeric_version_accepted() -> None:
    obj = good_json()
    obj["version"] = 1
    assert decode(raw_token(obj, pad=True)).secret == "s3cret"


def test_local_transport_without_address() -> None:
    inv = make(transport=TransportHint("local", False, "local"))
    assert decode(encode(inv)).transport.address is None


@pytest.mark.parametrize("version", ["2", 2, "1.0", None, True, 1.0])
def test_other_versions_are_unsupported(version: Any) -> None:
    obj = good_json()
    obj["version"] = version
    with pytest.raises(CommonroomError) as info:
        decode(raw_token(obj))
    assert info.value.code == "unsupported_version"
    assert info.value.http_status == 400


def _mutations() -> list[tuple[str, str]]:
    cases: list[tuple[str, str]] = [
        ("bad prefix", "commonroom://joinx/abc"),
        ("other scheme", "https://example.test/join/abc"),
        ("bad base64", PREFIX + "!!!not-base64!!!"),
        ("not json", PREFIX + base64.urlsafe_b64encode(b"{nope").decode().rstrip("=")),
        ("not an object", raw_token([1, 2, 3])),
        ("empty", PREFIX),
    ]
    for key in ("capabilities", "expires_at", "protocol", "secret", "transport", "workspace_id"):
        obj = good_json()
        del obj[key]
        cases.append((f"missing {key}", raw_token(obj)))
    wrong: dict[str, Any] = {
        "capabilities": "read",
        "expires_at": "yesterday",
        "protocol": "otherroom",
        "secret": 5,
        "transport": {"type": "carrier-pigeon", "encrypted": False, "mode": "private"},
        "workspace_id": None,
    }
    for key, value in wrong.items():
        obj = good_json()
        obj[key] = value
        cases.append((f"wrong {key}", raw_token(obj)))
    obj = good_json()
    obj["extra"] = 1
    cases.append(("unknown key", raw_token(obj)))
    obj = good_json()
    obj["transport"] = {"type": "loopback", "encrypted": "no", "mode": "private",
                        "address": "127.0.0.1", "port": 1}
    cases.append(("transport.encrypted not bool", raw_token(obj)))
    obj = good_json()
    obj["transport"] = {"type": "loopback", "encrypted": False, "mode": "private",
                        "address": "127.0.0.1", "port": 70000}
    cases.append(("bad port", raw_token(obj)))
    return cases


@pytest.mark.parametrize(("why", "token"), _mutations(), ids=[c[0] for c in _mutations()])
def test_broken_tokens_are_invalid_request(why: str, token: str) -> None:
    with pytest.raises(CommonroomError) as info:
        decode(token)
    assert info.value.code == "invalid_request", why


def test_tampered_token_is_invalid_request() -> None:
    uri = encode(make())
    body = uri[len(PREFIX):]
    tampered = PREFIX + body[:10] + ("A" if body[10] != "A" else "B") + body[11:]
    with pytest.raises(CommonroomError) as info:
        decode(tampered)
    assert info.value.code == "invalid_request"


def test_oversized_token_is_refused_both_ways() -> None:
    big = make(capabilities=("read",) * 2000)
    with pytest.raises(CommonroomError) as info:
        encode(big)
    assert info.value.code == "invalid_request"
    obj = good_json()
    obj["secret"] = "x" * (MAX_RAW_BYTES + 10)
    with pytest.raises(CommonroomError) as info:
        decode(raw_token(obj))
    assert info.value.code == "invalid_request"


def test_exactly_at_the_limit_decodes() -> None:
    obj = good_json()
    size = len(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())
    obj["secret"] = "x" * (MAX_RAW_BYTES - size + len("s3cret"))
    raw = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    assert len(raw) == MAX_RAW_BYTES
    token = PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert decode(token).secret == obj["secret"]


def test_secret_from_accepts_uri_or_bare_secret() -> None:
    assert secret_from(encode(make())) == "s3cret"
    assert secret_from("plain") == "plain"


def test_public_json_has_no_secret() -> None:
    assert "secret" not in make().public_json()


def test_error_wire_shape_and_status_table() -> None:
    err = CommonroomError(
        "stale_version", "moved on", {"x": 1}, base_version=3, current_version=5,
        expected_version=3, diff="-a\n+b\n", changes=[],
    )
    wire = err.to_wire()
    assert wire["error"] == "stale_version" and wire["details"] == {"x": 1}
    assert wire["base_version"] == 3 and wire["current_version"] == 5
    assert err.http_status == 409
    assert body_too_large(10).http_status == 413
    assert CommonroomError("limit_exceeded", "slow down").http_status == 429
    assert STATUS["session_expired"] == 401 and STATUS["handoff_not_found"] == 404
    with pytest.raises(ValueError):
        CommonroomError("no_such_code", "x")
    with pytest.raises(ValueError):
        CommonroomError("invalid_request", "x", session_id="leak")


def test_capabilities() -> None:
    assert caps.allows(["*"], "approve") and caps.allows(["admin"], "commit")
    assert not caps.allows(list(caps.DEFAULT_AGENT), "approve")
    assert set(caps.DEFAULT_AGENT).isdisjoint({"approve", "invite", "admin"})
    assert caps.is_subset(["read"], ["read", "invite"])
    assert not caps.is_subset(["approve"], ["read", "invite"])
    assert caps.normalize(["propose", "read", "read"]) == ("read", "propose")
    with pytest.raises(CommonroomError) as info:
        caps.normalize(["read", "fly"])
    assert info.value.code == "invalid_request"
    with pytest.raises(CommonroomError) as info:
        caps.require(["read"], "commit")
    assert info.value.code == "permission_denied"


def test_timestamps_are_microsecond_plus_zero() -> None:
    moment = datetime(2026, 11, 30, 17, 9, 23, tzinfo=UTC)
    assert format_ts(moment) == "2026-11-30T17:09:23.000000+00:00"
    other = datetime(2026, 11, 30, 18, 9, 23, 123, tzinfo=timezone(timedelta(hours=1)))
    assert format_ts(other) == "2026-11-30T17:09:23.000123+00:00"
    assert parse_ts("2026-11-30T17:09:23.000123+00:00") == other
    for bad in ("2026-11-30T17:09:23Z", "2026-11-30T17:09:23+00:00", "2026-11-30T17:09:23.000123+01:00"):
        with pytest.raises(ValueError):
            parse_ts(bad)
    with pytest.raises(ValueError):
        format_ts(datetime(2026, 1, 1))
