"""The `loopback` transport: plain local TCP, the reference implementation.

The room's ingress listener on 127.0.0.1 is itself the endpoint, so `run()`
only reports the hint `{"type": "loopback", "encrypted": false, "mode":
"private", "address": "127.0.0.1", "port": <ingress port>}` and then sleeps
until cancelled. `dial()` opens a TCP connection to the hint's address and
port; it refuses any address that is not a loopback address, so an
invitation cannot make a client send its secret in the clear to another
machine.
"""

from __future__ import annotations

from typing import ClassVar

import trio

from commonroom.protocol.invitation import TransportHint
from commonroom.transport.base import TransportPlugin, open_loopback_tcp


class LoopbackTransport(TransportPlugin):
    name: ClassVar[str] = "loopback"
    encrypted: ClassVar[bool] = False
    mode: ClassVar[str] = "private"

    async def run(
        self,
        ingress_host: str,
        ingress_port: int,
        *,
        task_status: trio.TaskStatus[TransportHint] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started(
            TransportHint(
                type=self.name,
                encrypted=self.encrypted,
                mode=self.mode,
                address="127.0.0.1",
                port=ingress_port,
            )
        )
        await trio.sleep_forever()

    @classmethod
    async def dial(cls, hint: TransportHint) -> trio.abc.Stream:
        return await open_loopback_tcp(hint.address, hint.port, cls.name)
