"""The settle state machine (engine/settle.py, docs/spec/PROTOCOL.md section 16) on an injected clock.

A simulated file is saved the three ways editors save (truncate then write in
chunks, overwrite then truncate, temp file + rename; also delete then create),
on a file system with fine or coarse (2 s) mtimes; the machine looks at it at
drawn moments and at the deadlines it asks for, and reads take drawn times
during which the file may change. Hypothesis draws the interleavings.

- No interleaving records bytes that changed while they were read.
- When saves are far enough apart to settle, every recorded reading is one
  whole save, each save is recorded at most once, in order, and the last one is
  recorded (the room does not wait for ever).
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import hypothesis.strategies as st
from hypothesis import given, settings

from commonroom.engine.settle import LOOK_SLACK, Reading, Settle, SettleWait, Step
from commonroom.store.document import FileStamp

START = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PERIOD_MS = 250
METHODS = ("truncate_write", "overwrite_truncate", "rename", "delete_create")
# When the machine looks (a request, the watcher's tick) and how long a read takes
# (a big file on a slow disk: a save may start during it) come from a seeded
# random.Random the example draws: hundreds of hypothesis draws per example cost
# more than the whole simulation.
LOOK_MS = (100, 1, 3, 17, 60, 149, 250, 300)
READ_MS = (1, 0, 2, 5, 30, 120, 300)
# Any gap: saves that settle, saves that start while the last is being read
# (just past a period of stillness), saves that never let the file settle.
ANY_GAP_MS = st.sampled_from([300, 1, 10, 100, 200, 251, 260, 400, 550, 2500])
SETTLING_GAP_MS = st.integers(1300, 3000)  # a period, a look's delay, two reads: always settles


def at_ms(ms: int) -> datetime:
    return START + timedelta(milliseconds=ms)


@dataclass
class State:
    since_ms: int
    stamp: FileStamp | None
    content: str
    whole: bool


@dataclass
class SimFile:
    """What the file holds over time: each state holds from `since_ms` until the next."""

    coarse: bool
    states: list[State] = field(default_factory=list)
    inodes: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def stamp(self, ms: int, size: int, inode: int) -> FileStamp:
        if self.coarse:  # FAT: 2 s
            return FileStamp(size, (ms // 2000) * 2_000_000_000, inode)
        return FileStamp(size, ms * 1_000_000 + 7, inode)  # a write per ms at most: distinct

    def write(self, ms: int, size: int, inode: int, content: str, whole: bool) -> None:
        assert not self.states or ms > self.states[-1].since_ms
        self.states.append(State(ms, self.stamp(ms, size, inode), content, whole))

    def delete(self, ms: int) -> None:
        self.states.append(State(ms, None, "", False))

    def at(self, ms: int) -> State:
        times = [s.since_ms for s in self.states]
        return self.states[max(0, bisect.bisect_right(times, ms) - 1)]

    def changed_within(self, start_ms: int, end_ms: int) -> bool:
        times = [s.since_ms for s in self.states]
        return bisect.bisect_right(times, end_ms) > bisect.bisect_right(times, start_ms)


def build(data: st.DataObject, coarse: bool, gaps: st.SearchStrategy[int], count: int
          ) -> tuple[SimFile, list[str]]:
    """A file and up to `count` saves `gaps` apart; returns it and the saves' contents, in order.

    Gaps between the writes of one save are 1-20 ms (well under the period).
    """
    sim = SimFile(coarse)
    inode = next(sim.inodes)
    size = 300
    sim.write(0, size, inode, "save0", True)
    saves = ["save0"]
    ms = 0
    for n in range(1, data.draw(st.integers(1, count), label="saves") + 1):
        ms += data.draw(gaps, label="gap before the save")
        method = data.draw(st.sampled_from(METHODS), label="method")
        chunks = data.draw(st.integers(1, 4), label="chunks")
        final = data.draw(st.integers(250, 350), label="size")
        content = f"save{n}"
        if method == "rename":
            inode = next(sim.inodes)
            sim.write(ms, final, inode, content, True)
        elif method == "delete_create":
            sim.delete(ms)
            ms += data.draw(st.integers(1, 20), label="gap")
            inode = next(sim.inodes)
            sim.write(ms, final, inode, content, True)
        elif method == "truncate_write":
            sim.write(ms, 0, inode, f"{content}.empty", False)
            for i in range(1, chunks + 1):
                ms += data.draw(st.integers(1, 20), label="gap between writes")
                sim.write(ms, final * i // chunks, inode, content if i == chunks else f"{content}.{i}",
                          i == chunks)
        else:  # overwrite then truncate: the size stays the old one until the end
            for i in range(1, chunks + 1):
                sim.write(ms, max(size, final * i // chunks), inode, f"{content}.{i}", False)
                ms += data.draw(st.integers(1, 20), label="gap between writes")
            sim.write(ms, final, inode, content, True)
        size = final
        saves.append(content)
    return sim, saves


def run(data: st.DataObject, sim: SimFile, until_ms: int) -> list[str]:
    """Drive the machine over the file; the contents it recorded."""
    timing = random.Random(data.draw(st.integers(0, 2**32 - 1), label="timing seed"))
    machine = Settle(timedelta(milliseconds=PERIOD_MS))
    machine.settled(sim.at(0).stamp)
    torn = itertools.count()
    recorded: list[str] = []
    ms = 1
    while ms < until_ms:
        state = sim.at(ms)
        step = machine.look(at_ms(ms), state.stamp)
        assert step is not Step.RESTORE  # nothing here stays gone for 5 s
        if step is Step.READ:
            assert state.stamp is not None  # a file that is gone is never read
            took = timing.choice(READ_MS)
            changed = sim.changed_within(ms, ms + took)
            content = f"torn{next(torn)}" if changed else state.content
            ms += took
            if machine.check(at_ms(ms), Reading(state.stamp, sim.at(ms).stamp, content)):
                assert not changed, f"recorded bytes that changed while read: {content}"
                recorded.append(content)
                machine.settled(state.stamp)
        # The next look: a drawn moment (a request, the watcher's tick), or the
        # deadline the machine asked for if that comes first.
        after = ms + timing.choice(LOOK_MS)
        deadline = machine.deadline
        if deadline is not None:
            wake = (deadline - START) // timedelta(milliseconds=1) + 1
            after = min(after, max(ms + 1, wake))
        ms = after
    return recorded


@settings(max_examples=200, deadline=None)
@given(data=st.data(), coarse=st.booleans())
def test_no_interleaving_records_bytes_that_changed_while_read(data: st.DataObject, coarse: bool) -> None:
    sim, _ = build(data, coarse, ANY_GAP_MS, count=25)
    run(data, sim, sim.states[-1].since_ms + 1500)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), coarse=st.booleans())
def test_saves_that_settle_are_each_recorded_once_and_whole(data: st.DataObject, coarse: bool) -> None:
    sim, saves = build(data, coarse, SETTLING_GAP_MS, count=6)
    recorded = run(data, sim, sim.states[-1].since_ms + 2000)
    wholes = [s.content for s in sim.states if s.whole]
    assert all(content in wholes for content in recorded), recorded
    assert len(set(recorded)) == len(recorded), recorded  # at most one record per save
    assert recorded == sorted(recorded, key=saves.index)
    # The last save is the file now: recorded, unless a coarse mtime hides it
    # altogether (same size within the same 2 s: no stat can tell, docs/protocol.md).
    last = next(i for i, state in enumerate(sim.states) if state.content.startswith(saves[-1]))
    if not coarse or sim.states[-1].stamp != sim.states[last - 1].stamp:
        assert recorded and recorded[-1] == saves[-1], (recorded, saves)


def stamp(size: int, ms: int, inode: int = 1) -> FileStamp:
    return FileStamp(size, ms * 1_000_000 + 3, inode)


def test_the_settle_restarts_on_any_change_and_reads_after_a_still_period() -> None:
    machine = Settle(timedelta(milliseconds=250))
    machine.settled(stamp(10, 0))
    assert machine.look(at_ms(100), stamp(10, 0)) is Step.STEADY and machine.deadline is None
    assert machine.look(at_ms(200), stamp(4, 190)) is Step.SETTLING  # a truncate, half written
    assert machine.deadline == at_ms(450)
    assert machine.look(at_ms(300), stamp(12, 290)) is Step.SETTLING  # more bytes: again
    assert machine.look(at_ms(549), stamp(12, 290)) is Step.SETTLING
    assert machine.look(at_ms(550), stamp(12, 290, inode=2)) is Step.SETTLING  # another inode
    assert machine.look(at_ms(800), stamp(12, 290, inode=2)) is Step.READ
    # The stamp after the read differs: not recorded, the period starts again.
    assert not machine.check(at_ms(801), Reading(stamp(12, 290, 2), stamp(13, 801, 2), "x"))
    assert machine.look(at_ms(1051), stamp(13, 801, 2)) is Step.READ
    assert machine.check(at_ms(1052), Reading(stamp(13, 801, 2), stamp(13, 801, 2), "y"))
    machine.settled(stamp(13, 801, 2))
    assert not machine.settling and machine.look(at_ms(1100), stamp(13, 801, 2)) is Step.STEADY


def test_a_file_that_never_settles_is_read_every_five_seconds() -> None:
    machine = Settle(timedelta(milliseconds=250))
    machine.settled(stamp(10, 0))
    reads = []
    for ms in range(100, 12_000, 100):  # a new stamp at every look
        if machine.look(at_ms(ms), stamp(ms, ms)) is Step.READ:
            reads.append(ms)
            machine.check(at_ms(ms), Reading(stamp(ms, ms), stamp(ms + 1, ms + 1), "x"))
    assert reads == [5100, 10100]


def test_a_gone_file_settles_until_it_is_back_and_is_restored_after_five_seconds() -> None:
    machine = Settle(timedelta(milliseconds=250))
    machine.settled(stamp(10, 0))
    assert machine.look(at_ms(100), None) is Step.SETTLING
    assert machine.look(at_ms(5099), None) is Step.SETTLING
    assert machine.look(at_ms(5100), None) is Step.RESTORE
    machine.retry_later(at_ms(5100))  # the restore failed: not at every look
    assert machine.look(at_ms(5200), None) is Step.SETTLING
    assert machine.look(at_ms(5300), stamp(7, 5250, 9)) is Step.SETTLING  # back: settled as a save
    assert machine.look(at_ms(5550), stamp(7, 5250, 9)) is Step.READ


def test_coarse_mtimes_need_the_same_bytes_a_period_apart() -> None:
    coarse = FileStamp(10, 4_000_000_000, 1)
    assert coarse.coarse and not stamp(10, 5).coarse
    machine = Settle(timedelta(milliseconds=250))
    machine.settled(FileStamp(10, 2_000_000_000, 1))
    assert machine.look(at_ms(0), coarse) is Step.SETTLING
    assert machine.look(at_ms(250), coarse) is Step.READ
    assert not machine.check(at_ms(251), Reading(coarse, coarse, "a"))  # first hash: kept
    assert machine.look(at_ms(400), coarse) is Step.SETTLING
    assert machine.look(at_ms(501), coarse) is Step.READ
    assert not machine.check(at_ms(502), Reading(coarse, coarse, "b"))  # changed under the stamp
    assert machine.look(at_ms(752), coarse) is Step.READ
    assert machine.check(at_ms(753), Reading(coarse, coarse, "b"))


def test_a_change_found_at_open_holds_nothing_until_the_file_moves_again() -> None:
    machine = Settle(timedelta(milliseconds=250))
    machine.found_at_open(at_ms(0), stamp(10, -5000))
    assert machine.settling and machine.at_open
    assert machine.look(at_ms(250), stamp(10, -5000)) is Step.READ and machine.at_open
    assert machine.look(at_ms(260), stamp(11, 255)) is Step.SETTLING and not machine.at_open


def test_the_cli_copies_of_the_settle_bounds_are_the_protocols() -> None:
    from commonroom.cli import host_serve
    from commonroom.protocol import limits

    assert (host_serve.SETTLE_MS, host_serve.SETTLE_MS_MIN, host_serve.SETTLE_MS_MAX) == (
        limits.SETTLE_MS, limits.SETTLE_MS_MIN, limits.SETTLE_MS_MAX)


# -- the caller's wait: SettleWait, the plan the room and the host CLI's no-room path follow --------

LIMIT = 2.0


def test_a_call_that_found_no_settle_does_not_wait() -> None:
    wait = SettleWait(100.0, LIMIT)
    assert wait.pause(None, at_ms(0), 100.0) is None
    assert wait.pause(None, at_ms(0), 101.9) is None


def test_the_next_attempt_is_just_after_the_settle_deadline() -> None:
    wait = SettleWait(100.0, LIMIT)
    assert wait.pause(at_ms(250), at_ms(0), 100.0) == 0.25 + LOOK_SLACK
    # a deadline already past (the store thread was slow): look again almost at once
    assert wait.pause(at_ms(0), at_ms(40), 100.0) == LOOK_SLACK
    assert wait.pause(at_ms(40), at_ms(40), 100.5) == LOOK_SLACK


def test_a_pause_never_ends_past_the_give_up_time_and_then_the_answer_stands() -> None:
    wait = SettleWait(100.0, LIMIT)
    assert wait.give_up == 102.0
    assert wait.pause(at_ms(5000), at_ms(0), 100.5) == 1.5  # the deadline is beyond: wait what is left
    last = wait.pause(at_ms(300), at_ms(0), 101.9)
    assert last is not None and abs(last - 0.1) < 1e-9
    assert wait.pause(at_ms(300), at_ms(0), 102.0) is None
    assert wait.pause(at_ms(300), at_ms(0), 150.0) is None


def _drive(wait: SettleWait, settled_after: float, deadline_step: float) -> tuple[int, float, bool]:
    """What a driver does with the plan, on injected time (no sleeps): attempt, and while the
    plan says so, pause and attempt again. The file settles `settled_after` s from the start;
    until then each attempt answers a deadline `deadline_step` s on. Returns (attempts, the
    time the last one ran, whether it found the file settled)."""
    started = at_ms(0)
    monotonic = 0.0
    attempts = 0
    while True:
        attempts += 1
        settled = monotonic >= settled_after
        retry_at = None if settled else started + timedelta(seconds=monotonic + deadline_step)
        pause = wait.pause(retry_at, started + timedelta(seconds=monotonic), monotonic)
        if pause is None:
            return attempts, monotonic, settled
        assert pause > 0
        monotonic += pause


def test_a_save_that_settles_in_time_is_waited_for_and_the_call_runs_just_after() -> None:
    attempts, ran_at, settled = _drive(SettleWait(0.0, LIMIT), settled_after=0.6, deadline_step=0.25)
    assert settled and attempts == 4 and 0.6 <= ran_at < 0.6 + 0.25 + 2 * LOOK_SLACK


def test_a_file_that_never_settles_is_given_up_on_after_the_limit() -> None:
    attempts, ran_at, settled = _drive(SettleWait(0.0, LIMIT), settled_after=1e9, deadline_step=0.25)
    assert not settled and ran_at == LIMIT and attempts == 9  # 8 waits of 0.252 s, then what is left


@settings(max_examples=200, deadline=None)
@given(settled_after=st.floats(0, 5), deadline_step=st.floats(0, 3))
def test_the_wait_is_bounded_and_ends_once_the_file_settled(settled_after: float, deadline_step: float) -> None:
    attempts, ran_at, settled = _drive(SettleWait(0.0, LIMIT), settled_after, deadline_step)
    assert ran_at <= LIMIT
    assert settled or ran_at == LIMIT
    assert attempts <= 1 + LIMIT / LOOK_SLACK + 1
