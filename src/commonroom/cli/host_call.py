"""How a host command acts on the room around FILE (docs/spec/PROTOCOL.md section 13).

Every host command (`host_serve.py` aside: it opens the room) acts as the host
(`*`) in one of two ways:

- A room runs (the service's credential file names a live process): the
  command calls that room over the blocking wire (`commonroom.wire.sync`, a
  plain socket: no trio) with the host bearer from the credential file, on its
  session ingress (`host_call`) or its owner listener (`owner_post`), so the
  running room applies the operation and publishes its events.
- No room runs: the command opens the sidecar itself through the engine's
  facade (`engine/facade.py`, the one way into the engine; `.importlinter`
  holds it), mints a short-lived host session and executes the operation.

Either way the answer is the operation's wire JSON, and a refusal is raised as
the `CommonroomError` the room would have sent. The operation's method and
path come from the client's route table (held to the operation table by
`tests/unit/test_client_surface.py`). Nothing here imports the engine until
the sidecar path needs it, so `ce --help` never loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from commonroom.protocol.errors import CommonroomError

if TYPE_CHECKING:
    from commonroom.credentials import Credentials

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
    refuse_without_room(doc)
    return _via_sidecar(doc, op_name, params)


def refuse_without_room(doc: Path) -> None:
    """A host command never invents a room: no file, or no room running and no sidecar,
    is said so, and nothing is created (`ce serve FILE` is what opens a room)."""
    from commonroom.engine.facade import SIDECAR_SUFFIX

    if not doc.is_file():
        raise CommonroomError(
            "invalid_request",
            f"{doc} is not a file: give the document a room is around (nothing was created)",
            {"file": str(doc), "reason": "no_such_file"})
    if not doc.with_name(doc.name + SIDECAR_SUFFIX).exists():
        raise CommonroomError(
            "invalid_request",
            f"no room around {doc}: no room runs and it never had one (nothing was created);"
            f" open one with `ce serve {doc}`",
            {"file": str(doc), "reason": "no_room"})


def host_answer(doc: Path, op_name: str, params: dict[str, Any]) -> dict[str, Any]:
    """`host_call` for an operation whose answer is an object (every one a command prints)."""
    return check_answer(host_call(doc, op_name, params))


def check_answer(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise CommonroomError("transport_unavailable", "the room's answer is not a JSON object")
    return answer


def owner_post(credentials: Credentials, path: str) -> dict[str, Any]:
    """POST `path` on the running room's owner listener as the host; its JSON object."""
    from commonroom.cli import runtime
    from commonroom.cli.output import error_from_wire
    from commonroom.wire.calls import loopback_hint
    from commonroom.wire.sync import Connection

    port = int(credentials.owner_port)
    connection = Connection(loopback_hint(port), timeouts=runtime.timeouts())
    response = connection.exchange("POST", path, {
        "Authorization": f"Bearer {credentials.host_session}", "Host": f"127.0.0.1:{port}"})
    answer = response.json()
    if response.status != 200 or not isinstance(answer, dict):
        raise error_from_wire(response.status, answer)
    return answer


def logout_all_pages(doc: Path) -> int:
    """End every owner-page login of the room around `doc` (`ce open FILE --logout-all`).

    Through the running room (which also ends the pages' open streams), else
    in the sidecar; returns how many logins were valid.
    """
    from commonroom.credentials import read_credentials

    credentials = read_credentials(doc)
    if credentials is not None:
        return int(owner_post(credentials, "/owner/logout-all")["ended"])
    refuse_without_room(doc)
    from commonroom.engine import facade

    engine = facade.open_engine(doc)
    try:
        return facade.end_owner_logins(engine)
    finally:
        engine.close()


def _via_room(port: int, bearer: str, op_name: str, params: dict[str, Any]) -> Any:
    # The client's route copy, not the engine's table: a running room needs no engine here.
    from commonroom.cli import runtime
    from commonroom.client.routes import ROUTES
    from commonroom.wire.calls import loopback_hint
    from commonroom.wire.sync import Connection

    route = ROUTES[op_name]
    connection = Connection(loopback_hint(port), timeouts=runtime.timeouts())
    return connection.call(route.method, route.path, params, bearer=bearer)


def _via_sidecar(doc: Path, op_name: str, params: dict[str, Any]) -> Any:
    """Run the operation on the sidecar, settling the file first as a room's watcher would.

    The engine reads a changed file only once it has settled (docs/spec/PROTOCOL.md
    section 16): an edit made while no room ran is waited out and recorded before
    the call, and a write that still finds the file settling runs again, both by the
    room's plan (`SettleWait`: at most `SETTLE_WAIT_SECONDS` in all). A file still
    changing after that is answered from the last version: `"file": "settling"` in
    the status, `file_changing` for a write.
    """
    import time

    from commonroom.engine import facade
    from commonroom.protocol.records import to_wire

    engine = facade.open_engine(doc)
    engine.without_room()
    settle_wait = facade.SettleWait(time.monotonic())
    try:
        _, deadline = engine.watch()
        while (seconds := settle_wait.pause(deadline, engine.clock(), time.monotonic())) is not None:
            time.sleep(seconds)
            _, deadline = engine.watch()
        bearer = facade.mint_host_session(engine, DIRECT_SESSION_MINUTES)
        outcome = facade.execute(engine, op_name, bearer, params)
        while (seconds := settle_wait.pause(outcome.retry_at, engine.clock(), time.monotonic())) is not None:
            time.sleep(seconds)
            outcome = facade.execute(engine, op_name, bearer, params)
    finally:
        engine.close()
    if outcome.error is not None:
        raise outcome.error
    return to_wire(outcome.result)
