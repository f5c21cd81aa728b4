"""Agent text fits the document, on a real `ce serve` over HTTP (PROTOCOL section 7).

The texts a language model really sends for a section: without a final newline, without the
blank line before the next heading, with a blank line too many, in CRLF, wrapped in a code
fence, with its heading changed or left out. Each row is sent to a real room; an accepted one
is approved and committed and the file is checked byte for byte (its `cat -A` view), a refused
one must name its one cause and line and leave the file alone.
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import Http, Room
from tests.e2e.review_support import VERSION

pytestmark = pytest.mark.e2e


def cat_a(room: Room) -> str:
    """The document as `cat -A` shows it: every line end a `$`, a CR a `^M`."""
    return subprocess.run(["cat", "-A", str(room.doc)], capture_output=True, text=True,
                          check=True, timeout=30).stdout


def shown(text: str) -> str:
    """What `cat -A` shows of `text` (only what these rows hold: ASCII, LF and CR, one é)."""
    return text.replace("\r", "^M").replace("\n", "$\n").replace("é", "M-CM-)")


def approve(room: Room, proposal_id: str) -> None:
    """The host approves the revision it read."""
    shown = room.host.ok("GET", f"/workspace/proposal?proposal_id={proposal_id}")
    room.host.ok("POST", "/workspace/proposal/review",
                 {"proposal_id": proposal_id, "decision": "approve", "revision": shown["revision"]})


def region_text(agent: Http, region: str) -> str:
    text: str = agent.ok("GET", f"/workspace/read?region={urllib.parse.quote(region)}")["content"]
    return text


# (what the agent did, region, content sent (or made of the region's text as read), what the
# room must do): ("fits", the fitted text as the file must hold it) or ("refused", reason,
# cause, line, words of its fix).
ROWS: list[tuple[str, str, str | Callable[[str], str], tuple[Any, ...]]] = [
    ("no final newline", "Risks",
     "## Risks\n\n- Spine recognition may be poor.\n- Books that never come back.",
     ("fits", "## Risks\n\n- Spine recognition may be poor.\n- Books that never come back.\n\n")),
    ("no separator blank line", "Who it is for",
     "## Who it is for\n\n- People who read a book or two a month.\n",
     ("fits", "## Who it is for\n\n- People who read a book or two a month.\n\n")),
    ("only trailing blank lines differ", "Problem", lambda read: read.rstrip("\n") + "\n\n\n\n",
     ("refused", "no_change", None, None, None)),
    ("only the final newline missing", "Problem", lambda read: read.rstrip("\n"),
     ("refused", "no_change", None, None, None)),
    ("heading level changed", "The idea", "### The idea\n\nA private catalogue.\n",
     ("refused", "outline_outside_region", "heading_level_changed", 1, "keep its level, `## The idea`")),
    ("heading missing", "The idea", "Each member photographs the spines on their shelf.\n",
     ("refused", "outline_outside_region", "heading_missing", 1,
      "the text must start with the section's heading line `## The idea`")),
    ("fenced whole text", "The idea", "```markdown\n## The idea\n\nA private catalogue.\n```",
     ("refused", "outline_outside_region", "fenced_whole_text", 1,
      "your text is wrapped in a ```markdown fence (line 1): send the section's markdown itself")),
    ("CRLF", "First milestone", "## First milestone\r\n\r\nA pilot on two streets.\r\n",
     ("fits", "## First milestone\n\nA pilot on two streets.\n\n")),
    ("heading renamed", "What we will not build (yet)",
     "## Not yet\n\n- Payments, deposits or ratings of people.\n",
     ("fits", "## Not yet\n\n- Payments, deposits or ratings of people.\n\n")),
    ("last section, blank lines too many", "Open questions",
     "## Open questions\n\n- Web or phone?\n\n\n",
     ("fits", "## Open questions\n\n- Web or phone?\n")),
]


def test_llm_shaped_texts_fit_or_are_refused_with_their_cause(served: Room) -> None:
    room = served
    agent = room.agent("drafter")
    expected = room.doc.read_text()
    for what, region, made, outcome in ROWS:
        current = region_text(agent, region)
        content = made if isinstance(made, str) else made(current)
        status, answer, _ = agent.call("POST", "/workspace/propose", {
            "region": region, "base_version": room.version(), "summary": what, "content": content})
        if outcome[0] == "refused":
            _, reason, cause, line, fix = outcome
            assert status == 400 and answer["error"] == "invalid_request", (what, answer)
            assert answer["details"]["reason"] == reason, (what, answer)
            if cause is not None:
                assert (answer["details"]["cause"], answer["details"]["line"]) == (cause, line), (
                    what, answer)
                assert fix in answer["message"], (what, answer)
        else:
            assert status == 200, (what, answer)
            approve(room, answer["proposal_id"])
            agent.ok("POST", "/workspace/commit", {"proposal_id": answer["proposal_id"]})
            fitted = outcome[1]
            expected = expected.replace(current, fitted)
        # byte for byte, as `cat -A` shows it: refused rows changed nothing
        assert cat_a(room) == shown(expected), what
        assert "^M" not in cat_a(room)
    view = cat_a(room)
    # the next heading never glues to the text: its blank line is kept
    assert "- Books that never come back.$\n$\n## First milestone$\n" in view
    assert "- People who read a book or two a month.$\n$\n## The idea$\n" in view
    assert "A pilot on two streets.$\n$\n## Open questions$\n" in view
    assert "## Not yet$\n$\n- Payments, deposits or ratings of people.$\n$\n## Risks$\n" in view
    assert view.endswith("- Web or phone?$\n")


def test_the_refusal_reads_the_same_in_an_mcp_tool_result(served: Room) -> None:
    agent = served.agent("mcp-drafter")
    tool = _tool_name(agent, "workspace.propose")
    result = _tools_call(agent, tool, {"region": "The idea", "base_version": served.version(),
                                       "summary": "heading", "content": "### The idea\n\nNew.\n"})
    assert result["isError"] is True, result
    error = json.loads(result["content"][0]["text"])
    assert error["details"]["cause"] == "heading_level_changed" and error["details"]["line"] == 1
    assert "keep its level, `## The idea`" in error["message"]


def test_two_one_line_changes_to_one_section_without_the_separator_rebase_cleanly(
        served: Room) -> None:
    """Each agent drops the blank line before the next heading; fitted, neither text touches
    that line, so the second proposal's three-way rebase merges instead of conflicting."""
    room = served
    first, second = room.agent("first"), room.agent("second")
    risks = region_text(first, "Risks")
    lines = risks.split("\n")
    assert lines[2].startswith("- Spine") and lines[-3].endswith("request is accepted.")
    one = list(lines)
    one[2] = "- Spine recognition may be poor for worn titles; manual entry"
    two = list(lines)
    two[-3] = "  never addresses, until a request is accepted by both."
    base = room.version()
    sent = ["\n".join(one).rstrip("\n") + "\n", "\n".join(two).rstrip("\n") + "\n"]
    proposals = [room.propose(agent, "Risks", text, "one line")
                 for agent, text in zip((first, second), sent, strict=True)]
    assert all(p["base_version"] == base for p in proposals)
    approve(room, proposals[0]["proposal_id"])
    first.ok("POST", "/workspace/commit", {"proposal_id": proposals[0]["proposal_id"]})
    rebased = second.ok("POST", "/workspace/proposal/rebase",
                        {"proposal_id": proposals[1]["proposal_id"], "apply": True})
    assert rebased["clean"] is True and rebased["conflicts"] == [], rebased
    assert rebased["applied"] is True
    approve(room, proposals[1]["proposal_id"])
    second.ok("POST", "/workspace/commit", {"proposal_id": proposals[1]["proposal_id"]})
    merged = "\n".join([*lines[:2], one[2], *lines[3:-3], two[-3], *lines[-2:]])
    assert region_text(first, "Risks") == merged
    assert "by both.$\n$\n## First milestone$\n" in cat_a(room)


def _tools_call(agent: Http, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return _mcp(agent, "tools/call", {"name": name, "arguments": arguments}, name)


def _tool_name(agent: Http, operation: str) -> str:
    """The MCP tool of an operation, as the room lists it (its spelling is the MCP
    adapter's business)."""
    listed = _mcp(agent, "tools/list", {}, None)["tools"]
    names = [tool["name"] for tool in listed
             if tool["name"].replace("_", ".") == operation.replace("_", ".")]
    assert len(names) == 1, [tool["name"] for tool in listed]
    return str(names[0])


def _mcp(agent: Http, method: str, params: dict[str, Any], name: str | None) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"}}}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION,
               "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    status, answer, _ = agent.call("POST", "/mcp", message, headers=headers)
    assert status == 200, answer
    result: dict[str, Any] = answer["result"]
    return result
