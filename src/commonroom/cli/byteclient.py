"""Moved: the byte client is `commonroom.wire` now (`wire.aio` for trio, `wire.http11` sans-I/O).

These names stay importable from here only so that branches written before the
move keep working when they land; new code imports `commonroom.wire.aio`.
"""

from __future__ import annotations

from commonroom.wire.aio import BodyChunks, iter_sse, open_stream, request
from commonroom.wire.http11 import (
    HOST,
    MAX_HEAD_BYTES,
    RECEIVE_SIZE,
    Headers,
    Response,
    SSEMessage,
    SSEParser,
    encode_request,
    header,
)

__all__ = [
    "HOST", "MAX_HEAD_BYTES", "RECEIVE_SIZE", "BodyChunks", "Headers", "Response", "SSEMessage",
    "SSEParser", "encode_request", "header", "iter_sse", "open_stream", "request",
]
