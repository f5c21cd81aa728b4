"""Run the official MCP conformance runner's generic server scenarios against real rooms, in
both ways a room can be started: the default (the seed's MCP: 2026-07-28 only) and
`ce serve --mcp-legacy` (2026-07-28, and the legacy initialize-era scenarios of 2025-03-26 /
2025-06-18 / 2025-11-25).

    python tools/mcp_conformance.py [--rooms default,mcp-legacy] [--runner-dir DIR] [--shared DIR]
                                    [--json OUT]

What it does:

1. installs the pinned runner `@modelcontextprotocol/conformance@0.2.0-alpha.12`
   with npm into `--runner-dir` (default `$XDG_CACHE_HOME/commonroom/mcp-conformance`)
   unless it is there already;
2. for each kind of room: starts it (`ce serve --json`, with `--mcp-legacy` for the second) on
   a copy of `samples/idea.md` in a temporary folder, and joins an agent with the default agent
   capabilities; the default room runs the 2026-07-28 scenarios and must refuse each legacy
   revision's `initialize` with HTTP 400 / -32022 (checked here: the runner has no scenario
   for a refusal), the legacy room runs every scenario;
3. starts a tiny local proxy in front of the room's ingress that adds
   `Authorization: Bearer <session>` to every request (the runner cannot
   send one) and forwards everything else, `Host` and `Origin` included,
   unchanged;
4. runs each scenario with Node and the shim in `shared/tools/mcp-conformance`
   (`register.mjs`: the runner needs Node 22's `fs.globSync`), collects the
   `checks.json` results and prints one line per check that did not pass;
5. exits 0 when every FAILURE is one of `EXPECTED_FAILURES` (explained in
   docs/mcp-conformance.md), 1 otherwise, 2 when the runner cannot run.

Everything it starts it stops. It binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import trio

REPO = Path(__file__).resolve().parents[1]
RUNNER_PACKAGE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
MODERN = "2026-07-28"
# (scenario, spec version): the 2026-07-28 scenarios, then the legacy (initialize) ones the
# pinned runner has that measure a server with its own tools (the rest need its fixture tools).
SCENARIOS: tuple[tuple[str, str], ...] = (
    *((name, MODERN) for name in (
        "server-stateless",
        "tools-list",
        "resources-list",
        "prompts-list",
        "sep-2164-resource-not-found",
        "caching",
        "dns-rebinding-protection",
        "input-required-result-unsupported-methods",
        "http-header-validation",
        "server-sse-multiple-streams",
    )),
    *(("server-session-lifecycle", version) for version in ("2025-03-26", "2025-06-18", "2025-11-25")),
    *((name, "2025-11-25") for name in (
        "server-initialize",
        "ping",
        "tools-list",
        "resources-list",
        "prompts-list",
        "resources-subscribe",
        "resources-unsubscribe",
        "dns-rebinding-protection",
        "server-sse-multiple-streams",
        "server-sse-polling",
        "logging-set-level",
    )),
)
# (scenario, check id) -> why it fails against commonroom by design.
EXPECTED_FAILURES: dict[tuple[str, str], str] = {
    ("server-stateless", "sep-2575-http-server-method-not-found-404-resources-subscribe"):
        "commonroom keeps resources/subscribe (the notes: docs/spec/PROTOCOL.md section 12)",
    ("server-stateless", "sep-2575-http-server-method-not-found-404-resources-unsubscribe"):
        "commonroom keeps resources/unsubscribe (the notes: docs/spec/PROTOCOL.md section 12)",
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"):
        "needs the suite's fixture tool test_missing_capability",
    ("server-stateless", "sep-2575-missing-capability-http-400"):
        "needs the suite's fixture tool test_missing_capability",
    ("server-stateless", "sep-2575-http-server-no-independent-requests-on-stream"):
        "needs the suite's fixture tool test_streaming_elicitation",
    ("server-stateless", "sep-2575-server-no-log-without-loglevel"):
        "needs the suite's fixture tool test_logging_tool",
    ("resources-subscribe@2025-11-25", "resources-subscribe"):
        "subscribes to the suite's fixture resource test://watched-resource (not found: -32602)",
    ("resources-unsubscribe@2025-11-25", "resources-unsubscribe"):
        "unsubscribes from the suite's fixture resource test://watched-resource (not found: -32602)",
    ("logging-set-level@2025-11-25", "logging-set-level"):
        "commonroom sends no log messages and does not advertise logging (-32601)",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the runner -------------------------------------------------------------------------


def ensure_runner(runner_dir: Path) -> Path:
    index = runner_dir / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if index.exists():
        return index
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is not installed: cannot install the conformance runner")
    runner_dir.mkdir(parents=True, exist_ok=True)
    if not (runner_dir / "package.json").exists():
        subprocess.run([npm, "init", "-y"], cwd=runner_dir, check=True, stdout=subprocess.DEVNULL)
    log(f"installing {RUNNER_PACKAGE} into {runner_dir}")
    subprocess.run([npm, "install", "--no-audit", "--no-fund", RUNNER_PACKAGE], cwd=runner_dir,
                   check=True, stdout=subprocess.DEVNULL)
    return index


def read_checks(out_dir: Path) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for path in sorted(out_dir.rglob("checks.json")):
        data = json.loads(path.read_text())
        checks.extend(data if isinstance(data, list) else data.get("checks", []))
    return checks


# -- the room ---------------------------------------------------------------------------


ROOMS: dict[str, tuple[str, ...]] = {"default": (), "mcp-legacy": ("--mcp-legacy",)}
LEGACY_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")


class Room:
    def __init__(self, folder: Path, extra: tuple[str, ...] = ()) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        doc = folder / "idea.md"
        shutil.copyfile(REPO / "samples" / "idea.md", doc)
        ce = Path(sys.executable).parent / "ce"
        self.proc = subprocess.Popen(
            [str(ce if ce.exists() else "ce"), "serve", str(doc), "--json", "--port-owner", "0",
             "--port-ingress", "0", *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the room did not start")
        self.ready = json.loads(line)
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.port = int(self.ready["ingress_port"])
        self.doc = doc

    def call(self, method: str, path: str, body: Any, bearer: str | None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {bearer}"} if bearer else {})})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def post_mcp(self, body: Any, bearer: str) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/mcp", method="POST", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream",
                     "Authorization": f"Bearer {bearer}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def agent_session(self) -> str:
        from commonroom.credentials import read_credentials

        creds = read_credentials(self.doc)
        assert creds is not None
        invite = self.call("POST", "/workspace/invite", {}, creds.host_session)
        joined = self.call("POST", "/session/join",
                           {"invite": invite["invitation"], "name": "conformance"}, None)
        return str(joined["session_id"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- the bearer-adding proxy ---------------------------------------------------------------


async def _pipe(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
    try:
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(sink)


def rewrite_head(head: bytes, bearer: str) -> bytes:
    """Add the bearer and `Connection: close` (one request per connection); all else unchanged."""
    lines = head.split(b"\r\n")
    kept = [lines[0]] + [line for line in lines[1:] if line and not line.lower().startswith(
        (b"authorization:", b"connection:", b"keep-alive:"))]
    kept += [b"Authorization: Bearer " + bearer.encode(), b"Connection: close"]
    return b"\r\n".join(kept) + b"\r\n\r\n"


async def _proxy_one(client: trio.SocketStream, port: int, bearer: str) -> None:
    async with client:
        head = b""
        while b"\r\n\r\n" not in head:
            data = await client.receive_some(65536)
            if not data:
                return
            head += data
        head, rest = head.split(b"\r\n\r\n", 1)
        upstream = await trio.open_tcp_stream("127.0.0.1", port)
        async with upstream:
            await upstream.send_all(rewrite_head(head, bearer) + rest)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_pipe, client, upstream)
                nursery.start_soon(_pipe, upstream, client)


async def serve_proxy(port: int, bearer: str, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(lambda stream: _proxy_one(stream, port, bearer), listeners)


# -- main -------------------------------------------------------------------------------------


def refusal_checks(room: Room, bearer: str) -> list[dict[str, Any]]:
    """The seed's rule on a default room: each legacy revision's `initialize` is HTTP 400 with
    -32022, and opens no session (checks in the runner's own shape)."""
    checks = []
    for version in LEGACY_VERSIONS:
        status, answer = room.post_mcp({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "conformance", "version": "1"}}}, bearer)
        code = answer.get("error", {}).get("code") if isinstance(answer, dict) else None
        ok = status == 400 and code == -32022
        checks.append({"id": f"seed-initialize-refused-{version}",
                       "status": "SUCCESS" if ok else "FAILURE",
                       "errorMessage": "" if ok else f"HTTP {status}, {answer}"})
    return checks


async def run_scenarios(index: Path, shim: Path, room_port: int, bearer: str, out: Path,
                        scenarios: tuple[tuple[str, str], ...] = SCENARIOS
                        ) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {}
    async with trio.open_nursery() as nursery:
        proxy_port = await nursery.start(serve_proxy, room_port, bearer)
        url = f"http://127.0.0.1:{proxy_port}/mcp"
        for scenario, version in scenarios:
            key = scenario if version == MODERN else f"{scenario}@{version}"
            target = out / key
            command = ["node", "--import", str(shim), str(index), "server", "--url", url,
                       "--scenario", scenario, "--spec-version", version, "-o", str(target)]
            with trio.fail_after(180):
                await trio.run_process(command, check=False, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            results[key] = read_checks(target)
        nursery.cancel_scope.cancel()
    return results


def run_room(kind: str, index: Path, shim: Path) -> dict[str, list[dict[str, Any]]]:
    """Every scenario one kind of room runs, keyed `<scenario>[@version] (<kind>)` for the
    default room (so the keys of the legacy room stay those of `EXPECTED_FAILURES`)."""
    modern_only = tuple(item for item in SCENARIOS if item[1] == MODERN)
    with tempfile.TemporaryDirectory(prefix=f"commonroom-conformance-{kind}-") as tmp:
        room = Room(Path(tmp) / "room", ROOMS[kind])
        try:
            bearer = room.agent_session()
            if kind == "mcp-legacy":
                return trio.run(run_scenarios, index, shim, room.port, bearer, Path(tmp) / "out")
            ran = trio.run(run_scenarios, index, shim, room.port, bearer, Path(tmp) / "out",
                           modern_only)
            ran["seed-initialize-refused"] = refusal_checks(room, bearer)
            return {f"{key} (default)": checks for key, checks in ran.items()}
        finally:
            room.stop()


def expected_failure(scenario: str, check_id: str) -> str | None:
    """Why a check fails by design (`EXPECTED_FAILURES`, for either kind of room), else None."""
    return EXPECTED_FAILURES.get((scenario.removesuffix(" (default)"), check_id))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    parser.add_argument("--runner-dir", type=Path, default=cache / "commonroom" / "mcp-conformance")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared",
                        help="the shared/ folder beside the project (holds tools/mcp-conformance)")
    parser.add_argument("--json", type=Path, help="also write every check as JSON here")
    parser.add_argument("--rooms", default=",".join(ROOMS),
                        help=f"which ways to start the room, comma-separated: {', '.join(ROOMS)}")
    args = parser.parse_args()
    kinds = [kind for kind in args.rooms.split(",") if kind]
    if not kinds or any(kind not in ROOMS for kind in kinds):
        parser.error(f"--rooms takes {', '.join(ROOMS)}")
    shim = args.shared / "tools" / "mcp-conformance" / "register.mjs"
    if shutil.which("node") is None or not shim.exists():
        log(f"node or {shim} is missing: the conformance runner cannot run here")
        return 2
    index = ensure_runner(args.runner_dir)
    results: dict[str, list[dict[str, Any]]] = {}
    for kind in kinds:
        results.update(run_room(kind, index, shim))
    unexpected = 0
    for scenario, checks in results.items():
        counts: dict[str, int] = {}
        for check in checks:
            counts[check.get("status", "?")] = counts.get(check.get("status", "?"), 0) + 1
        print(f"{scenario}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        if not checks:
            print("  no checks recorded (the runner failed)")
            unexpected += 1
        for check in checks:
            status = check.get("status")
            if status in ("SUCCESS", "INFO", "SKIPPED"):
                continue
            why = expected_failure(scenario, check.get("id", ""))
            mark = "expected" if why else ("warning" if status == "WARNING" else "UNEXPECTED")
            if status == "FAILURE" and not why:
                unexpected += 1
            print(f"  {status} {check.get('id')} [{mark}]: {why or check.get('errorMessage', '')}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"unexpected failures: {unexpected}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main())
