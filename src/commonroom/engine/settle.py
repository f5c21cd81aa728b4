"""When a changed file may be read: the settle rules of docs/spec/PROTOCOL.md section 16.

Editors save three ways: temp file + rename, truncate then write (often in
several writes), overwrite then truncate. A look in the middle of the last two
sees half a document. So a change is not read at once: the file's stamp
`(inode, size, mtime_ns)` has to stay the same for a whole settle period first,
and the bytes read count only if the stamp after the read is the one before it
(and the one the period ended on). A file that never settles is read every
`unsettled_read` with the same check. On a file system with coarse mtimes (FAT,
HFS+, some network mounts: 1-2 s) a save can leave the stamp unchanged, so
there the bytes themselves must stay still: a reading counts only when its
hash equals that of a reading a period earlier.

`Settle` is a pure state machine, like h11: no I/O, no clock. The engine feeds
it what it saw and does what it answers:

- `look(now, stamp)` after each stat (`stamp` None: the file is absent)
  answers a `Step`: STEADY (the file is what the current version has),
  SETTLING (look again by `deadline`), READ (read it now, then `check`) or
  RESTORE (gone for `restore_after`: put the current version back);
- `check(now, reading)` after a read: True when the bytes may be recorded,
  False when the settle starts again;
- `settled(stamp)` once the file is known again (recorded, found equal to the
  current version, refused as not text, or written by the room);
- `retry_later(now)` when the read or restore failed: try again a period on.

A change found when the room opens (`found_at_open`) is settled the same way;
`at_open` stays True until the stamp moves, so its version holds nothing.

`SettleWait` is the other half, for a caller: a write that found the file
settling (`Outcome.retry_at`), or a host command waiting for an edit made while
no room ran (the watch's deadline), runs again at the deadline, for at most
`SETTLE_WAIT_SECONDS` in all. It is as pure: the room drives it with
`trio.sleep`, the host CLI's no-room path with `time.sleep`.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from typing import Final

import attrs

from commonroom.protocol import limits
from commonroom.store.document import FileStamp


class Step(enum.Enum):
    STEADY = "steady"
    SETTLING = "settling"
    READ = "read"
    RESTORE = "restore"


@attrs.frozen
class Reading:
    """One read of the file: its stamp just before and just after, and the bytes' hash.

    `after` is None when the file was gone (or another file) by the end of the read.
    """

    before: FileStamp
    after: FileStamp | None
    digest: str


class Settle:
    def __init__(
        self,
        period: timedelta = timedelta(milliseconds=limits.SETTLE_MS),
        *,
        unsettled_read: timedelta = timedelta(seconds=limits.UNSETTLED_READ_SECONDS),
        restore_after: timedelta = timedelta(seconds=limits.RESTORE_AFTER_SECONDS),
    ) -> None:
        self.period = period
        self.unsettled_read = unsettled_read
        self.restore_after = restore_after
        self.known: FileStamp | None = None
        """The file's stamp as the current version has it (None: not known yet)."""
        self.settling = False
        self.at_open = False
        self._seen: FileStamp | None = None  # the stamp this stretch of stillness is of
        self._still_since = datetime.min
        self._read_by = datetime.min  # the next read a file that never settles gets
        self._coarse: str | None = None  # a coarse file's hash, read at `_still_since`

    @property
    def deadline(self) -> datetime | None:
        """When a look can next make progress (None: the file is steady)."""
        if not self.settling:
            return None
        if self._seen is None:
            return self._still_since + self.restore_after
        return min(self._still_since + self.period, self._read_by)

    def look(self, now: datetime, stamp: FileStamp | None) -> Step:
        if not self.settling:
            if stamp is not None and stamp == self.known:
                return Step.STEADY
            self._begin(now, stamp)
        elif stamp != self._seen:
            self._restart(now, stamp)
        if self._seen is None:
            return Step.RESTORE if now >= self._still_since + self.restore_after else Step.SETTLING
        if now >= self._still_since + self.period or now >= self._read_by:
            return Step.READ
        return Step.SETTLING

    def check(self, now: datetime, reading: Reading) -> bool:
        """Whether the bytes of `reading` (asked for by READ) are one whole save."""
        if now >= self._read_by:
            self._read_by = now + self.unsettled_read
        if reading.before != self._seen or reading.after != reading.before:
            self._restart(now, reading.after)  # it moved since the look, or during the read
            return False
        if reading.before.coarse and self._coarse != reading.digest:
            # The stamp cannot show a save here: keep this hash and compare the
            # bytes a period later.
            self._still_since, self._coarse = now, reading.digest
            self._read_by = max(self._read_by, now + self.period)
            return False
        return True

    def settled(self, stamp: FileStamp | None) -> None:
        self.known = stamp
        self.settling = False
        self.at_open = False
        self._coarse = None

    def found_at_open(self, now: datetime, stamp: FileStamp | None) -> None:
        """The file differs from the last version when the room opens: settle it first."""
        self._begin(now, stamp)
        self.at_open = True

    def retry_later(self, now: datetime) -> None:
        """The read or the restore failed: the next attempt is a period (or a restore wait) on."""
        self._still_since = now
        self._read_by = max(self._read_by, now + self.period)

    def _begin(self, now: datetime, stamp: FileStamp | None) -> None:
        self.settling = True
        self._read_by = now + self.unsettled_read
        self._restart(now, stamp)

    def _restart(self, now: datetime, stamp: FileStamp | None) -> None:
        self._seen = stamp
        self._still_since = now
        self._coarse = None
        self.at_open = False


# A settle deadline is looked at this much after it (a look exactly at it could
# land a hair before on a coarse clock, and wait a whole period more).
LOOK_SLACK: Final = 0.002


class SettleWait:
    """How long a caller waits for the file to settle before it tries again, or that it stops.

    `started` and every `at` are the driver's monotonic time in seconds (trio's
    clock in the room, `time.monotonic` in the host CLI), `now` the engine's
    clock when the attempt answered; nothing here reads a clock or sleeps.
    """

    def __init__(self, started: float, limit: float = limits.SETTLE_WAIT_SECONDS) -> None:
        self.give_up = started + limit

    def pause(self, retry_at: datetime | None, now: datetime, at: float) -> float | None:
        """Seconds to wait before the next attempt; None: stop, the last answer stands.

        `retry_at` is the settle deadline the attempt answered (None: the file was
        not settling). Past `give_up` the answer stands too: a write's then carries
        `file_changing`, a read's says `"file": "settling"`. A pause never ends past
        `give_up`, and is at least `LOOK_SLACK`.
        """
        left = self.give_up - at
        if retry_at is None or left <= 0:
            return None
        wait = (retry_at - now).total_seconds() + LOOK_SLACK
        return min(max(wait, LOOK_SLACK), left)


class FileSettling(Exception):
    """A write found the file settling, or moved since its version: nothing was written.

    Raised inside the transaction (which rolls back, or is undone after COMMIT);
    the dispatcher answers it with `Engine.file_changing` and `Outcome.retry_at`,
    and the room runs the operation again once `deadline` passed.
    """

    def __init__(self, deadline: datetime) -> None:
        super().__init__("the file is settling")
        self.deadline = deadline
