"""Capability names, implication, and the default agent set (docs/spec/PROTOCOL.md section 2)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from commonroom.protocol.errors import CommonroomError, invalid_request

ALL: Final[tuple[str, ...]] = (
    "read",
    "observe",
    "checkout",
    "propose",
    "commit",
    "approve",
    "invite",
    "message",
    "handoff",
    "wide_lease",
    "admin",
    "*",
)
KNOWN: Final[frozenset[str]] = frozenset(ALL)
# An agent's invitation unless the host asks for more: never approve, invite, admin.
DEFAULT_AGENT: Final[tuple[str, ...]] = (
    "read",
    "observe",
    "checkout",
    "propose",
    "commit",
    "message",
    "handoff",
)
HOST: Final[tuple[str, ...]] = ("*",)


def normalize(names: Iterable[str], *, field: str = "capabilities") -> tuple[str, ...]:
    """Validate and order capability names; unknown names are `invalid_request`."""
    seen: list[str] = []
    for name in names:
        if not isinstance(name, str) or name not in KNOWN:
            raise invalid_request(f"unknown capability {name!r}", field)
        if name not in seen:
            seen.append(name)
    return tuple(sorted(seen, key=ALL.index))


def allows(held: Iterable[str], needed: str) -> bool:
    """`*` and `admin` imply every capability."""
    held_set = set(held)
    return needed in held_set or "*" in held_set or "admin" in held_set


def is_subset(wanted: Iterable[str], held: Iterable[str]) -> bool:
    """An invitation never grants more than its creator holds."""
    held_t = tuple(held)
    if "*" in held_t:
        return True
    return all(name != "*" and allows(held_t, name) for name in wanted)


def require(held: Iterable[str], needed: str) -> None:
    if not allows(held, needed):
        raise CommonroomError(
            "permission_denied",
            f"this session lacks the {needed!r} capability",
            {"required_capability": needed},
        )
