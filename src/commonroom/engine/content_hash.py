"""A version's content hash (sha256 of its bytes), hashed again only from where it changed.

SHA-256 reads its input front to back, so its state after any prefix can be kept
(`hashlib`'s ``copy``) and resumed later. The current version keeps that state at
every `HASH_MARK_BYTES` of its bytes (its `HashMarks`); the next version, equal to
it up to the change's first byte, resumes from the last mark before that byte and
hashes only the rest. The digest is the same sha256 of the whole file (PROTOCOL's
content hash): a region commit on a large document hashes, on average, half of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import attrs

from commonroom.store.document import BytePieces, as_pieces, byte_size

if TYPE_CHECKING:
    from hashlib import _Hash

HASH_MARK_BYTES: Final = 128 * 1024
"""How far apart the kept states lie: at most this many unchanged bytes are hashed again.
(A state is ~200 bytes: a 10 MB version keeps 78 of them.)"""

HASH_PAUSE_MARKS: Final = 4
"""With a `pause`, it is called after every this many marks hashed (half a megabyte)."""


@attrs.frozen(eq=False)
class HashMarks:
    """The sha256 of one version's bytes, and its state at every `HASH_MARK_BYTES` of them.

    ``states[i]`` has read ``data[: i * HASH_MARK_BYTES]`` and is never updated itself
    (only copies are), so marks are shared between versions that have those bytes in common.
    """

    hexdigest: str
    size: int
    states: tuple[_Hash, ...]


def hash_marked(data: bytes | BytePieces, previous: HashMarks | None = None,
                unchanged: int = 0, *, pause: Callable[[], object] | None = None) -> HashMarks:
    """The sha256 of `data` (bytes, or the pieces they are the concatenation of), with its marks.

    `previous`: the marks of bytes equal to `data` in their first `unchanged` bytes
    (the version `data` replaces, and where its change begins); hashing resumes
    from the last of their states inside that head. `pause`, when given, is called
    between steps of `HASH_PAUSE_MARKS` marks (a bulk thread steps aside there:
    `EngineConfig.bulk_step_aside`).
    """
    size = byte_size(data)
    step = HASH_MARK_BYTES
    if previous is None or not previous.states:
        states = [hashlib.sha256()]
    else:
        head = min(unchanged, previous.size, size)
        states = list(previous.states[: head // step + 1])
    state = states[-1].copy()
    position = (len(states) - 1) * step  # hashed up to here
    offset = 0  # where the piece starts
    # up to a mark at a time: each update releases the interpreter lock (hashlib does
    # above 2 KiB)
    for piece in as_pieces(data):
        view = memoryview(piece)
        at = position - offset
        while at < len(view):
            take = min(len(view) - at, step - position % step)
            state.update(view[at : at + take])
            at, position = at + take, position + take
            if position % step == 0:
                states.append(state.copy())
                if pause is not None and len(states) % HASH_PAUSE_MARKS == 0:
                    pause()
        offset += len(view)
    return HashMarks(state.hexdigest(), size, tuple(states))
