"""The `local` transport: no listener, for embedded use.

`run()` reports the hint `{"type": "local", "encrypted": false, "mode":
"local"}` (no address, no port) and sleeps until cancelled; it exposes
nothing. A `local` room is meant to be used in-process, through the owner
API or by code embedding the room, so there is normally nothing to dial:
`dial()` raises `transport_unavailable`. The one exception is a hint that
does carry an address and port (the codec allows them for `local`): then
`dial()` opens TCP to it, and only to a loopback address.
"""

from __future__ import annotations

from typing import ClassVar

import trio

from commonroom.protocol.invitation import TransportHint
from commonroom.transport.base import TransportPlugin, open_loopback_tcp, transport_unavailable


class LocalTransport(TransportPlugin):
    name: ClassVar[str] = "local"
    encrypted: ClassVar[bool] = False
    mode: ClassVar[str] = "local"

    async def run(
        self,
        ingress_host: str,
        ingress_port: int,
        *,
        task_status: trio.TaskStatus[TransportHint] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started(TransportHint(type=self.name, encrypted=self.encrypted, mode=self.mode))
        await trio.sleep_forever()

    @classmethod
    async def dial(cls, hint: TransportHint) -> trio.abc.Stream:
        if hint.address is None or hint.port is None:
            raise transport_unavailable(
                "a local room has no listener to dial; use it from the process that hosts it"
            )
        return await open_loopback_tcp(hint.address, hint.port, cls.name)
