"""The markdown file on disk: cheap change detection and atomic writes.

Change detection is a `stat` (size, mtime_ns, inode) compared with what we
saw last; only when that differs is the file read. Writes go to a temp file
in the same folder, are fsynced, keep the original permission bits, and are
renamed over the file, so a reader never sees half a document.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
import tempfile
from pathlib import Path

import attrs

from commonroom.store import faults


@attrs.frozen
class FileStamp:
    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStamp:
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)


class DocumentFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp: FileStamp | None = None  # what the file was when we last read or wrote it
        # Temp files the folder refused to remove (`discard`, from either thread:
        # list.append is atomic); the next install retries them.
        self._leftovers: list[Path] = []

    def changed(self) -> bool:
        """One stat; True when the file may differ from what we last saw."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self.stamp is not None
        return FileStamp.of(st) != self.stamp

    def read(self) -> bytes:
        with open(self.path, "rb") as handle:
            data = handle.read()
            self.stamp = FileStamp.of(os.fstat(handle.fileno()))
        return data

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, data: bytes) -> None:
        self.install(self.prepare(data))

    def prepare(self, data: bytes) -> Path:
        """Write `data` to a fsynced temp file beside the document, with its permission bits."""
        try:
            mode: int | None = stat_mod.S_IMODE(os.stat(self.path).st_mode)
        except FileNotFoundError:
            mode = None
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                faults.reached("after_temp_write")
                if mode is not None:
                    os.fchmod(handle.fileno(), mode)
                os.fsync(handle.fileno())
                faults.reached("after_fsync")
        except BaseException:
            self.discard(Path(tmp))
            raise
        return Path(tmp)

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

    def install(self, temp: Path) -> None:
        """Rename the prepared temp file over the document and fsync the folder.

        Raises OSError only when the rename failed, i.e. the document is
        unchanged: once the rename happened the new bytes are the file, and
        calling that a failure would make the caller undo a write that landed.
        """
        os.replace(temp, self.path)
        faults.reached("after_rename")
        leftovers, self._leftovers = self._leftovers, []
        for leftover in leftovers:
            self.discard(leftover)  # the folder takes writes again
        with contextlib.suppress(OSError):
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        with contextlib.suppress(OSError):
            self.stamp = FileStamp.of(os.stat(self.path))

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
