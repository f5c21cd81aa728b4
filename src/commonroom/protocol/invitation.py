"""The invitation codec: `commonroom://join/<base64url json>` (docs/spec/PROTOCOL.md section 3).

One decoder serves the CLI and the server. Decoding never raises anything but
`CommonroomError`: `unsupported_version` for a version other than "1"/1, and
`invalid_request` for everything else that is broken.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Final

import attrs

from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.jsondepth import MAX_JSON_DEPTH, nests_deeper_than
from commonroom.protocol.timefmt import parse_ts

PREFIX: Final = "commonroom://join/"
MAX_RAW_BYTES: Final = 8192
BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
# A transport address is a host name, an IPv4 address or an IPv6 address (bare or in
# brackets), nothing else: it reaches a program's command line (`tailcat forward
# ADDRESS PORT`), so it never starts with `-` and holds no spaces, `=` or `/`.
ADDRESS: Final = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})"  # a host name or an IPv4 address
    r"|\[?[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:.]{1,44}\]?"  # an IPv6 address
)
TRANSPORT_TYPES: Final = ("loopback", "tailcat", "local")
TRANSPORT_MODES: Final = ("private", "local")
KEYS: Final = (
    "capabilities",
    "expires_at",
    "protocol",
    "secret",
    "transport",
    "version",
    "workspace_id",
)


@attrs.frozen
class TransportHint:
    """How to dial the room. A hint, never authorization."""

    type: str
    encrypted: bool
    mode: str
    address: str | None = None
    port: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "encrypted": self.encrypted, "mode": self.mode}
        if self.address is not None:
            out["address"] = self.address
        if self.port is not None:
            out["port"] = self.port
        return out


@attrs.frozen
class Invitation:
    capabilities: tuple[str, ...]
    expires_at: str
    secret: str
    transport: TransportHint
    workspace_id: str
    protocol: str = "commonroom"
    version: str = "1"

    def to_json(self) -> dict[str, Any]:
        return {
            "capabilities": list(self.capabilities),
            "expires_at": self.expires_at,
            "protocol": self.protocol,
            "secret": self.secret,
            "transport": self.transport.to_json(),
            "version": self.version,
            "workspace_id": self.workspace_id,
        }

    def public_json(self) -> dict[str, Any]:
        """What `ce decode` prints: everything but the secret."""
        out = self.to_json()
        del out["secret"]
        return out


def encode(invitation: Invitation) -> str:
    raw = json.dumps(invitation.to_json(), sort_keys=True, separators=(",", ":")).encode()
    if len(raw) > MAX_RAW_BYTES:
        raise invalid_request(f"invitation JSON is {len(raw)} bytes; the limit is {MAX_RAW_BYTES}")
    return PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode(text: str) -> Invitation:
    if not isinstance(text, str):
        raise invalid_request("invitation must be a string", "invitation")
    text = text.strip()
    if not text.startswith(PREFIX):
        raise invalid_request(f"an invitation starts with {PREFIX}", "invitation")
    body = text[len(PREFIX) :]
    # base64 of 8192 bytes is at most 10924 characters (+ padding); refuse
    # anything longer before decoding it.
    if len(body) > 10928:
        raise invalid_request(f"invitation JSON is over {MAX_RAW_BYTES} bytes", "invitation")
    # The decoder below silently drops characters outside the alphabet, so a
    # damaged token could decode; only base64url with optional padding is one.
    unpadded = body.rstrip("=")
    if BASE64URL.fullmatch(unpadded) is None or len(body) - len(unpadded) >= 3 or len(unpadded) % 4 == 1:
        raise invalid_request("invitation is not base64url", "invitation")
    try:
        raw = base64.urlsafe_b64decode(unpadded + "=" * (-len(unpadded) % 4))
    except (binascii.Error, ValueError):
        raise invalid_request("invitation is not base64url", "invitation") from None
    if not raw or len(raw) > MAX_RAW_BYTES:
        raise invalid_request(f"invitation JSON is empty or over {MAX_RAW_BYTES} bytes", "invitation")
    # Before the parser: its own limit (RecursionError) depends on the Python version.
    if nests_deeper_than(raw, MAX_JSON_DEPTH):
        raise invalid_request("invitation payload is nested too deeply", "invitation")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise invalid_request("invitation payload is not JSON", "invitation") from None
    if not isinstance(obj, dict):
        raise invalid_request("invitation payload is not a JSON object", "invitation")
    # The version is checked first: a future version may change every other key.
    version = obj.get("version")
    if version != "1" and not (type(version) is int and version == 1):
        raise CommonroomError(
            "unsupported_version",
            f"invitation version {version!r} is not supported; this is protocol version 1",
            {"supported_versions": ["1"], "version": version},
        )
    missing = [key for key in KEYS if key not in obj]
    if missing:
        raise invalid_request(f"invitation lacks {', '.join(missing)}", missing[0])
    extra = sorted(set(obj) - set(KEYS))
    if extra:
        raise invalid_request(f"invitation has unknown keys {', '.join(extra)}", extra[0])
    if obj["protocol"] != "commonroom":
        raise invalid_request("invitation protocol must be 'commonroom'", "protocol")
    caps = obj["capabilities"]
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise invalid_request("capabilities must be a list of strings", "capabilities")
    for key in ("secret", "workspace_id", "expires_at"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise invalid_request(f"{key} must be a non-empty string", key)
    try:
        parse_ts(obj["expires_at"])
    except ValueError:
        raise invalid_request("expires_at is not an RFC 3339 timestamp", "expires_at") from None
    return Invitation(
        capabilities=tuple(caps),
        expires_at=obj["expires_at"],
        secret=obj["secret"],
        transport=_decode_transport(obj["transport"]),
        workspace_id=obj["workspace_id"],
    )


def _decode_transport(value: Any) -> TransportHint:
    if not isinstance(value, dict):
        raise invalid_request("transport must be an object", "transport")
    kind = value.get("type")
    if kind not in TRANSPORT_TYPES:
        raise invalid_request(f"transport.type must be one of {TRANSPORT_TYPES}", "transport.type")
    encrypted = value.get("encrypted")
    if not isinstance(encrypted, bool):
        raise invalid_request("transport.encrypted must be a boolean", "transport.encrypted")
    mode = value.get("mode")
    if mode not in TRANSPORT_MODES:
        raise invalid_request(f"transport.mode must be one of {TRANSPORT_MODES}", "transport.mode")
    address = value.get("address")
    port = value.get("port")
    if isinstance(address, str) and address:
        check_address(address)
    if kind != "local":
        if not isinstance(address, str) or not address:
            raise invalid_request("transport.address must be a string", "transport.address")
        if type(port) is not int or not 0 < port < 65536:
            raise invalid_request("transport.port must be a port number", "transport.port")
    else:
        if address is not None and not isinstance(address, str):
            raise invalid_request("transport.address must be a string", "transport.address")
        if port is not None and (type(port) is not int or not 0 < port < 65536):
            raise invalid_request("transport.port must be a port number", "transport.port")
    return TransportHint(type=kind, encrypted=encrypted, mode=mode, address=address, port=port)


def check_address(address: str, field: str = "transport.address") -> str:
    """`address` when it is a host name or an IP address; else `invalid_request` (never quoting it)."""
    if ADDRESS.fullmatch(address) is None:
        raise invalid_request(f"{field} must be a host name or an IP address", field)
    return address


def secret_from(invite: str) -> str:
    """`POST /session/join` takes the bare secret or a full `commonroom://` URI."""
    if invite.startswith(PREFIX):
        return decode(invite).secret
    return invite
