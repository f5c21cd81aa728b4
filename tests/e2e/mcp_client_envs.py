"""The MCP SDKs that cannot live in the test venv, built once from the package registries.

- The Python SDK 1.x line (`PYTHON_SDK_1`): it cannot share a venv with the 2.x the suite
  uses, so it gets its own venv.
- The TypeScript SDK (`tests/e2e/mcp_clients/package.json` + `package-lock.json`, pinned),
  installed with `npm ci` on Node 20.

Both are cached under `.tox/mcp-clients/` (rebuilt when the pin or the lock changes) and built
under a file lock, so parallel test workers build each once. tox builds them before the suite
(`commands_pre`: `python tests/e2e/mcp_client_envs.py`), so the suite's own time does not
include the downloads; a test run without tox builds them on first use. A build that fails
(no registry, no Node) fails the tests that need it: nothing is skipped.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[2]
CLIENTS: Final = REPO / "tests" / "e2e" / "mcp_clients"
CACHE: Final = Path(os.environ.get("COMMONROOM_MCP_CLIENTS_CACHE") or REPO / ".tox" / "mcp-clients")
PYTHON_SDK_1: Final = "mcp==1.27.2"
BUILD_TIMEOUT: Final = 600


@contextmanager
def _locked() -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(command: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def python_sdk_1() -> Path:
    """The python of a venv holding the pinned Python SDK 1.x."""
    home = CACHE / ("py-" + PYTHON_SDK_1.replace("==", "-"))
    python = home / "bin" / "python"
    stamp = home / ".built"
    with _locked():
        if not stamp.exists():
            shutil.rmtree(home, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(home)])
            _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PYTHON_SDK_1])
            stamp.write_text(PYTHON_SDK_1)
    return python


def node() -> str:
    found = shutil.which("node")
    if found is None:
        raise RuntimeError("node is not on PATH: the TypeScript SDK's tests need Node 20+")
    return found


def _npm_ci(source: Path, prefix: str, needed_by: str) -> Path:
    """A cache folder holding `npm ci` of `source`'s package.json and lock, built once per lock."""
    lock = (source / "package-lock.json").read_bytes()
    home = CACHE / (prefix + hashlib.sha256(lock).hexdigest()[:16])
    stamp = home / ".built"
    with _locked():
        if not stamp.exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(source / name, home / name)
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError(f"npm is not on PATH: {needed_by} need it")
            node()
            _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=home)
            stamp.write_text("built")
    return home


def typescript_sdk() -> Path:
    """A folder with the pinned TypeScript SDK in node_modules (the client script goes beside
    it: ESM resolves imports from the script's folder, `typescript_client`)."""
    return _npm_ci(CLIENTS, "node-", "the TypeScript SDK's tests")


def typescript_client() -> Path:
    """The client script beside the pinned SDK, named by its content: a cache shared by
    several checkouts never runs another checkout's version of it."""
    home = typescript_sdk()
    script = (CLIENTS / "ts_client.mjs").read_bytes()
    path = home / f"ts_client-{hashlib.sha256(script).hexdigest()[:16]}.mjs"
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_bytes(script)
        tmp.replace(path)
    return path


ACP_AGENTS: Final = REPO / "tests" / "e2e" / "acp_agents"


def acp_agents() -> Path:
    """The `node_modules/.bin` holding real ACP agents (`gemini` from @google/gemini-cli, and
    `codex-acp` from @zed-industries/codex-acp), pinned by `tests/e2e/acp_agents/`'s lock."""
    return _npm_ci(ACP_AGENTS, "acp-", "the real ACP agents' tests") / "node_modules" / ".bin"


if __name__ == "__main__":
    print(python_sdk_1())
    print(typescript_sdk())
    print(acp_agents())
