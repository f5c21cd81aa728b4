"""Why the outline has its own CommonMark block scanner: ``commonmark_port_ratio``.

Usage: ``python tools/bench/bench_commonmark.py [--rounds N] [--megabytes M]``

`engine/commonmark.py` is a port of markdown-it's block rules that keeps only
what decides where headings are. It would be simpler to call markdown-it-py's
block tokenizer (the test extra pins it as the port's differential reference),
so this benchmark measures what the port buys, on one document in one run:

- the port's whole scan (`Outline(text)`: blocks, headings, region paths);
- markdown-it-py's block tokenizer alone (`MarkdownIt("commonmark").parse` with
  the core's inline pass off, which is all the outline would need of it);
- an incremental rescan after a one-line edit inside one section
  (`Outline.replaced`), which the port does on a window of the document and a
  whole-document tokenizer cannot.

The rounds are interleaved; medians in milliseconds; the last line is one JSON
object. Needs the test extra (markdown-it-py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from markdown_it import MarkdownIt  # noqa: E402
from tools.bench.bench_engine import FIGURES, machine, make_document, report  # noqa: E402

from commonroom.engine.regions import Outline  # noqa: E402


def _ms(start: int) -> float:
    return (time.perf_counter_ns() - start) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--megabytes", type=float, default=2.2)
    args = parser.parse_args()

    sections = max(10, int(args.megabytes * 1000))
    pieces, _ = make_document(parts=max(1, sections // 100), sections=100,
                                            target=int(args.megabytes * 1024 * 1024 / sections),
                                            seed=7)
    text = "".join(pieces)
    reference = MarkdownIt("commonmark")
    # The block tokenizer alone: the core's inline pass (and its rules) off.
    rules = reference.get_all_rules()
    reference.disable([rule for rule in rules["core"] if rule not in ("normalize", "block")]
                      + rules["inline"] + rules["inline2"], ignoreInvalid=True)
    outline = Outline(text)
    heading = outline.headings[len(outline.headings) // 2]
    span = outline.resolve(heading.path)
    section = outline.region_text(span)
    changed = section.rstrip("\n") + " edited\n\n"
    edited = outline.replace(span, changed)

    port: list[float] = []
    tokenizer: list[float] = []
    rescan: list[float] = []
    for _ in range(args.rounds):
        start = time.perf_counter_ns()
        Outline(text)
        port.append(_ms(start))
        start = time.perf_counter_ns()
        reference.parse(text)
        tokenizer.append(_ms(start))
        start = time.perf_counter_ns()
        outline.replaced(span, changed, text=edited)
        rescan.append(_ms(start))

    print(f"document: {len(text) / 1e6:.2f} MB, {len(outline.headings)} headings, "
          f"{args.rounds} interleaved rounds", flush=True)
    report("commonmark_port_ms", statistics.median(port), "ms")
    report("markdown_it_block_ms", statistics.median(tokenizer), "ms")
    report("outline_rescan_ms", statistics.median(rescan), "ms")
    report("commonmark_port_ratio", statistics.median(tokenizer) / statistics.median(port),
           "(markdown-it-py's block tokenizer ÷ the port; higher favours the port)")
    result: dict[str, Any] = {"machine": machine(), **FIGURES}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
