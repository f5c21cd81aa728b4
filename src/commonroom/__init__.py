"""commonroom: a temporary room around a markdown file, for people and their agents.

The public Python API is the client (see docs/architecture.md "The Python client"):

    import commonroom

    with commonroom.Client.join(invitation, name="bot") as room:
        print(room.read("Problem").content)

`Client` / `AsyncClient`, their `Lease` / `AsyncLease`, `Resync`, and the
exceptions under `CommonroomError` are exported here. They load on first use
(PEP 562), so `import commonroom` — and every `ce` start — stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
PROTOCOL_NAME = "commonroom"
PROTOCOL_VERSION = "1"

if TYPE_CHECKING:
    from commonroom.client.aio import AsyncClient, AsyncLease
    from commonroom.client.common import Resync
    from commonroom.client.errors import (
        CommonroomError,
        Conflict,
        InvalidRegion,
        InvalidRequest,
        InvitationError,
        LeaseConflict,
        LimitExceeded,
        NotFound,
        PermissionDenied,
        ProposalConflict,
        ProposalNotFound,
        RateLimited,
        ServerFault,
        SessionExpired,
        StaleVersion,
        StorageUnavailable,
        Timeout,
        TransportUnavailable,
        Unauthorized,
    )
    from commonroom.client.sync import Client, Lease

_EXPORTS: dict[str, str] = {
    "Client": "commonroom.client.sync",
    "Lease": "commonroom.client.sync",
    "AsyncClient": "commonroom.client.aio",
    "AsyncLease": "commonroom.client.aio",
    "Resync": "commonroom.client.common",
    **{
        name: "commonroom.client.errors"
        for name in (
            "CommonroomError", "Conflict", "InvalidRegion", "InvalidRequest", "InvitationError",
            "LeaseConflict", "LimitExceeded", "NotFound", "PermissionDenied", "ProposalConflict",
            "ProposalNotFound", "RateLimited", "ServerFault", "SessionExpired", "StaleVersion",
            "StorageUnavailable", "Timeout", "TransportUnavailable", "Unauthorized",
        )
    },
}

__all__ = [
    "PROTOCOL_NAME",
    "PROTOCOL_VERSION",
    "AsyncClient",
    "AsyncLease",
    "Client",
    "CommonroomError",
    "Conflict",
    "InvalidRegion",
    "InvalidRequest",
    "InvitationError",
    "Lease",
    "LeaseConflict",
    "LimitExceeded",
    "NotFound",
    "PermissionDenied",
    "ProposalConflict",
    "ProposalNotFound",
    "RateLimited",
    "Resync",
    "ServerFault",
    "SessionExpired",
    "StaleVersion",
    "StorageUnavailable",
    "Timeout",
    "TransportUnavailable",
    "Unauthorized",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'commonroom' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
