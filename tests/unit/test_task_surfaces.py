"""Task surfaces in the engine (engine/task_surfaces.py, protocol/task_surfaces.py; PROTOCOL.md 20).

Who publishes, revisions and surface ids, the schema's bounds with the path of
the first fault, the app state's compare-and-set, the end of the task and the
60 minutes after it. The room's half of app requests is in
tests/service/test_app_requests.py, the page's in tests/browser/test_task_surfaces_page.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commonroom.protocol import limits
from commonroom.protocol.events import EVENTS
from commonroom.protocol.params import NumberTooLarge
from tests.conftest import Driver


def checklist(revision: int = 1, done: Any = 0, **extra: Any) -> dict[str, Any]:
    """A checklist with a counter, as an agent would publish it."""
    return {
        "surface_id": "progress", "revision": revision,
        "root": {"type": "Card", "title": "Rewrite Goals", "children": [
            {"type": "Text", "text": "Steps done"},
            {"type": "Value", "path": "done", "label": "Done"},
            {"type": "Row", "children": [
                {"type": "Button", "label": "+1", "action": {"type": "increment", "path": "done"}},
                {"type": "Button", "label": "reset", "action": {"type": "set", "path": "done",
                                                                 "value": 0}},
            ]},
            {"type": "Input", "path": "note", "label": "Note"},
        ]},
        "data": {"done": done, "note": ""},
        **extra,
    }


CHOOSER = {
    "version": 1,
    "manifest": {"title": "Pick a draft", "networkOrigins": []},
    "html": "<button id=a>A</button><button id=b>B</button>",
    "css": "button{font-size:2em}",
    "js": "commonroom.onRequest(() => new Promise(() => {}));",
    "initialState": {"choice": None},
}


class Task:
    """A handoff from alice to bob, accepted: bob is the task's agent."""

    def __init__(self, room: Driver) -> None:
        self.room = room
        self.alice = room.join("alice")
        self.bob = room.join("bob")
        self.carol = room.join("carol")
        handoff = room.call("handoff.request", self.alice["session_id"],
                            to_participant_id=self.bob["participant_id"], summary="rewrite Goals")
        self.handoff_id = handoff["handoff_id"]
        accepted = room.call("handoff.respond", self.bob["session_id"],
                             handoff_id=self.handoff_id, decision="accept")
        self.task_id = accepted["task_id"]

    def publish(self, surface: dict[str, Any] | None, who: str = "bob") -> Any:
        if surface is None:
            return self.room.call("task.live_view", self.bearer(who), task_id=self.task_id,
                                  clear=True)
        return self.room.call("task.live_view", self.bearer(who), task_id=self.task_id,
                              surface=surface)

    def refused(self, op: str, who: str = "bob", **params: Any) -> Any:
        return self.room.error(op, self.bearer(who), task_id=self.task_id, **params)

    def bearer(self, who: str) -> str:
        return self.room.host if who == "host" else getattr(self, who)["session_id"]

    def surfaces(self) -> dict[str, Any]:
        listed = self.room.call("task.surfaces", self.carol["session_id"], task_id=self.task_id)
        assert len(listed["surfaces"]) <= 1
        return listed["surfaces"][0] if listed["surfaces"] else {}


@pytest.fixture
def task(room: Driver) -> Task:
    return Task(room)


def events_of(room: Driver, kind: str) -> list[dict[str, Any]]:
    history = room.call("workspace.history", room.host, limit=200)["events"]
    return [event["payload"] for event in reversed(history) if event["type"] == kind]


# -- live views -------------------------------------------------------------------------


def test_the_agent_publishes_a_live_view_and_everyone_reads_it(task: Task) -> None:
    answer = task.publish(checklist())
    assert answer["live_view"]["revision"] == 1 and not answer["cleared"]
    shown = task.surfaces()
    assert shown["open"] and shown["summary"] == "rewrite Goals"
    assert shown["live_view"]["root"]["title"] == "Rewrite Goals"
    assert shown["live_view"]["data"] == {"done": 0, "note": ""}
    assert shown["live_view"]["participant_id"] == task.bob["participant_id"]
    assert events_of(task.room, "task.live_view")[-1] == {
        "task_id": task.task_id, "surface_id": "progress", "revision": 1,
        "participant_id": task.bob["participant_id"], "reason": None}


def test_a_higher_revision_replaces_it_and_a_lower_or_equal_one_is_refused(task: Task) -> None:
    task.publish(checklist(1))
    task.publish(checklist(3, done=2))
    assert task.surfaces()["live_view"]["data"]["done"] == 2
    for revision in (3, 2):
        error = task.refused("task.live_view", surface=checklist(revision))
        assert error.code == "invalid_request" and error.details["path"] == "revision"
        assert error.details["current_revision"] == 3
    error = task.refused("task.live_view", surface={**checklist(4), "surface_id": "other"})
    assert error.details["path"] == "surface_id"
    assert task.surfaces()["live_view"]["revision"] == 3


def test_clearing_removes_it_and_a_new_one_starts_again(task: Task) -> None:
    task.publish(checklist(5))
    assert task.publish(None)["cleared"] is True
    assert task.surfaces() == {}
    assert task.publish(None)["cleared"] is False  # nothing to clear: no event
    assert [e["reason"] for e in events_of(task.room, "task.live_view")] == [None, "cleared"]
    task.publish({**checklist(1), "surface_id": "other"})
    assert task.surfaces()["live_view"]["surface_id"] == "other"
    # Neither a surface nor clear, or both: refused, nothing changed.
    for params in ({}, {"clear": True, "surface": checklist(2)}, {"surface": None}):
        error = task.refused("task.live_view", **params)
        assert error.code == "invalid_request" and error.details["field"] == "surface"
    assert task.surfaces()["live_view"]["revision"] == 1


@pytest.mark.parametrize("who", ["alice", "carol", "host"])
def test_only_the_tasks_agent_publishes(task: Task, who: str) -> None:
    assert task.refused("task.live_view", who, surface=checklist()).code == "permission_denied"
    assert task.refused("task.app", who, bundle=CHOOSER).code == "permission_denied"


def test_a_requested_handoff_has_no_task_and_an_unknown_task_is_not_found(task: Task) -> None:
    error = task.room.error("task.live_view", task.bob["session_id"], task_id="tk_nope",
                            surface=checklist())
    assert error.code == "handoff_not_found"


def test_an_ended_task_takes_no_more_surfaces(task: Task) -> None:
    task.publish(checklist())
    task.room.call("handoff.result", task.bob["session_id"], handoff_id=task.handoff_id,
                   status="completed", summary="done")
    assert task.refused("task.live_view", surface=checklist(2)).code == "handoff_conflict"
    assert task.refused("task.app", bundle=CHOOSER).code == "handoff_conflict"
    shown = task.surfaces()
    assert shown["open"] is False and shown["expires_at"] is not None
    assert shown["live_view"]["revision"] == 1  # still shown for the grace period


def _set(surface: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`surface` with the value at a dotted path (`root.children[2].action.path`) replaced."""
    copy = json.loads(json.dumps(surface))
    node: Any = copy
    parts = path.replace("]", "").replace("[", ".").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last):int(last) + 1] = [value]
    else:
        node[last] = value
    return copy


@pytest.mark.parametrize(("path", "value", "fault"), [
    ("root.children[2].children[0].action.path", "missing", None),
    ("root.children[2].children[1].action.type", "fetch", None),
    ("root.children[1].path", "nope", None),
    ("root.children[3].path", "done.x", None),
    ("root.children[0].type", "Script", None),
    ("root.children[0].type", {"a": 1}, None),
    ("root.children[0].type", ["Text"], None),
    ("root.children[2].children[0].action.type", ["set"], None),
    ("root.children[0].html", "<b>x</b>", None),
    ("root.children[0].text", 5, None),
    ("root.children[0].text", "a\x1bb", None),
    ("root.title", "", None),
    ("root.children[2].children", "x", None),
    ("root.children[2].children[1].action.value", {"a": 1}, None),
    ("data.note", [1], None),
    ("data", [], None),
    ("revision", 0, None),
    ("surface_id", "has space", None),
    ("root.children[2].children[0].action.amount", "1", None),
    ("root.children[4]", "just text", None),
    ("root.children[0]", {"type": "Text"}, "root.children[0].text"),
    ("extra", 1, "extra"),
    ("root.children[1].path", None, None),
])
def test_the_first_fault_is_named_by_its_path(
    task: Task, path: str, value: Any, fault: str | None
) -> None:
    error = task.refused("task.live_view", surface=_set(checklist(), path, value))
    assert error.code == "invalid_request"
    assert error.details["field"] == "surface"
    assert error.details["path"] == (fault or path)
    assert error.message.startswith(f"surface.{fault or path}:")


def test_increment_needs_a_number() -> None:
    from commonroom.protocol.errors import CommonroomError
    from commonroom.protocol.task_surfaces import check_live_view

    with pytest.raises(CommonroomError) as caught:
        check_live_view(checklist(done="three"))  # type: ignore[arg-type]
    assert caught.value.details["path"] == "root.children[2].children[0].action.path"


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "Text", "text": "deepest"}
    for _ in range(depth - 1):
        node = {"type": "Column", "children": [node]}
    return node


def test_depth_nodes_and_size_are_bounded(task: Task) -> None:
    assert task.publish({**checklist(), "root": _nested(limits.LIVE_VIEW_MAX_DEPTH)})
    error = task.refused("task.live_view",
                         surface={**checklist(2), "root": _nested(limits.LIVE_VIEW_MAX_DEPTH + 1)})
    assert error.details["path"] == "root" + ".children[0]" * limits.LIVE_VIEW_MAX_DEPTH
    many = {"type": "Column", "children": [{"type": "Text", "text": "x"}] * 250}
    error = task.refused("task.live_view", surface={**checklist(2), "root": many})
    assert error.details["path"] == f"root.children[{limits.LIVE_VIEW_MAX_NODES - 1}]"
    big = {"type": "Text", "text": "x" * 1900}
    wide = {"type": "Column", "children": [big] * 9}
    error = task.refused("task.live_view", surface={**checklist(2), "root": wide})
    assert error.details["path"] == "" and error.details["limit_bytes"] == limits.LIVE_VIEW_MAX_BYTES


def test_numbers_must_be_plain(task: Task) -> None:
    error = task.refused("task.live_view", surface=checklist(done=NumberTooLarge(30)))
    assert error.details["path"] == "data.done"
    error = task.refused("task.live_view", surface=checklist(done=float("nan")))
    assert error.details["path"] == "data.done"


def test_a_script_like_string_is_kept_as_text(task: Task) -> None:
    script = "<img src=x onerror=alert(1)><script>alert(2)</script>"
    task.publish(_set(checklist(), "root.children[0].text", script))
    assert task.surfaces()["live_view"]["root"]["children"][0]["text"] == script


# -- apps and their state ---------------------------------------------------------------


def test_the_agent_publishes_an_app_and_a_replacement_bumps_its_revision(task: Task) -> None:
    first = task.room.call("task.app", task.bob["session_id"], task_id=task.task_id,
                           bundle=CHOOSER)
    assert (first["revision"], first["state_revision"]) == (1, 0)
    shown = task.surfaces()
    assert shown["app"]["bundle"] == CHOOSER and shown["app"]["title"] == "Pick a draft"
    assert shown["app_state"]["revision"] == 0 and shown["app_state"]["state"] == {"choice": None}
    assert shown["app_state"]["participant_id"] is None
    task.room.call("task.app_state", task.alice["session_id"], task_id=task.task_id,
                   revision=0, state={"choice": "A"})
    second = task.room.call("task.app", task.bob["session_id"], task_id=task.task_id,
                            bundle={**CHOOSER, "initialState": {"choice": "B"}})
    # The replacement's initialState is the next state revision: the old app's setState is stale.
    assert (second["revision"], second["state_revision"]) == (2, 2)
    error = task.refused("task.app_state", "alice", revision=1, state={"choice": "old"})
    assert error.code == "stale_version"
    assert task.surfaces()["app_state"]["state"] == {"choice": "B"}
    assert [e["revision"] for e in events_of(task.room, "task.app")] == [1, 2]


def test_app_state_is_a_compare_and_set(task: Task) -> None:
    task.room.call("task.app", task.bob["session_id"], task_id=task.task_id, bundle=CHOOSER)
    state = task.room.call("task.app_state", task.room.host, task_id=task.task_id, revision=0,
                           state={"choice": "A"})
    assert state["revision"] == 1 and state["participant_id"] is not None
    error = task.refused("task.app_state", "bob", revision=0, state={"choice": "B"})
    assert error.code == "stale_version" and error.details["current_revision"] == 1
    assert task.room.call("task.app_state", task.bob["session_id"], task_id=task.task_id,
                          revision=1, state=["anything", 1, None])["revision"] == 2
    assert task.refused("task.app_state", "carol", revision=2, state=1).code == "permission_denied"
    big = "x" * limits.APP_STATE_MAX_BYTES
    error = task.refused("task.app_state", "bob", revision=2, state=big)
    assert error.code == "invalid_request" and error.details["field"] == "state"
    assert [e["revision"] for e in events_of(task.room, "task.app_state")] == [1, 2]


def test_app_state_without_an_app_is_refused(task: Task) -> None:
    assert task.refused("task.app_state", revision=0, state={}).code == "invalid_request"
    assert task.refused("task.app_request", payload={}).code == "invalid_request"


@pytest.mark.parametrize(("path", "value", "where"), [
    ("manifest.networkOrigins", ["https://example.com"], "manifest.networkOrigins[0]"),
    ("manifest.networkOrigins", "none", "manifest.networkOrigins"),
    ("manifest.title", "Pick\x1b[2Ja draft", "manifest.title"),
    ("manifest.title", "two\nlines", "manifest.title"),
    ("manifest.title", "   ", "manifest.title"),
    ("version", 2, "version"),
    ("js", None, "js"),
    ("manifest.icon", "x.png", "manifest.icon"),
    ("server", "x", "server"),
])
def test_a_bad_bundle_is_refused_with_the_path(task: Task, path: str, value: Any, where: str) -> None:
    bundle = json.loads(json.dumps(CHOOSER))
    head, _, tail = path.partition(".")
    if tail:
        bundle[head][tail] = value
    else:
        bundle[head] = value
    error = task.refused("task.app", bundle=bundle)
    assert error.code == "invalid_request" and error.details["field"] == "bundle"
    assert error.details["path"] == where


def test_a_bundle_past_48_kib_is_refused(task: Task) -> None:
    bundle = {**CHOOSER, "js": "x" * limits.APP_BUNDLE_MAX_BYTES}
    error = task.refused("task.app", bundle=bundle)
    assert error.details["path"] == "" and error.details["limit_bytes"] == limits.APP_BUNDLE_MAX_BYTES


def test_an_app_request_is_checked_and_bounded(task: Task) -> None:
    from commonroom.engine import dispatch
    from commonroom.engine.facade import AppRequestStart

    task.room.call("task.app", task.bob["session_id"], task_id=task.task_id, bundle=CHOOSER)
    outcome = dispatch.execute(task.room.engine, "task.app_request", task.bob["session_id"],
                               {"task_id": task.task_id, "payload": {"ask": "which"}})
    assert isinstance(outcome.result, AppRequestStart)
    assert outcome.result.payload == {"ask": "which"} and outcome.result.app_revision == 1
    assert task.refused("task.app_request", "carol", payload=1).code == "permission_denied"
    error = task.refused("task.app_request", payload="x" * limits.APP_REQUEST_MAX_BYTES)
    assert error.code == "invalid_request" and error.details["field"] == "payload"


# -- the end of the task ----------------------------------------------------------------


def test_surfaces_go_60_minutes_after_the_task_ended(task: Task) -> None:
    task.publish(checklist())
    task.room.call("task.app", task.bob["session_id"], task_id=task.task_id, bundle=CHOOSER)
    task.room.call("handoff.cancel", task.alice["session_id"], handoff_id=task.handoff_id)
    task.room.clock.advance(minutes=limits.TASK_SURFACE_GRACE_MINUTES - 1)
    assert task.surfaces()["live_view"] is not None
    task.room.clock.advance(minutes=2)
    assert task.surfaces() == {}
    assert events_of(task.room, "task.live_view")[-1]["reason"] == "task_ended"
    assert events_of(task.room, "task.app")[-1] == {
        "task_id": task.task_id, "revision": None, "title": None,
        "participant_id": task.bob["participant_id"], "reason": "task_ended"}


def test_the_events_are_in_the_catalogue() -> None:
    assert {"task.live_view", "task.app", "task.app_state"} <= set(EVENTS)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8)
    | st.sampled_from(["Text", "Value", "Button", "Input", "Row", "Column", "Card", "increment",
                       "set", "done", "note"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "text", "path", "label", "action", "children", "title", "value",
                         "amount", "surface_id", "revision", "root", "data", "version", "manifest",
                         "networkOrigins", "html", "css", "js", "x"]), inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, _JSON, _JSON)
def test_any_json_is_checked_or_refused_never_an_exception(root: Any, data: Any, other: Any) -> None:
    """Whatever JSON comes in, the shapes answer with a value or `invalid_request`, nothing else."""
    from commonroom.protocol.errors import CommonroomError
    from commonroom.protocol.task_surfaces import check_bundle, check_live_view

    candidates = [
        {"surface_id": "s", "revision": 1, "root": root, "data": data},
        {"surface_id": "s", "revision": 1, "root": root, "data": {"done": 1, "note": ""}},
        root if isinstance(root, dict) else {"root": root},
    ]
    for surface in candidates:
        try:
            check_live_view(surface)
        except CommonroomError as error:
            assert error.code == "invalid_request" and "path" in error.details
    bundle = {"version": 1, "manifest": other, "html": "", "css": "", "js": "", "initialState": data}
    for candidate in (bundle, other if isinstance(other, dict) else {"x": other}):
        try:
            check_bundle(candidate)
        except CommonroomError as error:
            assert error.code == "invalid_request" and "path" in error.details
