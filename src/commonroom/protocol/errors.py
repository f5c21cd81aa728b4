"""The one error type and the code -> HTTP status table (docs/spec/PROTOCOL.md section 11).

Every rule violation anywhere in commonroom raises `CommonroomError`. Adapters
turn it into `{"error", "message", "details"}` plus the recovery fields at the
top level; clients branch on `error`, never on `message`.
"""

from __future__ import annotations

from typing import Any, Final

STATUS: Final[dict[str, int]] = {
    "unauthorized": 401,
    "session_expired": 401,
    "permission_denied": 403,
    "invitation_expired": 403,
    "invitation_revoked": 403,
    "invitation_redeemed": 403,
    "unsupported_version": 400,
    "invalid_request": 400,
    "invalid_region": 400,
    "proposal_not_found": 404,
    "version_not_found": 404,
    "handoff_not_found": 404,
    "attachment_not_found": 404,
    "thread_not_found": 404,  # the review conversation (PROTOCOL.md 17)
    "permission_not_found": 404,  # resident agents' permission requests (section 19)
    "lease_conflict": 409,
    "stale_version": 409,
    "proposal_conflict": 409,
    "handoff_conflict": 409,
    "permission_conflict": 409,  # answered already, or expired
    "limit_exceeded": 429,
    "transport_unavailable": 503,
    # Server faults (docs/protocol.md "Server faults"): never `invalid_request`.
    # The room could not write its document or sidecar; nothing was committed.
    "storage_unavailable": 503,
    # A bug: logged with its traceback on the room's stderr, never sent.
    "internal_error": 500,
}

# Fields a client may act on without parsing `message`; they sit at the top
# level of the error object, next to `error`.
RECOVERY_FIELDS: Final[tuple[str, ...]] = (
    "base_version",
    "current_version",
    "expected_version",
    "diff",
    "changes",
    "retry_after_seconds",
    "lease_id",
    "proposal_id",
    "region",
)


class CommonroomError(Exception):
    """A protocol error: a code from `STATUS`, a human message, details, recovery fields.

    `http_status` overrides the table for the one code with two statuses:
    `limit_exceeded` is 413 when it is the request body that is too big.
    """

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        http_status: int | None = None,
        **recovery: Any,
    ) -> None:
        if code not in STATUS:
            raise ValueError(f"unknown error code {code!r}")
        unknown = set(recovery) - set(RECOVERY_FIELDS)
        if unknown:
            raise ValueError(f"unknown recovery fields {sorted(unknown)}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.recovery: dict[str, Any] = recovery
        self.http_status = http_status if http_status is not None else STATUS[code]

    def to_wire(self) -> dict[str, Any]:
        """The error object, exactly as every adapter sends it."""
        body: dict[str, Any] = {
            "error": self.code,
            "message": self.message,
            "details": self.details,
        }
        for field in RECOVERY_FIELDS:
            if field in self.recovery:
                body[field] = self.recovery[field]
        return body

    def __repr__(self) -> str:
        return f"CommonroomError({self.code!r}, {self.message!r})"


def invalid_request(message: str, field: str | None = None) -> CommonroomError:
    """`invalid_request`, naming the offending field when there is one."""
    details = {"field": field} if field is not None else {}
    return CommonroomError("invalid_request", message, details)


def internal_error() -> CommonroomError:
    """What a client sees of an unexpected exception: no detail (it is logged instead)."""
    return CommonroomError("internal_error", "internal error; the room logged it", {})


def body_too_large(limit: int) -> CommonroomError:
    return CommonroomError(
        "limit_exceeded",
        f"request body is larger than {limit} bytes",
        {"limit_bytes": limit},
        http_status=413,
    )
