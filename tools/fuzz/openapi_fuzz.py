"""schemathesis against a real room's session ingress, from the room's own `GET /openapi.json`.

    .venv/bin/python tools/fuzz/openapi_fuzz.py --examples 200 --scenarios 300

Starts a room (real hypercorn on 127.0.0.1, a fresh markdown file in a temp
folder), loads the OpenAPI document the room serves, and runs two phases:

- **stateless**: for every operation, `--examples` cases drawn by
  schemathesis, half schema-valid (positive) and half schema-violating
  (negative), each sent authenticated;
- **stateful**: `--scenarios` scenarios of schemathesis's state machine,
  which follows the document's OpenAPI links (invite -> join -> regions ->
  read -> checkout -> propose -> review -> commit, handoffs, tasks,
  attachments) with the ids the room really answered.

Every answer is checked: status < 500; every error is JSON in the protocol's
`{"error","message","details"}` shape; status, content type, headers and
body conform to the document (so every 2xx body validates against its
schema); schema-violating input is refused. Prints the requests sent, the
statuses seen and every failure, and exits 1 on any failure. The suite's
tests/reliability/test_schemathesis.py runs the same `run_fuzz` with a
CI-sized count.

Authentication: a session bearer from a real join (an invitation the host
session creates, with every capability but admin); operations that need
admin use the host session. When the fuzzer ends the agent's session
(`workspace.leave`), the next call joins again. Every secret handed out
(session ids, invitation tokens) is collected for the secrets audit.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import hypothesis
import hypothesis.errors
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.generation.stateful.state_machine import StepOutput
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from commonroom.protocol.errors import STATUS
from commonroom.protocol.operations import OPERATIONS_BY_ROUTE

# Streams never end by themselves (SSE, WebSocket): the ingress fuzz, stream and
# hostile-client tests own them. `/mcp` answers JSON-RPC, not the REST error
# shape (its own conformance tool is tools/mcp_conformance.py).
EXCLUDED_OPERATIONS = frozenset({"workspace.observe", "workspace.observe_ws", "mcp"})
# The long-poll holds up to timeout_seconds (<= 25) when nothing happens; the
# fuzzer's values are clamped so a run is not spent waiting.
WAIT_SECONDS_CAP = 1
AGENT_CAPABILITIES = ["read", "observe", "checkout", "propose", "commit", "approve", "invite",
                      "message", "handoff"]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]
NEGATIVE_CHECKS = [*CHECKS, negative_data_rejection]
REQUEST_TIMEOUT = 30.0
STATEFUL_BATCH = 25
HANDS_OUT_SECRETS = frozenset({"POST /session/join", "POST /workspace/invite"})


@attrs.define
class FuzzReport:
    requests: int = 0
    statuses: Counter[int] = attrs.field(factory=Counter)
    by_operation: Counter[str] = attrs.field(factory=Counter)
    server_errors: list[str] = attrs.field(factory=list)
    failures: list[str] = attrs.field(factory=list)
    stateful_scenarios: int = 0
    stateful_steps: int = 0
    stateful_batches_cut: int = 0
    """Stateful batches Hypothesis stopped early (`Flaky`: the room answered a replay differently)."""
    linked_steps: Counter[str] = attrs.field(factory=Counter)
    """Stateful steps whose input a link carried from the previous answer, by link, and status."""
    not_http: int = 0
    """Requests whose generated headers are not HTTP (hypercorn refuses them: empty 400)."""
    secrets: set[str] = attrs.field(factory=set)
    answers: list[tuple[str, int, bytes]] = attrs.field(factory=list)
    """Every answer as (method and path, status, body), for the secrets audit."""

    def audited_bodies(self) -> list[bytes]:
        """Every answer body but the two that hand a secret out (a join's, an invitation's)."""
        return [body for label, status, body in self.answers
                if not (status == 200 and label in HANDS_OUT_SECRETS)]

    def summary(self) -> str:
        statuses = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        return (f"requests sent: {self.requests}\n"
                f"5xx seen: {len(self.server_errors)}\n"
                f"check failures: {len(self.failures)}\n"
                f"stateful: {self.stateful_scenarios} scenarios, {self.stateful_steps} steps,"
                f" {sum(self.linked_steps.values())} of them fed by a link,"
                f" {self.stateful_batches_cut} batches cut short\n"
                f"not HTTP (refused by the parser, empty 400): {self.not_http}\n"
                f"statuses: {statuses}")


# RFC 9110 field names and values, as h11 (hypercorn's parser) enforces them: a request
# whose header breaks these is not HTTP, and hypercorn answers it with an empty 400 before
# the room sees it (docs/reliability.md: the one error not in the protocol's shape).
_TOKEN = re.compile(rb"^[-!#$%&'*+.^_`|~0-9A-Za-z]+$")
_FIELD_VALUE = re.compile(rb"^(?:[\x21-\x7e\x80-\xff](?:[ \t\x21-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?$")


def not_http(headers: dict[str, Any] | None) -> str | None:
    """Why these request headers make the request something other than HTTP, or None."""
    for name, value in (headers or {}).items():
        raw_name = str(name).encode("latin-1", "replace")
        raw_value = str(value).strip(" \t").encode("latin-1", "replace")
        if not _TOKEN.match(raw_name):
            return f"header name {name!r} is not a token"
        if not _FIELD_VALUE.match(raw_value):
            return f"header {name!r} has a value that is not a field value"
        if raw_name.lower() == b"content-length" and not raw_value.isdigit():
            return f"Content-Length {value!r} is not a number"
    return None


def protocol_error_problem(status: int, content_type: str, body: bytes) -> str | None:
    """Why an error answer is not the protocol's error object, or None when it is."""
    if status < 400:
        return None
    if not content_type.startswith("application/json"):
        return f"error {status} with content type {content_type!r}"
    try:
        parsed = json.loads(body)
    except ValueError:
        return f"error {status} with a body that is not JSON: {body[:80]!r}"
    if not isinstance(parsed, dict):
        return f"error {status} whose body is not an object"
    if parsed.get("error") not in STATUS:
        return f"error {status} with an unknown code {parsed.get('error')!r}"
    if not isinstance(parsed.get("message"), str) or not isinstance(parsed.get("details"), dict):
        return f"error {status} without a string message and an object details"
    return None


class Credentials:
    """The bearers the fuzzer sends: a joined agent's, re-joined after the fuzzer ends it; the host's."""

    def __init__(self, base_url: str, host_bearer: str, report: FuzzReport) -> None:
        self.base_url = base_url
        self.host_bearer = host_bearer
        self.report = report
        self.lock = threading.Lock()
        self.agent_bearer = ""
        self.rejoin()

    def rejoin(self) -> None:
        with self.lock:
            invite = requests.post(f"{self.base_url}/workspace/invite", timeout=REQUEST_TIMEOUT,
                                   headers={"Authorization": f"Bearer {self.host_bearer}"},
                                   json={"capabilities": AGENT_CAPABILITIES, "label": "fuzz"})
            invite.raise_for_status()
            token = invite.json()["invitation"]
            self.report.secrets.update({token, token.rsplit("/", 1)[-1]})
            joined = requests.post(f"{self.base_url}/session/join", timeout=REQUEST_TIMEOUT,
                                   json={"invite": token, "name": "fuzz"})
            joined.raise_for_status()
            self.agent_bearer = joined.json()["session_id"]
            self.report.secrets.add(self.agent_bearer)

    def bearer_for(self, case: Case) -> str | None:
        op = OPERATIONS_BY_ROUTE.get((case.method.upper(), case.path))
        if op is None or op.capability is None:
            return None
        return self.host_bearer if op.capability == "admin" else self.agent_bearer

    def install(self, schema: Any) -> None:
        """Register with schemathesis as the auth provider of every generated case."""
        credentials = self

        @schema.auth(refresh_interval=None)
        class SessionBearer:
            def get(self, case: Case, context: Any) -> str | None:
                return credentials.bearer_for(case)

            def set(self, case: Case, data: str | None, context: Any) -> None:
                if data is None:
                    return
                headers = case.headers if case.headers is not None else {}
                headers["Authorization"] = f"Bearer {data}"
                case.headers = headers


def _carry_linked_bearer(step: Any) -> None:
    """Send the bearer a link carried (join -> its session) instead of the fuzzer's own.

    The auth provider runs when a case is drawn, before the link's values are applied.
    """
    if step.transition is None:
        return
    carried = step.transition.parameters.get("headers", {}).get("Authorization")
    if carried is not None and isinstance(carried.value, Ok) and isinstance(carried.value.ok(), str):
        step.case.headers = {**(step.case.headers or {}), "Authorization": carried.value.ok()}


def _operation_id(operation: Any) -> str:
    return str(operation.definition.raw.get("operationId", ""))


# The long-polls; the waits for a person hold 25 s when timeout_seconds is absent.
LONG_POLL_PATHS = frozenset({"/workspace/wait", "/workspace/proposal/wait", "/workspace/thread/wait"})


def _clamp_wait(case: Case) -> None:
    if case.path not in LONG_POLL_PATHS:
        return
    if case.query is None:
        case.query = {}
    query = case.query
    if isinstance(query, dict):
        value = query.get("timeout_seconds")
        absent = value is None and case.path != "/workspace/wait"  # the default would hold 25 s
        long = isinstance(value, (int, float)) and not isinstance(value, bool) and value > WAIT_SECONDS_CAP
        if absent or long:
            query["timeout_seconds"] = WAIT_SECONDS_CAP


class Fuzzer:
    def __init__(self, base_url: str, host_bearer: str, *, seed: int,
                 only: frozenset[str] | None = None) -> None:
        self.base_url = base_url
        self.report = FuzzReport()
        self.report.secrets.add(host_bearer)
        self.credentials = Credentials(base_url, host_bearer, self.report)
        self.seed = seed
        self.session = requests.Session()
        self.schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
        self.credentials.install(self.schema)
        self.operations = [
            result.ok() for result in self.schema.get_all_operations()
            if _operation_id(result.ok()) not in EXCLUDED_OPERATIONS
            and (only is None or _operation_id(result.ok()) in only)
        ]

    # -- one request

    def send(self, case: Case, checks: list[Any]) -> schemathesis.Response:
        _clamp_wait(case)
        response = case.call(session=self.session, timeout=REQUEST_TIMEOUT)
        self.record(case, response, checks)
        sent = response.request.headers.get("Authorization", "")
        if response.status_code == 401 and sent == f"Bearer {self.credentials.agent_bearer}":
            self.credentials.rejoin()  # the fuzzer left or was revoked: carry on as a new agent
        return response

    def record(self, case: Case, response: schemathesis.Response, checks: list[Any]) -> None:
        report = self.report
        label = f"{case.method} {case.path}"
        report.requests += 1
        report.statuses[response.status_code] += 1
        report.by_operation[f"{label} {response.status_code}"] += 1
        report.answers.append((label, response.status_code, response.content))
        self._collect_secrets(case, response)
        if response.status_code >= 500:
            report.server_errors.append(f"{label} -> {response.status_code}: {response.content[:200]!r}")
        refused = not_http(dict(response.request.headers))  # the headers as they were sent
        if refused is not None:
            # Refused by the HTTP parser before any route: hypercorn's empty 400 is the answer
            # (anything else, 5xx above included, is still a finding).
            report.not_http += 1
            if response.status_code != 400 or response.content:
                report.failures.append(f"{label}: {refused}, yet answered"
                                       f" {response.status_code} {response.content[:80]!r}")
            return
        content_type = response.headers.get("content-type", [""])[0]
        problem = protocol_error_problem(response.status_code, content_type, response.content)
        if problem is not None:
            report.failures.append(f"{label}: {problem}")
        try:
            case.validate_response(response, checks=checks)
        except FailureGroup as group:
            for failure in group.exceptions:
                report.failures.append(f"{label} -> {response.status_code}: {failure.title}: "
                                       f"{str(failure.message)[:300]} [{case.as_curl_command()[:300]}]")
        except AssertionError as error:
            report.failures.append(f"{label} -> {response.status_code}: {error}"[:600])

    def _collect_secrets(self, case: Case, response: schemathesis.Response) -> None:
        if response.status_code != 200:
            return
        try:
            body = response.json()
        except ValueError:
            return
        if not isinstance(body, dict):
            return
        if case.path == "/session/join" and isinstance(body.get("session_id"), str):
            self.report.secrets.add(body["session_id"])
        if case.path == "/workspace/invite" and isinstance(body.get("invitation"), str):
            token = body["invitation"]
            self.report.secrets.update({token, token.rsplit("/", 1)[-1]})

    # -- stateless: each operation on its own

    def stateless(self, examples: int) -> None:
        for operation in self.operations:
            for mode, checks in ((GenerationMode.POSITIVE, CHECKS),
                                 (GenerationMode.NEGATIVE, NEGATIVE_CHECKS)):
                self._run_operation(operation, mode, checks, max(1, examples // 2))

    def _run_operation(self, operation: Any, mode: GenerationMode, checks: list[Any], examples: int) -> None:
        strategy = operation.as_strategy(generation_mode=mode, auth_storage=self.schema.auth)

        @hypothesis.settings(max_examples=examples, database=None, deadline=None,
                             phases=[Phase.explicit, Phase.generate],
                             suppress_health_check=list(HealthCheck))
        @hypothesis.seed(self.seed)
        @given(case=strategy)
        def test(case: Case) -> None:
            self.send(case, checks)

        try:
            test()
        except hypothesis.errors.Unsatisfiable:
            # Nothing to negate (an operation without parameters beyond its bearer, and that one
            # negated already): schemathesis draws no case, which is not a finding.
            if mode is not GenerationMode.NEGATIVE:
                raise

    # -- stateful: schemathesis's state machine over the document's links

    def stateful(self, scenarios: int, steps: int) -> None:
        """`scenarios` scenarios in seeded batches.

        A scenario's next rules depend on what the room answered, so Hypothesis can find a
        replayed prefix drawing differently and stop its run (`Flaky`); a batch is one run,
        and a stopped one only ends that batch (every request it sent was checked already).
        """
        fuzzer = self
        # Schema-valid inputs only: a scenario walks on from an answer, and invalid
        # input was the stateless phase's job (negative cases there).
        self.schema.config.generation.update(modes=[GenerationMode.POSITIVE])
        base = self.schema.as_state_machine()

        class Workflow(base):  # type: ignore[misc, valid-type]
            def step(self, input: Any) -> Any:
                if _operation_id(input.case.operation) in EXCLUDED_OPERATIONS:
                    return None
                fuzzer.report.stateful_steps += 1
                _carry_linked_bearer(input)
                response = fuzzer.send(input.case, CHECKS)
                if input.transition is not None and input.is_applied:
                    link = input.transition.id.rsplit(" -> ", 1)[0].split(" ")[-1]
                    fuzzer.report.linked_steps[f"{link} {response.status_code}"] += 1
                return StepOutput(response, input.case)

            def teardown(self) -> None:
                fuzzer.report.stateful_scenarios += 1

        batch = 0
        most_batches = 4 * (scenarios // STATEFUL_BATCH + 1)  # cut batches still end the phase
        while self.report.stateful_scenarios < scenarios and batch < most_batches:
            # hypothesis.seed on the class: run_state_machine_as_test copies it to its run.
            hypothesis.seed(self.seed * 1000 + batch)(Workflow)
            batch += 1
            try:
                Workflow.run(settings=hypothesis.settings(
                    max_examples=min(STATEFUL_BATCH, scenarios - self.report.stateful_scenarios),
                    stateful_step_count=steps, database=None, deadline=None,
                    phases=[Phase.generate], suppress_health_check=list(HealthCheck),
                ))
            except hypothesis.errors.Flaky:
                self.report.stateful_batches_cut += 1


def run_fuzz(base_url: str, host_bearer: str, *, examples: int, scenarios: int, steps: int = 10,
             seed: int = 14, only: set[str] | None = None,
             progress: Callable[[str], None] | None = None) -> FuzzReport:
    """Both phases against a running room; blocking (the suite runs it in a worker thread).

    Both phases are seeded by `seed`: the same seed draws the same cases (what the room
    answers can still differ, e.g. its ids). `only` limits the stateless phase to these
    operation ids and skips the stateful one.
    """
    fuzzer = Fuzzer(base_url, host_bearer, seed=seed, only=None if only is None else frozenset(only))
    fuzzer.stateless(examples)
    if progress is not None:
        progress(f"stateless done: {fuzzer.report.requests} requests")
    if only is None:
        fuzzer.stateful(scenarios, steps)
    return fuzzer.report


SAMPLE = """# Fuzzed idea

Preamble line.

## Goals

- one
- two

## Plan

Some plan.

### Details

More.
"""


def main(argv: list[str] | None = None) -> int:
    import tempfile

    import trio

    from commonroom.service import ServeOptions, read_credentials, serve_room

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="cases per operation (stateless)")
    parser.add_argument("--scenarios", type=int, default=300, help="stateful scenarios")
    parser.add_argument("--steps", type=int, default=10, help="at most this many steps a scenario")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: a fresh one)")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.randrange(10**6)
    print(f"seed: {args.seed}")

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "idea.md"
        path.write_text(SAMPLE, encoding="utf-8")
        reports: list[FuzzReport] = []

        async def session() -> None:
            stop = trio.Event()
            ready_box: list[Any] = []
            got = trio.Event()
            options = ServeOptions(path=path, owner_port=0, ingress_port=0,
                                   install_signal_handlers=False,
                                   requests_per_minute=10**9, anonymous_per_minute=10**9)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: serve_room(options, on_ready=lambda r: (ready_box.append(r),
                                                                                    got.set())[0],
                                                      stop=stop))
                await got.wait()
                creds = read_credentials(path)
                assert creds is not None
                base = f"http://127.0.0.1:{ready_box[0].ingress_port}"
                try:
                    reports.append(await trio.to_thread.run_sync(lambda: run_fuzz(
                        base, creds.host_session, examples=args.examples, scenarios=args.scenarios,
                        steps=args.steps, seed=args.seed, progress=print)))
                finally:
                    stop.set()

        trio.run(session)
    report = reports[0]
    print(report.summary())
    print("stateful steps fed by a link:", ", ".join(
        f"{key}: {n}" for key, n in sorted(report.linked_steps.items())))
    for line in report.server_errors + report.failures:
        print("FAIL", line)
    return 1 if report.server_errors or report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
