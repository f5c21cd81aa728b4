"""Attachments: small files shared in the room or in one handoff (docs/spec/PROTOCOL.md 10.1).

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

Against a participant filling the store (the attachment quota: 85 x 768 KiB on a
handoff it then cancelled evicted everyone else's and locked uploads for good):

- a handoff that ended (declined, completed, failed, cancelled) takes no more
  attachments (`handoff_conflict`);
- a handoff's attachments are removed `HANDOFF_ATTACHMENT_GRACE_MINUTES` (60)
  after it ended, and at most `HANDOFF_ATTACHMENT_TTL_MINUTES` (24 h) after
  they were added even while it stays open (`attachment.removed`, reason
  `handoff_ended` / `expired`), by the `expire` hook, so a restart keeps it;
- one participant (the host excepted) holds at most `ATTACHMENT_QUOTA_BYTES`
  (8 MiB): past it its own oldest room-scoped attachments make way (reason
  `participant_quota`), and when its handoff-scoped ones alone fill it the
  upload is 429 `limit_exceeded` with `details.scope: "attachment_quota"`;
- `attachment.delete` removes one (its uploader, or an `admin` such as the
  host; reason `deleted`);
- the host has a reserved share (`ATTACHMENT_HOST_RESERVED_BYTES`, 16 MiB):
  everyone else's attachments, handoff-scoped ones included (each counted
  against its uploader), stay within the bound less that share, so the host's
  uploads never wait on others' (the host's reserved share: nine agents' handoff files filled
  the 64 MiB and the host got 429 for up to 24 h).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from datetime import datetime, timedelta
from typing import Final

import attrs

from commonroom.engine import handoffs
from commonroom.engine._state import HANDOFF
from commonroom.engine.ids import new_id
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits, vocabulary
from commonroom.protocol.capabilities import allows, require
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import Attachment, AttachmentData, AttachmentDeleted
from commonroom.protocol.requests import AddParams, AttachmentIdParams
from commonroom.protocol.timefmt import format_ts

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
REMOVED_FOR_QUOTA: Final = "participant_quota"
REMOVED_HANDOFF_ENDED: Final = "handoff_ended"
REMOVED_EXPIRED: Final = "expired"
REMOVED_DELETED: Final = "deleted"



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


def _within_quota(tx: Tx, pid: str, size: int) -> None:
    """Keep one participant's attachments within `ATTACHMENT_QUOTA_BYTES` (see the docstring)."""
    quota = limits.ATTACHMENT_QUOTA_BYTES
    rows = tx.conn.execute(
        "SELECT attachment_id, size, handoff_id FROM attachments WHERE participant_id = ?"
        " ORDER BY seq", (pid,),
    ).fetchall()
    held = sum(row[1] for row in rows)
    if held + size <= quota:
        return
    freeable = sum(row[1] for row in rows if row[2] is None)
    if held - freeable + size > quota:
        raise CommonroomError(
            "limit_exceeded",
            f"a participant holds at most {quota} bytes of attachments and its handoffs'"
            " attachments fill that: delete some (attachment.delete) or wait until their"
            " handoffs end",
            {"limit_bytes": quota, "held_bytes": held, "scope": "attachment_quota"},
            retry_after_seconds=_seconds_until_own_expiry(tx, pid),
        )
    for attachment_id, old_size, handoff_id in rows:
        if held + size <= quota:
            break
        if handoff_id is None:
            _remove(tx, attachment_id, REMOVED_FOR_QUOTA)
            held -= old_size


def _seconds_until_own_expiry(tx: Tx, pid: str) -> int:
    due = _earliest_expiry(tx, "AND a.participant_id = ?", (pid,))
    if due is None:
        return 60
    return max(1, math.ceil((due - tx.now).total_seconds()))


def _remove(tx: Tx, attachment_id: str, reason: str) -> None:
    tx.conn.execute("DELETE FROM attachments WHERE attachment_id = ?", (attachment_id,))
    tx.emit(ev.AttachmentRemoved(attachment_id, reason))


# When a handoff-scoped attachment goes: its handoff's end + the grace, or its own age.
_ENDED = HANDOFF.ended_sql("h.status")


def _earliest_expiry(tx: Tx, where: str = "", args: tuple[str, ...] = ()) -> datetime | None:
    grace = timedelta(minutes=limits.HANDOFF_ATTACHMENT_GRACE_MINUTES)
    ttl = timedelta(minutes=limits.HANDOFF_ATTACHMENT_TTL_MINUTES)
    ended, oldest = tx.conn.execute(
        f"SELECT min(CASE WHEN {_ENDED} THEN h.updated_at END), min(a.created_at)"
        " FROM attachments a JOIN handoffs h USING (handoff_id)"
        f" WHERE a.handoff_id IS NOT NULL {where}", args,
    ).fetchone()
    times = [datetime.fromisoformat(ended) + grace if ended else None,
             datetime.fromisoformat(oldest) + ttl if oldest else None]
    due = [t for t in times if t is not None]
    return min(due) if due else None


def expire(tx: Tx) -> None:
    """The `on_expiry` hook: remove handoff attachments past their handoff's end or their TTL."""
    ended_before = format_ts(tx.now - timedelta(minutes=limits.HANDOFF_ATTACHMENT_GRACE_MINUTES))
    added_before = format_ts(tx.now - timedelta(minutes=limits.HANDOFF_ATTACHMENT_TTL_MINUTES))
    for attachment_id, is_ended in tx.conn.execute(
        f"SELECT a.attachment_id, {_ENDED} AND h.updated_at <= ? FROM attachments a"
        " JOIN handoffs h USING (handoff_id)"
        f" WHERE ({_ENDED} AND h.updated_at <= ?) OR a.created_at <= ? ORDER BY a.seq",
        (ended_before, ended_before, added_before),
    ).fetchall():
        _remove(tx, attachment_id, REMOVED_HANDOFF_ENDED if is_ended else REMOVED_EXPIRED)


def next_expiry(tx: Tx) -> datetime | None:
    return _earliest_expiry(tx)


def _make_room(tx: Tx, size: int) -> None:
    """Remove the oldest room-scoped attachments until `size` more bytes fit the bound; an
    upload by anyone but the host first fits everyone-but-the-host's share."""
    host = tx.engine.host_participant_id
    if tx.actor.participant_id != host:
        _fit(tx, size, limits.ATTACHMENTS_TOTAL_BYTES - limits.ATTACHMENT_HOST_RESERVED_BYTES,
             "AND participant_id != ?", (host,))
    _fit(tx, size, limits.ATTACHMENTS_TOTAL_BYTES)


def _fit(tx: Tx, size: int, bound: int, where: str = "", args: tuple[str, ...] = ()) -> None:
    """Remove the oldest room-scoped attachments (of those `where` selects) until `size`
    more bytes fit `bound`; `limit_exceeded` when their handoff-scoped ones alone fill it."""
    total = tx.conn.execute(f"SELECT coalesce(sum(size), 0) FROM attachments WHERE 1 {where}",
                            args).fetchone()[0]
    if total + size <= bound:
        return
    room_scoped = tx.conn.execute(
        f"SELECT attachment_id, size FROM attachments WHERE handoff_id IS NULL {where}"
        " ORDER BY seq", args,
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
        _remove(tx, attachment_id, REMOVED_FOR_BOUND)
        total -= old_size


_COLUMNS = "attachment_id, file_name, mime_type, size, sha256, participant_id, handoff_id, created_at"


def add(tx: Tx, p: AddParams) -> Attachment:
    file_name = _check_name(p.file_name)
    if p.handoff_id is not None:
        require(tx.actor.capabilities, "handoff")
        handoff = handoffs.get(tx, p.handoff_id)
        handoffs.require_party_or_host(tx, handoff, "attach files to it")
        if handoff.status not in vocabulary.HANDOFF_OPEN:
            raise CommonroomError(
                "handoff_conflict", f"a {handoff.status} handoff takes no more attachments",
                {"handoff_id": handoff.handoff_id, "status": handoff.status},
            )
    data = decode_base64(p.data_base64, "data_base64", limits.ATTACHMENT_MAX_BYTES)
    mime_type = stored_type(p.mime_type, data)
    if tx.actor.participant_id != tx.engine.host_participant_id:
        _within_quota(tx, tx.actor.participant_id, len(data))
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


def delete(tx: Tx, p: AttachmentIdParams) -> AttachmentDeleted:
    """Remove one attachment: its uploader's, or anyone's with `admin` (the host)."""
    row = tx.conn.execute(
        "SELECT participant_id FROM attachments WHERE attachment_id = ?", (p.attachment_id,)
    ).fetchone()
    if row is None:
        raise CommonroomError(
            "attachment_not_found", f"no attachment {p.attachment_id!r}",
            {"attachment_id": p.attachment_id},
        )
    if row[0] != tx.actor.participant_id and not allows(tx.actor.capabilities, "admin"):
        raise CommonroomError(
            "permission_denied", "only its uploader (or an admin) deletes an attachment",
            {"attachment_id": p.attachment_id},
        )
    _remove(tx, p.attachment_id, REMOVED_DELETED)
    return AttachmentDeleted(p.attachment_id, True)
