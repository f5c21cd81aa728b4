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
