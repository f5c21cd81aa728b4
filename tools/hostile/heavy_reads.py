"""The texts of issue 31's finding 3: revisions whose diff is as costly as difflib gets.

difflib's matcher treats a line as junk ("popular") when it makes up more than 1 % of
the text; a text whose lines come from a vocabulary of about 101 lines, each just
under that share, leaves nothing junked, and every line matches hundreds of places:
one diff between two shuffles of it took 2.7 to 17 s before the bound
(engine/linediff.py). `revisions` gives a region's two revisions of that kind, both
under the 256 KiB proposal limit. Used by tests/security/test_heavy_reads.py and
tools/bench/bench_heavy_read_isolation.py.
"""

from __future__ import annotations

import random

VOCABULARY = 101


def near_autojunk_body(rng: random.Random, size: int, line_bytes: int) -> str:
    """About `size` bytes of lines of `line_bytes` bytes (a newline included), drawn
    from `VOCABULARY` distinct lines, each as often as the others, in a random order."""
    lines = size // line_bytes
    vocabulary = [f"{k:0{line_bytes - 1}d}\n" for k in range(VOCABULARY)]
    body = [line for line in vocabulary for _ in range(lines // VOCABULARY)]
    rng.shuffle(body)
    return "".join(body)


def revisions(heading: str, *, size: int = 209_000, line_bytes: int = 4,
              seed: int = 31) -> tuple[str, str]:
    """Two texts of a region under `heading` (its heading line, e.g. "## Risks"), each
    about `size` bytes, whose diff is the costly kind."""
    rng = random.Random(seed)
    return tuple(f"{heading}\n\n{near_autojunk_body(rng, size, line_bytes)}\n"  # type: ignore[return-value]
                 for _ in range(2))
