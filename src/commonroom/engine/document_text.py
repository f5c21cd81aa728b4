"""A version's text, kept as what it is made of until something needs it whole.

A region proposal on a 10 MB document built the new text as one 10 MB `str` at
propose (the two slices, then their join): about 3 ms with the interpreter lock
held, in which no read of the room could run (`read_during_commits`,
docs/benchmarks.md). Most of what the engine asks of a current text is a stretch
of it (a region, the lines around a change, the first heading lines) or its
length. Those are answered here from what the text is made of: the text before
a change and the new content (`SplicedText`), or the version's own bytes when
every byte is one character (`OneByteText`). The whole `str` is built once,
and only for what reads it all (the whole document, a diff, blame).

The forms answer the same texts; a `DocumentText` is never changed once made.
"""

from __future__ import annotations

from typing import Final

from commonroom.engine.text import decode_text

MAX_SPLICE_DEPTH: Final = 8
"""Splices over splices kept before the text is joined: each window passes through
every level, and a document whose text is not one byte per character (its
bytes cannot stand in for it) joins once every this many versions."""


class DocumentText:
    """A text: its length, any stretch of it, and the whole of it (built once, on ask)."""

    __slots__ = ("_joined",)

    def __init__(self) -> None:
        self._joined: str | None = None

    def __len__(self) -> int:
        raise NotImplementedError

    def window(self, start: int, end: int) -> str:
        """``text[start:end]`` for ``0 <= start``, ``0 <= end`` (clamped to the text, as slicing)."""
        joined = self._joined
        if joined is not None:
            return joined[start:end]
        size = len(self)
        end = min(end, size)
        if start >= end:
            return ""
        return self._window(start, end)

    def joined(self) -> str:
        """The whole text as one `str`, built at the first ask."""
        joined = self._joined
        if joined is None:
            joined = self._joined = self._join()
        return joined

    @property
    def depth(self) -> int:
        """How many splices a window passes through."""
        return 0

    def find(self, char: str, start: int) -> int:
        """The first offset of `char` at or after `start`, or -1 (``str.find``)."""
        joined = self._joined
        if joined is not None:
            return joined.find(char, start)
        size, step = len(self), 256
        while start < size:
            piece = self.window(start, start + step)
            found = piece.find(char)
            if found >= 0:
                return start + found
            start += len(piece)
            step *= 4
        return -1

    def rfind(self, char: str, end: int) -> int:
        """The last offset of `char` before `end`, or -1 (``str.rfind(char, 0, end)``)."""
        joined = self._joined
        if joined is not None:
            return joined.rfind(char, 0, end)
        end, step = min(end, len(self)), 256
        while end > 0:
            start = max(end - step, 0)
            found = self.window(start, end).rfind(char)
            if found >= 0:
                return start + found
            end = start
            step *= 4
        return -1

    def count(self, char: str, start: int, end: int) -> int:
        """How many times `char` occurs in ``text[start:end]`` (``str.count``)."""
        joined = self._joined
        if joined is not None:
            return joined.count(char, start, end)
        return self.window(start, end).count(char)

    def _window(self, start: int, end: int) -> str:
        """``text[start:end]``, ``0 <= start < end <= len``."""
        raise NotImplementedError

    def _join(self) -> str:
        raise NotImplementedError


class JoinedText(DocumentText):
    """A text held as one `str`."""

    __slots__ = ()

    def __init__(self, text: str) -> None:
        self._joined = text

    def __len__(self) -> int:
        assert self._joined is not None
        return len(self._joined)

    def _window(self, start: int, end: int) -> str:  # (never called: `window` slices `_joined`)
        return self.joined()[start:end]

    def _join(self) -> str:
        assert self._joined is not None
        return self._joined


class OneByteText(DocumentText):
    """The text of bytes in which every byte is one character (`decode_text` of them is as
    long as they are): the character offsets are the byte offsets, so a stretch decodes
    alone. A version's bytes are in memory anyway; its text then costs nothing more."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def _window(self, start: int, end: int) -> str:
        return decode_text(self._data[start:end])

    # An ASCII character is its one byte here: searched in the bytes, at C speed (blame asks
    # for the line starts of every section when a commit moves headings).
    def find(self, char: str, start: int) -> int:
        if self._joined is None and char.isascii() and len(char) == 1:
            return self._data.find(char.encode(), start)
        return super().find(char, start)

    def rfind(self, char: str, end: int) -> int:
        if self._joined is None and char.isascii() and len(char) == 1:
            return self._data.rfind(char.encode(), 0, end)
        return super().rfind(char, end)

    def count(self, char: str, start: int, end: int) -> int:
        if self._joined is None and char.isascii() and len(char) == 1:
            return self._data.count(char.encode(), start, end)
        return super().count(char, start, end)

    def _join(self) -> str:
        return decode_text(self._data)


class SplicedText(DocumentText):
    """``base[:start] + content + base[end:]``, not joined."""

    __slots__ = ("_base", "_content", "_depth", "_end", "_size", "_start")

    def __init__(self, base: DocumentText, start: int, end: int, content: str) -> None:
        super().__init__()
        if not 0 <= start <= end <= len(base):
            raise ValueError(f"span {start}..{end} is outside the text")
        if base.depth >= MAX_SPLICE_DEPTH:
            base = JoinedText(base.joined())
        self._base = base
        self._start = start
        self._end = end
        self._content = content
        self._size = len(base) - (end - start) + len(content)
        self._depth = base.depth + 1

    def __len__(self) -> int:
        return self._size

    @property
    def depth(self) -> int:
        return self._depth

    def _window(self, start: int, end: int) -> str:
        base, at, content = self._base, self._start, self._content
        after = at + len(content)  # where the base's tail starts in this text
        shift = self._end - after  # this text's offset + shift = the base's offset
        if end <= at:
            return base.window(start, end)
        if start >= after:
            return base.window(start + shift, end + shift)
        pieces = []
        if start < at:
            pieces.append(base.window(start, at))
        pieces.append(content[max(start - at, 0) : min(end, after) - at])
        if end > after:
            pieces.append(base.window(self._end, end + shift))
        return "".join(pieces)

    def _join(self) -> str:
        base = self._base
        # One join of three pieces: two `+` would copy the whole document twice.
        return "".join((base.window(0, self._start), self._content, base.window(self._end, len(base))))

