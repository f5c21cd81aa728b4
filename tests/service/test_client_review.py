"""The review conversation through `AsyncClient` and `Client` against a real room (issue 22).

Records decode from the wire (the contract's shapes), a blocking question's
`wait_for_reply` wakes on someone else's reply only, and revise and rebase
work from both clients.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import commonroom
from commonroom.protocol import records as r
from tests.service.conftest import LiveRoom

GOALS = "Plan/Goals"


async def test_async_client_asks_waits_for_the_reply_revises_and_rebases(
        live: LiveRoom, doc: Path) -> None:
    invitation = live.ready.invitation
    host = commonroom.AsyncClient(invitation, session=live.host_session)
    async with await commonroom.AsyncClient.join(invitation, name="asker") as bot:
        assert bot.joined is not None
        thread = await bot.ask("Goals", "Ship what?", quote="ship it", blocking=True)
        assert isinstance(thread, r.Thread) and thread.region == GOALS and thread.blocking
        assert isinstance(thread.comments[0], r.Comment)
        with pytest.raises(commonroom.InvalidRequest) as absent:
            await bot.ask("Goals", "?", quote="no such words")
        assert absent.value.details["reason"] == "quote_not_found"
        with pytest.raises(commonroom.NotFound):
            await bot.thread("th_missing")
        with pytest.raises(commonroom.Timeout):
            await bot.wait_for_reply(thread.thread_id, timeout=0.2)
        answered: list[r.Thread] = []

        async def wait() -> None:
            answered.append(await bot.wait_for_reply(thread.thread_id, timeout=20))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.sleep(0.05)
            await bot.reply(thread.thread_id, "(to myself)")  # the author's own: still waiting
            await trio.sleep(0.05)
            assert not answered
            await host.reply(thread.thread_id, "The release.")
        assert answered[0].comments[-1].body == "The release."
        listed = await bot.threads(region="Goals", status="open")
        assert [t.thread_id for t in listed.threads] == [thread.thread_id]
        assert (await bot.resolve_thread(thread.thread_id)).status == "resolved"

        text = await bot.read("Goals")
        made = await bot.propose("Goals", "## Goals\n\n- ship it\n- ship it well\n\n",
                                 base_version=text.version)
        await host.review(made.proposal_id, "request_changes", revision=made.revision,
                          comment="when?")
        revised = await bot.revise(made.proposal_id, "## Goals\n\n- ship it\n- ship it soon\n\n")
        assert revised.revision == 2 and revised.status == "pending"
        detail = await bot.proposal(made.proposal_id, revision=1)
        assert "ship it well" in detail.content and len(detail.revisions) == 2
        assert isinstance(detail.revisions[0], r.RevisionInfo)
        preview = await bot.rebase(made.proposal_id)
        assert isinstance(preview, r.Rebased) and preview.clean and not preview.applied


async def test_sync_client_thread_verbs(live: LiveRoom) -> None:
    invitation = live.ready.invitation

    def script() -> tuple[int, str, str]:
        host = commonroom.Client(invitation, session=live.host_session)
        with commonroom.Client.join(invitation, name="sync-asker") as bot:
            thread = bot.ask("Risks", "Which sky?", quote="Nothing yet.", blocking=True)
            host.reply(thread.thread_id, "The blue one.")
            # Answered before the wait began: it returns at once.
            answered = bot.wait_for_reply(thread.thread_id, timeout=5)
            text = bot.read("Risks")
            made = bot.propose("Risks", "## Risks\n\nSome.\n\n", base_version=text.version)
            with pytest.raises(commonroom.PermissionDenied):
                host.revise(made.proposal_id, "## Risks\n\nMine.\n\n")
            listed = host.threads(region="Risks")
            return len(answered.comments), listed.threads[0].thread_id, thread.thread_id

    count, listed, asked = await trio.to_thread.run_sync(script)
    assert count == 2 and listed == asked
