"""How much of two files is the same text: the share of identical lines (issue 19: the client shells).

Usage: ``python tools/twin_lines.py [A B]`` (default: ``src/commonroom/client/aio.py
src/commonroom/client/sync.py``), or ``--rev REV`` to read both files at a git revision.

Lines are compared stripped of indentation; blank lines do not count. Two figures:

* ``shared``: the lines of A that also stand in B, each line of B matched at most once
  (a multiset intersection), as a share of A's lines — "how much of A is a copy of B";
* ``aligned``: difflib's ``SequenceMatcher`` ratio of the two line sequences (2 × matched /
  (len A + len B)), which also counts order.

Both are printed twice: as written, and with the async spelling taken out (``async ``,
``await ``, ``aclose`` → ``close``, ``__aenter__`` → ``__enter__``, ...), which counts a line
that differs from its twin only by being async as a copy too.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ("src/commonroom/client/aio.py", "src/commonroom/client/sync.py")


_ASYNC = ((r"\basync (def|with|for)\b", r"\1"), (r"\bawait ", ""), (r"\baclos", "clos"),
          (r"\b__a(enter|exit|iter|next)__\b", r"__\1__"), (r"\bAsync", ""),
          (r"StopAsyncIteration", "StopIteration"))


def lines_of(text: str, *, blocking: bool = False) -> list[str]:
    found = [line.strip() for line in text.splitlines() if line.strip()]
    if blocking:
        for pattern, replacement in _ASYNC:
            found = [re.sub(pattern, replacement, line) for line in found]
    return found


def figures(first: list[str], second: list[str]) -> tuple[int, float]:
    common = collections.Counter(first) & collections.Counter(second)
    aligned = difflib.SequenceMatcher(None, first, second, autojunk=False).ratio()
    return sum(common.values()), aligned


def read(path: str, rev: str | None) -> str:
    if rev is None:
        return (ROOT / path).read_text()
    return subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT))
    parser.add_argument("--rev", help="read the files at this git revision")
    args = parser.parse_args()
    texts = [read(path, args.rev) for path in args.files]
    for label, blocking in (("as written", False), ("async spelling taken out", True)):
        first, second = (lines_of(text, blocking=blocking) for text in texts)
        shared, aligned = figures(first, second)
        print(f"{label}: {args.files[0]} {len(first)} lines, {args.files[1]} {len(second)} lines;"
              f" shared {shared} = {100 * shared / len(first):.1f} % of the first;"
              f" aligned (difflib ratio) {100 * aligned:.1f} %")


if __name__ == "__main__":
    main()
