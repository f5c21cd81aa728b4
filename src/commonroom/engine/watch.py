"""The file: its look and settle, external edits, and the recovery on open.

Theory of operation
-------------------
`FileWatch.look` is what `Engine.refresh` (before every operation) and
`Engine.watch` (the room's file watcher) do: the file is checked with one
`stat`; a change is read once it has settled (`engine.settle`,
docs/spec/PROTOCOL.md section 16) and its content becomes a version (`external
edit`) before anything else reads or writes. While it settles, reads answer
from the last version and a write raises `FileSettling` (the room waits and
retries). A file the room cannot use never stops the room: `problem` says why,
reads keep serving the last version and writes are refused with it.

`recover` brings file and sidecar together when a room opens after a stop or a
crash (section 15): a version committed but not renamed is rolled forward, a
vanished file is written back, and a file edited while no room ran is settled
and recorded like any save, with `found_at_open` passed to the version write so
that its edit holds nothing (nobody is typing now).
"""

from __future__ import annotations

import math
from contextlib import suppress
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from commonroom.engine.ids import sha256_hex
from commonroom.engine.settle import Reading, Settle, Step
from commonroom.engine.text import is_text
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.events import Event
from commonroom.store.document import DocumentFile, FileStamp, NotRegularFile

if TYPE_CHECKING:
    from pathlib import Path

    from commonroom.engine.core import Engine


def not_a_file(path: Path) -> CommonroomError:
    return CommonroomError(
        "invalid_request",
        f"{path.name} is not a regular file (a FIFO, socket, device or folder);"
        " commonroom serves a markdown file", {"file": path.name})


def require_text_file(path: Path) -> None:
    """Before the sidecar exists (so refusing leaves nothing behind): the file is UTF-8 text."""
    try:
        data = DocumentFile(path).read()[0]
    except FileNotFoundError:
        return  # a new document: created empty when the engine opens
    except NotRegularFile:
        raise not_a_file(path) from None
    except OSError as exc:
        raise CommonroomError(
            "storage_unavailable",
            f"cannot read {path.name} ({exc.strerror or type(exc).__name__})",
            {"file": path.name},
        ) from None
    if not is_text(data):
        raise CommonroomError(
            "invalid_request",
            f"{path.name} is not UTF-8 text; commonroom serves UTF-8 markdown only",
            {"file": path.name},
        )


def remove_stray_temp_files(path: Path) -> None:
    """Temp files a crash before COMMIT left beside the document (`engine.txn`)."""
    for entry in path.parent.glob(f".{path.name}.*.tmp"):
        with suppress(OSError):
            entry.unlink()


class FileWatch:
    """What the engine knows of its file: the settle state and why it is unusable, if it is."""

    def __init__(self, engine: Engine, settle_ms: int) -> None:
        self.engine = engine
        self.path = engine.path
        self.doc = engine.doc
        # When a change of the file may be read, and the file's stamp as the current
        # version has it.
        self.settle = Settle(timedelta(milliseconds=settle_ms))
        # Why the file cannot take a version right now (it is not UTF-8 text
        # any more, it vanished and cannot be restored, it cannot be read):
        # reads keep serving the last version, writes are refused with it.
        self.problem: str | None = None

    @property
    def state(self) -> str:
        """`settling` (a change is not recorded yet), `unusable` (`problem`) or `settled`."""
        if self.settle.settling:
            return "settling"
        return "unusable" if self.problem is not None else "settled"

    def changing(self, now: datetime, deadline: datetime) -> CommonroomError:
        """What a write that found the file settling answers once the room stopped waiting."""
        wait = max(1, math.ceil((deadline - now).total_seconds()))
        return CommonroomError(
            "storage_unavailable",
            f"{self.path.name} is being changed (a save in progress, or the file is gone);"
            " nothing was committed: retry once it is saved",
            {"file": self.path.name, "reason": "file_changing"},
            retry_after_seconds=wait,
        )

    # ---------------------------------------------------------------- open

    def first_read(self, now: datetime) -> tuple[bytes, FileStamp]:
        """The bytes of version 1 (a missing file is created empty), and their stamp.

        A file that changed while it was read is still version 1 (a room needs
        one); what it settles to follows as a version of its own.
        """
        try:
            data, before, after = self.doc.read()
        except FileNotFoundError:
            return b"", self.doc.write(b"")
        except NotRegularFile:
            raise not_a_file(self.path) from None
        if after != before:
            self.settle.found_at_open(now, after)
        return data, before

    def recover(self, now: datetime) -> None:
        """Bring file and sidecar together after a stop or a crash (docs/spec/PROTOCOL.md section 15)."""
        versions, conn = self.engine.versions, self.engine.conn
        latest = versions.current()
        written = conn.execute(
            "SELECT file_written FROM versions WHERE version = ?", (latest.version,)
        ).fetchone()[0]
        try:
            data, before, after = self.doc.read()
        except NotRegularFile:
            raise not_a_file(self.path) from None
        except FileNotFoundError:
            # The file vanished: the room's last version is the best copy there is.
            self.settle.settled(self.doc.write(latest.data))
            return
        digest = sha256_hex(data)
        if after == before:
            if digest == latest.content_hash:
                if not written:
                    conn.execute("UPDATE versions SET file_written = 1 WHERE version = ?",
                                 (latest.version,))
                self.settle.settled(before)
                return
            if (not written and latest.version > 1
                    and digest == versions.snapshot(latest.version - 1).content_hash):
                # Crash between sidecar commit and rename: finish the write.
                self.settle.settled(self.doc.write(latest.data))
                conn.execute("UPDATE versions SET file_written = 1 WHERE version = ?",
                             (latest.version,))
                return
        # The file wins: someone edited it while the room was closed (or is saving
        # it right now). It is recorded once it has settled, like any save, and
        # holds nothing (`Settle.at_open`).
        self.settle.found_at_open(now, after)

    # ---------------------------------------------------------------- look

    def moved(self) -> bool:
        """Would a `look` now have something to do (a change settling, or a stamp that is
        not the current version's)? One `stat`; changes nothing, so the read path asks
        it from its own thread and leaves any work to the writer's (`dispatch.read`)."""
        settle = self.settle
        if settle.settling:
            return True
        try:
            stamp = self.doc.stat()
        except OSError:
            return True
        return stamp is None or stamp != settle.known

    def look(self, now: datetime) -> list[Event]:
        """One look at the file under the settle rules; a settled change is recorded.

        One `stat` when nothing changed. Never raises for the file's sake: the
        watcher calls this too, and a file the room cannot use must not stop the
        room (`problem` then says why, and writes are refused with it). Only
        a sidecar that refuses to record a settled edit raises: then every request
        answers `storage_unavailable` until it is recorded (docs/protocol.md).
        """
        name = self.path.name
        try:
            stamp = self.doc.stat()
        except OSError as exc:
            self.problem = f"{name} cannot be read ({exc.strerror})"
            self.settle.settled(None)  # not known any more: settled and read again once it can be
            return []
        step = self.settle.look(now, stamp)
        if step is Step.RESTORE:
            self._restore(now)
            return []
        if step is not Step.READ:
            return []
        try:
            data, before, after = self.doc.read()
        except FileNotFoundError:
            self.settle.look(now, None)
            return []
        except NotRegularFile:
            # Like a file that is not UTF-8: the last version is served, writes are refused,
            # and the file is read again once something else stands at its path.
            self.problem = f"{name} is not a regular file (a FIFO, socket or device)"
            self.settle.settled(stamp)
            return []
        except OSError as exc:
            self.problem = f"{name} cannot be read ({exc.strerror})"
            self.settle.retry_later(now)
            return []
        digest = sha256_hex(data)
        if not self.settle.check(now, Reading(before, after, digest)):
            return []
        return self._take_settled(now, data, digest, before)

    def _take_settled(self, now: datetime, data: bytes, digest: str, stamp: FileStamp) -> list[Event]:
        """The file settled as `data`: record it as an external edit (or note why not)."""
        engine = self.engine
        if digest == engine.versions.current().content_hash:
            self.problem = None
            self.settle.settled(stamp)
            return []
        if not is_text(data):
            # Not recorded: a version is text (regions, diffs). The room keeps
            # serving its last version and refuses writes, which would
            # overwrite the edit, until the file is UTF-8 text again.
            self.problem = f"{self.path.name} is not UTF-8 text any more"
            self.settle.settled(stamp)
            return []
        # A refusal (say the sidecar's disk is full) leaves the settle where it
        # is: the next look reads the file again instead of taking it as known.
        with engine.transaction(now) as tx:
            engine.versions.record_external_edit(tx, data, found_at_open=self.settle.at_open)
        self.problem = None
        self.settle.settled(stamp)
        return tx.events

    def _restore(self, now: datetime) -> None:
        """The file has been gone for `restore_after`: put the current version back.

        Never over a file that came back meanwhile (the next look settles that one).
        """
        try:
            stamp = self.doc.restore(self.engine.versions.current().data)
        except FileExistsError:
            return
        except OSError as exc:
            self.problem = f"{self.path.name} is gone and could not be restored ({exc.strerror})"
            self.settle.retry_later(now)
            return
        self.problem = None
        self.settle.settled(stamp)
