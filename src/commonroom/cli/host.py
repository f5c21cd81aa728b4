"""Host commands: `ce invite/invitations/revoke/status/proposals/show/review FILE ...`.

Theory of operation (docs/spec/PROTOCOL.md section 13): a host command acts as the
host (`*`) on the room around FILE, in one of two ways.

- A room runs (the service's credential file next to FILE names a live
  process): the command calls that room's session ingress on
  `127.0.0.1:<ingress_port>` with the host bearer from the credential file,
  over the blocking wire (`commonroom.wire.sync`, a plain socket: no trio),
  so the running room applies the operation and publishes its events.
- No room runs: the command opens the sidecar itself (`Engine(FILE)`), mints
  a short-lived host session and executes the operation directly.

Either way the answer is the operation's wire JSON, and a refusal is raised
as the `CommonroomError` the room would have sent. The operation's method
and path come from the client's route table (held to the operation table by
`tests/unit/test_client_surface.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from commonroom.protocol import vocabulary
from commonroom.protocol.errors import CommonroomError

if TYPE_CHECKING:
    from commonroom.engine.core import Engine

# A host session minted for one direct call lives this long (minutes): long
# enough for the call, short enough not to crowd the active-session limit.
DIRECT_SESSION_MINUTES: Final = 1


def host_call(doc: Path, op_name: str, params: dict[str, Any]) -> Any:
    """Run operation `op_name` as the host on the room around `doc`; its wire JSON."""
    from commonroom.credentials import read_credentials

    params = {key: value for key, value in params.items() if value is not None}
    credentials = read_credentials(doc)
    if credentials is not None:
        return _via_room(int(credentials.ingress_port), str(credentials.host_session), op_name,
                         params)
    return _via_sidecar(doc, op_name, params)


def _via_room(port: int, bearer: str, op_name: str, params: dict[str, Any]) -> Any:
    # The client's route copy, not the engine's table: a running room needs no engine here.
    from commonroom.cli import runtime
    from commonroom.client.routes import ROUTES
    from commonroom.wire.calls import loopback_hint
    from commonroom.wire.sync import Connection

    route = ROUTES[op_name]
    connection = Connection(loopback_hint(port), timeouts=runtime.timeouts())
    return connection.call(route.method, route.path, params, bearer=bearer)


def logout_all_pages(doc: Path) -> int:
    """End every owner-page login of the room around `doc` (`ce open FILE --logout-all`).

    Through the running room (which also ends the pages' open streams), else
    in the sidecar; returns how many logins were valid.
    """
    from commonroom.credentials import read_credentials

    credentials = read_credentials(doc)
    if credentials is None:
        from commonroom.engine import owner_logins
        from commonroom.engine.dispatch import open_engine

        engine = open_engine(doc)
        try:
            return owner_logins.end_all(engine)
        finally:
            engine.close()
    from commonroom.cli import runtime
    from commonroom.cli.output import error_from_wire
    from commonroom.wire.calls import loopback_hint
    from commonroom.wire.sync import Connection

    port = int(credentials.owner_port)
    connection = Connection(loopback_hint(port), timeouts=runtime.timeouts())
    response = connection.exchange("POST", "/owner/logout-all", {
        "Authorization": f"Bearer {credentials.host_session}", "Host": f"127.0.0.1:{port}"})
    answer = response.json()
    if response.status != 200 or not isinstance(answer, dict):
        raise error_from_wire(response.status, answer)
    return int(answer["ended"])


def _via_sidecar(doc: Path, op_name: str, params: dict[str, Any]) -> Any:
    from commonroom.engine import dispatch, sessions
    from commonroom.protocol.records import to_wire

    engine = dispatch.open_engine(doc)
    try:
        _let_the_file_settle(engine)
        bearer = sessions.mint_host_session(engine, DIRECT_SESSION_MINUTES)
        outcome = dispatch.execute(engine, op_name, bearer, params)
    finally:
        engine.close()
    if outcome.error is not None:
        raise outcome.error
    return to_wire(outcome.result)


def _let_the_file_settle(engine: Engine) -> None:
    """Record an edit made while no room ran before the call, as a room would.

    The engine reads a changed file only once it has settled (docs/spec/PROTOCOL.md
    section 16; the room's watcher waits for that): wait it out here, at most
    as long as a room lets a write wait. A file still changing after that is
    answered from the last version, with `"file": "settling"` in the status.
    """
    import time

    from commonroom.protocol.limits import SETTLE_WAIT_SECONDS

    give_up = time.monotonic() + SETTLE_WAIT_SECONDS
    _, deadline = engine.watch()
    while deadline is not None and (left := give_up - time.monotonic()) > 0:
        time.sleep(min(max((deadline - engine.clock()).total_seconds(), 0.005), left))
        _, deadline = engine.watch()


# -- readable output -------------------------------------------------------------------


def _caps(value: Any) -> str:
    return ",".join(str(c) for c in value) if isinstance(value, list) else str(value)


def format_status(answer: dict[str, Any]) -> list[str]:
    keys = (
        "workspace_id", "name", "version", "content_hash", "lifecycle", "participants",
        "active_leases", "pending_proposals",
    )
    lines = [f"{key}: {answer[key]}" for key in keys if key in answer]
    lines += [
        f"{key}: {value}"
        for key, value in answer.items()
        if key not in keys and isinstance(value, (str, int, float, bool))
    ]
    return lines


def format_invitations(answer: dict[str, Any]) -> list[str]:
    rows = answer.get("invitations") or []
    if not rows:
        return ["no invitations"]
    lines = []
    for row in rows:
        max_uses = row.get("max_uses")
        uses = f"{row.get('used_count', 0)}/{'∞' if max_uses is None else max_uses}"
        line = (
            f"{row.get('invite_id')}  {row.get('state', '?'):<8}  uses {uses}  "
            f"expires {row.get('expires_at')}  {_caps(row.get('capabilities', []))}"
        )
        if row.get("label"):
            line += f"  {row['label']}"
        lines.append(line)
    return lines


def format_revoked(answer: dict[str, Any]) -> list[str]:
    return [f"revoked {answer.get('invite_id')} ({answer.get('state', 'revoked')})"]


def proposals_view(doc: Path) -> dict[str, Any]:
    """`workspace.proposals` plus, per row, the author's name and whether it still applies.

    `applies` (pending and approved proposals only; null otherwise) is the
    engine's `stale`, negated: the room decides, the command only shows it.
    """
    answer = check_answer(host_call(doc, "workspace.proposals", {}))
    names = _participant_names(doc)
    rows = []
    for row in answer.get("proposals") or []:
        row = dict(row)
        row["author_name"] = names.get(str(row.get("participant_id")))
        open_ = row.get("status") in vocabulary.PROPOSAL_OPEN
        row["applies"] = (not row.get("stale")) if open_ else None
        rows.append(row)
    return {**answer, "proposals": rows}


def proposal_view(doc: Path, proposal_id: str) -> dict[str, Any]:
    """`workspace.proposal` (content and diff from the current text) plus the author's name."""
    detail = check_answer(host_call(doc, "workspace.proposal", {"proposal_id": proposal_id}))
    detail["author_name"] = _participant_names(doc).get(str(detail.get("participant_id")))
    return detail


def _participant_names(doc: Path) -> dict[str, str]:
    answer = check_answer(host_call(doc, "workspace.participants", {}))
    return {str(p.get("participant_id")): str(p.get("name"))
            for p in answer.get("participants") or [] if isinstance(p, dict)}


def _author(row: dict[str, Any]) -> str:
    name = row.get("author_name")
    return str(name) if name else str(row.get("participant_id"))


def format_proposals(answer: dict[str, Any]) -> list[str]:
    rows = answer.get("proposals") or []
    if not rows:
        return ["no proposals"]
    lines = []
    for row in rows:
        applies = {True: "applies", False: "stale: region changed since base", None: ""}[
            row.get("applies")]
        lines.append(
            f"{row.get('proposal_id')}  {row.get('status', '?'):<10}  {row.get('region')}  "
            f"base v{row.get('base_version')}  by {_author(row)}  "
            f"{json.dumps(row.get('summary', ''), ensure_ascii=False)}"
            + (f"  ({applies})" if applies else "")
        )
    return lines


def format_proposal_detail(detail: dict[str, Any], *, colour: bool) -> str:
    """What `ce show` and `ce review` print: nothing in it can drive the terminal (`visible`)."""
    from commonroom.cli.output import colour_diff, visible

    head = [
        f"proposal {detail.get('proposal_id')} ({detail.get('status')})",
        f"region:  {detail.get('region')}",
        f"by:      {_author(detail)}",
        f"base:    v{detail.get('base_version')} (current v{detail.get('current_version')})",
        f"summary: {detail.get('summary')}",
    ]
    if detail.get("review_comment"):
        head.append(f"comment: {detail.get('review_comment')}")
    if detail.get("amended"):
        head.append("amended: the reviewer edited it before approving")
    diff = str(detail.get("diff") or "")
    body = colour_diff(diff, colour) if diff else "(no change to the current text)\n"
    return visible("\n".join(head)) + "\n\n" + body


def format_review(answer: dict[str, Any], doc: Path) -> list[str]:
    """`pr_… approved (by host)`: the reviewer's name, not their id (`--json` keeps the id)."""
    from commonroom.cli.readable import Names

    names = Names(check_answer(host_call(doc, "workspace.participants", {})))
    return [f"{answer.get('proposal_id')} {answer.get('status')} (by {names.name(answer.get('reviewer_id'))})"]


def check_answer(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise CommonroomError("transport_unavailable", "the room's answer is not a JSON object")
    return answer
