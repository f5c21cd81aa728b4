"""One version of the document as the engine holds it: bytes, text, outline, layout."""

from __future__ import annotations

from typing import Final

from commonroom.engine.content_hash import HashMarks
from commonroom.engine.history import HeadingIndex, StoredOutline
from commonroom.engine.ids import sha256_hex
from commonroom.engine.regions import Outline, Span
from commonroom.engine.text import encode_text
from commonroom.store import blobs

SNAPSHOT_CACHE_BYTES: Final = 16 * 1024 * 1024
"""What the cached outlines of old versions may take in memory, about (their heading
indexes and block ids; an old version's text is never cached). The current
version, text and all, is outside this bound: it is always in memory."""


class Snapshot:
    """One version of the document, parsed once and shared while cached.

    The current version has its bytes, text and full outline in memory; an
    old one only its `StoredOutline` (regions are read from their blocks), and
    `data`/`text` load the whole version when asked.
    """

    __slots__ = ("_data", "_replacement", "content_hash", "edit", "hash_marks", "index", "layout", "outline",
                 "version")

    def __init__(
        self,
        version: int,
        data: bytes | None,
        content_hash: str,
        outline: Outline,
        layout: blobs.Layout | None = None,
        index: HeadingIndex | None = None,
        edit: tuple[int, int, int] | None = None,
        hash_marks: HashMarks | None = None,
    ) -> None:
        self.version = version
        self._data = data
        self.content_hash = content_hash
        self.outline = outline
        self.layout = layout
        """Where the blocks lie (the current version: new versions are stored against it)."""
        self.index = index
        """Its heading index (the current version: the next one's is built from it)."""
        self.edit = edit
        """A stretch of the text holding all it changed against version - 1, when its write
        knew one: (start, old end, new end) in characters. Blame compares only there."""
        self.hash_marks = hash_marks
        """The current version: its content hash's kept states, so that the next version's
        hash resumes from its change (`engine.content_hash`)."""
        self._replacement: tuple[Span, str, Outline] | None = None

    def replaced(self, span: Span, content: str) -> Outline:
        """``outline.replaced(span, content)`` of the current version, the last one remembered.

        A region proposal's outline (the whole new text with it) is built at propose
        and again at commit, against the same version unless another change landed
        between: the commit takes the one built at propose. One is kept, and it leaves
        memory with this snapshot (superseded by the next version) or with the next
        replacement asked.
        """
        remembered = self._replacement
        if remembered is not None and remembered[0] == span and remembered[1] == content:
            return remembered[2]
        outline = self.outline
        assert isinstance(outline, Outline)  # the current version's outline is always a full one
        replaced = outline.replaced(span, content)
        self._replacement = (span, content, replaced)
        return replaced

    @property
    def data(self) -> bytes:
        if self._data is not None:
            return self._data
        data = self.outline.data() if isinstance(self.outline, StoredOutline) else encode_text(self.text)
        if sha256_hex(data) != self.content_hash:
            raise RuntimeError(f"version {self.version} does not match its content hash")
        return data

    @property
    def text(self) -> str:
        return self.outline.text

    @property
    def in_memory(self) -> bool:
        """Is the whole text held (the current version)?"""
        return self._data is not None

    def footprint(self) -> int:
        """About what it holds in memory, in bytes."""
        if isinstance(self.outline, StoredOutline):
            return self.outline.footprint()
        size = len(self._data or b"")
        return 2 * size + 200 * len(self.outline._starts) + 1024
