"""The review conversation's figure (shared/spec/TARGETS.md): ``rebase_cost_10mb``.

Usage: ``python tools/bench/bench_review.py [--previews N]``

A rebase preview (``workspace.proposal.rebase``, ``apply`` false, in-process
``dispatch.execute``) of a stale region proposal on the 10 MB / 10,000-section
document, divided by the same on the 10 KB / 10-section document, measured in
the same run, the two interleaved preview by preview (target <= 3). Each
proposal is made stale the way it happens in a room: an agent proposes a
one-line change near the top of a ~1 KB section, then the host commits a
one-line change near its bottom (a region commit), so the proposal is
superseded and its rebase merges cleanly (base, proposal, current: three
texts of the region). Every preview is checked: clean, and its merged text
holds both changes. Medians in microseconds; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tools.bench.bench_engine import (  # noqa: E402
    FIGURES,
    agent_of,
    machine,
    make_document,
    report,
    write_doc,
)

from commonroom.engine import dispatch, sessions  # noqa: E402
from commonroom.engine.core import Engine  # noqa: E402
from commonroom.engine.dispatch import open_engine  # noqa: E402


def _call(engine: Engine, op: str, bearer: str, **params: Any) -> Any:
    outcome = dispatch.execute(engine, op, bearer, params)
    if outcome.error is not None:
        raise RuntimeError(f"{op} failed: {outcome.error}")
    return outcome.result


def _prose_lines(text: str) -> list[int]:
    lines = text.split("\n")
    fenced, out = False, []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line and not line.startswith("#"):
            out.append(i)
    return out


def _edit(text: str, line: int, tag: str) -> str:
    lines = text.split("\n")
    lines[line] = f"{lines[line]} {tag}"
    return "\n".join(lines)


class Room:
    """One document in an in-process room, with stale proposals to rebase."""

    def __init__(self, folder: Path, name: str, parts: int, sections: int) -> None:
        pieces, _ = make_document(parts, sections, 1000, seed=22)
        self.path = write_doc(folder, name, "".join(pieces))
        self.engine = open_engine(self.path)
        self.host = sessions.mint_host_session(self.engine)
        self.agent = agent_of(self.engine, self.host)
        self.parts, self.sections = parts, sections
        self.size = self.path.stat().st_size

    def stale_proposal(self, number: int) -> str:
        region = (f"Part {number % self.parts + 1}/Section"
                  f" {(number // self.parts) % self.sections + 1}")
        outline = self.engine.current().outline
        text = outline.region_text(outline.resolve(region))
        prose = _prose_lines(text)
        ours = _call(self.engine, "workspace.propose", self.agent, region=region,
                     base_version=self.engine.current_version, summary=f"ours {number}",
                     content=_edit(text, prose[0], f"ours{number}"))
        theirs = _call(self.engine, "workspace.propose", self.host, region=region,
                       base_version=self.engine.current_version, summary=f"theirs {number}",
                       content=_edit(text, prose[-1], f"theirs{number}"))
        _call(self.engine, "workspace.review", self.host, proposal_id=theirs.proposal_id, revision=theirs.revision,
              decision="approve")
        _call(self.engine, "workspace.commit", self.host, proposal_id=theirs.proposal_id)
        return str(ours.proposal_id)

    def preview_ns(self, proposal_id: str, number: int) -> int:
        t0 = time.perf_counter_ns()
        answer = _call(self.engine, "workspace.proposal.rebase", self.agent,
                       proposal_id=proposal_id)
        elapsed = time.perf_counter_ns() - t0
        if not (answer.clean and f"ours{number}" in answer.content
                and f"theirs{number}" in answer.content):
            raise RuntimeError(f"preview {number} is not the clean merge of both changes")
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--previews", type=int, default=60)
    args = parser.parse_args()
    print(json.dumps({"machine": machine()}), flush=True)
    with tempfile.TemporaryDirectory(prefix="commonroom-bench-review-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        small = Room(folder, "small.md", 1, 10)
        large = Room(folder, "large.md", 100, 100)
        print(f"[rebase_cost_10mb] documents of {small.size} and {large.size} bytes"
              f" ({time.perf_counter() - t0:.1f} s to open)", flush=True)
        # A superseded proposal keeps its text while it is among its author's newest few
        # terminal ones (issue 24), so each is made stale just before its preview.
        samples: dict[str, list[int]] = {"small": [], "large": []}
        for number in range(args.previews):  # interleaved: small, large, small, ...
            for key, room in (("small", small), ("large", large)):
                proposal_id = room.stale_proposal(number)
                samples[key].append(room.preview_ns(proposal_id, number))
        small_us = statistics.median(samples["small"]) / 1000
        large_us = statistics.median(samples["large"]) / 1000
        report("rebase_preview_10kb_median_us", small_us, "us")
        report("rebase_preview_10mb_median_us", large_us, "us")
        report("rebase_preview_10mb_max_us", max(samples["large"]) / 1000, "us")
        report("rebase_cost_10mb", large_us / small_us, "(target <= 3)")
        small.engine.close()
        large.engine.close()
    print(json.dumps(FIGURES), flush=True)


if __name__ == "__main__":
    main()
