"""The markdown file on disk: stamps, checked reads and atomic writes.

Change detection is a `stat`: the file's `FileStamp` (size, mtime_ns, inode)
compared with what the current version has (`engine.settle`); only a changed
stamp leads to a read. A read is checked: the stamp just before it and just
after it, so the settle rules (docs/spec/PROTOCOL.md section 16) can refuse bytes that
changed while they were read. Writes go to a temp file in the same folder,
are fsynced, keep the original permission bits, and are renamed over the file,
so a reader never sees half a document; the stamp a write returns is taken
from the temp file before the rename (a rename keeps inode, size and mtime), so
a save the host makes just after it is never taken for the room's own write.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat as stat_mod
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import attrs

from commonroom.store import faults

# mtimes that are whole milliseconds come from a file system that keeps them
# coarsely (FAT: 2 s, exFAT: 10 ms, HFS+ and ext3: 1 s, some network mounts): a
# save there may leave the stamp unchanged. A fine mtime is a whole millisecond
# once in a million; then the only cost is one more read.
_COARSE_NS = 1_000_000

BytePieces = Sequence[memoryview | bytes]
"""Bytes given as the pieces they are the concatenation of (a region commit's head, new
bytes and tail): written, hashed and joined without a copy of their own first."""


def as_pieces(data: bytes | BytePieces) -> BytePieces:
    """`data` as pieces (one, when it is whole)."""
    return (data,) if isinstance(data, bytes) else data


def byte_size(data: bytes | BytePieces) -> int:
    """How many bytes `data` is."""
    return len(data) if isinstance(data, bytes) else sum(map(len, data))


WRITE_STEP_BYTES: Final = 1024 * 1024
"""With a `pause`, `DocumentFile.fill_temp` writes this much at a time (~0.3 ms of a core)."""


def _read_whole(fd: int, size: int) -> bytes:
    """The first `size` bytes of the file `fd`, all of them (`OSError` if it is shorter)."""
    data = os.pread(fd, size, 0)
    if len(data) < size:  # a short read: gather the rest (one copy more, and rare)
        parts, done = [data], len(data)
        while done < size:
            more = os.pread(fd, size - done, done)
            if not more:
                raise OSError(errno.EIO, "the temp file is shorter than what was written")
            parts.append(more)
            done += len(more)
        data = b"".join(parts)
    return data


@attrs.frozen
class FileStamp:
    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStamp:
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)

    @property
    def coarse(self) -> bool:
        """Is the mtime too coarse to show every save (see `_COARSE_NS`)?"""
        return self.mtime_ns % _COARSE_NS == 0


class NotRegularFile(OSError):
    """The document's path names a FIFO, a socket, a device or a folder: never read it
    (opening a FIFO for reading waits for a writer, and held the store thread for ever)."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.EINVAL, "not a regular file", str(path))


class DocumentFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        # Temp files the folder refused to remove (`discard`, from either thread:
        # list.append is atomic); the next install retries them.
        self._leftovers: list[Path] = []

    def stat(self) -> FileStamp | None:
        """One stat of the file; None when it is gone. Other refusals raise OSError."""
        try:
            return FileStamp.of(os.stat(self.path))
        except FileNotFoundError:
            return None

    def read(self) -> tuple[bytes, FileStamp, FileStamp | None]:
        """The file's bytes, its stamp just before the read and just after it.

        The stamp after is None when the file is gone by then, or when the file
        opened is not the one stat'ed (replaced in between). Raises
        FileNotFoundError when there is no file to read.
        """
        before = FileStamp.of(os.stat(self.path))
        # Never blocking: a FIFO put in place of the document opens at once and is refused.
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as handle:
            found = os.fstat(fd)
            if not stat_mod.S_ISREG(found.st_mode):
                raise NotRegularFile(self.path)
            opened = FileStamp.of(found)
            data = handle.read()
        after = self.stat()
        return data, before, after if opened == before else None

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def write(self, data: bytes) -> FileStamp:
        """Write `data` atomically over the file; its stamp."""
        return self.install(self.prepare(data))

    def restore(self, data: bytes) -> FileStamp:
        """Put `data` back where the file was, never over a file that is there again.

        A hard link is created only when the name is free (FileExistsError
        otherwise), so a file the host's editor creates meanwhile is never
        replaced; where the file system has no hard links, the name is checked
        just before the rename.
        """
        temp = self.prepare(data)
        try:
            stamp = FileStamp.of(os.stat(temp))
            try:
                os.link(temp, self.path)
            except FileExistsError:
                raise
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                    raise
                if self.path.exists():
                    raise FileExistsError(errno.EEXIST, "the file is back", self.path.name) from None
                os.replace(temp, self.path)
        finally:
            self.discard(temp)
        self._sync_folder()
        return stamp

    def prepare(self, data: bytes) -> Path:
        """Write `data` to a fsynced temp file beside the document, with its permission bits."""
        fd, temp = self.open_temp()
        try:
            self.fill_temp(fd, data)
        except BaseException:
            os.close(fd)
            self.discard(temp)
            raise
        os.close(fd)
        return temp

    def open_temp(self) -> tuple[int, Path]:
        """A new empty temp file beside the document with the document's permission bits:
        its descriptor and path. The caller fills it (`fill_temp`), closes it, and
        installs or discards it."""
        try:
            mode: int | None = stat_mod.S_IMODE(os.stat(self.path).st_mode)
        except FileNotFoundError:
            mode = None
        fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            if mode is not None:
                os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            self.discard(Path(name))
            raise
        return fd, Path(name)

    @staticmethod
    def fill_temp(fd: int, data: bytes | BytePieces, *,
                  pause: Callable[[], object] | None = None,
                  read_back: Future[bytes] | None = None) -> None:
        """Write `data` (bytes, or pieces written one after the other) into the temp file
        `fd` and fsync it.

        Few system calls and almost no Python, so that run on the writer thread it needs
        the interpreter lock only a few times while the committing thread computes: a
        thread that wants the lock back waits up to the switch interval (5 ms) each time,
        and the old prepare's eight calls there made the 10 MB commit wait ~30 ms for its
        file. With `pause`, the bytes go in steps of `WRITE_STEP_BYTES`, `pause` called
        between them (the writer thread steps aside there: `EngineConfig.bulk_step_aside`).

        With `read_back`, the file's bytes are read back into one `bytes` before the
        fsync and given to it (or the failure, which is raised too): the committing thread
        gets the new version's bytes without joining the pieces itself, a copy that holds
        the interpreter lock (~1.3 ms for 10 MB), while ``pread`` does not.
        """
        pieces = as_pieces(data)
        step = WRITE_STEP_BYTES if pause is not None else max(map(len, pieces), default=0)
        try:
            written = 0
            for piece in pieces:
                view = memoryview(piece)
                while view:
                    if written and pause is not None:
                        pause()
                    done = os.write(fd, view[:step])
                    view, written = view[done:], written + done
            faults.reached("after_temp_write")
            if read_back is not None:
                read_back.set_result(_read_whole(fd, byte_size(data)))
        except BaseException as error:
            if read_back is not None and not read_back.done():
                read_back.set_exception(error)
            raise
        os.fsync(fd)
        faults.reached("after_fsync")

    def discard(self, temp: Path) -> None:
        """Remove a temp file that will not be installed; never raises.

        The folder may refuse the unlink for the very reason the rename failed
        (made immutable or read-only meanwhile): the caller is undoing a
        refused write then and must get to the undo. A temp file left behind
        is removed by the next successful install (or when the room next opens
        the document).
        """
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        except OSError:
            self._leftovers.append(temp)

    def install(self, temp: Path, *, release: Callable[[int], object] | None = None,
                renamed: Callable[[FileStamp], object] | None = None) -> FileStamp:
        """Rename the prepared temp file over the document and fsync the folder; its stamp.

        Raises OSError only when the rename failed, i.e. the document is
        unchanged: once the rename happened the new bytes are the file, and
        calling that a failure would make the caller undo a write that landed.

        With `release`, the file being replaced is held open across the rename and
        its descriptor handed to `release` to close later: the old file's blocks and
        cached pages are freed at that close instead of inside the rename (3.5 ms of a
        10 MB commit here), off the path of the caller who waits for the answer.

        `renamed`, when given, is called with the stamp as soon as the rename is done,
        before the folder's fsync (the engine lets readers in then: `engine.txn`).
        """
        stamp = FileStamp.of(os.stat(temp))  # the file once renamed: a rename keeps all three
        held = self._open_quietly() if release is not None else None
        try:
            os.replace(temp, self.path)
        except BaseException:
            if held is not None:
                os.close(held)
            raise
        faults.reached("after_rename")
        if renamed is not None:
            renamed(stamp)
        leftovers, self._leftovers = self._leftovers, []
        for leftover in leftovers:
            self.discard(leftover)  # the folder takes writes again
        self._sync_folder()
        if held is not None and release is not None:
            release(held)
        return stamp

    def _open_quietly(self) -> int | None:
        """A read-only descriptor of the document, or None (gone, unreadable)."""
        try:
            return os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None

    def _sync_folder(self) -> None:
        with contextlib.suppress(OSError):
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def check_writable(self) -> None:
        """Raise OSError unless the document and its folder take writes (temp file + rename).

        `os.access` honours what refuses even root (an immutable file or
        folder, a read-only mount) as well as permission bits and ACLs, and
        writes nothing.
        """
        if self.path.exists() and not os.access(self.path, os.W_OK):
            raise PermissionError(1, "the file is read-only or immutable", self.path.name)
        if not os.access(self.path.parent, os.W_OK | os.X_OK):
            raise PermissionError(1, "its folder is read-only or immutable", self.path.parent.name)
