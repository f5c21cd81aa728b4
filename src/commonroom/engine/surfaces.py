"""Surfaces: each participant's one current snapshot image (docs/spec/PROTOCOL.md 10.1; Free4Chat's
`publish_surface` / `clear_surface` / `read_surface`).

Participant-controlled observation, never capture or control: a participant
publishes an image of its own workspace (PNG, JPEG or WebP, sniffed by
content, at most 768 KiB); publishing replaces the previous one (no
history); clearing removes it; leaving clears it. Every reader may read any
participant's surface.
"""

from __future__ import annotations

import base64
import hashlib

from commonroom.engine.attachments import decode_base64, sniff_image
from commonroom.engine.tx import Tx
from commonroom.protocol import events as ev
from commonroom.protocol import limits
from commonroom.protocol.errors import invalid_request
from commonroom.protocol.records import Surface, SurfaceClearedAnswer, SurfaceData
from commonroom.protocol.requests import PublishParams, SurfaceParams


def publish(tx: Tx, p: PublishParams) -> Surface:
    data = decode_base64(p.data_base64, "data_base64", limits.SURFACE_MAX_BYTES)
    mime_type = sniff_image(data)
    if mime_type is None:
        raise invalid_request("a surface is a PNG, JPEG or WebP image", "data_base64")
    surface = Surface(tx.actor.participant_id, mime_type, len(data),
                      hashlib.sha256(data).hexdigest(), tx.now_s)
    tx.conn.execute(
        "INSERT INTO surfaces (participant_id, mime_type, size, sha256, data, published_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (participant_id) DO UPDATE SET"
        " mime_type = excluded.mime_type, size = excluded.size, sha256 = excluded.sha256,"
        " data = excluded.data, published_at = excluded.published_at",
        (surface.participant_id, mime_type, surface.size, surface.sha256, data, tx.now_s),
    )
    tx.emit(ev.SurfacePublished(surface.participant_id))
    return surface


def clear_of(tx: Tx, participant_id: str) -> bool:
    """Remove a participant's surface (it cleared it, or it left); True when there was one."""
    cur = tx.conn.execute("DELETE FROM surfaces WHERE participant_id = ?", (participant_id,))
    if cur.rowcount:
        tx.emit(ev.SurfaceCleared(participant_id))
    return bool(cur.rowcount)


def clear(tx: Tx, p: object) -> SurfaceClearedAnswer:
    pid = tx.actor.participant_id
    return SurfaceClearedAnswer(pid, clear_of(tx, pid))


def read(tx: Tx, p: SurfaceParams) -> SurfaceData:
    pid = p.participant_id or tx.actor.participant_id
    known = tx.conn.execute(
        "SELECT 1 FROM participants WHERE participant_id = ?", (pid,)
    ).fetchone()
    if known is None:
        raise invalid_request(f"no participant {pid!r}", "participant_id")
    row = tx.conn.execute(
        "SELECT mime_type, size, sha256, published_at, data FROM surfaces WHERE participant_id = ?",
        (pid,),
    ).fetchone()
    if row is None:
        return SurfaceData(pid, False, None, None, None, None, None)
    mime_type, size, sha256, published_at, data = row
    return SurfaceData(pid, True, mime_type, size, sha256, published_at,
                       base64.b64encode(data).decode("ascii"))
