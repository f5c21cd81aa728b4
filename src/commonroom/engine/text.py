"""Bytes and text of the document: UTF-8, any byte sequence kept round-trippable."""

from __future__ import annotations


def decode_text(data: bytes) -> str:
    # surrogateescape keeps any byte sequence round-trippable, so a file that
    # is not valid UTF-8 still reads back byte-exact. (Strict first: for valid
    # UTF-8 it is the same text, and many times faster.)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


def is_text(data: bytes) -> bool:
    """Whether `data` is UTF-8: the only files a room serves (docs/protocol.md)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def encode_text(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def line_ending(text: str) -> str | None:
    """`"\\r\\n"` or `"\\n"` when every line break of `text` is that one; None when it has
    no line break or mixes both."""
    breaks = text.count("\n")
    if breaks == 0:
        return None
    crlf = text.count("\r\n")
    if crlf == breaks:
        return "\r\n"
    return "\n" if crlf == 0 else None


def with_line_endings(text: str, ending: str | None) -> str:
    """`text` with every line break made `ending` (None: `text` unchanged). A lone CR
    (not before an LF) is not a line break and stays."""
    if ending is None:
        return text
    lf = text.replace("\r\n", "\n")
    return lf if ending == "\n" else lf.replace("\n", "\r\n")
