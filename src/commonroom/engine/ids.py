"""Ids, secrets' hashes and content hashes: how the room names and recognises things."""

from __future__ import annotations

import base64
import hashlib
import secrets


def new_id(prefix: str, nbytes: int = 12) -> str:
    return prefix + secrets.token_urlsafe(nbytes)


def new_workspace_id() -> str:
    return "ws_" + base64.b32encode(secrets.token_bytes(16)).decode("ascii").lower()[:26]


def hash_secret(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
