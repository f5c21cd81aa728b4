"""Issue 31, finding 7 (medium): thread spam.

The attack: threads bypassed the room-text budget (60 per 5 minutes), anyone could
reply to any thread, resolved ones included, comments were never pruned (4.8 MiB a
minute per agent, kept for ever), and the page read every comment again at each event
(31 MB per refresh at 3,800 comments). Now a new thread and a reply count against the
author's room-text budget with its messages (429 `scope: "message_budget"`), a
stranger's reply to a resolved thread is refused (its author or the host reopens it),
the room keeps its newest comments (each thread keeps its question), and
`GET /workspace/threads?since=` answers only what changed, which the page uses. A real
room on 127.0.0.1 (hypercorn, a real sidecar); the bystander is the hostile suite's.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import trio

from commonroom.protocol import limits
from tests.reliability.test_hostile import while_served
from tests.service.conftest import LiveRoom, doc, start_room  # noqa: F401 - the doc fixture

BODY = "spam " * 1600  # 8,000 bytes: just under a comment's 8 KiB


async def _ok(live: LiveRoom, method: str, path: str, bearer: str, body: Any = None) -> Any:
    answer = await live.call(method, path, bearer, body)
    assert answer.status == 200, answer.body
    return answer.json()


async def test_thread_spam_is_budgeted_and_does_not_slow_the_room(doc: Path) -> None:  # noqa: F811
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        try:
            spammer = (await live.join("spammer"))["session_id"]
            bystander = (await live.join("bystander"))["session_id"]
            thread = await _ok(live, "POST", "/workspace/thread", spammer,
                               {"region": "Risks", "body": "a question"})
            await _ok(live, "POST", "/workspace/message", spammer, {"text": "hello"})
            answers: list[tuple[int, Any]] = []

            async def spam() -> None:
                async def one_connection() -> None:
                    for _ in range(25):
                        answer = await live.call("POST", "/workspace/thread/reply", spammer,
                                                 {"thread_id": thread["thread_id"], "body": BODY})
                        answers.append((answer.status, answer.json()))

                async with trio.open_nursery() as inner:
                    for _ in range(4):
                        inner.start_soon(one_connection)

            await while_served(live.ready.ingress_port, bystander, spam)
            # The thread's question and the message used two of the 60.
            accepted = [body for code, body in answers if code == 200]
            refused = [body for code, body in answers if code == 429]
            assert len(accepted) == limits.MESSAGE_BUDGET - 2
            assert len(refused) == 100 - len(accepted)
            assert {body["details"]["scope"] for body in refused} == {"message_budget"}
            status = await live.call("POST", "/workspace/thread", spammer,
                                     {"region": "Goals", "body": "another"})
            assert status.status == 429
            message = await live.call("POST", "/workspace/message", spammer, {"text": "hi"})
            assert message.status == 429
            # The host has no budget.
            await _ok(live, "POST", "/workspace/thread/reply", live.host_session,
                      {"thread_id": thread["thread_id"], "body": "enough"})
        finally:
            live.stop.set()


async def test_strangers_do_not_reply_to_a_resolved_thread(doc: Path) -> None:  # noqa: F811
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        try:
            author = (await live.join("author"))["session_id"]
            stranger = (await live.join("stranger"))["session_id"]
            thread = await _ok(live, "POST", "/workspace/thread", author,
                               {"region": "Risks", "body": "settled?"})
            await _ok(live, "POST", "/workspace/thread/resolve", author,
                      {"thread_id": thread["thread_id"], "resolved": True})
            refused = await live.call("POST", "/workspace/thread/reply", stranger,
                                      {"thread_id": thread["thread_id"], "body": "reopen!"})
            assert refused.status == 403 and refused.json()["error"] == "permission_denied"
            reopen = await live.call("POST", "/workspace/thread/resolve", stranger,
                                     {"thread_id": thread["thread_id"], "resolved": False})
            assert reopen.status == 403
            # Its author (or the host) may still add a word, and reopen it for everyone.
            await _ok(live, "POST", "/workspace/thread/reply", author,
                      {"thread_id": thread["thread_id"], "body": "one more thing"})
            await _ok(live, "POST", "/workspace/thread/resolve", live.host_session,
                      {"thread_id": thread["thread_id"], "resolved": False})
            await _ok(live, "POST", "/workspace/thread/reply", stranger,
                      {"thread_id": thread["thread_id"], "body": "now I may"})
        finally:
            live.stop.set()


async def test_comments_are_pruned_and_read_by_what_changed(doc: Path,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "THREAD_COMMENTS_KEPT", 30)  # the room's 2,000, made small
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc)
        try:
            host = live.host_session
            threads = [await _ok(live, "POST", "/workspace/thread", host,
                                 {"region": "Risks", "body": f"question {n}"}) for n in range(3)]
            for n in range(40):
                await _ok(live, "POST", "/workspace/thread/reply", host,
                          {"thread_id": threads[n % 3]["thread_id"], "body": f"reply {n}"})
            listed = (await _ok(live, "GET", "/workspace/threads?limit=200", host))["threads"]
            bodies = [c["body"] for t in listed for c in t["comments"]]
            assert len(bodies) <= 30 + 3
            assert all(f"question {n}" in bodies for n in range(3))  # each keeps its question
            assert "reply 39" in bodies and "reply 0" not in bodies
            # What the page reads after an event: the threads that changed, not all of them.
            newest = max(t["updated_at"] for t in listed)
            await _ok(live, "POST", "/workspace/thread/reply", host,
                      {"thread_id": threads[0]["thread_id"], "body": "latest"})
            changed = (await _ok(live, "GET", "/workspace/threads?since=" + urllib.parse.quote(newest), host))
            ids = {t["thread_id"] for t in changed["threads"]}
            assert threads[0]["thread_id"] in ids and len(ids) <= 2
        finally:
            live.stop.set()
