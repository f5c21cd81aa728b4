"""`ce agent` with real ACP agents from npm (docs/spec/PROTOCOL.md section 19): Gemini CLI
(`gemini --acp`, @google/gemini-cli) and Zed's Codex adapter (`codex-acp`,
@zed-industries/codex-acp), built once into the clients' cache (`mcp_client_envs.acp_agents`).

- With a key in the environment (a placeholder: nothing here reaches a model), each completes
  `initialize` and `session/new` with the room as its MCP server: the runtime reports itself and
  the agent has started the `ce mcp` bridge.
- Without credentials, `ce agent` says so in one line ("gemini needs you to sign in: run
  `gemini` once"), never a traceback. (Both agents refuse `session/new` itself without
  credentials, so that is where it fails, before any prompt.)

Skipped, with the reason, only where Node or npm is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e import mcp_client_envs
from tests.e2e.conftest import Room, ce, ce_path

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
BOUND = 120.0
AGENTS = {
    # shorthand: (placeholder credentials, setup of the agent's home)
    "gemini": {"GEMINI_API_KEY": "placeholder-not-a-key"},
    "codex": {"OPENAI_API_KEY": "sk-placeholder-not-a-key"},
}


@pytest.fixture(scope="module")
def agents_bin() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node and npm are needed to install the real ACP agents")
    return mcp_client_envs.acp_agents()


def _env(bin_dir: Path, home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY")}
    return {**env, "HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            **extra}


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (by each process's parent in /proc/*/stat: a child started
    from another thread is not in /proc/PID/task/PID/children)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        kids = [child for child, up in parent.items() if up == current]
        found += kids
        frontier += kids
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


@pytest.mark.parametrize("shorthand", sorted(AGENTS))
def test_a_real_agent_starts_a_session_with_the_room_as_its_mcp_server(
    served: Room, agents_bin: Path, tmp_path: Path, shorthand: str,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    # Gemini CLI starts MCP servers only in a folder the user trusts.
    (home / ".gemini").mkdir()
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(work): "TRUST_FOLDER"}))
    invitation = served.invite()["invitation"]
    err = tmp_path / "ce-agent.err"
    with err.open("wb") as sink:
        process = subprocess.Popen([ce_path(), "agent", invitation, "--name", shorthand, shorthand],
                                   cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=sink, env=_env(agents_bin, home, AGENTS[shorthand]))
        try:
            deadline = time.monotonic() + BOUND
            bridge: list[int] = []
            while not bridge:
                assert process.poll() is None, err.read_text()
                assert time.monotonic() < deadline, f"no session with the room: {err.read_text()}"
                parts = served.ok("GET", "/workspace/participants", served.host_session)
                me = next((p for p in parts["participants"] if p["name"] == shorthand), None)
                if me and (me.get("runtime") or {}).get("state") == "idle":
                    # session/new answered; the agent started the room's MCP server
                    bridge = [pid for pid in _descendants(process.pid)
                              if [a for a in _cmdline(pid) if a][-2:] == [ce_path(), "mcp"]]
                time.sleep(0.2)
            assert me is not None and me["runtime"]["harness"] == f"acp:{shorthand}"
            # the bridge got the session from its environment, never from its arguments
            for pid in bridge:
                assert not any(arg.startswith(("commonroom://", "ses_")) for arg in _cmdline(pid))
            below = _descendants(process.pid)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    assert "Traceback" not in err.read_text()
    # stopping `ce agent` ended the agent's whole process group: the launcher, the real
    # binary, the bridge
    deadline = time.monotonic() + 10
    while (alive := [pid for pid in below if Path(f"/proc/{pid}").exists()
                     and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]]):
        assert time.monotonic() < deadline, [_cmdline(pid) for pid in alive]
        time.sleep(0.1)


@pytest.mark.parametrize("shorthand", sorted(AGENTS))
def test_without_credentials_it_says_so_in_one_line(
    served: Room, agents_bin: Path, tmp_path: Path, shorthand: str,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    invitation = served.invite()["invitation"]
    result = ce("agent", invitation, "--name", shorthand, shorthand,
                env=_env(agents_bin, home, {}), cwd=tmp_path, timeout=BOUND)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == f"Error: {shorthand} needs you to sign in: run `{shorthand}` once", lines
    assert not [line for line in lines if not line.startswith(("ce agent:", "Error:"))], lines
