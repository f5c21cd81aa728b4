"""What wakes a resident agent (cli/attention.py) and how ACP messages map to the room
(cli/acp.py): pure functions, every attention rule of docs/spec/PROTOCOL.md section 19."""

from __future__ import annotations

from typing import Any

from commonroom.cli import acp
from commonroom.cli.attention import Attention, describe, prompt_text

ME, HOST, OTHER = "pt_me", "pt_host", "pt_other"
NAMES = {ME: "bot", HOST: "host", OTHER: "drafter"}


def ev(n: int, kind: str, /, **payload: Any) -> dict[str, Any]:
    return {"event_id": n, "type": kind, "payload": payload}


def test_room_text_wakes_only_when_addressed_and_never_by_itself() -> None:
    a = Attention(ME)
    assert a.wake(ev(1, "message.sent", participant_id=HOST, to=[], text="hi",
                     message_id="m1", handoff_id=None)) is None
    assert a.wake(ev(2, "message.sent", participant_id=HOST, to=[OTHER], text="hi",
                     message_id="m2", handoff_id=None)) is None
    assert a.wake(ev(3, "message.sent", participant_id=ME, to=[ME], text="hi",
                     message_id="m3", handoff_id=None)) is None
    wake = a.wake(ev(4, "message.sent", participant_id=HOST, to=[ME, OTHER], text="tighten",
                     message_id="m4", handoff_id=None))
    assert wake is not None and wake["from"] == HOST and wake["text"] == "tighten"


def test_a_handoff_to_it_wakes_it_others_do_not() -> None:
    a = Attention(ME)
    assert a.wake(ev(1, "handoff.requested", handoff_id="h1", from_participant_id=HOST,
                     to_participant_id=OTHER, summary="x")) is None
    wake = a.wake(ev(2, "handoff.requested", handoff_id="h2", from_participant_id=HOST,
                     to_participant_id=ME, summary="take Risks"))
    assert wake is not None and wake["handoff_id"] == "h2"


def test_decisions_and_comments_on_its_own_proposal_wake_it() -> None:
    a = Attention(ME)
    a.wake(ev(1, "proposal.created", proposal_id="pr_mine", participant_id=ME, region="R",
              base_version=1, summary="s"))
    a.wake(ev(2, "proposal.created", proposal_id="pr_theirs", participant_id=OTHER, region="R",
              base_version=1, summary="s"))
    for kind in ("proposal.approved", "proposal.rejected", "proposal.superseded"):
        assert a.wake(ev(3, kind, proposal_id="pr_theirs", reviewer_id=HOST)) is None
        assert a.wake(ev(4, kind, proposal_id="pr_mine", reviewer_id=HOST)) is not None
    assert a.wake(ev(5, "proposal.changes_requested", proposal_id="pr_mine", reviewer_id=HOST,
                     comment="more")) is not None
    assert a.wake(ev(6, "proposal.committed", proposal_id="pr_mine", version=2)) is None
    opened = a.wake(ev(7, "thread.opened", thread_id="th_1", region="R", participant_id=HOST,
                       blocking=False, proposal_id="pr_mine"))
    assert opened is not None and opened["proposal_id"] == "pr_mine"
    replied = a.wake(ev(8, "thread.replied", thread_id="th_1", region="R", participant_id=OTHER,
                        comment_id="c1"))
    assert replied is not None and replied["proposal_id"] == "pr_mine"
    assert a.wake(ev(9, "thread.replied", thread_id="th_1", region="R", participant_id=ME,
                     comment_id="c2")) is None
    assert a.wake(ev(10, "thread.opened", thread_id="th_2", region="R", participant_id=HOST,
                     blocking=False, proposal_id="pr_theirs")) is None


def test_a_reply_on_a_thread_it_opened_wakes_it_and_the_memory_survives() -> None:
    a = Attention(ME)
    a.wake(ev(1, "thread.opened", thread_id="th_q", region="R", participant_id=ME,
              blocking=True, proposal_id=None))
    again = Attention(ME, a.memory())  # a restarted runtime
    assert again.wake(ev(2, "thread.replied", thread_id="th_q", region="R",
                         participant_id=HOST, comment_id="c")) is not None
    assert again.wake(ev(3, "thread.replied", thread_id="th_elsewhere", region="R",
                         participant_id=HOST, comment_id="c")) is None


def test_others_commits_and_observation_never_wake() -> None:
    a = Attention(ME)
    for event in (ev(1, "change.committed", version=2, summary="s", participant_id=OTHER,
                     region="R", source="proposal"),
                  ev(2, "lease.acquired", lease_id="l", participant_id=OTHER, region="R",
                     expires_at="x"),
                  ev(3, "participant.joined", participant_id=OTHER, kind="agent", name="d",
                     capabilities=[])):
        assert a.wake(event) is None


def test_its_own_actions_are_recognised() -> None:
    a = Attention(ME)
    assert a.is_action(ev(1, "message.sent", participant_id=ME, to=[], text="x",
                          message_id="m", handoff_id=None))
    assert a.is_action(ev(2, "change.committed", version=2, summary="s", participant_id=ME,
                          region="R", source="proposal"))
    assert a.is_action(ev(3, "handoff.accepted", handoff_id="h", from_participant_id=HOST,
                          to_participant_id=ME, summary="s"))
    assert not a.is_action(ev(4, "message.sent", participant_id=HOST, to=[ME], text="x",
                              message_id="m", handoff_id=None))


def test_the_prompt_says_who_what_where_with_names_and_ids() -> None:
    wakes = [
        {"type": "message.sent", "from": HOST, "text": "tighten Risks", "message_id": "msg_1"},
        {"type": "proposal.approved", "from": HOST, "proposal_id": "pr_1", "text": None},
    ]
    text = prompt_text(wakes, NAMES, me="bot (pt_me)", room="ws_1")
    assert "host (pt_host) wrote to you (message msg_1):\n> tighten Risks" in text
    assert "2. host (pt_host) approved your proposal pr_1." in text
    assert describe({"type": "thread.replied", "from": OTHER, "thread_id": "th_1",
                     "region": "R", "text": "why?"}, NAMES).startswith(
        "drafter (pt_other) replied in thread th_1 you opened")


def test_a_permission_prompt_keeps_the_exact_options_and_bounds_the_preview() -> None:
    body = acp.permission_request({
        "sessionId": "s", "toolCall": {"toolCallId": "t", "title": "Run\x1b[31m it",
                                       "kind": "execute", "rawInput": {"cmd": "x" * 900}},
        "options": [{"optionId": "a-1", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "r", "name": "Reject", "kind": "odd"}]})
    assert body["options"] == [{"option_id": "a-1", "name": "Allow", "kind": "allow_once"},
                               {"option_id": "r", "name": "Reject", "kind": "reject_once"}]
    assert "\x1b" not in body["title"] and len(body["input_preview"]) == 500
    assert acp.selected("a-1") == {"outcome": {"outcome": "selected", "optionId": "a-1"}}


def test_an_env_auth_method_is_used_only_when_its_variables_are_set() -> None:
    methods = [{"id": "login"}, {"type": "env_var", "id": "key", "vars": [{"name": "K"}]}]
    assert acp.env_auth_method(methods, {}) is None
    assert acp.env_auth_method(methods, {"K": "v"}) == "key"


def test_the_peer_matches_answers_and_sorts_what_the_agent_sends() -> None:
    peer = acp.AcpPeer()
    rid, line = peer.request("initialize", {"protocolVersion": 1})
    assert line.endswith(b"\n")
    got = peer.receive(b'{"jsonrpc":"2.0","id":%d,"result":{"protocolVersion":1}}\nnot json\n'
                       % rid + b'{"jsonrpc":"2.0","method":"session/update","params":{}}\n'
                       + b'{"jsonrpc":"2.0","id":"x","method":"session/request_permission",'
                       + b'"params":{}}\n{"jsonrpc":"2.0","id":99,"result":{}}\n')
    assert [type(m).__name__ for m in got] == ["Answer", "Notification", "AgentRequest"]
