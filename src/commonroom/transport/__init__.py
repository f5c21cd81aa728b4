"""Transport plugins: how bytes reach the room's session ingress (docs/spec/PROTOCOL.md section 14).

A plugin only carries bytes. It never decides capabilities, creates sessions
or reads the workspace; the engine, the HTTP layer and the GUI never import
this package. Plugins are found by name through the entry-point group
`commonroom.transports` (see `registry`); in tree: `loopback`, `local` and
`tailcat`.
"""

from __future__ import annotations

from commonroom.transport.base import TransportPlugin, transport_unavailable
from commonroom.transport.registry import GROUP, available, dial, load

__all__ = ["GROUP", "TransportPlugin", "available", "dial", "load", "transport_unavailable"]
