"""What fitting agent text to its region costs (PROTOCOL section 7, "Agent text fits the document").

Usage: ``python tools/bench/bench_fitting.py [--proposes N]``

On the 10 MB / 10,000-section document of ``bench_engine.py`` (in-process ``engine.execute``):

1. ``fit_region_256k_us``: median time of ``fitting.fit_region`` on a 256 KiB text (the largest
   proposal) without a final newline, against a 1 KB region.
2. ``propose_fitted_ms``: median ``workspace.propose`` of a one-line edit sent the way a model
   writes it (no final newline, no separator), accepted after fitting (each withdrawn after).
3. ``propose_refused_ms``: median ``workspace.propose`` of texts refused with a cause (heading
   level changed, an unclosed fence, a heading that adopts the next sections), the cause found
   by ``fitting.misfit``; ``refused_over_fitted`` is their ratio (the refusal must not scan the
   document: about 1; the outline check before it, unchanged, rescans what an unclosed fence
   or an adopting heading reaches); ``misfit_ms`` is the part spent finding the cause.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import agent_of, edit_one_line, make_document, report, write_doc  # noqa: E402

from commonroom.engine import dispatch, sessions  # noqa: E402
from commonroom.engine.dispatch import open_engine  # noqa: E402
from commonroom.engine.fitting import fit_region, misfit  # noqa: E402


def _ms(samples: list[int]) -> float:
    return float(statistics.median(samples)) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proposes", type=int, default=60)
    args = parser.parse_args()

    region_text = "## Section 1\n\n" + "word " * 200 + "\n\n"
    big = "## Section 1\n\n" + ("A line of text, as a model writes it.\n" * 7000)[: 256 * 1024 - 20]
    samples = []
    for _ in range(200):
        t0 = time.perf_counter_ns()
        fit_region(region_text, big)
        samples.append(time.perf_counter_ns() - t0)
    report("fit_region_256k_us", float(statistics.median(samples)) / 1000.0, "us median")

    pieces, _ = make_document(100, 100, 1000, seed=7)
    with tempfile.TemporaryDirectory() as folder:
        path = write_doc(Path(folder), "bench.md", "".join(pieces))
        engine = open_engine(path)
        try:
            host = sessions.mint_host_session(engine)
            agent = agent_of(engine, host)
            rng = random.Random(3)
            fitted: list[int] = []
            refused: list[int] = []
            explained: list[int] = []
            for tag in range(args.proposes):
                region = f"Part {rng.randint(1, 100)}/Section {rng.randint(1, 100)}"
                outline = engine.current().outline
                own = outline.region_text(outline.resolve(region))
                edited = edit_one_line(rng, own, tag).rstrip("\n")  # no final newline, no separator
                params = {"region": region, "base_version": engine.current_version,
                          "summary": f"edit {tag}", "content": edited}
                t0 = time.perf_counter_ns()
                outcome = dispatch.execute(engine, "workspace.propose", agent, params)
                fitted.append(time.perf_counter_ns() - t0)
                if outcome.error is not None:
                    raise RuntimeError(f"propose failed: {outcome.error}")
                dispatch.execute(engine, "workspace.withdraw", agent,
                                 {"proposal_id": outcome.result.proposal_id})
                bad = [own.replace("## ", "### ", 1), own + "```python\n", own + "# Adopter\n\n"]
                for content in bad:
                    t0 = time.perf_counter_ns()
                    outcome = dispatch.execute(engine, "workspace.propose", agent,
                                               {**params, "content": content})
                    refused.append(time.perf_counter_ns() - t0)
                    if outcome.error is None or "cause" not in outcome.error.details:
                        raise RuntimeError(f"expected a refusal with a cause: {outcome}")
                    span = outline.resolve(region)
                    new = outline.replaced(span, content + "\n")
                    t0 = time.perf_counter_ns()
                    misfit(outline, span, content + "\n", new)
                    explained.append(time.perf_counter_ns() - t0)
            report("propose_fitted_ms", _ms(fitted), "ms median")
            report("propose_refused_ms", _ms(refused), "ms median")
            report("refused_over_fitted", _ms(refused) / _ms(fitted))
            report("misfit_ms", _ms(explained), "ms median (finding the cause, of the refusal)")
        finally:
            engine.close()


if __name__ == "__main__":
    main()
