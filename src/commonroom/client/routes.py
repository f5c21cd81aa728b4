"""Where each operation lives on the wire, for the client: derived from the protocol's specs.

`protocol/operations.py` holds every operation's spec and imports only attrs
and `protocol/`, so the client reads the table itself (no engine, no copy):
method, path, and the name of the result record, per operation.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from commonroom.protocol.operations import OPERATIONS


class Route(NamedTuple):
    method: str
    path: str
    result: str | None  # the name of the result record in `commonroom.protocol.records`


ROUTES: Final[dict[str, Route]] = {
    op.name: Route(op.method, op.path, op.result.__name__ if op.result is not None else None)
    for op in OPERATIONS
}
