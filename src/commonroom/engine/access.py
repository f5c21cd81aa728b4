"""Joining, invitations, sessions, leaving, participants (docs/spec/PROTOCOL.md sections 2-4).

Redemption order is fixed by the protocol: unknown secret -> `unauthorized`,
revoked -> `invitation_revoked`, expired -> `invitation_expired`, used up ->
`invitation_redeemed`. The whole redemption is one `BEGIN IMMEDIATE`
transaction, so concurrent joins on a single-use invitation serialize and
exactly one of them gets a session.

Invitations never outlive their minter's standing (the invitation bounds): an invitation
minted by anyone but the host lasts at most 60 minutes and 5 uses; revoking a
participant's sessions (or its leaving) revokes the invitations it minted; only
an `admin` revokes someone else's invitation. At most `max_sessions` sessions
joined through one invitation are active at once (default 8; the inviter may
set 1..64), so one multi-use invitation cannot fill the room's 64 by default.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from commonroom.engine import handoffs, sessions, surfaces
from commonroom.engine.ids import hash_secret, new_id
from commonroom.engine.leases import end_leases_of
from commonroom.engine.runtimes import runtimes as last_runtimes
from commonroom.engine.tx import Tx
from commonroom.protocol import capabilities as caps_mod
from commonroom.protocol import events as ev
from commonroom.protocol import invitation as codec
from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.records import (
    InvitationCreatedAnswer,
    InvitationInfo,
    Invitations,
    Joined,
    Left,
    Participant,
    Participants,
    SessionsRevoked,
)
from commonroom.protocol.requests import (
    AdvertiseParams,
    InviteIdParams,
    InviteParams,
    JoinParams,
    ListParams,
    NoParams,
    ParticipantIdParams,
)
from commonroom.protocol.timefmt import format_ts

if TYPE_CHECKING:
    from commonroom.engine.core import Engine

# ------------------------------------------------------------------ params



# ---------------------------------------------------------------- handlers


def folded_name(name: str) -> str:
    """What two names are compared by: NFKC, case-folded, letters and digits only."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", name).casefold() if ch.isalnum())


def _name_in_the_room(tx: Tx, wanted: str) -> str:
    """`wanted`, or `wanted-2`, `-3`…: unique among those in the room (not left), compared
    case-insensitively (`folded_name`). `host` and the host's own name are nobody else's:
    a joiner asking for one is refused, so no agent's text reads as the host's."""
    host_name = tx.conn.execute("SELECT name FROM participants WHERE is_host = 1").fetchone()
    reserved = {folded_name("host"), folded_name(host_name[0] if host_name else "host")}
    if folded_name(wanted) in reserved:
        error = invalid_request(f"{wanted!r} is the host's name: choose another", "name")
        error.details["reason"] = "name_reserved"
        raise error
    taken = {folded_name(str(row[0])) for row in tx.conn.execute(
        "SELECT name FROM participants WHERE left_at IS NULL")}
    if folded_name(wanted) not in taken:
        return wanted
    for number in range(2, tx.engine.serving.max_participants + 2):
        suffix = f"-{number}"
        candidate = wanted[: limits.NAME_MAX - len(suffix)] + suffix
        if folded_name(candidate) not in taken:
            return candidate
    raise invalid_request(f"too many participants are called {wanted!r}", "name")


def join(tx: Tx, p: JoinParams) -> Joined:
    secret = codec.secret_from(p.invite)
    name = p.name.strip()
    if not name or len(name) > limits.NAME_MAX:
        raise invalid_request(f"name must be 1 to {limits.NAME_MAX} characters", "name")
    row = tx.conn.execute(
        "SELECT invite_id, capabilities, expires_at, max_uses, used_count, revoked_at,"
        " max_sessions, label, created_by FROM invitations WHERE secret_hash = ?",
        (hash_secret(secret),),
    ).fetchone()
    if row is None:
        raise CommonroomError("unauthorized", "unknown invitation")
    (invite_id, caps_json, expires_at, max_uses, used_count, revoked_at, max_sessions,
     invite_label, created_by) = row
    if revoked_at is not None:
        raise CommonroomError("invitation_revoked", "this invitation was revoked")
    if expires_at <= tx.now_s:
        raise CommonroomError("invitation_expired", "this invitation has expired")
    if max_uses is not None and used_count >= max_uses:
        raise CommonroomError("invitation_redeemed", "this invitation has been used up")
    sessions_limit = _sessions_limit(max_sessions)
    active = tx.conn.execute(
        "SELECT count(*) FROM sessions WHERE invite_id = ? AND ended_at IS NULL AND expires_at > ?",
        (invite_id, tx.now_s),
    ).fetchone()[0]
    if active >= sessions_limit:
        raise CommonroomError(
            "limit_exceeded",
            f"this invitation already has {sessions_limit} active sessions",
            {"scope": "invitation_sessions", "limit": sessions_limit},
            retry_after_seconds=60,
        )
    # Those in the room: a participant who left is history, not a member (else a room
    # where agents leave and rejoin locks out for ever after 256 joins); the host is
    # not a guest, as for the session limit.
    count = tx.conn.execute(
        "SELECT count(*) FROM participants WHERE left_at IS NULL AND is_host = 0"
    ).fetchone()[0]
    most = tx.engine.serving.max_participants  # 256, or the room's session limit if larger
    if count >= most:
        raise CommonroomError(
            "limit_exceeded",
            f"the room already has {most} participants",
            {"limit": most},
            retry_after_seconds=60,
        )
    capabilities = tuple(json.loads(caps_json))
    name = _name_in_the_room(tx, name)
    participant_id = new_id("pt_")
    # The label a policy may name (PROTOCOL section 18) is the host's alone: a label on an
    # invitation some participant minted is shown, never carried.
    label = invite_label if created_by == tx.engine.host_participant_id else None
    tx.conn.execute(
        "INSERT INTO participants (participant_id, kind, name, capabilities, joined_at, label)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (participant_id, p.kind, name, caps_json, tx.now_s, label),
    )
    bearer, session_expires = sessions.create_session(
        tx, participant_id, capabilities, limits.SESSION_DEFAULT_MINUTES, invite_id=invite_id
    )
    tx.conn.execute(
        "UPDATE invitations SET used_count = used_count + 1 WHERE invite_id = ?", (invite_id,)
    )
    tx.emit(ev.ParticipantJoined(participant_id, p.kind, name, list(capabilities)))
    tx.emit(ev.InvitationRedeemed(invite_id, participant_id))
    tx.touch_presence(participant_id)
    return Joined(
        session_id=bearer,
        participant_id=participant_id,
        workspace_id=tx.engine.workspace_id,
        kind=p.kind,
        name=name,
        capabilities=list(capabilities),
        expires_at=session_expires,
    )


def _sessions_limit(max_sessions: int | None) -> int:
    """An invitation's active-session limit (null: one stored before there was a limit)."""
    return limits.INVITATION_SESSIONS_DEFAULT if max_sessions is None else int(max_sessions)


def _agent_invitation_bounds(tx: Tx, p: InviteParams) -> int:
    """The minutes an invitation minted by anyone but the host lasts; refuses wider ones."""
    if tx.actor.participant_id == tx.engine.host_participant_id:
        return p.expires_in_minutes or limits.INVITATION_DEFAULT_MINUTES
    most = limits.AGENT_INVITATION_MAX_MINUTES
    if p.expires_in_minutes is not None and p.expires_in_minutes > most:
        raise invalid_request(
            f"an invitation minted by a participant lasts at most {most} minutes",
            "expires_in_minutes",
        )
    uses = limits.AGENT_INVITATION_MAX_USES
    if p.max_uses is None or p.max_uses > uses:
        raise invalid_request(
            f"an invitation minted by a participant allows at most {uses} uses", "max_uses"
        )
    return p.expires_in_minutes or most


def create_invitation(tx: Tx, p: InviteParams) -> InvitationCreatedAnswer:
    """The invite answer; the `commonroom://` URI appears only here."""
    wanted = caps_mod.normalize(
        p.capabilities if p.capabilities is not None else caps_mod.DEFAULT_AGENT
    )
    if not wanted:
        raise invalid_request("an invitation needs at least one capability", "capabilities")
    if "*" in wanted:
        raise invalid_request("'*' is the host's and never travels in an invitation", "capabilities")
    if not caps_mod.is_subset(wanted, tx.actor.capabilities):
        raise CommonroomError(
            "permission_denied",
            "an invitation cannot grant capabilities its creator does not hold",
            {"held": list(tx.actor.capabilities), "requested": list(wanted)},
        )
    hint = tx.engine.ports.transport_hint
    if hint is None:
        raise CommonroomError(
            "transport_unavailable", "the room has no transport running to invite anyone to"
        )
    if p.label is not None and len(p.label) > limits.NAME_MAX:
        raise invalid_request(f"label must be at most {limits.NAME_MAX} characters", "label")
    minutes = _agent_invitation_bounds(tx, p)
    max_sessions = _sessions_limit(p.max_sessions)
    expires_at = format_ts(tx.now + timedelta(minutes=minutes))
    invite_id = new_id("inv_")
    secret = new_id("", 24)
    invitation = codec.Invitation(
        capabilities=wanted,
        expires_at=expires_at,
        secret=secret,
        transport=hint,
        workspace_id=tx.engine.workspace_id,
    )
    uri = codec.encode(invitation)
    tx.conn.execute(
        "INSERT INTO invitations (invite_id, secret_hash, capabilities, created_by, created_at,"
        " expires_at, max_uses, label, max_sessions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (invite_id, hash_secret(secret), json.dumps(list(wanted)), tx.actor.participant_id,
         tx.now_s, expires_at, p.max_uses, p.label, max_sessions),
    )
    tx.after_commit.append(partial(tx.engine.live.invitation_minted, hash_secret(secret)))
    tx.emit(ev.InvitationCreated(invite_id, list(wanted), expires_at, p.max_uses))
    return InvitationCreatedAnswer(invite_id, uri, expires_at, list(wanted), p.max_uses,
                                   max_sessions)


def _invitation_info(tx: Tx, row: tuple[Any, ...]) -> InvitationInfo:
    (invite_id, caps_json, created_by, created_at, expires_at, max_uses, used, revoked, label,
     max_sessions) = row
    if revoked is not None:
        state = "revoked"
    elif expires_at <= tx.now_s:
        state = "expired"
    elif max_uses is not None and used >= max_uses:
        state = "used_up"
    else:
        state = "active"
    return InvitationInfo(
        invite_id, json.loads(caps_json), created_by, created_at, expires_at, max_uses, used,
        revoked, label, state, _sessions_limit(max_sessions),
    )


def unused_start_invitation(engine: Engine, kept_secret: str | None) -> str | None:
    """The invitation an earlier `ce serve` printed, while still unused; else None (reprinted until used).

    Unused: the host's, not revoked, not expired, never redeemed. Its secret is
    re-encoded with how the room is reached now (the port may have changed), so
    a restart prints it again instead of adding one more unused invitation.
    """
    hint = engine.ports.transport_hint
    if not kept_secret or hint is None:
        return None
    with engine.transaction(engine.clock(), write=False) as tx:  # a read: no write lock
        row = tx.conn.execute(
            "SELECT capabilities, expires_at FROM invitations WHERE secret_hash = ?"
            " AND created_by = ? AND revoked_at IS NULL AND used_count = 0 AND expires_at > ?",
            (hash_secret(kept_secret), engine.host_participant_id, tx.now_s),
        ).fetchone()
    if row is None:
        return None
    caps_json, expires_at = row
    return codec.encode(codec.Invitation(
        capabilities=tuple(json.loads(caps_json)), expires_at=expires_at, secret=kept_secret,
        transport=hint, workspace_id=engine.workspace_id))


_INVITATION_COLUMNS = (
    "invite_id, capabilities, created_by, created_at, expires_at, max_uses, used_count,"
    " revoked_at, label, max_sessions"
)


def list_invitations(tx: Tx, p: ListParams) -> Invitations:
    rows = tx.conn.execute(
        f"SELECT {_INVITATION_COLUMNS} FROM invitations ORDER BY created_at DESC LIMIT ?",
        (p.limit,),
    ).fetchall()
    return Invitations([_invitation_info(tx, row) for row in rows])


def revoke_invitation(tx: Tx, p: InviteIdParams) -> InvitationInfo:
    row = tx.conn.execute(
        f"SELECT {_INVITATION_COLUMNS} FROM invitations WHERE invite_id = ?", (p.invite_id,)
    ).fetchone()
    if row is None:
        raise invalid_request(f"no invitation {p.invite_id!r}", "invite_id")
    if row[2] != tx.actor.participant_id and not caps_mod.allows(tx.actor.capabilities, "admin"):
        raise CommonroomError(
            "permission_denied", "only its creator (or an admin) revokes an invitation",
            {"invite_id": p.invite_id},
        )
    if row[7] is None:
        tx.conn.execute(
            "UPDATE invitations SET revoked_at = ? WHERE invite_id = ?", (tx.now_s, p.invite_id)
        )
        tx.emit(ev.InvitationRevoked(p.invite_id))
        row = (*row[:7], tx.now_s, *row[8:])
    return _invitation_info(tx, row)


def revoke_minted(tx: Tx, participant_id: str) -> None:
    """Revoke every invitation `participant_id` minted that is not revoked yet (one event each)."""
    for (invite_id,) in tx.conn.execute(
        "UPDATE invitations SET revoked_at = ? WHERE created_by = ? AND revoked_at IS NULL"
        " RETURNING invite_id",
        (tx.now_s, participant_id),
    ).fetchall():
        tx.emit(ev.InvitationRevoked(invite_id))


def revoke_sessions(tx: Tx, p: ParticipantIdParams) -> SessionsRevoked:
    row = tx.conn.execute(
        "SELECT is_host FROM participants WHERE participant_id = ?", (p.participant_id,)
    ).fetchone()
    if row is None:
        raise invalid_request(f"no participant {p.participant_id!r}", "participant_id")
    if row[0] and p.participant_id != tx.actor.participant_id:
        raise CommonroomError("permission_denied", "the host's sessions cannot be revoked")
    ended = sessions.end_sessions(tx, p.participant_id, "revoked")
    if ended:
        tx.emit(ev.SessionRevoked(p.participant_id))
    if p.participant_id != tx.engine.host_participant_id:
        # Its pre-minted invitations would let it back in (revoke what it minted).
        revoke_minted(tx, p.participant_id)
    return SessionsRevoked(p.participant_id, ended)


def leave(tx: Tx, p: NoParams) -> Left:
    pid = tx.actor.participant_id
    end_leases_of(tx, pid, "left")
    handoffs.on_leave(tx, pid)
    surfaces.clear_of(tx, pid)
    sessions.end_sessions(tx, pid, "left")
    if pid != tx.engine.host_participant_id:
        revoke_minted(tx, pid)
    tx.conn.execute(
        "UPDATE participants SET left_at = ?, last_seen = ? WHERE participant_id = ?",
        (tx.now_s, tx.now_s, pid),
    )
    tx.after_commit.append(partial(tx.engine.presence.forget, pid))
    tx.emit(ev.ParticipantLeft(pid))
    return Left(pid, True)


def participants(tx: Tx, p: NoParams) -> Participants:
    return Participants(list_participants(tx))


def list_participants(tx: Tx) -> list[Participant]:
    out: list[Participant] = []
    presence = tx.engine.presence
    runtimes = last_runtimes(tx)
    for pid, kind, name, caps_json, adv_json, joined_at, last_seen_db, left_at, label in (
        tx.conn.execute(
            "SELECT participant_id, kind, name, capabilities, advertised, joined_at, last_seen,"
            " left_at, label FROM participants ORDER BY joined_at, participant_id")):
        seen = presence.last_seen(pid)
        last_seen = format_ts(seen) if seen is not None else last_seen_db
        present = left_at is None and presence.is_present(pid, tx.now)
        out.append(
            Participant(
                pid, kind, name, json.loads(caps_json), json.loads(adv_json), present, joined_at,
                last_seen, left=left_at is not None, label=label,
                runtime=runtimes.get(pid) if left_at is None else None,  # who left runs nothing
            )
        )
    return out


def advertise(tx: Tx, p: AdvertiseParams) -> Participant:
    """Replace the caller's advertised tokens: discovery hints shown in participants.

    Never authority: capabilities come from the session alone, so a token named
    like a real capability (`approve`) grants nothing.
    """
    tokens = list(dict.fromkeys(token.strip() for token in p.capabilities))
    if len(tokens) > limits.ADVERTISED_MAX_TOKENS:
        raise invalid_request(
            f"at most {limits.ADVERTISED_MAX_TOKENS} advertised tokens", "capabilities"
        )
    for token in tokens:
        if not token or len(token) > limits.ADVERTISED_TOKEN_MAX:
            raise invalid_request(
                f"each advertised token is 1 to {limits.ADVERTISED_TOKEN_MAX} characters",
                "capabilities",
            )
    pid = tx.actor.participant_id
    tx.conn.execute(
        "UPDATE participants SET advertised = ? WHERE participant_id = ?", (json.dumps(tokens), pid)
    )
    return next(each for each in list_participants(tx) if each.participant_id == pid)


def presence_sweep(tx: Tx) -> None:
    """The `on_sweep` hook: announce presence changes (`participant.present` / `.away`)."""
    arrived, gone = tx.engine.presence.transitions(tx.now)
    for pid in arrived:
        tx.emit(ev.ParticipantPresent(pid))
    for pid in gone:
        tx.emit(ev.ParticipantAway(pid))


def presence_due(tx: Tx) -> datetime | None:
    return tx.engine.presence.next_change(tx.now)
