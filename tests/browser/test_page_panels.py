"""The page's panels are chosen by each event's resources (/protocol's event catalogue).

An event reaches the panels whose `resources` meet the event's: here the Invitations panel,
for invitations the host makes outside the page (`ce invite` does it this way), with no
reload and no other event to carry it.
"""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import open_page
from tests.e2e.conftest import Room


def test_an_invitation_made_outside_the_page_shows_and_leaves_live(page: Any, room: Room) -> None:
    open_page(page, room)
    page.locator("#invitations li").first.wait_for()  # the panel's first read is done
    made = room.host.ok("POST", "/workspace/invite", {"label": "made at the terminal"})
    row = page.locator("#invitations li", has_text="made at the terminal")
    row.wait_for()
    assert made["invitation"].startswith("commonroom://join/")
    listed = room.host.ok("GET", "/workspace/invitations?limit=50")["invitations"]
    invite_id = next(i["invite_id"] for i in listed if i["label"] == "made at the terminal")
    room.host.ok("POST", "/workspace/invite/revoke", {"invite_id": invite_id})
    # Into the collapsed group of used, expired and revoked ones (closed: attached, not visible).
    page.locator("#invitations-old-list li", has_text="made at the terminal").wait_for(state="attached")
    assert page.locator("#invitations li", has_text="made at the terminal").count() == 0
