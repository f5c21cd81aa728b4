"""Provenance (engine/blame.py, restore.py, policies.py; docs/spec/PROTOCOL.md section 18)."""

from __future__ import annotations

import difflib
import random
from typing import Any

import pytest

from commonroom.engine.restore import three_way_undo
from tests.conftest import Driver

GOALS = "## Goals\n\n- ship it\n- ship it well\n\n"


def commit(room: Driver, agent: str, region: str, content: str, *, amend: str | None = None,
           summary: str = "edit") -> dict[str, Any]:
    prop = room.call("workspace.propose", agent, region=region, base_version=room.version,
                     summary=summary, content=content)
    if prop["status"] == "pending":
        params: dict[str, Any] = {"proposal_id": prop["proposal_id"],
                "revision": prop["revision"], "decision": "approve"}
        if amend is not None:
            params["content"] = amend
        room.call("workspace.review", room.host, **params)
    done: dict[str, Any] = room.call("workspace.commit", agent, proposal_id=prop["proposal_id"])
    done["proposal"] = prop
    return done


def lines_of(room: Driver, region: str = "workspace", version: int | None = None
             ) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"region": region}
    if version is not None:
        params["version"] = version
    answer = room.call("workspace.blame", room.host, **params)
    lines: list[dict[str, Any]] = answer["lines"]
    return lines


def external_save(room: Driver, text: str) -> None:
    room.engine.path.write_text(text)
    room.clock.advance(seconds=5)  # past the settle: the next call records it
    room.call("workspace.status", room.host)
    room.clock.advance(seconds=5)
    room.call("workspace.status", room.host)


# -- blame -------------------------------------------------------------------------------


def test_blame_names_agents_the_host_editor_and_the_amending_reviewer(room: Driver) -> None:
    ada = room.join("ada")
    bob = room.join("bob")
    first = commit(room, ada["session_id"], "Goals", GOALS)
    second = commit(room, bob["session_id"], "Risks",
                    "## Risks\n\nNothing yet.\nA storm.\n\n",
                    amend="## Risks\n\nNothing yet.\nA big storm.\n\n")
    text = room.engine.path.read_text()
    external_save(room, text.replace("The end.", "The very end."))
    lines = lines_of(room)
    assert [line["text"] for line in lines] == room.engine.path.read_text().split("\n")[:-1]
    by_text = {line["text"]: line for line in lines}
    assert by_text["- ship it well"]["name"] == "ada"
    assert by_text["- ship it well"]["kind"] == "agent"
    assert by_text["- ship it well"]["version"] == first["version"]
    assert by_text["- ship it well"]["proposal_id"] == first["proposal_id"]
    assert by_text["- ship it well"]["amended_by"] is None
    storm = by_text["A big storm."]
    assert storm["name"] == "bob" and storm["proposal_id"] == second["proposal_id"]
    assert storm["amended_by"] == room.engine.host_participant_id
    assert by_text["The very end."]["kind"] == "host_editor"
    assert by_text["# Plan"]["kind"] == "host_editor" and by_text["# Plan"]["version"] == 1
    # a region: the document's line numbers, only its lines
    goals = lines_of(room, "Goals")
    assert goals[0]["text"] == "## Goals" and goals[0]["line"] == 5
    # an older version
    old = lines_of(room, "workspace", first["version"])
    assert "A big storm." not in {line["text"] for line in old}


def test_blame_of_a_missing_region_or_version_is_a_clear_error(room: Driver) -> None:
    assert room.error("workspace.blame", room.host, region="Nope").code == "invalid_region"
    assert room.error("workspace.blame", room.host, version=99).code == "version_not_found"


def _oracle(texts: list[str]) -> list[int]:
    """Line origins of the last text, replaying every version over whole-document line lists."""
    origins: list[int] = []
    previous: list[str] = []
    for version, text in enumerate(texts, start=1):
        lines = [line + "\n" for line in text.split("\n")]  # only "\n" ends a line
        if lines[-1] == "\n":
            lines.pop()
        else:
            lines[-1] = lines[-1][:-1]
        if version == 1:
            origins = [1] * len(lines)
        else:
            head = 0
            while head < min(len(previous), len(lines)) and previous[head] == lines[head]:
                head += 1
            tail = 0
            while (tail < min(len(previous), len(lines)) - head
                   and previous[-1 - tail] == lines[-1 - tail]):
                tail += 1
            # in between, lines are compared without their newline (a last line gaining one
            # is the same line)
            old_mid = [line.rstrip("\n") for line in previous[head:len(previous) - tail]]
            new_mid = [line.rstrip("\n") for line in lines[head:len(lines) - tail]]
            mid = [version] * len(new_mid)
            kept = origins[head:len(origins) - tail]
            matcher = difflib.SequenceMatcher(None, old_mid, new_mid, autojunk=False)
            for a, b, size in matcher.get_matching_blocks():
                mid[b:b + size] = kept[a:a + size]
            origins = origins[:head] + mid + origins[len(origins) - tail:]
        previous = lines
    return origins


@pytest.mark.parametrize("seed", range(8))
def test_blame_follows_every_kind_of_edit_like_a_full_replay(room: Driver, seed: int) -> None:
    """Raw whole-document commits that add, drop, rename and move headings and lines."""
    rng = random.Random(seed)
    # "\r" ends a line for the heading scanner, not for blame: headings inside our lines
    words = ["alpha", "beta", "gamma", "# Top", "## Sub", "### Deep", "", "## Sub", "text",
             "x\r## Sub", "***\r# ", "```"]
    texts = [room.engine.path.read_text()]
    for _ in range(25):
        lines = texts[-1].split("\n")[:-1]
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(lines))
            action = rng.random()
            if action < 0.4 or not lines:
                lines.insert(at, rng.choice(words))
            elif action < 0.7:
                del lines[min(at, len(lines) - 1)]
            else:
                lines[min(at, len(lines) - 1)] = rng.choice(words)
        text = "\n".join(lines) + ("\n" if rng.random() < 0.9 else "")
        if text == texts[-1] or not text.strip():
            continue
        room.call("workspace.commit", room.host, base_version=room.version, summary="raw",
                  content=text)
        texts.append(text)
        whole = lines_of(room)
        assert [line["version"] for line in whole] == _oracle(texts)
        # every region's blame is the whole document's, at its own line numbers
        for region in room.call("workspace.regions", room.host)["regions"]:
            part = lines_of(room, region["region"])
            if part:  # empty only for a heading that shares its line with the next one
                assert part == whole[part[0]["line"] - 1 : part[-1]["line"]]


def test_blame_reads_few_rows_whatever_the_history(room: Driver) -> None:
    agent = room.join("ada")["session_id"]
    for n in range(30):
        commit(room, agent, "Goals", f"## Goals\n\n- ship it {n}\n\n")
    rows = room.engine.conn.execute(
        "SELECT count(*) FROM blame_sections WHERE path = 'Plan/Risks'").fetchone()[0]
    assert rows == 1  # Risks never changed: its first row still describes it
    assert lines_of(room, "Risks")[0]["text"] == "## Risks"


# -- revert and restore ------------------------------------------------------------------


def test_three_way_undo() -> None:
    assert three_way_undo("a\nB\nc\n", "a\nb\nc\n", "x\na\nB\nc\ny\n") == "x\na\nb\nc\ny\n"
    assert three_way_undo("a\nB\nc\n", "a\nb\nc\n", "a\nBB\nc\n") is None
    assert three_way_undo("a\nnew\nc\n", "a\nc\n", "a\nnew\nc\nd\n") == "a\nc\nd\n"


def test_revert_merges_onto_later_changes_and_conflicts_when_they_touch_its_lines(
        room: Driver) -> None:
    agent = room.join("ada")["session_id"]
    goals = commit(room, agent, "Goals", GOALS)
    commit(room, agent, "Risks", "## Risks\n\nNothing yet.\nStill nothing.\n\n")
    reverted = room.call("workspace.revert", room.host, version=goals["version"])
    assert reverted["reverts"] == goals["version"]
    text = room.engine.path.read_text()
    assert "ship it well" not in text and "Still nothing." in text
    events = room.call("workspace.history", room.host, limit=5)["events"]
    change = next(e for e in events if e["type"] == "change.committed")
    assert change["payload"]["reverts"] == goals["version"]
    assert change["payload"]["source"] == "revert"
    # a later change of the same lines: stale-shaped, nothing written
    again = commit(room, agent, "Goals", "## Goals\n\n- ship it twice\n\n")
    commit(room, agent, "Goals", "## Goals\n\n- ship it thrice\n\n")
    before = room.engine.path.read_text()
    version = room.version
    err = room.error("workspace.revert", room.host, version=again["version"])
    assert err.code == "stale_version"
    wire = err.to_wire()
    assert wire["current_version"] == version and wire["details"]["reverts"] == again["version"]
    assert room.version == version and room.engine.path.read_text() == before


def test_revert_in_one_region_only(room: Driver) -> None:
    raw = room.engine.path.read_text().replace("- ship it", "- ship it now").replace(
        "Nothing yet.", "Something.")
    room.call("workspace.commit", room.host, base_version=1, summary="both", content=raw)
    room.call("workspace.revert", room.host, version=2, region="Goals")
    text = room.engine.path.read_text()
    assert "- ship it now" not in text and "Something." in text


def test_revert_of_version_one_and_of_nothing_are_refused(room: Driver) -> None:
    err = room.error("workspace.revert", room.host, version=1)
    assert err.code == "invalid_request" and "version 1" in err.message
    assert room.error("workspace.revert", room.host, version=7).code == "version_not_found"
    agent = room.join("ada")["session_id"]
    commit(room, agent, "Goals", GOALS)
    err = room.error("workspace.revert", room.host, version=2, region="Appendix")
    assert err.code == "invalid_request"


def test_restore_sets_a_region_back_and_refuses_one_that_did_not_exist(room: Driver) -> None:
    agent = room.join("ada")["session_id"]
    commit(room, agent, "Goals", GOALS)
    commit(room, agent, "Goals", "## Goals\n\n- other\n\n")
    restored = room.call("workspace.restore", room.host, region="Goals", version=1)
    assert restored["restores"] == 1
    assert "## Goals\n\n- ship it\n\n## Risks" in room.engine.path.read_text()
    commit(room, agent, "Appendix", "# Appendix\n\nThe end.\n\n## New\n\nnew.\n")
    err = room.error("workspace.restore", room.host, region="Appendix/New", version=1)
    assert err.code == "invalid_region" and "did not exist at version 1" in err.message


def test_revert_and_restore_pass_the_lease_rules_and_need_admin(room: Driver) -> None:
    agent = room.join("ada")["session_id"]
    commit(room, agent, "Goals", GOALS)
    room.call("workspace.checkout", agent, region="Goals")
    assert room.error("workspace.revert", room.host, version=2).code == "lease_conflict"
    assert room.error("workspace.restore", room.host, region="Goals", version=1).code == (
        "lease_conflict")
    assert room.error("workspace.revert", agent, version=2).code == "permission_denied"


# -- policies ------------------------------------------------------------------------------


ALL_BUT_ADMIN = ["read", "observe", "checkout", "propose", "commit", "approve", "invite",
                 "handoff", "message", "wide_lease"]


def test_policy_approves_a_small_fix_and_refuses_a_big_one(room: Driver) -> None:
    ada = room.join("ada")
    agent = ada["session_id"]
    policy = room.call("workspace.policy_add", room.host, participant_id=ada["participant_id"],
                       region_pattern="Plan/*", max_changed_lines=1)
    small = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                      summary="typo", content="## Goals\n\n- ship it!\n\n")
    assert small["status"] == "approved"
    assert small["reviewer_id"] == f"policy:{policy['policy_id']}"
    events = room.call("workspace.history", room.host, limit=3)["events"]
    approved = next(e for e in events if e["type"] == "proposal.approved")
    assert approved["payload"]["policy_id"] == policy["policy_id"]
    room.call("workspace.commit", agent, proposal_id=small["proposal_id"])
    big = "## Goals\n\n" + "".join(f"- line {n}\n" for n in range(30)) + "\n"
    large = room.call("workspace.propose", agent, region="Goals", base_version=room.version,
                      summary="rewrite", content=big)
    assert large["status"] == "pending"
    outside = room.call("workspace.propose", agent, region="Appendix", base_version=room.version,
                        summary="x", content="# Appendix\n\nThe end!\n")
    assert outside["status"] == "pending"
    listed = room.call("workspace.policies", room.host)["policies"]
    assert listed[0]["approved_count"] == 1
    assert listed[0]["approved"][0]["proposal_id"] == small["proposal_id"]


def test_kill_switch_pauses_every_policy(room: Driver) -> None:
    ada = room.join("ada")
    room.call("workspace.policy_add", room.host, participant_id=ada["participant_id"],
              region_pattern="*", max_changed_lines=5)
    paused = room.call("workspace.policy_pause", room.host, all=True)
    assert paused["paused"] is True and len(paused["policy_ids"]) == 1
    prop = room.call("workspace.propose", ada["session_id"], region="Goals",
                     base_version=room.version, summary="typo",
                     content="## Goals\n\n- ship it!\n\n")
    assert prop["status"] == "pending"
    assert room.call("workspace.policies", room.host)["policies"][0]["active"] is False


def test_agents_never_touch_policies(room: Driver) -> None:
    agent = room.join("mallory", ALL_BUT_ADMIN)["session_id"]
    for op, params in (
        ("workspace.policy_add", {"name_pattern": "*", "region_pattern": "*",
                                  "max_changed_lines": 1000}),
        ("workspace.policy_pause", {"all": True, "paused": False}),
        ("workspace.policy_remove", {"policy_id": "po_x"}),
        ("workspace.policies", {}),
    ):
        assert room.error(op, agent, **params).code == "permission_denied", op


def test_policy_glob_that_matches_nothing_is_refused(room: Driver) -> None:
    err = room.error("workspace.policy_add", room.host, label="bots",
                     region_pattern="Nowhere/*", max_changed_lines=3)
    assert err.code == "invalid_request" and err.details["reason"] == "pattern_matches_nothing"
    assert err.details["field"] == "region_pattern"



def test_blame_of_region_commits_in_a_long_document_is_a_full_replay(room: Driver) -> None:
    """A commit's blame reads windows of the two texts, never the whole of them
    (engine/document_text.py): a document far longer than those windows, region
    commits (one amended by the reviewer) at its start, middle and end, against the
    replay over whole texts."""
    rng = random.Random(3)
    sections = [f"## Part {i}\n\n" + "".join(f"line {i}.{j} {'x' * rng.randint(0, 60)}\n" for j in range(12))
                + "\n" for i in range(400)]
    big = "# Doc\n\n" + "".join(sections)
    assert len(big) > 3 * 65536
    texts = [room.engine.path.read_text()]
    room.call("workspace.commit", room.host, base_version=room.version, summary="big", content=big)
    texts.append(big)
    agent = room.join("writer", ["read", "propose", "commit"])["session_id"]
    for n, (part, amend) in enumerate([(0, False), (200, True), (399, False), (57, False), (200, False)]):
        region = f"Doc/Part {part}"
        old = room.call("workspace.read", agent, region=region)["content"]
        lines = old.split("\n")
        lines[3] = f"changed {n}"
        del lines[5]
        content = "\n".join(lines)
        amended = content.replace(f"changed {n}", f"amended {n}") if amend else None
        commit(room, agent, region, content, amend=amended)
        text = texts[-1]
        texts.append(text.replace(old, amended or content, 1))
        assert room.engine.path.read_text() == texts[-1]
        assert [line["version"] for line in lines_of(room)] == _oracle(texts)
