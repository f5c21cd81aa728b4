"""The Python client against the operation table, the error codes, and its import weight."""

from __future__ import annotations

import inspect
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest

import commonroom
from commonroom.cli import output, profiles
from commonroom.client import aio, errors, sync
from commonroom.client.routes import ROUTES
from commonroom.protocol import errors as protocol_errors
from commonroom.protocol import records
from commonroom.protocol.operations import CALLS, OPERATIONS


def test_routes_match_the_operation_table() -> None:
    assert set(ROUTES) == {op.name for op in OPERATIONS}
    for op in OPERATIONS:
        route = ROUTES[op.name]
        assert (route.method, route.path) == (op.method, op.path), op.name
        assert route.result == (op.result.__name__ if op.result else None), op.name


@pytest.mark.parametrize("cls", [sync.Client, aio.AsyncClient])
def test_a_typed_method_per_operation(cls: type) -> None:
    covered = set(sync.OPERATION_METHODS)
    assert {op.name for op in CALLS} <= covered
    assert covered - {op.name for op in CALLS} <= {"workspace.observe", "workspace.wait", "workspace.proposal.wait",
                                                  "workspace.thread.wait"}
    for op in OPERATIONS:
        if op.name not in sync.OPERATION_METHODS:
            continue
        method = getattr(cls, sync.OPERATION_METHODS[op.name])
        returned = inspect.signature(method, eval_str=True).return_annotation
        if op.name == "session.join":
            assert returned is cls
        elif op.name == "workspace.checkout":
            assert issubclass(returned, records.Lease)
        elif op.name == "workspace.observe":
            assert "Iterator" in str(returned)
        else:
            assert returned is op.result, (op.name, returned)
        if cls is aio.AsyncClient and op.name not in ("workspace.observe",):
            assert inspect.iscoroutinefunction(method), op.name
        # Every parameter of the operation is a parameter of the method (named alike).
        if op.name in ("session.join", "workspace.observe", "workspace.wait"):
            continue
        signature = inspect.signature(method)
        wire_names = {f.name for f in op.params.__attrs_attrs__}
        accepted = set(signature.parameters) - {"self"}
        if op.name == "workspace.propose":
            accepted.add("content")
        missing = wire_names - accepted
        assert not missing, (op.name, missing)


def test_every_code_maps_to_a_class_under_the_one_base() -> None:
    for code in protocol_errors.STATUS:
        error = errors.from_answer(protocol_errors.STATUS[code],
                                   {"error": code, "message": "m", "details": {}})
        assert isinstance(error, commonroom.CommonroomError)
        assert isinstance(error, protocol_errors.CommonroomError)  # the server's type too
        assert error.code == code
        assert type(error) is not errors.CommonroomError, code
    unknown = errors.from_answer(500, {"error": "server_fault", "message": "m"})
    assert type(unknown) is errors.CommonroomError and unknown.code == "server_fault"
    garbage = errors.from_answer(502, "<html>")
    assert isinstance(garbage, commonroom.TransportUnavailable)


def test_errors_carry_their_recovery_fields() -> None:
    stale = errors.from_answer(409, {
        "error": "stale_version", "message": "m", "details": {}, "base_version": 1,
        "expected_version": 1, "current_version": 3, "diff": "--- a\n+++ b\n",
        "changes": [{"version": 2}], "region": "Plan/Goals"})
    assert isinstance(stale, commonroom.StaleVersion) and isinstance(stale, commonroom.Conflict)
    assert (stale.current_version, stale.base_version, stale.diff, stale.changes) == (
        3, 1, "--- a\n+++ b\n", [{"version": 2}])
    lease = errors.from_answer(409, {
        "error": "lease_conflict", "message": "m",
        "details": {"participant_id": "pt_x", "expires_at": "t"},
        "lease_id": "ls_1", "region": "Plan/Goals"})
    assert isinstance(lease, commonroom.LeaseConflict)
    assert (lease.lease_id, lease.region, lease.holder) == ("ls_1", "Plan/Goals", "pt_x")
    limited = errors.from_answer(429, {"error": "limit_exceeded", "message": "m",
                                       "retry_after_seconds": 2.5})
    assert isinstance(limited, commonroom.RateLimited) and limited.retry_after_seconds == 2.5
    too_big = errors.from_answer(413, {"error": "limit_exceeded", "message": "m"})
    assert isinstance(too_big, commonroom.LimitExceeded)
    assert not isinstance(too_big, commonroom.RateLimited)
    timeout = commonroom.Timeout("still pending")
    assert timeout.code == "timeout" and isinstance(timeout, commonroom.CommonroomError)


def test_exit_codes_follow_the_decisions() -> None:
    expected = {
        "lease_conflict": 3, "proposal_conflict": 3, "handoff_conflict": 3,
        "stale_version": 4, "permission_denied": 5, "invitation_expired": 5,
        "invitation_revoked": 5, "invitation_redeemed": 5, "proposal_not_found": 6,
        "version_not_found": 6, "handoff_not_found": 6, "unauthorized": 7,
        "session_expired": 7, "limit_exceeded": 8, "transport_unavailable": 9,
        "timeout": 124, "invalid_request": 1, "invalid_region": 1,
    }
    for code, exit_code in expected.items():
        assert output.exit_code_for(code) == exit_code, code
    helped = output.exit_codes_help()
    for exit_code in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 124, 130):
        assert f"{exit_code:>4}  " in helped


def test_the_client_and_the_verbs_do_not_load_the_server() -> None:
    probe = (
        "import sys, commonroom\n"
        "commonroom.Client; commonroom.AsyncClient; commonroom.StaleVersion\n"
        "import commonroom.cli.main, commonroom.cli.agent_verbs, commonroom.wire.sync\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('quart', 'quart_trio',"
        " 'hypercorn') or m.startswith(('commonroom.engine', 'commonroom.room',"
        " 'commonroom.http', 'commonroom.store')) or m in ('commonroom.service',"
        " 'commonroom.hub', 'commonroom.streams'))\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "[]", result.stdout
    # The path a one-shot verb takes does not even load trio.
    lean = ("import sys, commonroom.cli.main, commonroom.wire.sync, commonroom.cli.profiles\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'cattrs')))\n")
    result = subprocess.run([sys.executable, "-c", lean], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "[]", result.stdout


def test_profiles_are_private_and_selected_in_order(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in ("CE_PROFILE", "CE_INVITATION", "CE_SESSION"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(click.UsageError, match="ce join"):
        profiles.select()
    hint = {"type": "loopback", "address": "127.0.0.1", "port": 9}
    first = profiles.create("first", "commonroom://join/x", {"session_id": "ses_1"}, hint)
    second = profiles.create("second", "commonroom://join/y", {"session_id": "ses_2"}, hint)
    assert second.data["joined_at"] >= first.data["joined_at"]
    folder = tmp_path / "commonroom" / "profiles"
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(folder / "first.json").st_mode) == 0o600
    assert profiles.select().session == "ses_2"  # the last joined
    monkeypatch.setenv("CE_PROFILE", "first")
    assert profiles.select().session == "ses_1"
    monkeypatch.setenv("CE_INVITATION", "commonroom://join/z")
    monkeypatch.setenv("CE_SESSION", "ses_env")
    assert profiles.select().session == "ses_env"
    assert profiles.select(profile="second").session == "ses_2"  # flags first
    with pytest.raises(click.UsageError):
        profiles.select(profile="second", session="ses_3")
    # A --session flag takes its invitation from CE_INVITATION, and needs one.
    assert profiles.select(session="ses_3").invitation == "commonroom://join/z"
    monkeypatch.delenv("CE_INVITATION")
    with pytest.raises(click.UsageError):
        profiles.select(session="ses_3")
    with pytest.raises(click.UsageError):
        profiles.check_name("../escape")
    first.record_read(["Problem", "Doc/Problem"], 4)
    assert profiles.load("first").last_read("Doc/Problem") == 4
    assert json.loads((folder / "first.json").read_text())["reads"]["Problem"] == 4
