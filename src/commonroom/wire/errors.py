"""The client's exceptions: one class per protocol error code, under `commonroom.CommonroomError`.

They live in the wire, the layer that raises them (an answer's error, a dropped
connection), and `commonroom.client.errors` re-exports them: the library's public
names and import paths (`commonroom.StaleVersion`, `commonroom.client.errors`) are
those, and the wire never imports the client above it.

The room answers every refusal as `{"error": code, "message", "details"}`
plus recovery fields (docs/spec/PROTOCOL.md section 11). The client raises the class
this module maps `code` to, the way httpx maps statuses to exceptions, so a
script writes `except commonroom.StaleVersion as e: e.current_version`
instead of parsing JSON.

How this relates to the server side: `commonroom.protocol.errors.CommonroomError`
is the one error type the engine and the adapters raise. The client's base
`CommonroomError` *subclasses* it, so `code`, `message`, `details`,
`recovery`, `http_status` and `to_wire()` mean the same on both sides and any
code that catches the protocol error (the `ce` guard) also catches the
client's. The client's base adds two things the protocol type refuses: codes
it does not know (a newer room may answer one; it still raises the base
class) and the client-side code `timeout` (`Timeout`, a wait that ran out;
never sent by a room).
"""

from __future__ import annotations

from typing import Any, Final

from commonroom.protocol import errors as protocol
from commonroom.protocol.errors import RECOVERY_FIELDS, STATUS

# The one code a client raises that no room ever sends.
TIMEOUT_CODE: Final = "timeout"


class CommonroomError(protocol.CommonroomError):
    """Base of every error the client raises; `code` is the protocol's `error` field."""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        http_status: int | None = None,
        **recovery: Any,
    ) -> None:
        # Not protocol.CommonroomError.__init__: it refuses codes it does not know.
        Exception.__init__(self, f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = dict(details or {})
        self.recovery = {key: value for key, value in recovery.items() if key in RECOVERY_FIELDS}
        self.http_status = http_status if http_status is not None else STATUS.get(code, 0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


# -- by kind ------------------------------------------------------------------------


class Unauthorized(CommonroomError):
    """401: the session is unknown, ended, or expired."""


class SessionExpired(Unauthorized):
    pass


class PermissionDenied(CommonroomError):
    """403: the session lacks a capability, or a rule refuses the caller."""


class InvitationError(PermissionDenied):
    """The invitation cannot be used (expired, revoked, already redeemed)."""


class InvitationExpired(InvitationError):
    pass


class InvitationRevoked(InvitationError):
    pass


class InvitationRedeemed(InvitationError):
    pass


class InvalidRequest(CommonroomError):
    """400: a parameter is missing or wrong; `details["field"]` names it when known."""

    @property
    def field(self) -> str | None:
        value = self.details.get("field")
        return value if isinstance(value, str) else None


class InvalidRegion(InvalidRequest):
    """The region path does not name a region of the document."""


class UnsupportedVersion(InvalidRequest):
    pass


class NotFound(CommonroomError):
    """404: a proposal, version, handoff or attachment that does not exist."""


class ProposalNotFound(NotFound):
    pass


class VersionNotFound(NotFound):
    pass


class HandoffNotFound(NotFound):
    pass


class AttachmentNotFound(NotFound):
    pass


class ThreadNotFound(NotFound):
    pass


class PermissionNotFound(NotFound):
    pass



class Conflict(CommonroomError):
    """409: the room's state refuses the change (someone else holds it, it moved on)."""

    @property
    def region(self) -> str | None:
        value = self.recovery.get("region")
        return value if isinstance(value, str) else None


class LeaseConflict(Conflict):
    """Another participant holds a lease on the region (or one overlapping it)."""

    @property
    def lease_id(self) -> str | None:
        value = self.recovery.get("lease_id")
        return value if isinstance(value, str) else None

    @property
    def holder(self) -> str | None:
        """The participant id holding the lease, when the room says."""
        for key in ("holder", "participant_id", "holder_id"):
            value = self.details.get(key)
            if isinstance(value, str):
                return value
        return None


class StaleVersion(Conflict):
    """The base version is behind: re-read (`.current_version`, `.diff`, `.changes`), re-propose."""

    @property
    def current_version(self) -> int | None:
        return _int(self.recovery.get("current_version"))

    @property
    def base_version(self) -> int | None:
        return _int(self.recovery.get("base_version"))

    @property
    def expected_version(self) -> int | None:
        return _int(self.recovery.get("expected_version"))

    @property
    def diff(self) -> str | None:
        value = self.recovery.get("diff")
        return value if isinstance(value, str) else None

    @property
    def changes(self) -> list[dict[str, Any]]:
        value = self.recovery.get("changes")
        return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


class ProposalConflict(Conflict):
    """The proposal is not in a state that allows this (e.g. committing a pending one)."""

    @property
    def proposal_id(self) -> str | None:
        value = self.recovery.get("proposal_id")
        return value if isinstance(value, str) else None


class HandoffConflict(Conflict):
    pass


class PermissionConflict(Conflict):
    """A permission request answered already, or expired."""


class LimitExceeded(CommonroomError):
    """A limit of the room: request rate (429), body size (413), or a count."""

    @property
    def retry_after_seconds(self) -> float | None:
        value = self.recovery.get("retry_after_seconds")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else None


class RateLimited(LimitExceeded):
    """429 with `retry_after_seconds`: wait that long, then retry."""


class TransportUnavailable(CommonroomError):
    """The room cannot be reached (not running, transport down, no answer in time)."""


class ServerFault(CommonroomError):
    """The room failed on its side; nothing was half-done (retrying later may work)."""


class StorageUnavailable(ServerFault):
    """503: the room could not write its file or sidecar; nothing was committed."""


class InternalError(ServerFault):
    """500: a bug in the room, logged there; the request changed nothing."""


class Timeout(CommonroomError):
    """A client-side wait ran out (`wait_for_review(timeout=...)`); the room said nothing wrong."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(TIMEOUT_CODE, message, details)


_BY_CODE: Final[dict[str, type[CommonroomError]]] = {
    "unauthorized": Unauthorized,
    "session_expired": SessionExpired,
    "permission_denied": PermissionDenied,
    "invitation_expired": InvitationExpired,
    "invitation_revoked": InvitationRevoked,
    "invitation_redeemed": InvitationRedeemed,
    "unsupported_version": UnsupportedVersion,
    "invalid_request": InvalidRequest,
    "invalid_region": InvalidRegion,
    "proposal_not_found": ProposalNotFound,
    "version_not_found": VersionNotFound,
    "handoff_not_found": HandoffNotFound,
    "attachment_not_found": AttachmentNotFound,
    "thread_not_found": ThreadNotFound,
    "permission_not_found": PermissionNotFound,
    "lease_conflict": LeaseConflict,
    "stale_version": StaleVersion,
    "proposal_conflict": ProposalConflict,
    "handoff_conflict": HandoffConflict,
    "permission_conflict": PermissionConflict,
    "limit_exceeded": LimitExceeded,
    "transport_unavailable": TransportUnavailable,
    "storage_unavailable": StorageUnavailable,
    "internal_error": InternalError,
    TIMEOUT_CODE: Timeout,
}


def class_for(code: str, http_status: int | None = None) -> type[CommonroomError]:
    """The exception class of `code` (the base class for a code this client does not know)."""
    if code == "limit_exceeded" and http_status == 429:
        return RateLimited
    if code.endswith("_not_found") and code not in _BY_CODE:
        return NotFound
    return _BY_CODE.get(code, CommonroomError)


def from_protocol(error: protocol.CommonroomError) -> CommonroomError:
    """The client exception for a protocol error (e.g. one raised by the byte client)."""
    if isinstance(error, CommonroomError):
        return error
    return build(error.code, error.message, error.details, error.http_status, error.recovery)


def build(
    code: str, message: str, details: dict[str, Any], http_status: int | None,
    recovery: dict[str, Any],
) -> CommonroomError:
    cls = class_for(code, http_status)
    if cls is Timeout:
        return Timeout(message, details)
    return cls(code, message, details, http_status=http_status, **recovery)


def from_answer(status: int, body: Any) -> CommonroomError:
    """The exception for a non-2xx answer whose parsed body is `body`."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        details = body.get("details")
        recovery = {key: body[key] for key in RECOVERY_FIELDS if key in body}
        return build(
            body["error"], str(body.get("message", "")),
            details if isinstance(details, dict) else {}, status, recovery,
        )
    return TransportUnavailable(
        "transport_unavailable",
        f"the room answered HTTP {status} without a commonroom error object",
        {"status": status},
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


__all__ = [
    "TIMEOUT_CODE",
    "AttachmentNotFound",
    "CommonroomError",
    "Conflict",
    "HandoffConflict",
    "HandoffNotFound",
    "InternalError",
    "InvalidRegion",
    "InvalidRequest",
    "InvitationError",
    "InvitationExpired",
    "InvitationRedeemed",
    "InvitationRevoked",
    "LeaseConflict",
    "LimitExceeded",
    "NotFound",
    "PermissionConflict",
    "PermissionDenied",
    "PermissionNotFound",
    "ProposalConflict",
    "ProposalNotFound",
    "RateLimited",
    "ServerFault",
    "SessionExpired",
    "StaleVersion",
    "StorageUnavailable",
    "ThreadNotFound",
    "Timeout",
    "TransportUnavailable",
    "Unauthorized",
    "UnsupportedVersion",
    "VersionNotFound",
    "build",
    "class_for",
    "from_answer",
    "from_protocol",
]
