"""Engine costs of the room beyond the document: room text, the loop guard, handoffs, attachments.

Usage: ``python tools/bench/bench_room_text.py``  (about 30 s)

Measures on a real sidecar (temporary folder, deleted at the end), through
`dispatch.execute` (the path every adapter takes, fsync'd commits included):

1. ``message_ms_young`` / ``message_ms_full``: median latency of one
   unaddressed `workspace.message` with ~100 messages stored vs with the
   5,000-message bound full (every send then drops one); ``message_full_ratio``
   is their ratio (the bound must not make sending slower as history grows).
2. ``addressed_message_ms``: the same with `to` (one guard admission).
3. ``handoff_cycle_ms``: request -> accept -> result(completed), three calls.
4. ``attachment_768k_ms``: one 768 KiB text attachment (base64 decode, sniff,
   store); ``attachment_get_768k_ms``: reading it back.

The last line is one JSON object with every figure.
"""

from __future__ import annotations

import base64
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from commonroom.engine import dispatch, sessions  # noqa: E402
from commonroom.engine.core import Engine  # noqa: E402
from commonroom.engine.dispatch import open_engine  # noqa: E402
from commonroom.protocol import limits  # noqa: E402
from commonroom.protocol.invitation import TransportHint  # noqa: E402

FIGURES: dict[str, Any] = {}


def call(engine: Engine, op: str, bearer: str | None, **params: Any) -> Any:
    outcome = dispatch.execute(engine, op, bearer, params)
    if outcome.error is not None:
        raise outcome.error
    return outcome.result


def median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def figure(name: str, value: float) -> None:
    FIGURES[name] = round(value, 3)
    print(f"{name}: {FIGURES[name]}", flush=True)


def join(engine: Engine, host: str, name: str) -> Any:
    invite = call(engine, "workspace.invite", host)
    return call(engine, "session.join", None, invite=invite.invitation, name=name)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="commonroom-bench-") as folder:
        path = Path(folder) / "doc.md"
        path.write_text("# Doc\n\ntext\n")
        engine = open_engine(path)
        engine.ports.transport_hint = TransportHint("loopback", False, "private", "127.0.0.1", 9)
        host = sessions.mint_host_session(engine)
        a, b = join(engine, host, "a"), join(engine, host, "b")
        sa, sb = a.session_id, b.session_id
        for i in range(100):
            call(engine, "workspace.message", sa, text=f"warm {i}")
        young = median_ms(lambda: call(engine, "workspace.message", sa, text="hello room"), 300)
        figure("message_ms_young", young)
        filler = limits.MESSAGES_KEPT + 100
        for i in range(filler):
            call(engine, "workspace.message", sa, text=f"fill {i}")
        full = median_ms(lambda: call(engine, "workspace.message", sa, text="hello room"), 300)
        figure("message_ms_full", full)
        figure("message_full_ratio", full / young)
        kept = engine.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        assert kept == limits.MESSAGES_KEPT, kept

        # Addressed turns: b -> a, under the guard (20 per 5 minutes: use fresh pairs).
        people = [join(engine, host, f"p{i}") for i in range(15)]
        counter = iter(range(10**6))

        def addressed() -> None:
            who = people[next(counter) % len(people)]
            call(engine, "workspace.message", sb, text="your turn", to=[who.participant_id])

        figure("addressed_message_ms", median_ms(addressed, 15 * 19))

        def cycle() -> None:
            h = call(engine, "handoff.request", sa, to_participant_id=b.participant_id, summary="x")
            call(engine, "handoff.respond", sb, handoff_id=h.handoff_id, decision="accept")
            call(engine, "handoff.result", sb, handoff_id=h.handoff_id, status="completed",
                 summary="done")

        figure("handoff_cycle_ms", median_ms(cycle, 19))
        data = base64.b64encode(b"a" * limits.ATTACHMENT_MAX_BYTES).decode()
        ids: list[str] = []

        def add() -> None:
            ids.append(call(engine, "attachment.add", sa, file_name="big.txt",
                            mime_type="text/plain", data_base64=data).attachment_id)

        figure("attachment_768k_ms", median_ms(add, 20))
        figure("attachment_get_768k_ms", median_ms(
            lambda: call(engine, "attachment.get", sb, attachment_id=ids[-1]), 20))
        engine.close()
    FIGURES["machine"] = f"{platform.machine()} {platform.python_version()}"
    print(json.dumps(FIGURES))


if __name__ == "__main__":
    main()
