"""Line diffs with a bound on their cost: no single request holds the room.

difflib's matcher is quadratic in the worst case: two 209 KB texts whose lines come
from a vocabulary just under its "popular line" threshold (each line about 1 % of
the text, so none is junked) took 2.7 to 17 s for one diff, on the one store thread
every request waits on. Here the matcher is charged, before each of its
longest-match searches, what that search costs (the lines it scans times how many
places each line matches on average), and a diff past `WORK_MAX` stops at once.

Past the bound a diff is answered plainly: `unified_diff` gives one hunk that
removes every old line and adds every new one (both texts in full, a valid unified
diff), its first label saying "too large to diff"; `matching_blocks` answers None
and its caller treats the texts as unrelated. Below the bound the answer is difflib's
own, line for line. Deterministic (work, not time), so it is the same on a loaded machine.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar, Final, TypeVar

import attrs

T = TypeVar("T")

# Units of the matcher's inner loop (an index of b visited for a line of a). 1,000,000 is
# at most about 0.3 s of CPython (the worst inputs); an edit of a few lines of a 256 KiB
# text costs a few thousand, rewriting a tenth of a 134 KB one about 500,000.
WORK_MAX: Final = 1_000_000
TOO_LARGE: Final = "too large to diff: both texts in full"
CONTEXT: Final = 3


class TooLarge(Exception):
    """A matcher's searches went past their work bound (`Budget`)."""


@attrs.define
class Budget:
    """Work left for the matchers charged to it (one diff, or every match of one merge)."""

    left: int = WORK_MAX


class _Charged(difflib.SequenceMatcher[str]):
    """A matcher that stops (`TooLarge`) once its searches would cost more than its budget."""

    def __init__(self, a: Sequence[str], b: Sequence[str], *, autojunk: bool,
                 work: int | Budget) -> None:
        self.budget = work if isinstance(work, Budget) else Budget(work)
        self.size_a = len(a)
        super().__init__(None, a, b, autojunk=autojunk)
        # difflib's index of b (line -> its positions), junk and popular lines left out
        where: dict[str, list[int]] = self.b2j  # type: ignore[attr-defined]
        pairs = sum(len(where.get(line, ())) for line in a)
        self.weight = max(1.0, pairs / max(len(a), 1))

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0,
                           bhi: int | None = None) -> difflib.Match:
        high = self.size_a if ahi is None else ahi
        self.budget.left -= int((high - alo) * self.weight) + 1
        if self.budget.left < 0:
            raise TooLarge
        return super().find_longest_match(alo, ahi, blo, bhi)


class _BudgetMatcher(_Charged):
    """`difflib.SequenceMatcher`'s constructor, charging the class's `shared` budget."""

    shared: ClassVar[Budget]

    def __init__(self, isjunk: Callable[[str], bool] | None = None, a: Sequence[str] = "",
                 b: Sequence[str] = "", autojunk: bool = True) -> None:
        super().__init__(a, b, autojunk=autojunk, work=self.shared)


def charged_matcher(budget: Budget) -> type[_BudgetMatcher]:
    """A `difflib.SequenceMatcher` class whose every instance charges `budget` and raises
    `TooLarge` past it: for a library that takes a matcher class, as
    `merge3.Merge3(sequence_matcher=...)` does."""
    return type("BudgetMatcher", (_BudgetMatcher,), {"shared": budget})


def opcodes(a: Sequence[str], b: Sequence[str], *, autojunk: bool = True,
            work: int = WORK_MAX) -> list[tuple[str, int, int, int, int]] | None:
    """difflib's opcodes from a to b (the very same), or None past the work bound."""
    try:
        return list(_Charged(a, b, autojunk=autojunk, work=work).get_opcodes())
    except TooLarge:
        return None


def matching_blocks(a: Sequence[str], b: Sequence[str], *, autojunk: bool = True,
                    work: int = WORK_MAX) -> list[tuple[int, int, int]] | None:
    """(i, j, size) runs equal in a and b, in order, or None past the work bound."""
    ops = opcodes(a, b, autojunk=autojunk, work=work)
    if ops is None:
        return None
    return [(i1, j1, i2 - i1) for tag, i1, i2, j1, _ in ops if tag == "equal"]


def _range(start: int, length: int) -> str:
    """A hunk range as difflib writes it (`difflib._format_range_unified`)."""
    first = start + 1
    if length == 1:
        return f"{first}"
    if not length:
        first -= 1
    return f"{first},{length}"


def _grouped(ops: list[tuple[str, int, int, int, int]]
             ) -> Iterator[list[tuple[str, int, int, int, int]]]:
    """difflib's `get_grouped_opcodes(CONTEXT)` over precomputed opcodes."""
    codes = list(ops) or [("equal", 0, 1, 0, 1)]
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - CONTEXT), i2, max(j1, j2 - CONTEXT), j2
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + CONTEXT), j1, min(j2, j1 + CONTEXT)
    wide = CONTEXT + CONTEXT
    group: list[tuple[str, int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > wide:
            group.append((tag, i1, min(i2, i1 + CONTEXT), j1, min(j2, j1 + CONTEXT)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - CONTEXT), max(j1, j2 - CONTEXT)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def unified_diff(before: str, after: str, from_label: str, to_label: str, *,
                 work: int = WORK_MAX) -> str:
    """The unified diff from `before` to `after` (as difflib writes it, 3 lines of context);
    past the work bound, one hunk with both texts in full and a first label that says so."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    if a == b:
        return ""
    ops = opcodes(a, b, work=work)
    if ops is None:
        return _whole(a, b, f"{from_label} ({TOO_LARGE})", to_label)
    out = [f"--- {from_label}\n", f"+++ {to_label}\n"]
    for group in _grouped(ops):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2] - first[1])}"
                   f" +{_range(first[3], last[4] - first[3])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(" " + line for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                out.extend("-" + line for line in a[i1:i2])
            if tag in ("replace", "insert"):
                out.extend("+" + line for line in b[j1:j2])
    return "".join(out)


def _whole(a: list[str], b: list[str], from_label: str, to_label: str) -> str:
    # (inline, not a helper per line: 25,000 lines of a 256 KiB text cost half as much)
    breaks = ("\n", "\r")
    return "".join([f"--- {from_label}\n", f"+++ {to_label}\n",
                    f"@@ -{_range(0, len(a))} +{_range(0, len(b))} @@\n",
                    *("-" + line if line.endswith(breaks) else "-" + line + "\n" for line in a),
                    *("+" + line if line.endswith(breaks) else "+" + line + "\n" for line in b)])


# -- diffs computed after the transaction ------------------------------------------------


class Deferred:
    """A field of a read's answer computed after its transaction, by `resolved` (`compute`)."""

    def compute(self) -> object:
        raise NotImplementedError


class Later(str, Deferred):
    """A diff the read answers, not computed yet: the empty string until `resolved`.

    The engine builds a read's answer inside its transaction (on the store, which every
    call waits for) but the diff is a pure function of two texts: the room computes it
    after the transaction, off the store (`dispatch.execute(..., later=True)`), so a
    large diff holds nobody else's call. Without `later` the answer is resolved at once.
    """

    before: str
    after: str
    labels: tuple[str, str]

    def compute(self) -> str:
        return unified_diff(self.before, self.after, *self.labels)


def later(before: str, after: str, from_label: str, to_label: str) -> str:
    """The unified diff from `before` to `after`, to be computed by `resolved`."""
    pending = Later("")
    pending.before, pending.after, pending.labels = before, after, (from_label, to_label)
    return pending


def resolved(record: T) -> T:
    """`record` (an attrs record) with every `Deferred` among its fields (a `Later` diff,
    a proposal's link warnings) computed."""
    if record is None or not attrs.has(type(record)):
        return record
    changes = {field.name: value.compute() for field in attrs.fields(type(record))  # type: ignore[arg-type]
               if isinstance(value := getattr(record, field.name), Deferred)}
    return attrs.evolve(record, **changes) if changes else record  # type: ignore[misc]
