"""The sidecar schema and its forward migrations.

`MIGRATIONS[i]` takes a database at schema version i to i+1. A new table for a
later feature (handoffs, tasks, messages) is a new entry at the end; existing
entries never change once released. Every table must be an ordinary rowid
table (no WITHOUT ROWID, no virtual tables): `store/undo.py` reverses a
committed transaction row by rowid.
"""

from __future__ import annotations

import sqlite3
from typing import Final

MIGRATIONS: Final[tuple[str, ...]] = (
    # 0 -> 1: the room's core.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE blocks (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, data BLOB NOT NULL);
    CREATE TABLE versions (
        version INTEGER PRIMARY KEY,
        content_hash TEXT NOT NULL,
        size INTEGER NOT NULL,
        manifest BLOB NOT NULL,
        summary TEXT NOT NULL,
        participant_id TEXT,
        region TEXT,
        source TEXT NOT NULL,
        proposal_id TEXT,
        created_at TEXT NOT NULL,
        file_written INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE participants (
        participant_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        capabilities TEXT NOT NULL,
        advertised TEXT NOT NULL DEFAULT '[]',
        joined_at TEXT NOT NULL,
        last_seen TEXT,
        left_at TEXT,
        is_host INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE sessions (
        session_hash BLOB PRIMARY KEY,
        participant_id TEXT NOT NULL REFERENCES participants(participant_id),
        capabilities TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        ended_at TEXT,
        end_reason TEXT
    );
    CREATE INDEX sessions_open ON sessions (ended_at, expires_at);
    CREATE INDEX sessions_participant ON sessions (participant_id);
    CREATE TABLE invitations (
        invite_id TEXT PRIMARY KEY,
        secret_hash BLOB NOT NULL UNIQUE,
        capabilities TEXT NOT NULL,
        created_by TEXT,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        max_uses INTEGER,
        used_count INTEGER NOT NULL DEFAULT 0,
        revoked_at TEXT,
        label TEXT
    );
    CREATE TABLE leases (
        lease_id TEXT PRIMARY KEY,
        participant_id TEXT NOT NULL,
        region TEXT NOT NULL,
        acquired_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        ended_at TEXT,
        end_reason TEXT
    );
    CREATE INDEX leases_open ON leases (ended_at, expires_at);
    CREATE TABLE proposals (
        proposal_id TEXT PRIMARY KEY,
        participant_id TEXT NOT NULL,
        region TEXT NOT NULL,
        base_version INTEGER NOT NULL,
        summary TEXT NOT NULL,
        content TEXT NOT NULL,
        base_region_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        reviewer_id TEXT,
        review_comment TEXT,
        committed_version INTEGER
    );
    CREATE INDEX proposals_status ON proposals (status, created_at);
    CREATE TABLE events (
        event_id INTEGER PRIMARY KEY AUTOINCREMENT,
        type TEXT NOT NULL,
        created_at TEXT NOT NULL,
        payload TEXT NOT NULL
    );
    """,
    # 1 -> 2: edit before approve keeps the author's text beside the reviewer's.
    """
    ALTER TABLE proposals ADD COLUMN original_content TEXT;
    """,
    # 2 -> 3: the room beyond the document (docs/spec/PROTOCOL.md 9, 10, 10.1): handoffs and their
    # tasks, room text, attachments, surfaces, the loop guard's window, and the
    # reason column that marks a human-editing hold among the leases.
    """
    ALTER TABLE leases ADD COLUMN reason TEXT;
    CREATE TABLE handoffs (
        handoff_id TEXT PRIMARY KEY,
        request_id TEXT,
        request_hash TEXT NOT NULL,
        from_participant_id TEXT NOT NULL,
        to_participant_id TEXT NOT NULL,
        summary TEXT NOT NULL,
        details TEXT,
        region TEXT,
        attachment_ids TEXT NOT NULL DEFAULT '[]',
        status TEXT NOT NULL,
        task_id TEXT UNIQUE,
        result_summary TEXT,
        result_details TEXT,
        reason TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE UNIQUE INDEX handoffs_request ON handoffs (from_participant_id, request_id)
        WHERE request_id IS NOT NULL;
    CREATE INDEX handoffs_status ON handoffs (status, created_at);
    CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        handoff_id TEXT NOT NULL UNIQUE REFERENCES handoffs(handoff_id),
        status TEXT NOT NULL,
        status_message TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL UNIQUE,
        participant_id TEXT NOT NULL,
        recipients TEXT NOT NULL DEFAULT '[]',
        handoff_id TEXT,
        text TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX messages_thread ON messages (handoff_id, seq);
    CREATE TABLE attachments (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        attachment_id TEXT NOT NULL UNIQUE,
        participant_id TEXT NOT NULL,
        handoff_id TEXT,
        file_name TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        size INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        data BLOB NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE surfaces (
        participant_id TEXT PRIMARY KEY,
        mime_type TEXT NOT NULL,
        size INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        data BLOB NOT NULL,
        published_at TEXT NOT NULL
    );
    CREATE TABLE guard_sends (
        sender TEXT NOT NULL,
        target TEXT NOT NULL,
        kind TEXT NOT NULL,
        sent_at TEXT NOT NULL
    );
    CREATE INDEX guard_sends_pair ON guard_sends (sender, target, sent_at);
    CREATE TABLE guard_trips (
        sender TEXT NOT NULL,
        target TEXT NOT NULL,
        until TEXT NOT NULL,
        PRIMARY KEY (sender, target)
    );
    """,
    # 3 -> 4: the heading index of each version (engine/history.py): a region of any
    # version is read from its blocks alone. `headings` is the blocks row of
    # its levels, paths and titles; `positions` per heading its character
    # offset, block ordinal and offset in that block. Versions written before
    # this get their row the first time they are read.
    """
    CREATE TABLE version_index (
        version INTEGER PRIMARY KEY,
        chars INTEGER NOT NULL,
        headings INTEGER NOT NULL,
        positions BLOB NOT NULL
    );
    """,
    # 4 -> 5: the room's rules against a hostile agent (docs/protocol.md, the section of that name). Each session
    # remembers the invitation it was joined through (the sessions-per-invitation
    # limit) and an invitation its limit; invitations are found by their creator
    # (revoked with it). A proposal records the bytes of text it holds
    # (`content_bytes`, the author's quota) and when a terminal one's text was
    # pruned (`pruned_at`; the row and its summary stay). Messages are counted per
    # sender (the room-text budget).
    """
    ALTER TABLE sessions ADD COLUMN invite_id TEXT;
    CREATE INDEX sessions_invitation ON sessions (invite_id) WHERE invite_id IS NOT NULL;
    ALTER TABLE invitations ADD COLUMN max_sessions INTEGER;
    CREATE INDEX invitations_creator ON invitations (created_by);
    ALTER TABLE proposals ADD COLUMN content_bytes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE proposals ADD COLUMN pruned_at TEXT;
    UPDATE proposals SET content_bytes = length(CAST(content AS BLOB))
        + coalesce(length(CAST(original_content AS BLOB)), 0);
    CREATE INDEX proposals_author ON proposals (participant_id, pruned_at);
    CREATE INDEX messages_sender ON messages (participant_id, created_at);
    """,
    # 5 -> 6: the owner page's logins (engine/owner_logins.py, docs/protocol.md "Owner page
    # login"): the sha256 of each page credential and until when it is valid, so a
    # restart keeps the host's browser logged in. Never the credential itself.
    """
    CREATE TABLE owner_logins (
        login_hash BLOB PRIMARY KEY,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
    );
    """,
    # 6 -> 7: provenance and trust (docs/spec/PROTOCOL.md section 18). `blame_sections`: per
    # section (heading to next heading; the preamble's path is "\n") the origin of each
    # line, one row each time a version changed that section's text or path
    # (engine/blame.py). A version records what it reverts or restores. Auto-approve
    # policies, and the proposals a reviewer (a policy) approved.
    """
    CREATE TABLE blame_sections (
        version INTEGER NOT NULL,
        path TEXT NOT NULL,
        origins BLOB NOT NULL
    );
    CREATE INDEX blame_sections_path ON blame_sections (path, version);
    ALTER TABLE versions ADD COLUMN reverts INTEGER;
    ALTER TABLE versions ADD COLUMN restores INTEGER;
    CREATE TABLE policies (
        policy_id TEXT PRIMARY KEY,
        participant_id TEXT,
        name_pattern TEXT,
        region_pattern TEXT NOT NULL,
        max_changed_lines INTEGER NOT NULL,
        expires_at TEXT,
        paused INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        removed_at TEXT
    );
    CREATE INDEX proposals_reviewer ON proposals (reviewer_id) WHERE reviewer_id IS NOT NULL;
    """,
    # 7 -> 8: the review conversation (engine/threads.py, engine/revisions.py; PROTOCOL.md 17).
    # Threads anchored to a region (and an optional exact quote), their comments;
    # a proposal's revision number and whether its latest revision came from a
    # rebase; the earlier revisions of a proposal (the latest one is the
    # proposal's own row: `content`, `base_version`, `summary`).
    """
    CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY,
        region TEXT NOT NULL,
        quote TEXT,
        blocking INTEGER NOT NULL,
        status TEXT NOT NULL,
        author_id TEXT NOT NULL,
        proposal_id TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX threads_region ON threads (region, status);
    CREATE INDEX threads_status ON threads (status, author_id);
    CREATE TABLE thread_comments (
        comment_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        participant_id TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX thread_comments_thread ON thread_comments (thread_id);
    ALTER TABLE proposals ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE proposals ADD COLUMN rebased INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE proposals ADD COLUMN revised_at TEXT;
    CREATE TABLE proposal_revisions (
        proposal_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        base_version INTEGER NOT NULL,
        summary TEXT NOT NULL,
        content TEXT NOT NULL,
        rebased INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (proposal_id, revision)
    );
""",
    # 8 -> 9: the proposals whose text is still stored, newest first. Pruning after
    # every decision and commit looked through every terminal proposal ever made
    # (the status index), so its cost grew with the room's history.
    """
    CREATE INDEX proposals_unpruned ON proposals (updated_at) WHERE pruned_at IS NULL;
""",
    # 9 -> 10: each participant's pending proposals. The limit check at every propose
    # counted them through the author index, i.e. through every proposal the
    # participant ever made.
    """
    CREATE INDEX proposals_pending ON proposals (participant_id) WHERE status = 'pending';
""",
    # 10 -> 11: task surfaces (docs/spec/PROTOCOL.md 20): one row per task with a live view or an app
    # (`engine/task_surfaces.py`); the JSON as checked and stored, who published it when.
    """
    CREATE TABLE task_surfaces (
        task_id TEXT PRIMARY KEY,
        handoff_id TEXT NOT NULL,
        view_json TEXT,
        view_surface_id TEXT,
        view_revision INTEGER,
        view_by TEXT,
        view_at TEXT,
        app_json TEXT,
        app_revision INTEGER NOT NULL DEFAULT 0,
        app_title TEXT,
        app_size INTEGER,
        app_by TEXT,
        app_at TEXT,
        state_json TEXT,
        state_revision INTEGER NOT NULL DEFAULT 0,
        state_by TEXT,
        state_at TEXT
    );
    CREATE INDEX task_surfaces_handoff ON task_surfaces (handoff_id);
""",
    # 11 -> 12: resident agents (PROTOCOL section 19): each participant's runtime report, and
    # the permission requests its runtime relays to the host.
    """
    CREATE TABLE participant_runtimes (
        participant_id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        harness TEXT NOT NULL,
        queued INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        turn_started_at TEXT,
        note TEXT,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE permission_requests (
        permission_id TEXT PRIMARY KEY,
        participant_id TEXT NOT NULL,
        title TEXT NOT NULL,
        tool TEXT NOT NULL,
        input_preview TEXT NOT NULL,
        options TEXT NOT NULL,
        status TEXT NOT NULL,
        option_id TEXT,
        answered_by TEXT,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        answered_at TEXT
    );
    CREATE INDEX permission_requests_pending ON permission_requests (expires_at)
        WHERE status = 'pending';
""",
    # 12 -> 13: narrow policies (docs/spec/PROTOCOL.md section 18, wave 4). A policy names
    # participants by an invitation label the host set, never by a display name; each
    # participant keeps the label of the host's invitation it joined through. Thread
    # comments count against their author's room-text budget (by author and time), and
    # the page reads the threads that moved since it last looked (by `updated_at`).
    """
    ALTER TABLE policies ADD COLUMN label TEXT;
    ALTER TABLE participants ADD COLUMN label TEXT;
    CREATE INDEX thread_comments_author ON thread_comments (participant_id, created_at);
    CREATE INDEX threads_updated ON threads (updated_at);
""",
    # 13 -> 14: the host's saves and the agents' work (PROTOCOL.md 16, wave 4): the
    # recent changes by others a save took back (`undoes`, JSON, and what the host
    # chose about it), and when a lease's region vanished (a save seen half-way: the
    # lease is kept if the region comes back in time).
    """
    ALTER TABLE versions ADD COLUMN undoes TEXT;
    ALTER TABLE versions ADD COLUMN undoes_settled TEXT;
    ALTER TABLE leases ADD COLUMN vanished_at TEXT;
""",
)

SCHEMA_VERSION: Final = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to SCHEMA_VERSION; returns the version it found."""
    found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if found > SCHEMA_VERSION:
        raise RuntimeError(
            f"sidecar schema {found} is newer than this commonroom ({SCHEMA_VERSION})"
        )
    for index in range(found, SCHEMA_VERSION):
        conn.executescript("BEGIN IMMEDIATE;" + MIGRATIONS[index] + f"PRAGMA user_version = {index + 1}; COMMIT;")
    return found
