"""Resident agents in the host's page, in real Chromium (docs/spec/PROTOCOL.md section 19): a real
`ce agent` over the scripted ACP agent asks for permission; the card shows the exact options and
the input preview; the host's click returns exactly that option to the agent; the participant
row says "resident · running"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import open_page, run_axe
from tests.e2e.conftest import Room
from tests.e2e.test_resident_agent import ResidentAgent, _say, eventually


def test_a_permission_card_answers_the_agent_with_the_clicked_option(
    room: Room, page: Any, tmp_path: Path,
) -> None:
    bot = ResidentAgent(room, tmp_path)
    try:
        open_page(page, room)
        _say(room, "please ask permission", "bot")
        card = page.locator(".permission-card")
        expect(card).to_have_count(1, timeout=30_000)
        expect(card.locator(".permission-who")).to_contain_text("bot asks: Run the tests")
        expect(card.locator(".permission-preview")).to_have_text(
            json.dumps({"command": "pytest -q"}, sort_keys=True))
        expect(card.locator(".permission-options button")).to_have_text(["Allow once", "Reject"])
        row = page.locator("#people li[data-participant]", has_text="bot")
        expect(row.locator(".runtime")).to_contain_text("resident · running")
        expect(row.locator(".runtime")).to_contain_text("waiting for the host")
        expect(row.get_by_role("button", name="Interrupt bot's turn")).to_be_visible()
        assert run_axe(page) == []
        card.get_by_role("button", name="Allow once").click()
        expect(card).to_have_count(0)
        outcome = eventually(lambda: bot.entries("permission"), "the agent got the click")
        assert outcome == [{"event": "permission", "outcome": "allow-once"}]
        expect(row.locator(".runtime")).to_contain_text("resident · idle", timeout=30_000)
    finally:
        bot.stop()


def test_interrupt_in_the_page_cancels_the_running_turn(
    room: Room, page: Any, tmp_path: Path,
) -> None:
    bot = ResidentAgent(room, tmp_path)
    try:
        open_page(page, room)
        _say(room, "take your time", "bot")
        row = page.locator("#people li[data-participant]", has_text="bot")
        expect(row.locator(".runtime")).to_contain_text("resident · running", timeout=30_000)
        row.get_by_role("button", name="Interrupt bot's turn").click()
        eventually(lambda: bot.entries("cancelled"), "the agent's turn was cancelled")
        expect(row.locator(".runtime")).to_contain_text("resident · idle", timeout=30_000)
        expect(row.locator(".runtime")).to_contain_text("the host interrupted the turn")
    finally:
        bot.stop()
