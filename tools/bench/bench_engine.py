"""Engine figures for "Document size and history" (shared/spec/TARGETS.md).

Usage: ``python tools/bench/bench_engine.py [--quick]``

Measures, in one run on this machine, printing each figure as it goes:

1. ``read_scaling``: median latency of ``workspace.read`` of one ~1 KB region
   of a 10 MB / 10,000-section document divided by the same on a 10 KB /
   10-section document (target <= 3.0); plus the one-time cost of opening the
   10 MB document and of one raw commit on it (for information).
2. ``unchanged_check``: during 1,000 reads of an unchanged file, the file is
   stat'ed once per read and never read: counted in-process (wrapping
   ``engine.doc.read``, ``os.stat`` and ``open``) and, when ``strace`` is on
   the PATH, by tracing a child process and attributing syscalls to the file.
3. ``storage_growth``: sidecar growth (``.commonroom.db`` + ``-wal`` after a
   TRUNCATE checkpoint) for 1,000 one-line raw commits to a 1 MB document
   (target < 20 MB), every version read back and checked byte-exact.
4. ``ring_trim``: cost of appending one event with the event id around
   1,000,000 (ring full, so every append trims one row) divided by around 100
   (target <= 1.5); batched emits per transaction and single-emit transactions.

5. ``commit_cost_10mb``: median time of a region commit (propose -> approve ->
   commit, the commit timed, in-process ``engine.execute``) on the 10 MB /
   10,000-section document divided by the median time of writing the same
   10 MB atomically (``DocumentFile.write``: temp file, fsync, rename, folder
   fsync), the two interleaved commit by commit (target <= 2.0); the 10 KB
   document's commit for information.
6. ``old_read_scaling``: median ``workspace.read`` of one region of an *old*
   version, not in the cache (its entry dropped before each read), on the 10 MB
   document divided by the same on the 10 KB one (target <= 3.0).
7. ``room_rss_ratio_10mb``: a real room process (``loadgen.room_server``) on the
   10 MB document: VmRSS after 100 region commits over HTTP (and a read of an
   old version after each) divided by VmRSS idle (after join and one read)
   (target <= 1.5).

8. ``storage_growth_in_place``: as ``storage_growth``, but each of the 1,000
   one-line edits is saved *in place* by the host's "editor" (truncate, then the
   1 MB written in four writes 2 ms apart) under a real room process (default
   settle, 250 ms), waiting for each save's version before the next edit:
   sidecar growth (target < 10 MB), and exactly one version per save, every one
   byte-equal to its save (checked in-process after the room stopped).
9. ``settle_latency_ms``: 50 external saves (temp file + rename, 0.8 s apart)
   until their ``change.committed`` reaches a subscriber of
   ``/workspace/observe`` (the Python client's stream, in a thread): p50, p99
   and the maximum (target p99 < settle + 150 ms = 400 ms).

10. ``prune_history_ratio``: the text pruning every decision and commit runs
   (``proposal_texts.prune``, its two queries inside one transaction), median time after 2,000 committed
   proposals divided by the same after 100 (no target in TARGETS.md; it must
   stay about flat: the cost of a decision does not grow with the room's history).

``--quick`` uses smaller counts (under a minute, plus the in-place saves); ``--only
read,commit`` runs some steps (read, strace, growth, ring, commit, oldread, rss, inplace,
settle, prune). The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import hashlib
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from commonroom.engine import dispatch, sessions  # noqa: E402
from commonroom.engine.core import Engine  # noqa: E402
from commonroom.engine.dispatch import open_engine  # noqa: E402
from commonroom.engine.ids import hash_secret  # noqa: E402
from commonroom.protocol import events as ev  # noqa: E402
from commonroom.protocol.invitation import TransportHint  # noqa: E402
from commonroom.protocol.records import to_wire  # noqa: E402
from commonroom.store.document import DocumentFile  # noqa: E402

MARK_BEGIN = "/nonexistent-commonroom-bench-begin"
MARK_END = "/nonexistent-commonroom-bench-end"

FIGURES: dict[str, Any] = {}


def report(key: str, value: Any, unit: str = "") -> None:
    """Record a figure and print it at once."""
    FIGURES[key] = value
    shown = f"{value:.3f}" if isinstance(value, float) else str(value)
    print(f"  {key}: {shown}{(' ' + unit) if unit else ''}", flush=True)


def median_us(samples_ns: list[int] | list[float]) -> float:
    return float(statistics.median(samples_ns)) / 1000.0


# ------------------------------------------------------------------- documents

_WORDS: tuple[str, ...] = (
    "the", "room", "holds", "a", "markdown", "file", "while", "people", "and", "agents", "propose",
    "review", "commit", "changes", "to", "its", "regions", "under", "leases", "with", "events",
    "streamed", "every", "participant", "version", "sidecar", "block", "manifest", "heading",
    "section", "outline", "reader", "writer", "stale",
)


def _sentence(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def make_section(rng: random.Random, part: int, number: int, target: int) -> str:
    """One ``##`` section of about `target` bytes: paragraphs, lists, fenced code with ``#``."""
    out = [f"## Section {number}\n\n"]
    size = len(out[0])
    step = 0
    while size < target - 80:
        kind = rng.random()
        if kind < 0.5:
            chunk = _sentence(rng, 12, 30) + " " + _sentence(rng, 6, 14) + "\n\n"
        elif kind < 0.75:
            items = rng.randint(2, 4)
            chunk = "".join(f"- {_sentence(rng, 4, 9)}\n" for _ in range(items)) + "\n"
        elif kind < 0.9:
            chunk = (
                "```python\n"
                f"# step {step} of part {part}: not a heading\n"
                f"value = {rng.randint(0, 9999)}  # comment\n"
                "```\n\n"
            )
        else:
            chunk = f"1. {_sentence(rng, 3, 8)}\n2. {_sentence(rng, 3, 8)}\n\n"
        out.append(chunk)
        size += len(chunk)
        step += 1
    return "".join(out)


def make_document(parts: int, sections: int, target: int, seed: int) -> tuple[list[str], list[int]]:
    """The document as pieces (joined, it is the text) and the indices of the section pieces."""
    rng = random.Random(seed)
    pieces = [f"# Bench document\n\n{_sentence(rng, 10, 20)}\n\n"]
    section_indices: list[int] = []
    for part in range(1, parts + 1):
        pieces.append(f"# Part {part}\n\n{_sentence(rng, 8, 16)}\n\n")
        for number in range(1, sections + 1):
            section_indices.append(len(pieces))
            pieces.append(make_section(rng, part, number, target))
    return pieces, section_indices


def edit_one_line(rng: random.Random, section: str, tag: int) -> str:
    """Change one prose or list line of a section."""
    lines = section.split("\n")
    fenced = False
    candidates: list[int] = []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line and not line.startswith("#"):
            candidates.append(i)
    i = rng.choice(candidates)
    words = lines[i].split(" ")
    j = rng.randrange(1, len(words)) if len(words) > 1 else 0
    words[j] = f"edit{tag}"
    lines[i] = " ".join(words)
    return "\n".join(lines)


def write_doc(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_bytes(text.encode("utf-8"))
    return path.resolve()


def sidecar_bytes(engine: Engine) -> int:
    engine.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    total = 0
    for suffix in ("", "-wal"):
        candidate = Path(str(engine.sidecar_path) + suffix)
        if candidate.exists():
            total += candidate.stat().st_size
    return total


def read_region(engine: Engine, bearer: str, region: str) -> str:
    outcome = dispatch.execute(engine, "workspace.read", bearer, {"region": region})
    if outcome.error is not None:
        raise RuntimeError(f"read of {region!r} failed: {outcome.error}")
    return str(outcome.result.content)


def raw_commit(engine: Engine, bearer: str, text: str, summary: str) -> dict[str, Any]:
    outcome = dispatch.execute(
        engine,
        "workspace.commit",
        bearer,
        {"base_version": engine.current_version, "summary": summary, "content": text},
    )
    if outcome.error is not None:
        raise RuntimeError(f"raw commit failed: {outcome.error}")
    result: dict[str, Any] = to_wire(outcome.result)
    return result


# ------------------------------------------------------------ 1. read scaling


def bench_read_scaling(folder: Path, reads: int) -> None:
    print("[1] read_scaling", flush=True)
    small_pieces, _ = make_document(1, 10, 1000, seed=10)
    big_pieces, big_sections = make_document(100, 100, 1000, seed=11)
    small_text, big_text = "".join(small_pieces), "".join(big_pieces)
    small_path = write_doc(folder, "small.md", small_text)
    big_path = write_doc(folder, "big.md", big_text)
    report("small_doc_bytes", len(small_text.encode()))
    report("big_doc_bytes", len(big_text.encode()))

    small = open_engine(small_path)
    t0 = time.perf_counter_ns()
    big = open_engine(big_path)
    open_s = (time.perf_counter_ns() - t0) / 1e9
    report("open_10mb_s", open_s, "s (first open: read, hash, store blocks, parse outline)")
    big.close()
    t0 = time.perf_counter_ns()
    big = open_engine(big_path)
    report("reopen_10mb_s", (time.perf_counter_ns() - t0) / 1e9, "s (existing sidecar)")
    report("big_doc_regions", len(big.current().outline.headings))

    small_host, big_host = sessions.mint_host_session(small), sessions.mint_host_session(big)
    small_region, big_region = "Part 1/Section 7", "Part 42/Section 7"
    report("small_region_bytes", len(read_region(small, small_host, small_region).encode()))
    report("big_region_bytes", len(read_region(big, big_host, big_region).encode()))
    for _ in range(300):  # warm-up
        read_region(small, small_host, small_region)
        read_region(big, big_host, big_region)

    small_ns: list[int] = []
    big_ns: list[int] = []
    perf = time.perf_counter_ns
    rounds = 10
    for _ in range(rounds):  # interleaved, so drift hits both alike
        for engine, bearer, region, sink in (
            (small, small_host, small_region, small_ns),
            (big, big_host, big_region, big_ns),
        ):
            execute = dispatch.execute
            params = {"region": region}
            for _ in range(reads // rounds):
                t0 = perf()
                outcome = execute(engine, "workspace.read", bearer, params)
                sink.append(perf() - t0)
                assert outcome.error is None
    small_us, big_us = median_us(small_ns), median_us(big_ns)
    report("read_small_us", small_us, "µs median")
    report("read_big_us", big_us, "µs median")
    report("read_small_p90_us", statistics.quantiles(small_ns, n=10)[-1] / 1000, "µs")
    report("read_big_p90_us", statistics.quantiles(big_ns, n=10)[-1] / 1000, "µs")
    report("read_scaling", big_us / small_us, "(target <= 3.0)")

    # One raw commit on the 10 MB document (one line changed), median of 3.
    rng = random.Random(5)
    commit_ns: list[int] = []
    for n in range(3):
        index = big_sections[rng.randrange(len(big_sections))]
        big_pieces[index] = edit_one_line(rng, big_pieces[index], n)
        text = "".join(big_pieces)
        t0 = perf()
        raw_commit(big, big_host, text, f"bench commit {n}")
        commit_ns.append(perf() - t0)
    report("commit_10mb_ms", statistics.median(commit_ns) / 1e6, "ms median of 3")

    # 2. (in-process half) on the 10 MB room: the read path never reads the file.
    bench_unchanged_in_process(big, big_host, big_region, 1000)
    small.close()
    big.close()


# --------------------------------------------------------- 2. unchanged check


def bench_unchanged_in_process(engine: Engine, bearer: str, region: str, reads: int) -> None:
    print("[2] unchanged_check (in-process counters)", flush=True)
    doc_path = str(engine.path)
    counts: Counter[str] = Counter()
    real_read = engine.doc.read
    real_stat = os.stat
    real_open = builtins.open

    def counting_read() -> Any:
        counts["doc_read"] += 1
        return real_read()

    def counting_stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        counts["stat_any"] += 1
        if isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path) == doc_path:
            counts["stat_doc"] += 1
        return real_stat(path, *args, **kwargs)

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, bytes, os.PathLike)) and os.fsdecode(file) == doc_path:
            counts["open_doc"] += 1
        return real_open(file, *args, **kwargs)

    read_region(engine, bearer, region)  # settle anything pending before counting
    engine.doc.read = counting_read  # type: ignore[method-assign]
    os.stat = counting_stat
    builtins.open = counting_open
    try:
        for _ in range(reads):
            read_region(engine, bearer, region)
    finally:
        engine.doc.read = real_read  # type: ignore[method-assign]
        os.stat = real_stat
        builtins.open = real_open
    report("unchanged_reads_counted", reads)
    report("unchanged_file_reads", counts["doc_read"] + counts["open_doc"], "(must be 0)")
    report("unchanged_stats_per_read", counts["stat_doc"] / reads, "(expected 1)")
    report("unchanged_any_stats_per_read", counts["stat_any"] / reads)


def child_unchanged(doc: str, reads: int) -> None:
    """Run under strace by the parent: open, warm up, then `reads` reads between markers."""
    engine = open_engine(Path(doc))
    bearer = sessions.mint_host_session(engine)
    region = "Part 3/Section 7"
    for _ in range(50):
        read_region(engine, bearer, region)
    with contextlib.suppress(FileNotFoundError):
        os.stat(MARK_BEGIN)
    for _ in range(reads):
        read_region(engine, bearer, region)
    with contextlib.suppress(FileNotFoundError):
        os.stat(MARK_END)
    engine.close()


def bench_unchanged_strace(folder: Path, reads: int) -> None:
    print("[2] unchanged_check (strace)", flush=True)
    strace = shutil.which("strace")
    if strace is None:
        report("unchanged_strace", None, "(strace not on PATH; skipped)")
        return
    pieces, _ = make_document(10, 100, 1000, seed=12)
    doc = write_doc(folder, "traced.md", "".join(pieces))
    out = folder / "strace.txt"
    syscalls = "openat,open,read,pread64,readv,newfstatat,fstatat64,statx,stat,lstat,fstat"
    cmd = [
        strace, "-f", "-y", "-qq", "-s", "16", "-o", str(out), "-e", f"trace={syscalls}",
        sys.executable, str(Path(__file__).resolve()), "--child-unchanged", str(doc), str(reads),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        report("unchanged_strace", None, f"(strace run failed: {proc.stderr.strip()[-300:]})")
        return
    lines = out.read_text(errors="replace").splitlines()
    begin = next(i for i, line in enumerate(lines) if MARK_BEGIN in line)
    end = next(i for i, line in enumerate(lines) if MARK_END in line)
    window = lines[begin + 1 : end]
    by_call: Counter[str] = Counter()
    doc_stats = doc_reads = doc_opens = 0
    quoted, fd_tag = f'"{doc}"', f"<{doc}>"
    for line in window:
        body = line.split(" ", 1)[1] if line[:1].isdigit() else line
        name = body.split("(", 1)[0].strip()
        by_call[name] += 1
        if name in ("read", "pread64", "readv") and fd_tag in body:
            doc_reads += 1
        elif name in ("openat", "open") and quoted in body:
            doc_opens += 1
        elif "stat" in name and (quoted in body or fd_tag in body):
            doc_stats += 1
    summary = {
        "reads": reads,
        "file_reads": doc_reads,
        "file_opens": doc_opens,
        "file_stats": doc_stats,
        "stats_per_read": doc_stats / reads,
        "syscalls_in_window": dict(sorted(by_call.items())),
    }
    report("unchanged_strace", summary)


# -------------------------------------------------------- 3. storage growth


def bench_storage_growth(folder: Path, edits: int) -> None:
    print(f"[3] storage_growth ({edits} one-line raw commits to a 1 MB document)", flush=True)
    pieces, sections = make_document(10, 100, 1000, seed=13)
    text = "".join(pieces)
    path = write_doc(folder, "growth.md", text)
    engine = open_engine(path)
    bearer = sessions.mint_host_session(engine)
    report("growth_doc_bytes", len(text.encode()))
    report("growth_doc_sections", len(sections))
    expected: dict[int, bytes] = {1: hashlib.sha256(text.encode()).digest()}
    before = sidecar_bytes(engine)
    report("sidecar_before_mb", before / 1e6, "MB")

    rng = random.Random(7)
    commit_ns: list[int] = []
    t_all = time.perf_counter_ns()
    for n in range(edits):
        index = sections[rng.randrange(len(sections))]
        pieces[index] = edit_one_line(rng, pieces[index], n)
        text = "".join(pieces)
        t0 = time.perf_counter_ns()
        result = raw_commit(engine, bearer, text, f"edit {n}")
        commit_ns.append(time.perf_counter_ns() - t0)
        expected[int(result["version"])] = hashlib.sha256(text.encode()).digest()
        if (n + 1) % max(1, edits // 5) == 0:
            print(f"    {n + 1} commits", flush=True)
    wall_s = (time.perf_counter_ns() - t_all) / 1e9
    after = sidecar_bytes(engine)
    report("sidecar_after_mb", after / 1e6, "MB")
    report("storage_edits", edits)
    report("storage_growth_mb", (after - before) / 1e6, f"MB for {edits} edits (target < 20)")
    report("commits_per_s", edits / wall_s, "(loop wall time, incl. building the text)")
    report("commit_1mb_median_ms", statistics.median(commit_ns) / 1e6, "ms")

    t0 = time.perf_counter_ns()
    exact = True
    bad: list[int] = []
    for version in range(1, engine.current_version + 1):
        engine.versions.cache.clear()
        data = engine.snapshot(version).data
        if hashlib.sha256(data).digest() != expected.get(version):
            exact = False
            bad.append(version)
    report("versions_checked", engine.current_version)
    report("all_versions_exact", exact, f"(mismatches: {bad[:10]})" if bad else "")
    report("verify_s", (time.perf_counter_ns() - t0) / 1e9, "s")
    engine.close()


# -------------------------------------------------------------- 4. ring trim


RING = 2000


def ring_engine(folder: Path, name: str, base: int) -> Engine:
    """A fresh room whose last event id is `base`; with the ring full when base > RING."""
    path = write_doc(folder, name, "# Ring\n\ntext\n")
    engine = open_engine(path)
    ring_reset(engine, base)
    return engine


def ring_reset(engine: Engine, base: int) -> None:
    """Put the events table back to: ids max(1, base-RING+1)..base, sequence at base."""
    conn = engine.conn
    now = "2026-01-01T00:00:00Z"
    low = max(1, base - RING + 1)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM events WHERE event_id > ? OR event_id < ?", (base, low))
    conn.executemany(
        "INSERT OR IGNORE INTO events (event_id, type, created_at, payload) VALUES (?, ?, ?, ?)",
        ((i, "bench.fill", now, '{"n":0}') for i in range(low, base + 1)),
    )
    conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'", (base,))
    conn.execute("COMMIT")
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == base - low + 1


def bench_ring_trim(folder: Path, batches: int, batch: int, singles: int) -> None:
    print("[4] ring_trim", flush=True)
    low_base, high_base = 100, 999_900
    low = ring_engine(folder, "ring_low.md", low_base)
    high = ring_engine(folder, "ring_high.md", high_base)
    perf = time.perf_counter_ns

    def batched(engine: Engine) -> float:
        """ns per event of one transaction of `batch` emits (commit included)."""
        t0 = perf()
        with engine.transaction(engine.clock()) as tx:
            for i in range(batch):
                tx.emit(ev.WorkspaceStarted(version=i))
        return (perf() - t0) / batch

    def single(engine: Engine, i: int) -> int:
        t0 = perf()
        with engine.transaction(engine.clock()) as tx:
            tx.emit(ev.WorkspaceStarted(version=i))
        return perf() - t0

    results: dict[str, dict[str, list[float]]] = {"batch": {}, "single": {}}
    engines = (("low", low, low_base), ("high", high, high_base))
    for label, engine, base in engines:  # warm-up, then back to the position
        batched(engine)
        ring_reset(engine, base)
        results["batch"][label] = []
        results["single"][label] = []
    for _ in range(batches):
        for label, engine, base in engines:
            results["batch"][label].append(batched(engine))
            ring_reset(engine, base)
    chunk = 100
    for start in range(0, singles, chunk):
        for label, engine, base in engines:
            for i in range(start, min(singles, start + chunk)):
                results["single"][label].append(single(engine, i))
            ring_reset(engine, base)
    max_id = high.conn.execute("SELECT max(event_id) FROM events").fetchone()[0]
    ring_rows = high.conn.execute("SELECT count(*) FROM events").fetchone()[0]
    report("ring_high_check", {"max_event_id": max_id, "rows": ring_rows})
    figures: dict[str, float] = {}
    for mode in ("batch", "single"):
        low_us = median_us(results[mode]["low"])
        high_us = median_us(results[mode]["high"])
        figures[f"{mode}_low_us"] = low_us
        figures[f"{mode}_high_us"] = high_us
        figures[f"{mode}_ratio"] = high_us / low_us
        report(f"ring_{mode}_at_100_us", low_us, "µs per event")
        report(f"ring_{mode}_at_1e6_us", high_us, "µs per event")
        report(f"ring_trim_{mode}", high_us / low_us)
    report("ring_trim", figures["batch_ratio"], "(batched emits; target <= 1.5)")
    low.close()
    high.close()



# ------------------------------------------------- 5. commit cost on 10 MB


def agent_of(engine: Engine, host: str) -> str:
    """An agent session in an in-process room (the invitation needs a transport hint)."""
    engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
    invite = dispatch.execute(engine, "workspace.invite", host, {})
    joined = dispatch.execute(engine, "session.join", None, {"invite": invite.result.invitation,
                                                   "name": "bench"})
    if joined.error is not None:
        raise RuntimeError(f"join failed: {joined.error}")
    return str(joined.result.session_id)


def region_commit(engine: Engine, host: str, agent: str, rng: random.Random, sections: int,
                  tag: int, parts: int = 100) -> int:
    """propose (one line of a random section changed) -> approve -> commit; ns of the commit."""
    region = f"Part {rng.randint(1, parts)}/Section {rng.randint(1, sections)}"
    outline = engine.current().outline
    content = edit_one_line(rng, outline.region_text(outline.resolve(region)), tag)
    proposed = dispatch.execute(engine, "workspace.propose", agent, {
        "region": region, "base_version": engine.current_version, "summary": f"edit {tag}",
        "content": content,
    })
    if proposed.error is not None:
        raise RuntimeError(f"propose failed: {proposed.error}")
    proposal_id = proposed.result.proposal_id
    reviewed = dispatch.execute(engine, "workspace.review", host,
                              {"proposal_id": proposal_id, "revision": 1, "decision": "approve"})
    if reviewed.error is not None:
        raise RuntimeError(f"review failed: {reviewed.error}")
    t0 = time.perf_counter_ns()
    done = dispatch.execute(engine, "workspace.commit", agent, {"proposal_id": proposal_id})
    elapsed = time.perf_counter_ns() - t0
    if done.error is not None:
        raise RuntimeError(f"commit failed: {done.error}")
    return elapsed


def bench_commit_cost(folder: Path, commits: int) -> None:
    print(f"[5] commit_cost_10mb ({commits} region commits, each followed by an atomic write)",
          flush=True)
    big_pieces, _ = make_document(100, 100, 1000, seed=11)
    small_pieces, _ = make_document(1, 10, 1000, seed=10)
    big = open_engine(write_doc(folder, "big.md", "".join(big_pieces)))
    small = open_engine(write_doc(folder, "small.md", "".join(small_pieces)))
    big_host, small_host = sessions.mint_host_session(big), sessions.mint_host_session(small)
    big_agent, small_agent = agent_of(big, big_host), agent_of(small, small_host)
    target = DocumentFile(folder / "atomic.md")
    rng = random.Random(21)
    for n in range(3):  # warm-up
        region_commit(big, big_host, big_agent, rng, 100, n)
        target.write(big.current().data)
    commit_ns: list[int] = []
    write_ns: list[int] = []
    small_ns: list[int] = []
    for n in range(commits):
        commit_ns.append(region_commit(big, big_host, big_agent, rng, 100, 100 + n))
        data = big.current().data
        # The commit hands the replaced file's close (freeing its 10 MB) to the engine's
        # writer thread, after its answer: let it finish, so it does not slow the write
        # timed next and flatter the ratio.
        big.txn.drain_writer()
        t0 = time.perf_counter_ns()
        target.write(data)
        write_ns.append(time.perf_counter_ns() - t0)
        small_ns.append(region_commit(small, small_host, small_agent, rng, 10, 100 + n, parts=1))
    commit_ms = statistics.median(commit_ns) / 1e6
    write_ms = statistics.median(write_ns) / 1e6
    report("commit_10mb_region_ms", commit_ms, "ms median (propose/approve untimed)")
    report("atomic_write_10mb_ms", write_ms, "ms median (temp, fsync, rename, dir fsync)")
    report("commit_10kb_region_ms", statistics.median(small_ns) / 1e6, "ms median")
    report("commit_10mb_all_ms", [round(x / 1e6, 1) for x in commit_ns])
    report("atomic_write_all_ms", [round(x / 1e6, 1) for x in write_ns])
    report("commit_cost_10mb", commit_ms / write_ms, "(target <= 2.0)")
    big.close()
    small.close()


# ------------------------------------------- 6. old-version region reads


def bench_old_read(folder: Path, reads: int) -> None:
    print("[6] old_read_scaling (region of an old version, outside the cache)", flush=True)
    rooms = []
    for name, parts, sections, seed in (("small", 1, 10, 10), ("big", 100, 100, 11)):
        pieces, _ = make_document(parts, sections, 1000, seed=seed)
        engine = open_engine(write_doc(folder, f"{name}.md", "".join(pieces)))
        host = sessions.mint_host_session(engine)
        agent = agent_of(engine, host)
        rng = random.Random(seed)
        for n in range(10):  # old versions to read
            region_commit(engine, host, agent, rng, sections, n, parts=parts)
        rooms.append((name, engine, host, "Part 1/Section 7"))
    perf = time.perf_counter_ns
    samples: dict[str, list[int]] = {"small": [], "big": []}
    for round_ in range(reads):
        for name, engine, host, region in rooms:
            version = 2 + round_ % 8
            engine.versions.cache.pop(version, None)  # outside the cache: a cold read
            params = {"region": region, "version": version}
            t0 = perf()
            outcome = dispatch.execute(engine, "workspace.read", host, params)
            samples[name].append(perf() - t0)
            assert outcome.error is None, outcome.error
    small_us, big_us = median_us(samples["small"]), median_us(samples["big"])
    report("old_read_small_us", small_us, "µs median")
    report("old_read_big_us", big_us, "µs median")
    report("old_read_scaling", big_us / small_us, "(target <= 3.0)")
    for _, engine, _, _ in rooms:
        engine.close()


# ----------------------------------------------------- 7. room RSS, 10 MB


def bench_rss(folder: Path, commits: int) -> None:
    import loadgen

    print(f"[7] room_rss_ratio_10mb (a room process, {commits} region commits over HTTP)",
          flush=True)
    pieces, _ = make_document(100, 100, 1000, seed=11)
    doc = write_doc(folder, "rss.md", "".join(pieces))
    rng = random.Random(31)
    with loadgen.room_server(doc, None) as room:
        agent = room.join("bench")
        http = loadgen.Http(room.port)
        region = "Part 1/Section 1"
        http.call("GET", f"/workspace/read?{loadgen.region_query(region)}", bearer=agent)
        time.sleep(1.0)
        idle_kb = loadgen.rss_kb(room.pid)
        version = 1
        for n in range(commits):
            region = f"Part {rng.randint(1, 100)}/Section {rng.randint(1, 100)}"
            read = http.call("GET", f"/workspace/read?{loadgen.region_query(region)}", bearer=agent)
            proposal = http.call("POST", "/workspace/propose", {
                "region": region, "base_version": read["version"], "summary": f"edit {n}",
                "content": edit_one_line(rng, read["content"], n),
            }, bearer=agent)
            http.call("POST", "/workspace/proposal/review", {
                "proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"},
                bearer=room.host_session)
            version = int(http.call("POST", "/workspace/commit",
                                    {"proposal_id": proposal["proposal_id"]}, bearer=agent)["version"])
            old = rng.randint(1, version - 1)
            http.call("GET", f"/workspace/read?{loadgen.region_query(region)}&version={old}",
                      bearer=agent)
        time.sleep(1.0)
        after_kb = loadgen.rss_kb(room.pid)
        http.close()
    report("room_rss_idle_mb", idle_kb / 1024, "MB")
    report("room_rss_after_mb", after_kb / 1024, f"MB after {commits} commits")
    report("room_rss_ratio_10mb", after_kb / idle_kb, "(target <= 1.5)")


# ------------------------------------------------ 8. saves in place, 9. settle latency


def save_in_place(path: Path, data: bytes, writes: int = 4, gap_s: float = 0.002) -> None:
    """Truncate, then write in `writes` pieces `gap_s` apart: how many editors save."""
    step = len(data) // writes + 1
    with open(path, "r+b", buffering=0) as handle:
        handle.truncate(0)
        for start in range(0, len(data), step):
            handle.write(data[start:start + step])
            time.sleep(gap_s)


def wait_for_hash(http: Any, bearer: str, digest: str, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        status = http.call("GET", "/workspace/status", bearer=bearer)
        if status["content_hash"] == digest:
            return int(status["version"])
        if time.monotonic() > deadline:
            raise RuntimeError(f"the save never became a version: {status}")
        time.sleep(0.01)


def bench_storage_growth_in_place(folder: Path, edits: int) -> None:
    import loadgen

    print(f"[8] storage_growth_in_place ({edits} one-line edits to a 1 MB document, each saved"
          " in place under a room)", flush=True)
    pieces, sections = make_document(10, 100, 1000, seed=13)
    text = "".join(pieces)
    path = write_doc(folder, "inplace.md", text)
    expected = [hashlib.sha256(text.encode()).hexdigest()]
    rng = random.Random(7)
    with loadgen.room_server(path, None) as room:
        http = loadgen.Http(room.port)
        wait_for_hash(http, room.host_session, expected[0])
        before = sum(Path(str(path) + ".commonroom.db" + s).stat().st_size
                     for s in ("", "-wal") if Path(str(path) + ".commonroom.db" + s).exists())
        save_s: list[float] = []
        for n in range(edits):
            index = sections[rng.randrange(len(sections))]
            pieces[index] = edit_one_line(rng, pieces[index], n)
            data = "".join(pieces).encode()
            expected.append(hashlib.sha256(data).hexdigest())
            t0 = time.perf_counter()
            save_in_place(path, data)
            version = wait_for_hash(http, room.host_session, expected[-1])
            save_s.append(time.perf_counter() - t0)
            if version != n + 2:
                raise RuntimeError(f"save {n + 1} became version {version}, not {n + 2}")
            if (n + 1) % max(1, edits // 5) == 0:
                print(f"    {n + 1} saves", flush=True)
        http.close()
    engine = open_engine(path)
    after = sidecar_bytes(engine)
    versions = engine.current_version
    sources = Counter(r[0] for r in engine.conn.execute("SELECT source FROM versions"))
    exact = all(
        engine.snapshot(v).content_hash == expected[v - 1]
        and hashlib.sha256(engine.snapshot(v).data).hexdigest() == expected[v - 1]
        for v in range(1, versions + 1)
    )
    engine.close()
    report("inplace_saves", edits)
    report("inplace_versions", versions - 1, f"external versions for {edits} saves (must be equal)")
    report("inplace_sources", dict(sources))
    report("inplace_all_versions_exact", exact)
    report("storage_growth_in_place_mb", (after - before) / 1e6,
           f"MB for {edits} in-place saves (target < 10)")
    report("inplace_save_to_version_median_ms", statistics.median(save_s) * 1e3,
           "ms (save start until the status shows it; includes the 250 ms settle)")


def bench_settle_latency(folder: Path, saves: int) -> None:
    import threading

    import loadgen

    import commonroom

    print(f"[9] settle_latency_ms ({saves} saves by temp file + rename, to a subscriber)", flush=True)
    pieces, sections = make_document(2, 20, 1000, seed=17)
    path = write_doc(folder, "settle.md", "".join(pieces))
    rng = random.Random(9)
    arrived: dict[int, float] = {}
    with loadgen.room_server(path, None) as room:
        observer = commonroom.Client(room.invitation, session=room.host_session)
        ready = threading.Event()

        def subscribe() -> None:
            stream = observer.observe()
            ready.set()
            for item in stream:
                payload = getattr(item, "payload", None)
                if getattr(item, "type", "") == "change.committed" and payload is not None:
                    arrived[int(payload.version)] = time.perf_counter()
                    if len(arrived) >= saves:
                        return

        reader = threading.Thread(target=subscribe, daemon=True)
        reader.start()
        ready.wait(10)
        time.sleep(1.0)  # the stream is open and caught up
        saved: dict[int, float] = {}
        temp = path.with_name(f".{path.name}.swp")
        for n in range(saves):
            index = sections[rng.randrange(len(sections))]
            pieces[index] = edit_one_line(rng, pieces[index], n)
            temp.write_bytes("".join(pieces).encode())
            os.replace(temp, path)
            saved[n + 2] = time.perf_counter()
            time.sleep(0.8)
        reader.join(10)
        observer.close()
    latencies = sorted((arrived[v] - t) * 1e3 for v, t in saved.items() if v in arrived)
    if len(latencies) != saves:
        raise RuntimeError(f"{saves - len(latencies)} saves never reached the subscriber")
    report("settle_saves", saves)
    report("settle_latency_p50_ms", statistics.median(latencies), "ms")
    # Nearest rank: of 50 samples the p99 is the 50th, the maximum itself.
    report("settle_latency_ms", latencies[math.ceil(0.99 * saves) - 1],
           "ms, p99 (target < 400: the 250 ms settle + 150)")
    report("settle_latency_max_ms", latencies[-1], "ms, the maximum")


# --------------------------------------------------------------------- main


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "processor": platform.processor(),
        "cpu_model": model,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": __import__("sqlite3").sqlite_version,
        "platform": platform.platform(),
    }


# ------------------------------------------------------- 10. pruning after history


def bench_prune_history(folder: Path, small: int, large: int, rounds: int) -> None:
    from commonroom.engine import proposal_texts

    print(f"[10] prune_history_ratio (prune after {small} and after {large} committed proposals)",
          flush=True)
    doc = write_doc(folder, "prune.md", "# Prune\n\n## Scratch\n\nstart\n")
    engine = open_engine(doc)
    host = sessions.mint_host_session(engine)
    agent = agent_of(engine, host)
    author = engine.conn.execute(
        "SELECT participant_id FROM sessions WHERE session_hash = ?", (hash_secret(agent),)
    ).fetchone()[0]
    medians: dict[int, float] = {}
    made = 0
    for target in (small, large):
        while made < target:
            made += 1
            proposed = dispatch.execute(engine, "workspace.propose", agent, {
                "region": "Prune/Scratch", "base_version": engine.current_version,
                "summary": f"churn {made}", "content": f"## Scratch\n\nchurn {made}\n",
            })
            proposal_id = proposed.result.proposal_id
            dispatch.execute(engine, "workspace.review", host,
                             {"proposal_id": proposal_id, "revision": 1, "decision": "approve"})
            dispatch.execute(engine, "workspace.commit", agent, {"proposal_id": proposal_id})
        samples = []
        with engine.transaction(engine.clock()) as tx:  # the queries alone, in one transaction
            for _ in range(rounds):
                t0 = time.perf_counter_ns()
                proposal_texts.prune(tx, author)
                samples.append(time.perf_counter_ns() - t0)
        medians[target] = median_us(samples)
        report(f"prune_after_{target}_us", medians[target], "µs median")
    report("prune_history_ratio", medians[large] / medians[small], "(about flat)")
    engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts (under a minute)")
    parser.add_argument("--only", default="", help="comma-separated steps to run")
    parser.add_argument("--child-unchanged", nargs=2, metavar=("DOC", "READS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_unchanged:
        child_unchanged(args.child_unchanged[0], int(args.child_unchanged[1]))
        return

    quick: bool = args.quick
    steps: list[tuple[str, Callable[[Path], None]]] = [
        ("read", lambda d: bench_read_scaling(d, 3000 if quick else 20000)),
        ("strace", lambda d: bench_unchanged_strace(d, 1000)),
        ("growth", lambda d: bench_storage_growth(d, 100 if quick else 1000)),
        ("ring", lambda d: bench_ring_trim(d, 10 if quick else 40, 250, 200 if quick else 1000)),
        ("commit", lambda d: bench_commit_cost(d, 15 if quick else 40)),
        ("oldread", lambda d: bench_old_read(d, 200 if quick else 1000)),
        ("rss", lambda d: bench_rss(d, 30 if quick else 100)),
        ("inplace", lambda d: bench_storage_growth_in_place(d, 100 if quick else 1000)),
        ("settle", lambda d: bench_settle_latency(d, 20 if quick else 50)),
        ("prune", lambda d: bench_prune_history(d, 100, 500 if quick else 2000, 200)),
    ]
    if args.only:
        wanted = set(args.only.split(","))
        steps = [step for step in steps if step[0] in wanted]
    FIGURES["quick"] = quick
    FIGURES["machine"] = machine()
    print(f"machine: {FIGURES['machine']}", flush=True)
    started = time.perf_counter()
    for name, step in steps:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"crbench-{name}-") as folder:
            step(Path(folder))
        print(f"  ({name} took {time.perf_counter() - t0:.1f} s)", flush=True)
    FIGURES["total_s"] = round(time.perf_counter() - started, 1)
    keys = [
        "read_scaling", "read_small_us", "read_big_us", "open_10mb_s", "commit_10mb_ms",
        "unchanged_file_reads", "unchanged_stats_per_read", "storage_growth_mb",
        "all_versions_exact", "commits_per_s", "ring_trim", "commit_cost_10mb",
        "old_read_scaling", "room_rss_ratio_10mb", "storage_growth_in_place_mb",
        "inplace_versions", "settle_latency_ms", "prune_history_ratio",
    ]
    final = {key: FIGURES.get(key) for key in keys}
    final.update({k: v for k, v in FIGURES.items() if k not in final})
    print(json.dumps(final, separators=(",", ":"), ensure_ascii=False))


if __name__ == "__main__":
    main()
