"""Property tests of the invitation codec (docs/spec/PROTOCOL.md section 3; issue 14).

Round trip for every well-formed invitation; every malformed token refused
with the code docs/spec/PROTOCOL.md names (`unsupported_version` for another version,
`invalid_request` for anything else broken) and never with another exception.
The hand-picked cases live in test_protocol.py; these draw the inputs.
"""

from __future__ import annotations

import base64
import json
import string
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.invitation import (
    ADDRESS,
    KEYS,
    MAX_RAW_BYTES,
    PREFIX,
    TRANSPORT_MODES,
    Invitation,
    TransportHint,
    decode,
    encode,
)
from commonroom.protocol.timefmt import format_ts

BASE64URL = frozenset(string.ascii_letters + string.digits + "-_")
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

timestamps = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(9999, 1, 1),
                          timezones=st.just(UTC)).map(format_ts)
nonempty = st.text(min_size=1, max_size=40)
ports = st.integers(min_value=1, max_value=65535)
# A well-formed address is a host name or an IP address (issue 24: it reaches a command line).
addresses = st.from_regex(ADDRESS, fullmatch=True)


@st.composite
def hints(draw: st.DrawFn) -> TransportHint:
    kind = draw(st.sampled_from(("loopback", "tailcat", "local")))
    mode = draw(st.sampled_from(TRANSPORT_MODES))
    encrypted = draw(st.booleans())
    if kind == "local":
        return TransportHint(kind, encrypted, mode, draw(st.none() | addresses), draw(st.none() | ports))
    return TransportHint(kind, encrypted, mode, draw(addresses), draw(ports))


invitations = st.builds(
    Invitation,
    capabilities=st.lists(st.text(max_size=12), max_size=6).map(tuple),
    expires_at=timestamps,
    secret=nonempty,
    transport=hints(),
    workspace_id=nonempty,
)


def token_of(obj: Any) -> str:
    raw = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def refused(text: Any) -> str:
    """The error code `decode` refuses `text` with (any other outcome fails the test)."""
    with pytest.raises(CommonroomError) as caught:
        decode(text)
    return caught.value.code


@PROPS
@given(invitations)
def test_every_invitation_round_trips(invitation: Invitation) -> None:
    assume(len(json.dumps(invitation.to_json(), separators=(",", ":"))) < MAX_RAW_BYTES)
    token = encode(invitation)
    assert token.startswith(PREFIX)
    assert set(token[len(PREFIX):]) <= BASE64URL  # no padding, nothing outside base64url
    assert decode(token) == invitation
    # Padded, and with surrounding whitespace (a pasted token), it is the same invitation.
    body = token[len(PREFIX):]
    assert decode(f"  {PREFIX}{body}{'=' * (-len(body) % 4)}\n") == invitation
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    assert list(json.loads(raw)) == sorted(KEYS)  # exactly the keys, sorted, compact
    # Compact: no separator spaces anywhere outside strings (a string may hold '", "').
    assert raw == json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()


@PROPS
@given(invitations, st.data())
def test_a_truncated_token_is_invalid_request(invitation: Invitation, data: st.DataObject) -> None:
    token = encode(invitation)
    cut = data.draw(st.integers(min_value=0, max_value=len(token) - 1))
    assert refused(token[:cut]) == "invalid_request"


@PROPS
@given(invitations, st.data())
def test_a_character_outside_base64url_is_invalid_request(invitation: Invitation,
                                                           data: st.DataObject) -> None:
    token = encode(invitation)
    body = token[len(PREFIX):]
    bad = data.draw(st.characters().filter(lambda c: c not in BASE64URL and not c.isspace()))
    at = data.draw(st.integers(min_value=0, max_value=len(body)))
    assume(not (bad == "=" and at == len(body)))  # trailing padding is allowed
    assert refused(PREFIX + body[:at] + bad + body[at:]) == "invalid_request"


@PROPS
@given(invitations, st.data())
def test_a_flipped_character_never_gives_another_error(invitation: Invitation,
                                                      data: st.DataObject) -> None:
    """One base64url character changed: the same invitation, or a protocol error, nothing else."""
    token = encode(invitation)
    at = data.draw(st.integers(min_value=len(PREFIX), max_value=len(token) - 1))
    new = data.draw(st.sampled_from(sorted(BASE64URL)))
    try:
        decoded = decode(token[:at] + new + token[at + 1:])
    except CommonroomError as error:
        assert error.code in ("invalid_request", "unsupported_version")
    else:
        assert isinstance(decoded, Invitation)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@PROPS
@given(invitations, json_values)
def test_another_version_is_unsupported_version(invitation: Invitation, version: Any) -> None:
    assume(version != "1" and not (type(version) is int and version == 1))
    obj = invitation.to_json()
    obj["version"] = version
    assert refused(token_of(obj)) == "unsupported_version"
    # Checked first: a future version may change every other key.
    assert refused(token_of({"version": version})) == "unsupported_version"


@PROPS
@given(invitations, st.text(min_size=1, max_size=20), json_values)
def test_an_extra_field_is_invalid_request(invitation: Invitation, key: str, value: Any) -> None:
    assume(key not in KEYS)
    obj = invitation.to_json()
    obj[key] = value
    assert refused(token_of(obj)) == "invalid_request"


@PROPS
@given(invitations, st.sampled_from([k for k in KEYS if k != "version"]))
def test_a_missing_field_is_invalid_request(invitation: Invitation, key: str) -> None:
    obj = invitation.to_json()
    del obj[key]
    assert refused(token_of(obj)) == "invalid_request"


@PROPS
@given(invitations, st.sampled_from([k for k in KEYS if k != "version"]), json_values)
def test_a_wrongly_typed_field_is_invalid_request(invitation: Invitation, key: str, value: Any) -> None:
    obj = invitation.to_json()
    if key == "capabilities":
        assume(not (isinstance(value, list) and all(isinstance(c, str) for c in value)))
    elif key == "transport":
        assume(not isinstance(value, dict) or value.get("type") not in ("loopback", "tailcat", "local"))
    else:  # secret, workspace_id, expires_at, protocol: a non-empty string, of a given form
        assume(not isinstance(value, str) or not value or key in ("expires_at", "protocol"))
        assume(value != obj[key])
    obj[key] = value
    assert refused(token_of(obj)) == "invalid_request"


@PROPS
@given(st.text(max_size=200))
def test_any_text_decodes_or_is_refused_with_a_protocol_code(text: str) -> None:
    for candidate in (text, PREFIX + text):
        try:
            decode(candidate)
        except CommonroomError as error:
            assert error.code in ("invalid_request", "unsupported_version")


@PROPS
@given(st.binary(max_size=300))
def test_any_payload_bytes_decode_or_are_refused_with_a_protocol_code(raw: bytes) -> None:
    try:
        decode(token_of(raw))
    except CommonroomError as error:
        assert error.code in ("invalid_request", "unsupported_version")


@PROPS
@given(invitations, st.text(min_size=1, max_size=5).filter(lambda t: any(ord(c) > 127 for c in t)))
def test_non_ascii_in_the_token_is_invalid_request(invitation: Invitation, extra: str) -> None:
    token = encode(invitation)
    middle = len(PREFIX) + (len(token) - len(PREFIX)) // 2
    assume(not extra.isspace())
    assert refused(token[:middle] + extra.strip() + token[middle:]) == "invalid_request"


@pytest.mark.parametrize("raw", [
    b"[" * MAX_RAW_BYTES,  # as deep as the size limit allows
    b'{"a":' * 1300 + b"1" + b"}" * 1300,
    b'{"version":"1","nest":' + b"[" * 4000 + b"]" * 4000 + b"}",  # deep after a good version
])
def test_deep_nesting_is_invalid_request(raw: bytes) -> None:
    assert refused(token_of(raw)) == "invalid_request"


@pytest.mark.parametrize("size", [MAX_RAW_BYTES + 1, 10_000, 1_000_000])
def test_a_huge_token_is_invalid_request(size: int) -> None:
    obj = make_json()
    obj["secret"] = "s" * size
    assert refused(token_of(obj)) == "invalid_request"
    assert refused(PREFIX + "A" * size) == "invalid_request"
    with pytest.raises(CommonroomError) as caught:
        encode(Invitation(("read",), obj["expires_at"], "s" * size,
                          TransportHint("local", False, "local"), "ws_1"))
    assert caught.value.code == "invalid_request"


@pytest.mark.parametrize("value", [None, 1, b"commonroom://join/", ["x"], {"a": 1}])
def test_a_token_that_is_not_a_string_is_invalid_request(value: Any) -> None:
    assert refused(value) == "invalid_request"


def make_json() -> dict[str, Any]:
    return Invitation(("read",), "2026-12-01T10:00:00.000000+00:00", "s3cret",
                      TransportHint("loopback", False, "private", "127.0.0.1", 4321), "ws_1").to_json()
