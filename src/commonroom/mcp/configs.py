"""The exact setup snippet for each MCP client: what `ce mcp config CLIENT` prints.

Pure (no I/O, no quart), so the CLI and the owner API (the page's invitation
panel) render the same snippets. Each snippet uses the real URL of the room's
`/mcp` (or the `ce` bridge for stdio) with the absolute path of the `ce` that
is asked, and passes the bearer the way that client expects:

| client | file | http | bearer |
|---|---|---|---|
| claude-code | (a command) | `claude mcp add --transport http` | `--header` |
| claude-desktop | claude_desktop_config.json | stdio only (local servers) | `ce mcp` keeps it |
| vscode | .vscode/mcp.json | `servers.*.type: http` | an `inputs` prompt, `password: true` |
| cursor | ~/.cursor/mcp.json | `url` | `headers` |
| codex | ~/.codex/config.toml | `url` | `bearer_token_env_var` |
| windsurf | ~/.codeium/windsurf/mcp_config.json | `serverUrl` | `headers` |
| zed | settings.json | `context_servers.*.url` | `headers` |
| gemini | ~/.gemini/settings.json | `httpUrl` | `headers` |

A snippet that must hold a secret says where it lives (`Snippet.secret`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs

SERVER_NAME: Final = "commonroom"
SESSION_ENV: Final = "COMMONROOM_SESSION"
VSCODE_INPUT: Final = "commonroom-session"


class ConfigError(ValueError):
    """A snippet that cannot be made from what was given (the message says what is missing)."""


@attrs.frozen
class ClientSpec:
    name: str
    title: str
    transports: tuple[str, ...]  # the first is the default
    where: str


CLIENTS: Final[dict[str, ClientSpec]] = {spec.name: spec for spec in (
    ClientSpec("claude-code", "Claude Code", ("http", "stdio"), "run it in a shell"),
    ClientSpec("claude-desktop", "Claude Desktop", ("stdio",),
               "merge into claude_desktop_config.json (Settings > Developer > Edit Config)"),
    ClientSpec("vscode", "VS Code", ("http", "stdio"), "save as .vscode/mcp.json (or merge into it)"),
    ClientSpec("cursor", "Cursor", ("http", "stdio"), "merge into ~/.cursor/mcp.json"),
    ClientSpec("codex", "Codex", ("http", "stdio"), "merge into ~/.codex/config.toml"),
    ClientSpec("windsurf", "Windsurf", ("http", "stdio"),
               "merge into ~/.codeium/windsurf/mcp_config.json"),
    ClientSpec("zed", "Zed", ("http", "stdio"),
               "merge into Zed's settings.json (zed: open settings)"),
    ClientSpec("gemini", "Gemini CLI", ("http", "stdio"), "merge into ~/.gemini/settings.json"),
)}


@attrs.frozen
class Snippet:
    client: str
    transport: str  # "http" | "stdio"
    format: str  # "json" | "toml" | "shell"
    text: str
    where: str  # what to do with the text
    secret: str  # where the secret it needs lives
    env: Mapping[str, str] = attrs.field(factory=dict)  # variables the client must start with

    def to_json(self) -> dict[str, Any]:
        return {"client": self.client, "transport": self.transport, "format": self.format,
                "text": self.text, "where": self.where, "secret": self.secret, "env": dict(self.env)}


def running_ce() -> str:
    """The absolute path of the `ce` this process runs as (a desktop client's PATH has no venv)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "ce" and argv0.exists():
        return os.path.abspath(argv0)  # not resolve(): keep the venv's own bin/ce
    beside = Path(sys.executable).parent / "ce"
    if beside.exists():
        return str(beside)
    found = shutil.which("ce")
    if found is None:
        raise ConfigError("cannot find the `ce` command (pip install commonroom puts it beside python)")
    return os.path.abspath(found)


def mcp_url(hint: Mapping[str, Any]) -> str | None:
    """The `/mcp` URL a client on this machine dials for a transport hint (loopback only)."""
    address, port = hint.get("address"), hint.get("port")
    if hint.get("type") != "loopback" or not address or not port:
        return None
    host = f"[{address}]" if ":" in str(address) else str(address)
    return f"http://{host}:{int(port)}/mcp"


def render(client: str, *, transport: str | None = None, url: str | None, bearer: str | None,
           ce_command: str, invitation: str | None, name: str = "mcp-agent") -> Snippet:
    """The snippet for `client`; raises ConfigError when a piece it needs is missing."""
    spec = CLIENTS.get(client)
    if spec is None:
        raise ConfigError(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")
    chosen = transport or spec.transports[0]
    if chosen not in spec.transports:
        raise ConfigError(f"{spec.title} connects to local MCP servers over"
                          f" {' or '.join(spec.transports)} only; use --{spec.transports[0]}")
    if chosen == "http":
        if url is None:
            raise ConfigError("the room's transport hint is not a loopback address, so there is no"
                              " URL to give: use --stdio (the `ce mcp` bridge dials the hint)")
        if not bearer:
            raise ConfigError("an HTTP client needs a session: run `ce join INVITATION --name NAME`"
                              " first (it saves one), or give --session")
        return _HTTP[client](spec, url, bearer)
    if not invitation:
        raise ConfigError("the stdio bridge needs the invitation: give INVITATION")
    args = ["mcp", invitation, "--name", name, *(["--session", bearer] if bearer else [])]
    return _stdio(spec, ce_command, args, bearer)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _in_file(what: str) -> str:
    return (f"the session ({what}) is in that file: keep it in your user-wide config, never in a"
            " project file you commit")


def _claude_code(spec: ClientSpec, url: str, bearer: str) -> Snippet:
    text = shlex.join(["claude", "mcp", "add", "--transport", "http", SERVER_NAME, url,
                       "--header", f"Authorization: Bearer {bearer}"])
    return Snippet(spec.name, "http", "shell", text, spec.where,
                   "Claude Code keeps the header in its config (~/.claude.json for the default local"
                   f" scope); `claude mcp remove {SERVER_NAME}` drops it")


def _vscode(spec: ClientSpec, url: str, bearer: str) -> Snippet:
    block = {
        "inputs": [{"type": "promptString", "id": VSCODE_INPUT, "password": True,
                    "description": "commonroom session (from ce join)"}],
        "servers": {SERVER_NAME: {"type": "http", "url": url, "headers": {
            "Authorization": "Bearer ${input:" + VSCODE_INPUT + "}"}}},
    }
    return Snippet(spec.name, "http", "json", _json(block), spec.where,
                   f"VS Code asks for the session once ({VSCODE_INPUT}) and keeps it in its secret"
                   f" storage: paste {bearer}")


def _cursor(spec: ClientSpec, url: str, bearer: str) -> Snippet:
    block = {"mcpServers": {SERVER_NAME: {"url": url, "headers": {"Authorization": f"Bearer {bearer}"}}}}
    return Snippet(spec.name, "http", "json", _json(block), spec.where, _in_file("the header"))


def _codex(spec: ClientSpec, url: str, bearer: str) -> Snippet:
    text = (f"[mcp_servers.{SERVER_NAME}]\nurl = {_toml_string(url)}\n"
            f"bearer_token_env_var = {_toml_string(SESSION_ENV)}\n")
    return Snippet(spec.name, "http", "toml", text, spec.where,
                   f"the session lives in the environment variable {SESSION_ENV} (Codex reads it"
                   f" through bearer_token_env_var): export {SESSION_ENV}={bearer} before codex",
                   {SESSION_ENV: bearer})


def _windsurf(spec: ClientSpec, url: str, bearer: str) -> Snippet:
    block = {"mcpServers": {SERVER_NAME: {"serverUrl": url,
                                          "headers": {"Authorization": f"Bearer {bearer}"}}}}
    return Snippet(spec.name, "http", "json", _json(block), spec.where, _in_file("the header"))


def _zed(spec: ClientSpec, url: str, bearer: str) -> Snippet:
    block = {"context_servers": {SERVER_NAME: {"url": url,
                                               "headers": {"Authorization": f"Bearer {bearer}"}}}}
    return Snippet(spec.name, "http", "json", _json(block), spec.where, _in_file("the header"))


def _gemini(spec: ClientSpec, url: str, bearer: str) -> Snippet:
    block = {"mcpServers": {SERVER_NAME: {"httpUrl": url,
                                          "headers": {"Authorization": f"Bearer {bearer}"}}}}
    return Snippet(spec.name, "http", "json", _json(block), spec.where, _in_file("the header"))


_HTTP: Final = {"claude-code": _claude_code, "vscode": _vscode, "cursor": _cursor, "codex": _codex,
                "windsurf": _windsurf, "zed": _zed, "gemini": _gemini}


def _stdio(spec: ClientSpec, ce_command: str, args: list[str], bearer: str | None) -> Snippet:
    held = ("the session given with --session" if bearer else
            "the invitation; `ce mcp` joins once and keeps its session in"
            " ~/.config/commonroom/mcp-sessions.json (mode 0600)")
    secret = f"the config holds {held}: keep it in your user-wide config"
    server = {"command": ce_command, "args": args}
    if spec.name == "claude-code":
        text = shlex.join(["claude", "mcp", "add", SERVER_NAME, "--", ce_command, *args])
        return Snippet(spec.name, "stdio", "shell", text, spec.where, secret)
    if spec.name == "codex":
        text = (f"[mcp_servers.{SERVER_NAME}]\ncommand = {_toml_string(ce_command)}\n"
                f"args = [{', '.join(_toml_string(a) for a in args)}]\n")
        return Snippet(spec.name, "stdio", "toml", text, spec.where, secret)
    if spec.name == "vscode":
        block: dict[str, Any] = {"servers": {SERVER_NAME: {"type": "stdio", **server}}}
    elif spec.name == "zed":
        block = {"context_servers": {SERVER_NAME: {**server, "env": {}}}}
    else:
        block = {"mcpServers": {SERVER_NAME: server}}
    return Snippet(spec.name, "stdio", "json", _json(block), spec.where, secret)
