"""`ce`, the command-line client (docs/spec/PROTOCOL.md section 13): the entry point.

This module is the `ce` group (its help, `--version`, the exit-code table in
its epilog), `ce FILE` as the shorthand of `ce serve FILE`, and the list of
command modules. The commands live on two sides:

- the host's, on the room around FILE (`host_call.py` says how they reach
  it: the running room, or the sidecar through the engine's facade):
  `host_serve.py` (`serve`), `host_access.py` (`invite`, `invitations`,
  `revoke`, `open`), `host_review.py` (`proposals`, `show`, `review`),
  `host_room.py` (`status`, `handoffs`, `handoff`, `say`, `messages`),
  `provenance.py` (`revert`, `restore`, `reapply`, `policy`, `export`, `blame FILE`);
- the agent's, over a session (a saved profile, or an invitation and a
  session): `agent_session.py` (`join`, `call`, `observe`, `decode`, `use`, `profiles`),
  `agent_verbs.py` (`read`, `checkout`, `propose`, `wait`, `commit`, ...),
  `mcp_command.py` (`ce mcp`, its bridge and `config`);
- `conversation.py` (`ask`, `threads`, `reply`, `resolve`, `revise`,
  `rebase`), `provenance.blame`, `say`/`messages` and the read verbs `history`, `diff`,
  `participants`, `leases` take both forms, FILE first for the host.

Every command takes `--json`. Every command body runs inside
`output.guarded`, so any failure is one error object (`--json`, on stdout)
or one readable line (on stderr) and a non-zero exit whose code says what
kind of failure it was (`output.EXIT_CODES`). Importing a command module
loads neither trio nor the engine nor the room service: those are imported
inside the commands that need them, so `ce` starts fast
(`tests/unit/test_cli_imports.py` holds it).
"""

from __future__ import annotations

import os
from typing import Any, Final

import click

from commonroom.cli import (
    agent_command,
    agent_session,
    agent_tasks,
    agent_verbs,
    conversation,
    host_access,
    host_review,
    host_room,
    host_serve,
    mcp_command,
    output,
    provenance,
)

# Every `ce` command, host side first (`ce --help` lists them sorted by name).
COMMANDS: Final[tuple[click.Command, ...]] = (
    *host_serve.COMMANDS, *host_access.COMMANDS, *host_review.COMMANDS, *host_room.COMMANDS,
    *provenance.COMMANDS,
    *agent_session.COMMANDS, *agent_verbs.COMMANDS, *mcp_command.COMMANDS,
    *conversation.COMMANDS,
    *agent_tasks.COMMANDS,  # task surfaces (docs/spec/PROTOCOL.md 20)

    *agent_command.COMMANDS,  # resident agents: `ce agent` and the host's permissions (section 19)
)


class CeGroup(click.Group):
    """The `ce` group: `ce FILE` is `ce serve FILE`; usage errors honour `--json`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["ce.json"] = "--json" in args
        return super().parse_args(ctx, args)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            if os.path.isfile(name):
                return "serve", self.get_command(ctx, "serve"), list(args)
            raise click.UsageError(f"no such command or file: {name!r}", ctx)
        return super().resolve_command(ctx, args)

    def _main_shell_completion(self, ctx_args: Any, prog_name: str, complete_var: str | None = None
                               ) -> None:
        # A completion script must never print a traceback: no suggestions instead.
        try:
            super()._main_shell_completion(ctx_args, prog_name, complete_var)
        except SystemExit:
            raise
        except BaseException:  # whatever went wrong, the shell gets nothing
            raise SystemExit(1) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            if not ctx.meta.get("ce.json"):
                raise
            output.report_usage(error)
            raise SystemExit(error.exit_code) from None


@click.group(
    cls=CeGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="\b\nExit codes:\n" + output.exit_codes_help(),
)
@click.version_option(package_name="commonroom", prog_name="ce")
def main() -> None:
    """commonroom: open a temporary room around a markdown file.

    `ce FILE` opens a room around FILE (the same as `ce serve FILE`) and prints
    an invitation; people and agents join with `ce join INVITATION`.
    """


for command in COMMANDS:
    main.add_command(command)
