"""The exact setup snippet for each MCP client: what `ce mcp config CLIENT` prints.

Pure (no I/O, no quart), so the CLI and the owner API (the page's invitation
panel) render the same snippets. Each snippet uses the real URL of the room's
`/mcp` (or the `ce` bridge for stdio) with the absolute path of the `ce` that
is asked.

Which form: a room started the default way serves MCP 2026-07-28 only (the seed's
rule), so a client that speaks only the older (initialize) eras gets the stdio
bridge `ce mcp`, which answers its `initialize` and speaks 2026-07-28 to the room;
the URL form goes to clients that speak 2026-07-28, and to every client when the
room runs with `--mcp-legacy` (`legacy_room`).

No secret is ever in a command line a snippet makes (`/proc/PID/cmdline` is readable
by every local user): a stdio bridge names the saved profile (`ce mcp --profile NAME`:
the profile file, mode 0600, holds the session) or reads the invitation and session
from an `env` block the client sets (`CE_INVITATION`, `CE_SESSION`); an HTTP client
keeps its bearer in its own config or an environment variable:

| client | file | http | bearer |
|---|---|---|---|
| claude-code | .mcp.json (a command writes it) | `claude mcp add --transport http` | `${COMMONROOM_SESSION}` |
| claude-desktop | claude_desktop_config.json | stdio only (local servers) | the bridge's profile / env |
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
VSCODE_INVITATION_INPUT: Final = "commonroom-invitation"
# What the `ce mcp` bridge reads when no argument names the room (cli/profiles.py's names).
BRIDGE_INVITATION_ENV: Final = "CE_INVITATION"
BRIDGE_SESSION_ENV: Final = "CE_SESSION"


class ConfigError(ValueError):
    """A snippet that cannot be made from what was given (the message says what is missing)."""


@attrs.frozen
class ClientSpec:
    name: str
    title: str
    transports: tuple[str, ...]  # what it can use; the first where it has a choice
    where: str
    speaks_2026: bool = False
    """It speaks MCP 2026-07-28 by URL; the others open with `initialize` (the older eras)."""

    def default_transport(self, legacy_room: bool) -> str:
        """By URL where the room serves what the client speaks, else the stdio bridge."""
        if "http" in self.transports and (self.speaks_2026 or legacy_room):
            return "http"
        return "stdio"


CLIENTS: Final[dict[str, ClientSpec]] = {spec.name: spec for spec in (
    ClientSpec("claude-code", "Claude Code", ("http", "stdio"), "run it in a shell (in your"
               " project: it writes .mcp.json)", speaks_2026=True),
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
           ce_command: str, invitation: str | None, name: str = "mcp-agent",
           profile: str | None = None, legacy_room: bool = False) -> Snippet:
    """The snippet for `client`; raises ConfigError when a piece it needs is missing.

    `profile`: the saved profile a stdio bridge runs as (else it reads `invitation` and
    `bearer` from its env block); `legacy_room`: the room serves the initialize eras too
    (`ce serve --mcp-legacy`), so every client that can may use the URL.
    """
    spec = CLIENTS.get(client)
    if spec is None:
        raise ConfigError(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")
    chosen = transport or spec.default_transport(legacy_room)
    if chosen not in spec.transports:
        raise ConfigError(f"{spec.title} connects to local MCP servers over"
                          f" {' or '.join(spec.transports)} only; use --{spec.transports[0]}")
    if chosen == "http" and not (spec.speaks_2026 or legacy_room):
        raise ConfigError(f"{spec.title} opens with `initialize` (MCP's older eras), which this"
                          " room refuses by URL (it speaks 2026-07-28 only, the seed's rule): use"
                          " --stdio (the `ce mcp` bridge), or start the room with"
                          " `ce serve --mcp-legacy`")
    if chosen == "http":
        if url is None:
            raise ConfigError("the room's transport hint is not a loopback address, so there is no"
                              " URL to give: use --stdio (the `ce mcp` bridge dials the hint)")
        if not bearer:
            raise ConfigError("an HTTP client needs a session: run `ce join INVITATION --name NAME`"
                              " first (it saves one), or give --session")
        return _HTTP[client](spec, url, bearer)
    if profile is not None:
        return _stdio(spec, ce_command, ["mcp", "--profile", profile], {},
                      f"the session stays in the profile {profile!r} (mode 0600); no secret is"
                      " in this config")
    if not invitation:
        raise ConfigError("the stdio bridge needs the invitation: give INVITATION")
    env = {BRIDGE_INVITATION_ENV: invitation, **({BRIDGE_SESSION_ENV: bearer} if bearer else {})}
    held = ("the invitation and the session" if bearer else
            "the invitation; `ce mcp` joins once and keeps its session in"
            " ~/.config/commonroom/mcp-sessions.json (mode 0600)")
    return _stdio(spec, ce_command, ["mcp", "--name", name], env,
                  f"the config's env block holds {held} (never a command line): keep it in your"
                  " user-wide config, never in a project file you commit")


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _in_file(what: str) -> str:
    return (f"the session ({what}) is in that file: keep it in your user-wide config, never in a"
            " project file you commit")


def _claude_code(spec: ClientSpec, url: str, bearer: str) -> Snippet:
    # The bearer is a variable Claude Code expands when it connects: never in this command
    # line (other users read it from /proc), never in .mcp.json (a project file).
    text = shlex.join(["claude", "mcp", "add", "--scope", "project", "--transport", "http",
                       SERVER_NAME, url, "--header",
                       "Authorization: Bearer ${" + SESSION_ENV + "}"])
    return Snippet(spec.name, "http", "shell", text, spec.where,
                   f"the session lives in the environment variable {SESSION_ENV} (Claude Code"
                   f" expands it in .mcp.json): export {SESSION_ENV}={bearer} before claude",
                   {SESSION_ENV: bearer})


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


def _stdio(spec: ClientSpec, ce_command: str, args: list[str], env: dict[str, str],
           secret: str) -> Snippet:
    """The bridge as `spec` starts a local server; `env` is the block the client sets for it
    (its secrets live there, never in `args`)."""
    server: dict[str, Any] = {"command": ce_command, "args": args}
    if env:
        server["env"] = dict(env)
    if spec.name == "claude-code":
        if not env:  # nothing secret: the command line may carry it
            text = shlex.join(["claude", "mcp", "add", SERVER_NAME, "--", ce_command, *args])
            return Snippet(spec.name, "stdio", "shell", text, spec.where, secret)
        block: dict[str, Any] = {"mcpServers": {SERVER_NAME: {"type": "stdio", **server}}}
        return Snippet(spec.name, "stdio", "json", _json(block),
                       "merge into ~/.claude.json (mcpServers: your user scope)", secret)
    if spec.name == "codex":
        text = (f"[mcp_servers.{SERVER_NAME}]\ncommand = {_toml_string(ce_command)}\n"
                f"args = [{', '.join(_toml_string(a) for a in args)}]\n")
        if env:
            text += f"\n[mcp_servers.{SERVER_NAME}.env]\n" + "".join(
                f"{key} = {_toml_string(value)}\n" for key, value in env.items())
        return Snippet(spec.name, "stdio", "toml", text, spec.where, secret)
    if spec.name == "vscode":
        inputs: list[dict[str, Any]] = []
        if env:  # a project file: VS Code asks once and keeps them in its secret storage
            prompts = {BRIDGE_INVITATION_ENV: (VSCODE_INVITATION_INPUT, "commonroom invitation"),
                       BRIDGE_SESSION_ENV: (VSCODE_INPUT, "commonroom session (from ce join)")}
            server["env"] = {key: "${input:" + prompts[key][0] + "}" for key in env}
            inputs = [{"type": "promptString", "id": prompts[key][0], "password": True,
                       "description": prompts[key][1]} for key in env]
            secret = ("VS Code asks for them once and keeps them in its secret storage: paste "
                      + " and ".join(f"{key}={value}" for key, value in env.items()))
        block = {**({"inputs": inputs} if inputs else {}),
                 "servers": {SERVER_NAME: {"type": "stdio", **server}}}
    elif spec.name == "zed":
        block = {"context_servers": {SERVER_NAME: {**server, "env": dict(env)}}}
    else:
        block = {"mcpServers": {SERVER_NAME: server}}
    return Snippet(spec.name, "stdio", "json", _json(block), spec.where, secret)
