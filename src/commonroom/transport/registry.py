"""Finding transport plugins by name through the `commonroom.transports` entry points.

The room asks for a plugin by the name the user chose (`ce serve --transport
NAME`); a client asks by the `type` of the hint inside an invitation. Either
way an unknown or broken plugin is `transport_unavailable`, never an
ImportError.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Final

import trio

from commonroom.protocol.invitation import TransportHint
from commonroom.transport.base import TransportPlugin, transport_unavailable

GROUP: Final = "commonroom.transports"


def available() -> list[str]:
    """The names of the installed plugins, sorted."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def load(name: str) -> type[TransportPlugin]:
    """The plugin class registered under `name`."""
    found = entry_points(group=GROUP, name=name)
    if not found:
        raise transport_unavailable(
            f"no transport plugin named {name!r}", {"transport": name, "available": available()}
        )
    # Several distributions may register one name; take the first, like pip-installed
    # console scripts do.
    ep = next(iter(found))
    try:
        plugin = ep.load()
    except Exception as exc:  # a broken plugin must not crash the room or the CLI
        raise transport_unavailable(
            f"transport plugin {name!r} cannot be loaded: {type(exc).__name__}",
            {"transport": name},
        ) from None
    if not (isinstance(plugin, type) and issubclass(plugin, TransportPlugin)):
        raise transport_unavailable(
            f"transport plugin {name!r} is not a TransportPlugin", {"transport": name}
        )
    return plugin


async def dial(hint: TransportHint) -> trio.abc.Stream:
    """Open a byte stream to the room described by `hint`, with the plugin its type names."""
    return await load(hint.type).dial(hint)
