"""`ce` starts light: its help and an agent verb load neither the engine, nor the server, nor trio.

Each check runs `ce` in a fresh interpreter (the command's real import path, not the test
process's) and prints what that run left in `sys.modules`. The engine, the room service and
the web stack are imported only inside the commands that need them (`ce serve`, a host
command with no room running); `.importlinter` holds the other half: the CLI reaches the
engine only through `engine/facade.py`. Help needs not even the records (attrs, cattrs);
a verb does, for the operation table its routes come from.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

# What a run of `ce` must not have loaded: trio, the engine, the store, the room and its web
# stack (`commonroom.mcp.configs`, a pure renderer, is loaded only by the commands using it).
HEAVY_PROBE = (
    "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('quart', 'quart_trio',"
    " 'hypercorn', 'trio') or m.startswith(('commonroom.engine', 'commonroom.store',"
    " 'commonroom.room', 'commonroom.http', 'commonroom.mcp.')) or m == 'commonroom.service')\n"
    "records = sorted(m for m in sys.modules if m.split('.')[0] in ('attrs', 'cattrs'))\n"
)


def _run_ce(args: list[str], setup: str = "", env: dict[str, str] | None = None
            ) -> tuple[int, str, list[str], list[str]]:
    """Run `ce ARGS` in a fresh interpreter: (exit code, stdout, the heavy modules and the
    record libraries it loaded)."""
    script = (
        "import sys\n"
        f"{setup}"
        "from commonroom.cli.main import main\n"
        "try:\n"
        f"    main({args!r}, prog_name='ce')\n"
        "    code = 0\n"
        "except SystemExit as exit_:\n"
        "    code = exit_.code if isinstance(exit_.code, int) else 1\n"
        + HEAVY_PROBE
        + "import json\nsys.stderr.write('\\n' + json.dumps([code, heavy, records]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, env=env)
    code, heavy, records = json.loads(result.stderr.strip().splitlines()[-1])
    return code, result.stdout, heavy, records


@pytest.mark.parametrize("args", [["--help"], ["status", "--help"], ["serve", "--help"],
                                  ["read", "--help"], ["mcp", "config", "--help"]])
def test_help_loads_no_engine_no_server_no_trio(args: list[str]) -> None:
    code, out, heavy, records = _run_ce(args)
    assert code == 0 and "Usage: ce" in out
    assert heavy == [] and records == []


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_agent_verb_loads_no_engine_no_server_no_trio(tmp_path: Path) -> None:
    # A saved profile whose room is gone: `ce read` takes its whole path (profile, route,
    # the blocking wire, the refusal) and ends with the unreachable room's exit code.
    hint = {"type": "loopback", "mode": "direct", "encrypted": False, "address": "127.0.0.1",
            "port": _closed_port()}
    setup = ("from commonroom.cli import profiles\n"
             f"profiles.create('gone', 'commonroom://join/x', {{'session_id': 'ses_1'}}, {hint!r})\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    code, out, heavy, _ = _run_ce(["read", "--json", "--profile", "gone"], setup, env)
    assert code == 9, out  # output.EXIT_UNAVAILABLE
    assert json.loads(out)["error"] == "transport_unavailable"
    assert heavy == []
