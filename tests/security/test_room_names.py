"""Issue 31, finding 10 (low): an agent could impersonate the host.

The attack: an agent joined as `host` (kind `human`) and its room text printed as
`host · …` in `ce messages`, where the host reads what the room said. Now names are
unique among those in the room, compared case-insensitively (and NFKC, punctuation
aside): a second `bot` becomes `bot-2` (docs/protocol.md decides to suffix, so an agent
that rejoins is never locked out); `host` and the host's own name are refused
(`name_reserved`); and a name that could still mislead (not plain ASCII, or alike to
another's) is shown by `ce` and the page with its kind and a short id.
"""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import browser, open_page, page  # noqa: F401
from tests.e2e.conftest import Room, ce


def test_nobody_joins_as_the_host_and_names_stay_unique(served: Room) -> None:
    room = served
    for name in ("host", "HOST", " Host ", "ｈｏｓｔ", "h.o.s.t"):
        invitation = room.invite()["invitation"]
        status, answer = room.call("POST", "/session/join", None,
                                   {"invite": invitation, "name": name, "kind": "human"})
        assert status == 400, (name, answer)
        assert answer["details"]["reason"] == "name_reserved", answer
        # The refusal spent nothing: the invitation still joins under another name.
        assert room.join("someone", invitation=invitation)["name"].startswith("someone")
    names = [room.join(name)["name"] for name in ("bot", "bot", "BOT", "Bot-2")]
    assert names == ["bot", "bot-2", "BOT-3", "Bot-2-2"]
    participants = room.ok("GET", "/workspace/participants", room.host_session)["participants"]
    assert sum(1 for p in participants if p["name"].casefold() == "host") == 1


def test_a_lookalike_name_is_shown_with_its_kind_and_id(served: Room) -> None:
    room = served
    sly = room.join("hоst")  # a Cyrillic "о": not the host's name, but it reads like it
    room.ok("POST", "/workspace/message", sly["session_id"], {"text": "approve everything now"})
    result = ce("say", str(room.doc), "I approve what I read")
    assert result.returncode == 0, result.stderr
    out = ce("messages", str(room.doc)).stdout
    forged = next(line for line in out.splitlines() if "approve everything" in line)
    assert f"(agent {sly['participant_id'][:7]})" in forged, out
    mine = next(line for line in out.splitlines() if "I approve what I read" in line)
    assert " host · " in mine and "(agent" not in mine, out


def test_the_page_shows_a_lookalike_with_its_kind_and_id(page: Any, served: Room) -> None:  # noqa: F811
    room = served
    open_page(page, room)
    sly = room.join("Hоst")  # a Cyrillic "о"
    read = room.read(sly["session_id"], "Risks")
    proposal = room.ok("POST", "/workspace/propose", sly["session_id"], {
        "region": "Risks", "base_version": read["version"], "summary": "from the host, honest",
        "content": read["content"] + "- Nothing else.\n\n"})
    page.locator(f"[data-proposal='{proposal['proposal_id']}']").click()
    provenance = page.locator("#review-provenance")
    provenance.wait_for()
    page.wait_for_function(
        "id => document.getElementById('review-provenance').textContent.includes(id)",
        arg=sly["participant_id"][:7])
    assert f"Hоst (agent {sly['participant_id'][:7]})" in provenance.inner_text()
