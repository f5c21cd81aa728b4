"""Attachments: small files shared in the room or in one handoff (PROTOCOL.md 10.1).

The type is decided by the content, never by the declared type or the name:

- an image (PNG, JPEG, WebP signature) is stored as what it is, whatever was
  declared (a PNG declared `text/plain` is stored as `image/png`);
- otherwise the declared type must be one of the text types (`TEXT_TYPES`)
  and the bytes must be text: UTF-8, no NUL, no other control characters than
  tab, newline, carriage return and form feed (JSON must also parse);
- text declared as an image, binary declared as text, and any other type are
  `invalid_request`.

At most `ATTACHMENT_MAX_BYTES` (768 KiB) decoded; larger is 413
`limit_exceeded`. A room-scoped attachment is readable by every reader; a
handoff-scoped one only by the handoff's two participants and the host.

The sidecar holds at most `ATTACHMENTS_TOTAL_BYTES` (64 MiB) of attachments:
a new one that would pass the bound first removes the oldest room-scoped
ones (`attachment.removed`, reason `room_bound`); when handoff-scoped ones
alone fill the bound, the new one is refused with `limit_exceeded`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Final

import attrs

from commonroom.engine import handoffs
from commonroom.engine.core import Tx, new_id
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.capabilities import require
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import Attachment, AttachmentData

IMAGE_TYPES: Final = ("image/png", "image/jpeg", "image/webp")
# declared name -> the type it is stored as
TEXT_TYPES: Final[dict[str, str]] = {
    "text/plain": "text/plain",
    "text/markdown": "text/markdown",
    "text/x-markdown": "text/markdown",
    "text/csv": "text/csv",
    "application/json": "application/json",
    "application/yaml": "application/yaml",
    "application/x-yaml": "application/yaml",
    "text/yaml": "application/yaml",
    "text/x-yaml": "application/yaml",
}
# Control bytes text never has (tab, LF, FF and CR are fine); one scan in C, not per character.
_CONTROL: Final = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
REMOVED_FOR_BOUND: Final = "room_bound"


@attrs.frozen
class AddParams:
    file_name: str
    mime_type: str = attrs.field(metadata={"doc": "the declared type; the content decides"})
    data_base64: str = attrs.field(metadata={"doc": "the file, base64 (at most 768 KiB decoded)"})
    handoff_id: str | None = attrs.field(
        default=None, metadata={"doc": "share it only in this handoff (needs handoff)"}
    )


@attrs.frozen
class AttachmentIdParams:
    attachment_id: str


def sniff_image(data: bytes) -> str | None:
    """The image type its signature says, or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _CONTROL.search(data) is None


def decode_base64(value: str, field: str, maximum: int) -> bytes:
    """Strict base64 (padding optional), bounded: 413 `limit_exceeded` past `maximum` bytes."""
    compact = "".join(value.split())
    if len(compact) * 3 // 4 > maximum + 3:
        raise _too_large(maximum, len(compact) * 3 // 4)
    try:
        data = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise invalid_request(f"{field} is not valid base64", field) from None
    if len(data) > maximum:
        raise _too_large(maximum, len(data))
    if not data:
        raise invalid_request(f"{field} is empty", field)
    return data


def _too_large(maximum: int, size: int) -> CommonroomError:
    return CommonroomError(
        "limit_exceeded", f"the file is {size} bytes; at most {maximum} are accepted",
        {"limit_bytes": maximum, "size_bytes": size}, http_status=413,
    )


def stored_type(declared: str, data: bytes) -> str:
    """The type an upload is stored as, decided by its content (see the module docstring)."""
    image = sniff_image(data)
    if image is not None:
        return image
    declared = declared.split(";")[0].strip().lower()
    if declared in IMAGE_TYPES:
        raise invalid_request(f"the content is not a {declared} image", "mime_type")
    text_type = TEXT_TYPES.get(declared)
    if text_type is None:
        accepted = ", ".join((*IMAGE_TYPES, *sorted(set(TEXT_TYPES.values()))))
        raise invalid_request(f"{declared or 'that type'} is not accepted; send one of {accepted}",
                              "mime_type")
    if not is_text(data):
        raise invalid_request(f"the content is not text, so it is not {declared}", "mime_type")
    if text_type == "application/json":
        try:
            json.loads(data)
        except ValueError:
            raise invalid_request("the content is not valid JSON", "data_base64") from None
    return text_type


def _check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > limits.FILE_NAME_MAX or any(c in name for c in "/\\\x00"):
        raise invalid_request(
            f"file_name must be 1 to {limits.FILE_NAME_MAX} characters without / or \\",
            "file_name",
        )
    return name


def _make_room(tx: Tx, size: int) -> None:
    """Remove the oldest room-scoped attachments until `size` more bytes fit the bound."""
    total = tx.conn.execute("SELECT coalesce(sum(size), 0) FROM attachments").fetchone()[0]
    bound = limits.ATTACHMENTS_TOTAL_BYTES
    if total + size <= bound:
        return
    room_scoped = tx.conn.execute(
        "SELECT attachment_id, size FROM attachments WHERE handoff_id IS NULL ORDER BY seq"
    ).fetchall()
    freeable = sum(row[1] for row in room_scoped)
    if total - freeable + size > bound:
        raise CommonroomError(
            "limit_exceeded",
            "the room's attachment store is full of handoff attachments",
            {"limit_bytes": bound, "scope": "attachments"}, retry_after_seconds=60,
        )
    for attachment_id, old_size in room_scoped:
        if total + size <= bound:
            break
        tx.conn.execute("DELETE FROM attachments WHERE attachment_id = ?", (attachment_id,))
        tx.emit(ev.AttachmentRemoved(attachment_id, REMOVED_FOR_BOUND))
        total -= old_size


_COLUMNS = "attachment_id, file_name, mime_type, size, sha256, participant_id, handoff_id, created_at"


def add(tx: Tx, p: AddParams) -> Attachment:
    file_name = _check_name(p.file_name)
    if p.handoff_id is not None:
        require(tx.actor.capabilities, "handoff")
        handoffs.require_party_or_host(tx, handoffs.get(tx, p.handoff_id), "attach files to it")
    data = decode_base64(p.data_base64, "data_base64", limits.ATTACHMENT_MAX_BYTES)
    mime_type = stored_type(p.mime_type, data)
    _make_room(tx, len(data))
    attachment = Attachment(
        new_id("att_"), file_name, mime_type, len(data), hashlib.sha256(data).hexdigest(),
        tx.actor.participant_id, p.handoff_id, tx.now_s,
    )
    tx.conn.execute(
        f"INSERT INTO attachments ({_COLUMNS}, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*attrs.astuple(attachment), data),
    )
    tx.emit(ev.AttachmentAdded(attachment.attachment_id, attachment.participant_id,
                               attachment.handoff_id, mime_type, len(data)))
    return attachment


def get(tx: Tx, p: AttachmentIdParams) -> AttachmentData:
    row = tx.conn.execute(
        f"SELECT {_COLUMNS}, data FROM attachments WHERE attachment_id = ?", (p.attachment_id,)
    ).fetchone()
    if row is None:
        raise CommonroomError(
            "attachment_not_found", f"no attachment {p.attachment_id!r}",
            {"attachment_id": p.attachment_id},
        )
    attachment = Attachment(*row[:-1])
    if attachment.handoff_id is not None:
        handoffs.require_party_or_host(tx, handoffs.get(tx, attachment.handoff_id), "read it")
    return AttachmentData(
        **attrs.asdict(attachment, recurse=False),
        data_base64=base64.b64encode(row[-1]).decode("ascii"),
    )
