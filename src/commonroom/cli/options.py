"""The options and arguments several `ce` commands share, written once so their help reads the same."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

JSON_HELP: Final = "Machine-readable output (one JSON object)."
# FILE of a host command: the document the room is around (it must exist).
DOCUMENT: Final = click.Path(exists=True, dir_okay=False, path_type=Path)


def json_option(fn: F) -> F:
    """`--json` (as `json_mode`), on every command."""
    return click.option("--json", "json_mode", is_flag=True, help=JSON_HELP)(fn)


def file_argument(fn: F) -> F:
    """FILE (as `file`), the first argument of every host command."""
    return click.argument("file", type=DOCUMENT)(fn)
