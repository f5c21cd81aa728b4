"""`commonroom.Client`: the synchronous Python client.

One method per operation of the table (`OPERATION_METHODS` names them),
with typed parameters, returning the operation's result record from
`commonroom.protocol.records`. Refusals raise the `commonroom.CommonroomError`
subclass of their code. Calls over a loopback transport share one kept-alive
connection (`wire.KeptAlive`); other transports dial a connection per call.

    with commonroom.Client.join(invitation, name="bot") as room:
        text = room.read("Problem")
        with room.checkout("Problem") as lease:
            proposal = room.propose("Problem", new_text, base_version=text.version,
                                    summary="sharper")
            if room.wait_for_review(proposal.proposal_id).status == "approved":
                room.commit(proposal.proposal_id)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Final, TypeVar

import attrs

from commonroom.client import errors, wire
from commonroom.client.common import (
    DECIDED,
    WAIT_HOLD_SECONDS,
    Resync,
    event_concerns,
    record,
    sse_item,
)
from commonroom.client.routes import ROUTES
from commonroom.protocol import records as r
from commonroom.protocol.events import Event

T = TypeVar("T")
RECONNECT_SECONDS: Final = 5.0
# A silent event stream (the room sends a heartbeat every 15 s) is dropped after this.
STREAM_SILENCE_SECONDS: Final = 45.0


@attrs.frozen
class Lease(r.Lease):
    """The lease `Client.checkout` took; `with` releases it on exit (if still held)."""

    client: Client = attrs.field(kw_only=True, eq=False, repr=False)

    def renew(self, minutes: int | None = None) -> r.Lease:
        return self.client.renew(self.lease_id, minutes=minutes)

    def release(self) -> r.Released:
        return self.client.release(self.lease_id)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.release()
        except errors.InvalidRequest as gone:
            if gone.field != "lease_id":
                raise
            # The lease had ended already (released by hand, expired, or by the host).
        except errors.CommonroomError:
            if exc is None:
                raise
            # Already failing: the original error matters more than the release.


class Client:
    """A session in a room. `Client.join(...)` joins; `Client(invitation, session=...)` resumes."""

    def __init__(
        self, invitation: str, *, session: str, timeout: float = wire.DEFAULT_TIMEOUT,
        hint: dict[str, Any] | None = None,
    ) -> None:
        self.invitation = invitation
        self.session = session
        self.timeout = timeout
        self.hint = hint if hint is not None else wire.hint_of(invitation)
        self.joined: r.Joined | None = None
        self._closed = False
        self._kept = wire.KeptAlive()

    @classmethod
    def join(
        cls, invitation: str, *, name: str, kind: str = "agent",
        timeout: float = wire.DEFAULT_TIMEOUT,
    ) -> Client:
        """Redeem `invitation` as participant `name`; the new session is `client.session`."""
        hint = wire.hint_of(invitation)
        route = ROUTES["session.join"]
        answer = wire.call(
            hint, route.method, route.path,
            {"invite": invitation.strip(), "name": name, "kind": kind, "transport": hint.get("type")},
            timeout=timeout,
        )
        joined = record(answer, r.Joined)
        client = cls(invitation, session=joined.session_id, timeout=timeout, hint=hint)
        client.joined = joined
        return client

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; the session stays valid (use `leave()` to end it)."""
        self._closed = True
        self._kept.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, op: str, cls: type[T], params: dict[str, Any] | None = None,
              timeout: float | None = None) -> T:
        if self._closed:
            raise errors.TransportUnavailable("transport_unavailable", "this client is closed")
        route = ROUTES[op]
        answer = wire.call(self.hint, route.method, route.path, params, bearer=self.session,
                           timeout=self.timeout if timeout is None else timeout, kept=self._kept)
        return record(answer, cls)

    # -- reads ------------------------------------------------------------------------

    def status(self) -> r.Status:
        return self._call("workspace.status", r.Status)

    def summary(self) -> r.Summary:
        return self._call("workspace.summary", r.Summary)

    def regions(self) -> r.Regions:
        return self._call("workspace.regions", r.Regions)

    def read(self, region: str = "workspace", *, version: int | None = None,
             max_lines: int | None = None, max_bytes: int | None = None) -> r.ReadAnswer:
        return self._call("workspace.read", r.ReadAnswer, {
            "region": region, "version": version, "max_lines": max_lines, "max_bytes": max_bytes})

    def diff(self, base_version: int, *, to_version: int | None = None,
             region: str | None = None) -> r.DiffAnswer:
        return self._call("workspace.diff", r.DiffAnswer, {
            "base_version": base_version, "to_version": to_version, "region": region})

    def changes_since(self, version: int, *, limit: int | None = None) -> r.Changes:
        return self._call("workspace.changes_since", r.Changes,
                          {"version": version, "limit": limit})

    def history(self, *, limit: int | None = None,
                before_event_id: int | None = None) -> r.History:
        return self._call("workspace.history", r.History,
                          {"limit": limit, "before_event_id": before_event_id})

    def participants(self) -> r.Participants:
        return self._call("workspace.participants", r.Participants)

    def leases(self) -> r.Leases:
        return self._call("workspace.leases", r.Leases)

    def proposals(self, *, status: str | None = None, limit: int | None = None) -> r.Proposals:
        return self._call("workspace.proposals", r.Proposals, {"status": status, "limit": limit})

    def proposal(self, proposal_id: str) -> r.ProposalDetail:
        return self._call("workspace.proposal", r.ProposalDetail, {"proposal_id": proposal_id})

    def room(self) -> r.RoomSnapshot:
        return self._call("workspace.room", r.RoomSnapshot)

    def diagnostics(self) -> r.Diagnostics:
        return self._call("workspace.diagnostics", r.Diagnostics)

    def invitations(self, *, limit: int | None = None) -> r.Invitations:
        return self._call("workspace.invitations", r.Invitations, {"limit": limit})

    # -- leases -----------------------------------------------------------------------

    def checkout(self, region: str, *, minutes: int | None = None) -> Lease:
        """Lease `region` now; the returned `Lease` releases it when its `with` block ends."""
        taken = self._call("workspace.checkout", r.Lease, {"region": region, "minutes": minutes})
        return Lease(**attrs.asdict(taken, recurse=False), client=self)

    def renew(self, lease_id: str, *, minutes: int | None = None) -> r.Lease:
        return self._call("workspace.renew", r.Lease, {"lease_id": lease_id, "minutes": minutes})

    def release(self, lease_id: str) -> r.Released:
        return self._call("workspace.release", r.Released, {"lease_id": lease_id})

    # -- proposals --------------------------------------------------------------------

    def propose(self, region: str, content: str, *, base_version: int,
                summary: str | None = None) -> r.Proposal:
        """Propose `content` (the region's new text, heading line included) on `base_version`."""
        return self._call("workspace.propose", r.Proposal, {
            "region": region, "content": content, "base_version": base_version,
            "summary": summary or f"update {region}"})

    def review(self, proposal_id: str, decision: str, *,
               comment: str | None = None, content: str | None = None) -> r.Reviewed:
        """Approve or reject; `content` (approve only) amends the text that lands."""
        return self._call("workspace.review", r.Reviewed, {
            "proposal_id": proposal_id, "decision": decision, "comment": comment,
            "content": content})

    def withdraw(self, proposal_id: str) -> r.Proposal:
        return self._call("workspace.withdraw", r.Proposal, {"proposal_id": proposal_id})

    def commit(self, proposal_id: str | None = None, *, base_version: int | None = None,
               summary: str | None = None, content: str | None = None) -> r.Committed:
        return self._call("workspace.commit", r.Committed, {
            "proposal_id": proposal_id, "base_version": base_version, "summary": summary,
            "content": content})

    def wait_for_review(self, proposal_id: str, timeout: float | None = None) -> r.Proposal:
        """Block until the proposal is decided (approved, rejected, superseded, ...); return it.

        Long-polls `/workspace/wait` (needs `observe`), re-reading the proposal
        only when an event about it arrives. Raises `commonroom.Timeout` after
        `timeout` seconds (None: no limit).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        cursor = self.room().latest_event_id
        current = self._proposal(proposal_id)
        while current.status not in DECIDED:
            hold = float(WAIT_HOLD_SECONDS)
            if deadline is not None:
                hold = min(hold, deadline - time.monotonic())
                if hold <= 0:
                    raise errors.Timeout(
                        f"proposal {proposal_id} is still {current.status} after {timeout:g} s",
                        {"proposal_id": proposal_id, "status": current.status})
            answer = self.wait(cursor, timeout_seconds=hold)
            cursor = answer.cursor
            if answer.resync or any(event_concerns(e, proposal_id) for e in answer.events):
                current = self._proposal(proposal_id)
        return current

    def _proposal(self, proposal_id: str) -> r.Proposal:
        detail = self.proposal(proposal_id)
        fields = {f.name for f in attrs.fields(r.Proposal)}
        return r.Proposal(**{k: v for k, v in attrs.asdict(detail).items() if k in fields})

    # -- room ------------------------------------------------------------------------

    def invite(self, *, capabilities: list[str] | None = None,
               expires_in_minutes: int | None = None, max_uses: int | None = None,
               label: str | None = None, max_sessions: int | None = None,
               ) -> r.InvitationCreatedAnswer:
        return self._call("workspace.invite", r.InvitationCreatedAnswer, {
            "capabilities": capabilities, "expires_in_minutes": expires_in_minutes,
            "max_uses": max_uses, "label": label, "max_sessions": max_sessions})

    def revoke_invitation(self, invite_id: str) -> r.InvitationInfo:
        return self._call("workspace.revoke_invitation", r.InvitationInfo,
                          {"invite_id": invite_id})

    def revoke_session(self, participant_id: str) -> r.SessionsRevoked:
        return self._call("session.revoke", r.SessionsRevoked,
                          {"participant_id": participant_id})

    def leave(self) -> r.Left:
        """End this session (its leases are released); the client is closed afterwards."""
        left = self._call("workspace.leave", r.Left)
        self.close()
        return left

    # -- coordination: handoffs, tasks, room text, attachments, surfaces --------------

    def request_handoff(
        self, to_participant_id: str, summary: str, *, details: str | None = None,
        region: str | None = None, attachment_ids: list[str] | None = None,
        request_id: str | None = None,
    ) -> r.Handoff:
        """Ask another participant to take something on (they decide).

        A repeated `request_id` with the same body returns the same handoff.
        """
        return self._call("handoff.request", r.Handoff, {
            "to_participant_id": to_participant_id,
            "summary": summary,
            "details": details,
            "region": region,
            "attachment_ids": attachment_ids,
            "request_id": request_id})

    def respond_handoff(self, handoff_id: str, decision: str, *, summary: str | None = None) -> r.Handoff:
        """Accept or decline a handoff addressed to you (accepting creates its task)."""
        return self._call("handoff.respond", r.Handoff, {
            "handoff_id": handoff_id,
            "decision": decision,
            "summary": summary})

    def report_handoff(self, handoff_id: str, status: str, summary: str, *, details: str | None = None) -> r.Handoff:
        """Report an accepted handoff completed or failed."""
        return self._call("handoff.result", r.Handoff, {
            "handoff_id": handoff_id,
            "status": status,
            "summary": summary,
            "details": details})

    def cancel_handoff(self, handoff_id: str) -> r.Handoff:
        """Cancel a handoff you requested."""
        return self._call("handoff.cancel", r.Handoff, {"handoff_id": handoff_id})

    def handoffs(self, *, status: str | None = None, limit: int | None = None) -> r.Handoffs:
        """Handoffs, optionally by status."""
        return self._call("workspace.handoffs", r.Handoffs, {"status": status, "limit": limit})

    def handoff(self, handoff_id: str) -> r.Handoff:
        """One handoff."""
        return self._call("workspace.handoff", r.Handoff, {"handoff_id": handoff_id})

    def task(self, task_id: str) -> r.Task:
        """The task of an accepted handoff."""
        return self._call("task.get", r.Task, {"task_id": task_id})

    def update_task(
        self, task_id: str, status: str, *, status_message: str | None = None,
        result_summary: str | None = None, result_details: str | None = None,
    ) -> r.Task:
        """Report a task's progress (its handoff follows)."""
        return self._call("task.update", r.Task, {
            "task_id": task_id,
            "status": status,
            "status_message": status_message,
            "result_summary": result_summary,
            "result_details": result_details})

    def cancel_task(self, task_id: str) -> r.Task:
        """Cancel a task you requested."""
        return self._call("task.cancel", r.Task, {"task_id": task_id})

    def send_message(self, text: str, *, to: list[str] | None = None, handoff_id: str | None = None) -> r.Message:
        """Room text, visible to everyone; `to` makes it an addressed turn for those participants."""
        return self._call("workspace.message", r.Message, {"text": text, "to": to, "handoff_id": handoff_id})

    def messages(
        self, *, after: int | None = None, limit: int | None = None, handoff_id: str | None = None,
    ) -> r.Messages:
        """Room text after a seq, ascending."""
        return self._call("workspace.messages", r.Messages, {"after": after, "limit": limit, "handoff_id": handoff_id})

    def advertise(self, capabilities: list[str]) -> r.Participant:
        """Replace your self-reported capability tokens (hints, never authority)."""
        return self._call("workspace.advertise", r.Participant, {"capabilities": capabilities})

    def add_attachment(
        self, file_name: str, mime_type: str, data_base64: str, *, handoff_id: str | None = None,
    ) -> r.Attachment:
        """Upload one file (text-like or png/jpeg/webp, at most 768 KiB; its type is sniffed)."""
        return self._call("attachment.add", r.Attachment, {
            "file_name": file_name,
            "mime_type": mime_type,
            "data_base64": data_base64,
            "handoff_id": handoff_id})

    def attachment(self, attachment_id: str) -> r.AttachmentData:
        """One attachment with its data."""
        return self._call("attachment.get", r.AttachmentData, {"attachment_id": attachment_id})

    def delete_attachment(self, attachment_id: str) -> r.AttachmentDeleted:
        """Delete an attachment you uploaded (the host deletes any)."""
        return self._call("attachment.delete", r.AttachmentDeleted,
                          {"attachment_id": attachment_id})

    def publish_surface(self, data_base64: str, *, mime_type: str | None = None) -> r.Surface:
        """Publish (replace) your one snapshot image of your own workspace."""
        return self._call("surface.publish", r.Surface, {"data_base64": data_base64, "mime_type": mime_type})

    def surface(self, participant_id: str | None = None) -> r.SurfaceData:
        """A participant's current snapshot."""
        return self._call("surface.read", r.SurfaceData, {"participant_id": participant_id})

    def clear_surface(self) -> r.SurfaceClearedAnswer:
        """Remove your snapshot."""
        return self._call("surface.clear", r.SurfaceClearedAnswer)

    # -- events -----------------------------------------------------------------------

    def wait(self, cursor: int = 0, *, timeout_seconds: float | None = None) -> r.WaitAnswer:
        """The events after `cursor`, held up to `timeout_seconds` (max 25) when there are none."""
        hold = WAIT_HOLD_SECONDS if timeout_seconds is None else timeout_seconds
        return self._call("workspace.wait", r.WaitAnswer,
                          {"cursor": cursor, "timeout_seconds": hold}, timeout=self.timeout + hold)

    def observe(self, since: int | None = None, *, retry: float | None = None
                ) -> Iterator[Event | Resync]:
        """The room's events for ever: replays after `since`, then live; resumes after drops.

        A dropped connection (room restarting, network) is re-opened after the
        room's `retry` delay with `Last-Event-ID`, so no event is skipped; a
        `Resync` is yielded when the room could not replay (read `room()`
        again). A session that ended raises `Unauthorized`. `retry` (seconds)
        overrides the room's reconnection delay.
        """
        last_id = "" if since is None else str(since)
        fixed_retry = retry
        retry = RECONNECT_SECONDS if fixed_retry is None else fixed_retry
        connected = False
        route = ROUTES["workspace.observe"]
        while True:
            headers = {"Authorization": f"Bearer {self.session}"}
            if last_id:
                headers["Last-Event-ID"] = last_id
            try:
                for message in wire.open_events(self.hint, route.path, headers,
                                                STREAM_SILENCE_SECONDS):
                    connected = True
                    if message.retry is not None and fixed_retry is None:
                        retry = message.retry / 1000
                    if message.id:
                        last_id = message.id
                    item = sse_item(message)
                    if item is not None:
                        yield item
            except errors.TransportUnavailable:
                if not connected:
                    raise
            time.sleep(retry)  # reconnection delay the room asked for, not a poll


OPERATION_METHODS: Final[dict[str, str]] = {
    "session.join": "join",
    "workspace.status": "status",
    "workspace.summary": "summary",
    "workspace.regions": "regions",
    "workspace.read": "read",
    "workspace.diff": "diff",
    "workspace.changes_since": "changes_since",
    "workspace.history": "history",
    "workspace.participants": "participants",
    "workspace.leases": "leases",
    "workspace.proposals": "proposals",
    "workspace.proposal": "proposal",
    "workspace.room": "room",
    "workspace.diagnostics": "diagnostics",
    "workspace.invitations": "invitations",
    "workspace.observe": "observe",
    "workspace.wait": "wait",
    "workspace.checkout": "checkout",
    "workspace.renew": "renew",
    "workspace.release": "release",
    "workspace.propose": "propose",
    "workspace.review": "review",
    "workspace.withdraw": "withdraw",
    "workspace.commit": "commit",
    "workspace.invite": "invite",
    "workspace.revoke_invitation": "revoke_invitation",
    "session.revoke": "revoke_session",
    "workspace.leave": "leave",
    "handoff.request": "request_handoff",
    "handoff.respond": "respond_handoff",
    "handoff.result": "report_handoff",
    "handoff.cancel": "cancel_handoff",
    "workspace.handoffs": "handoffs",
    "workspace.handoff": "handoff",
    "task.get": "task",
    "task.update": "update_task",
    "task.cancel": "cancel_task",
    "workspace.message": "send_message",
    "workspace.messages": "messages",
    "workspace.advertise": "advertise",
    "attachment.add": "add_attachment",
    "attachment.get": "attachment",
    "attachment.delete": "delete_attachment",
    "surface.publish": "publish_surface",
    "surface.read": "surface",
    "surface.clear": "clear_surface",
}
