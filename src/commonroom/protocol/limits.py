"""Numbers the protocol fixes (docs/spec/PROTOCOL.md sections 4, 6, 7, 8, 10, 11, 16), in one place.

The engine and the adapters read them from here; `ServingLimits` holds the
ones a room may be started with other values for (`ce serve` options, tests),
and the running room reports those actual values in diagnostics.
"""

from typing import Final

import attrs

EVENT_RING: Final = 2000
SESSION_DEFAULT_MINUTES: Final = 8 * 60
SESSION_MAX_MINUTES: Final = 24 * 60
INVITATION_DEFAULT_MINUTES: Final = 24 * 60
INVITATION_MAX_MINUTES: Final = 7 * 24 * 60
LEASE_DEFAULT_MINUTES: Final = 15
LEASE_MAX_MINUTES: Final = 120
PROPOSAL_MAX_BYTES: Final = 256 * 1024
MAX_ACTIVE_SESSIONS: Final = 64  # the default; `ce serve --max-sessions N` (section 11)
MAX_SESSIONS_LIMIT: Final = 4096  # the most `--max-sessions` may ask for
MAX_PARTICIPANTS: Final = 256  # or the session limit when larger (`ServingLimits`)
MAX_PENDING_PROPOSALS: Final = 20
MAX_OPEN_LEASES: Final = 16
LIST_DEFAULT: Final = 50
LIST_MAX: Final = 200
CHANGES_IN_STALE_ERROR: Final = 20
PRESENCE_SECONDS: Final = 90
NAME_MAX: Final = 64
SUMMARY_MAX: Final = 500
POLICY_MAX_CHANGED_LINES: Final = 10_000  # the most an auto-approve policy may allow
REQUESTS_PER_MINUTE: Final = 600
ANONYMOUS_PER_MINUTE: Final = 60
BODY_BYTES: Final = 1024 * 1024
WAIT_MAX_SECONDS: Final = 25
WAIT_MAX_EVENTS: Final = 200
# Handoffs, tasks, room text, attachments, surfaces, guards (docs/spec/PROTOCOL.md 9, 10, 10.1).
HANDOFF_DETAILS_MAX: Final = 16 * 1024  # characters
HANDOFF_ATTACHMENTS_MAX: Final = 16
REQUEST_ID_MAX: Final = 128
MESSAGE_MAX_CHARS: Final = 4096
MESSAGES_KEPT: Final = 5000
ADVERTISED_MAX_TOKENS: Final = 32
ADVERTISED_TOKEN_MAX: Final = 64
ATTACHMENT_MAX_BYTES: Final = 768 * 1024  # decoded
ATTACHMENT_BODY_BYTES: Final = 1536 * 1024  # the attachment and surface routes' body limit
ATTACHMENTS_TOTAL_BYTES: Final = 64 * 1024 * 1024  # the sidecar's bound for all attachments
FILE_NAME_MAX: Final = 255
SURFACE_MAX_BYTES: Final = 768 * 1024
GUARD_MAX_SENDS: Final = 20
GUARD_WINDOW_SECONDS: Final = 5 * 60
HUMAN_HOLD_MINUTES: Final = 2.0
# A save seen half-way (PROTOCOL.md 16, wave 4): a lease whose region vanished is kept
# this long for the region to come back, and the holds of external versions recorded
# this close together are computed against the version before the first of them.
TORN_SAVE_SECONDS: Final = 10
# The room's rules against a hostile agent (docs/protocol.md, the section of that name).
AGENT_INVITATION_MAX_MINUTES: Final = 60  # an invitation minted by anyone but the host
AGENT_INVITATION_MAX_USES: Final = 5
INVITATION_SESSIONS_DEFAULT: Final = 8  # active sessions joined through one invitation
INVITATION_SESSIONS_MAX: Final = MAX_ACTIVE_SESSIONS
# A lease on the whole document, on the root heading (the one whose region holds every
# other heading) or on a region with more than this many sub-sections needs `wide_lease`.
WIDE_LEASE_SUBSECTIONS: Final = 8
# Room text per participant (the host excepted), addressed or not, in any window: 300
# messages of 4 KB a minute cycled the 2,000-event ring.
MESSAGE_BUDGET: Final = 60
MESSAGE_BUDGET_WINDOW_SECONDS: Final = 5 * 60
# Reads that compute diffs or merges (a proposal's detail, a diff between versions, blame,
# a rebase): per participant (the host excepted) per minute, beyond the request limit. One
# such read is bounded (engine/linediff.py), this bounds how often one agent asks.
HEAVY_READS_PER_MINUTE: Final = 60
HEAVY_READS: Final = frozenset({"workspace.proposal", "workspace.diff", "workspace.blame",
                                "workspace.proposal.rebase"})
# Attachments: what one participant (the host excepted) may hold in the sidecar, and how
# long a handoff's attachments outlive it (or live at most, while it stays open).
ATTACHMENT_QUOTA_BYTES: Final = 8 * 1024 * 1024
# The share of the room's attachment store only the host's uploads may use: everyone else's
# attachments together stay within the rest, so nine agents' handoff files never lock the
# host out.
ATTACHMENT_HOST_RESERVED_BYTES: Final = 16 * 1024 * 1024
HANDOFF_ATTACHMENT_GRACE_MINUTES: Final = 60
HANDOFF_ATTACHMENT_TTL_MINUTES: Final = 24 * 60
# Proposal text the sidecar keeps: terminal proposals (rejected, committed, conflicted,
# withdrawn, superseded) keep their row and summary, but only the newest keep their text;
# one participant's (the host excepted) stored proposal text is bounded.
TERMINAL_TEXTS_PER_PARTICIPANT: Final = 5
TERMINAL_TEXTS_TOTAL: Final = 100
PROPOSAL_BYTES_PER_PARTICIPANT: Final = 2 * 1024 * 1024
# The review conversation (docs/spec/PROTOCOL.md section 17): a thread's quote and each
# comment's body; how many comments one thread keeps and how many open threads one
# participant (the host excepted) may have; how many revisions a proposal may reach.
THREAD_QUOTE_MAX: Final = 500  # characters
THREAD_BODY_MAX_BYTES: Final = 8 * 1024
THREAD_COMMENTS_MAX: Final = 200
# Comments the sidecar keeps in the whole room, newest first (each thread's opening comment
# is always kept): like room text (`MESSAGES_KEPT`), threads are bounded, not a record.
THREAD_COMMENTS_KEPT: Final = 2000
OPEN_THREADS_PER_PARTICIPANT: Final = 100
PROPOSAL_REVISIONS_MAX: Final = 50
# Task surfaces (docs/spec/PROTOCOL.md section 20): a live view's JSON, nesting and nodes; an
# app's bundle, its shared state, one app request's payload and its reply (compact UTF-8
# JSON bytes); how long a request waits for the page hosting the app; how long a task's
# surfaces outlive its end (as its handoff's attachments do).
LIVE_VIEW_MAX_BYTES: Final = 16 * 1024
LIVE_VIEW_MAX_DEPTH: Final = 8
LIVE_VIEW_MAX_NODES: Final = 200
LIVE_VIEW_TEXT_MAX: Final = 2000  # characters of one text, label or title
LIVE_VIEW_DATA_KEYS_MAX: Final = 100
APP_BUNDLE_MAX_BYTES: Final = 48 * 1024
APP_TITLE_MAX: Final = 120
APP_STATE_MAX_BYTES: Final = 64 * 1024
APP_REQUEST_MAX_BYTES: Final = 8 * 1024
APP_REPLY_MAX_BYTES: Final = 64 * 1024
APP_REQUEST_TIMEOUT_SECONDS: Final = 15.0
TASK_SURFACE_GRACE_MINUTES: Final = HANDOFF_ATTACHMENT_GRACE_MINUTES
# Open streams (SSE, WebSocket, long-poll, MCP streams) at once: the open-streams bound.
STREAMS_PER_SESSION: Final = 8
STREAMS_PER_PARTICIPANT: Final = 8
# External edits (section 16): a changed file is read once its (inode, size, mtime)
# stayed still this long (`ce serve --settle-ms`, within the bounds); one that never
# settles is read every UNSETTLED_READ_SECONDS; a write waits at most
# SETTLE_WAIT_SECONDS for a settle before it answers `file_changing`.
SETTLE_MS: Final = 250
SETTLE_MS_MIN: Final = 50
SETTLE_MS_MAX: Final = 5000
UNSETTLED_READ_SECONDS: Final = 5.0
SETTLE_WAIT_SECONDS: Final = 2.0
# A file gone this long is put back from the last version (docs/protocol.md).
RESTORE_AFTER_SECONDS: Final = 5.0

# Resident agents (docs/spec/PROTOCOL.md section 19): a permission request's life and bounds.
PERMISSION_TTL_SECONDS: Final = 300
PERMISSION_PREVIEW_MAX: Final = 500
PERMISSION_TITLE_MAX: Final = 200
PERMISSION_OPTIONS_MAX: Final = 10
PERMISSION_OPTION_FIELD_MAX: Final = 200
# How many of them one participant may have open at once (a runtime has at most one per turn).
PERMISSIONS_OPEN_MAX: Final = 20
RUNTIME_HARNESS_MAX: Final = 64
RUNTIME_QUEUED_MAX: Final = 20


@attrs.frozen
class ServingLimits:
    """The limits one running room was started with (defaults: the protocol's)."""

    requests_per_minute: int = REQUESTS_PER_MINUTE
    anonymous_per_minute: int = ANONYMOUS_PER_MINUTE
    body_bytes: int = BODY_BYTES
    max_sessions: int = attrs.field(
        default=MAX_ACTIVE_SESSIONS,
        validator=[attrs.validators.ge(1), attrs.validators.le(MAX_SESSIONS_LIMIT)],
    )
    """Active guest sessions at once (`ce serve --max-sessions N`, 1..MAX_SESSIONS_LIMIT)."""

    @property
    def max_participants(self) -> int:
        """Participants in the room at once: 256, or the session limit when larger, so a
        room opened for many dashboards (one session each) can seat them all."""
        return max(MAX_PARTICIPANTS, self.max_sessions)
