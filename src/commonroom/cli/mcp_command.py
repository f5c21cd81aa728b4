"""`ce mcp`: the stdio bridge (`ce mcp INVITATION ...`) and `ce mcp config CLIENT ...` (agent side).

`ce mcp` is a group whose default command is the bridge, so `ce mcp INVITATION`, `ce mcp
--profile NAME` and `ce mcp` with CE_INVITATION (and CE_SESSION) in its environment run it;
`ce mcp config CLIENT [INVITATION --session ID] [--http|--stdio]` prints the exact setup
snippet for CLIENT (`mcp/configs.py` renders it): the snippet on stdout, so
`ce mcp config vscode > .vscode/mcp.json` works, and where it goes and where its secret lives on
stderr (with `--json`, one object with all of it). Without INVITATION it uses the room of the
saved session profile (`ce join` saves one), its session included. It asks the running room
(`server/discover`) whether it serves MCP's older eras by URL (`ce serve --mcp-legacy`): if not,
clients that speak only those get the stdio bridge. The bridge itself is `mcp_bridge.py`,
imported (with trio) only when it runs.
"""

from __future__ import annotations

from typing import Any, Final

import click

from commonroom.cli.options import json_option
from commonroom.cli.output import echo, emit_json, guarded

BRIDGE: Final = "bridge"


class McpGroup(click.Group):
    """`ce mcp ARGS`: a subcommand when ARGS start with one, else the bridge (also a bare
    `ce mcp` whose environment names the room, as a client's env block does)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        import os

        from commonroom.cli.profiles import ENV_INVITATION

        if (args and args[0] not in self.commands and args[0] not in ("--help", "-h")) or (
                not args and os.environ.get(ENV_INVITATION)):
            args = [BRIDGE, *args]
        return super().parse_args(ctx, args)


@click.command(name="config")
@click.argument("client", metavar="CLIENT")
@click.argument("invitation", required=False)
@click.option("--session", metavar="ID", help="The session the client uses (with INVITATION).")
@click.option("--profile", metavar="NAME", help="Use this saved profile (default: the last joined).")
@click.option("--http", "transport", flag_value="http", help="Connect by URL (the default where"
              " the client can).")
@click.option("--stdio", "transport", flag_value="stdio", help="Run the `ce mcp` bridge instead.")
@click.option("--name", metavar="NAME", help="The bridge's display name when it joins (default:"
              " CLIENT).")
@json_option
@guarded()
def config(client: str, invitation: str | None, session: str | None, profile: str | None,
           transport: str | None, name: str | None, json_mode: bool) -> None:
    """Print the setup snippet for CLIENT: claude-code, claude-desktop, vscode, cursor, codex,
    windsurf, zed or gemini."""
    from commonroom.cli import profiles
    from commonroom.mcp import configs
    from commonroom.protocol.invitation import decode

    hint: dict[str, Any]
    saved: str | None = None  # the profile a stdio bridge runs as
    if invitation is not None:
        if profile is not None:
            raise click.UsageError("give INVITATION or --profile, not both")
        invitation = profiles.invitation_argument(invitation)
        hint = decode(invitation).transport.to_json()
        bearer = profiles.session_argument(session) if session else None
    else:
        if session is not None:
            raise click.UsageError("--session goes with INVITATION (without one, the profile's"
                                   " session is used)")
        chosen = profiles.select(profile)
        invitation, bearer, hint, saved = chosen.invitation, chosen.session, chosen.hint, chosen.name
    legacy_room = _serves_legacy_eras(hint)
    if legacy_room is None and not json_mode:
        echo("# note: the room did not answer; assuming it speaks MCP 2026-07-28 only (the"
             " default): clients of the older eras get the `ce mcp` bridge", err=True)
    try:
        snippet = configs.render(client, transport=transport, url=configs.mcp_url(hint),
                                 bearer=bearer, ce_command=configs.running_ce(),
                                 invitation=invitation.strip() if invitation else None,
                                 name=name or client, profile=saved,
                                 legacy_room=bool(legacy_room))
    except configs.ConfigError as error:
        raise click.UsageError(str(error)) from None
    if json_mode:
        emit_json(snippet.to_json())
        return
    echo(f"# {snippet.where}", err=True)
    echo(f"# {snippet.secret}", err=True)
    echo(snippet.text.rstrip("\n"))


def _serves_legacy_eras(hint: dict[str, Any]) -> bool | None:
    """Whether the running room serves MCP's initialize eras by URL (`ce serve --mcp-legacy`),
    from its public `server/discover`; None when it does not answer."""
    import json

    from commonroom.client import errors
    from commonroom.wire import sync
    from commonroom.wire.timeouts import DEFAULT

    version = "2026-07-28"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": version,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json",
               "MCP-Protocol-Version": version, "Mcp-Method": "server/discover"}
    try:
        response = sync.Connection(hint, timeouts=DEFAULT).exchange("POST", "/mcp", headers, body)
        versions = json.loads(response.body)["result"]["supportedVersions"]
    except (errors.CommonroomError, OSError, ValueError, KeyError, TypeError):
        return None
    return isinstance(versions, list) and len(versions) > 1


@click.command(name=BRIDGE)
@click.argument("invitation", required=False)
@click.option("--profile", metavar="NAME", help="Run as this saved profile (its room and session:"
              " nothing secret on the command line).")
@click.option("--session", metavar="ID", help="Use this session instead of joining (default:"
              " CE_SESSION, else join once and keep the session in your profile; an ID here is"
              " visible to other users).")
@click.option("--name", default="mcp-agent", show_default=True,
              help="Your display name when the bridge joins.")
@click.option("--channel", is_flag=True, help="Also push what is addressed to you into a running"
              " Claude Code session (its `claude/channel` capability), and relay its permission"
              " prompts to the host.")
@json_option
def bridge(invitation: str | None, profile: str | None, session: str | None, name: str,
           channel: bool, json_mode: bool) -> None:
    """A stdio MCP server for local MCP clients, bridged to the room's POST /mcp (the default
    command of `ce mcp`: `ce mcp INVITATION`, `ce mcp --profile NAME`, or CE_INVITATION in the
    environment; `ce mcp config CLIENT` prints a client's setup)."""
    import os

    from commonroom.cli import profiles
    from commonroom.cli.mcp_bridge import command

    if profile is not None:
        if invitation is not None or session is not None:
            raise click.UsageError("give --profile, or INVITATION (and --session), not both")
        saved = profiles.load(profile)
        command(saved.invitation, session=saved.session, name=name, explicit=True,
                channel=channel)
        return
    invitation = invitation or os.environ.get(profiles.ENV_INVITATION)
    if not invitation:
        raise click.UsageError(f"give INVITATION, --profile NAME, or {profiles.ENV_INVITATION} in"
                               " the environment")
    # `ce agent` starts the bridge with the invitation and the session in the environment,
    # never in argv (where `ps` shows them).
    command(invitation, session=session, name=name, channel=channel)


@click.group(name="mcp", cls=McpGroup)
def mcp() -> None:
    """MCP: `ce mcp INVITATION` is a stdio MCP server bridged to the room's /mcp;
    `ce mcp config CLIENT` prints a client's setup (by URL, or through the bridge)."""


mcp.add_command(bridge)
mcp.add_command(config)

COMMANDS: Final = (mcp,)
