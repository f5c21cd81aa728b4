"""Every operation of the table as a typed method, written once for `Client` and `AsyncClient`.

Each method below declares an operation's Python signature and builds its
parameters; `@operation(name, Result)` turns it into a method of both
clients. On `Client` (a `BlockingShell`) it returns the `Result` record; on
`AsyncClient` (an `AsyncShell`) it is a coroutine function returning it. Each
shell says only how one `Call` is carried (`_run`); what differs beyond that
(joining, leases as context managers, observe, wait_for_review) is in the
shells themselves (`sync.py`, `aio.py`).

mypy sees the two faces through `Operation.__get__`'s overloads; at run time a
real function (with the builder's signature and docstring, the result as its
return annotation, `async` on the async client) is made once per face and
operation, the first time it is looked up.

An operation of the table with no method written here still gets one,
generated from its spec (`generated_operations`): named after the operation
(`workspace.ping` -> `ping`, `handoff.request` -> `handoff_request`), its
keyword parameters the fields of its parameter record, returning its result
record. A method is written here only to give an operation a better Python
signature than its record's; `OPERATION_METHODS` (op name -> method name) is
derived from both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from types import MethodType
from typing import Any, Concatenate, Final, Generic, ParamSpec, TypeAlias, TypeVar, overload

import attrs

from commonroom.protocol import records as r
from commonroom.protocol import vocabulary
from commonroom.protocol.operations import OPERATIONS, OperationSpec
from commonroom.protocol.schema import hints, unwrap_optional
from commonroom.wire.plans import WAIT_HOLD_SECONDS

P = ParamSpec("P")
T = TypeVar("T")
Params: TypeAlias = dict[str, Any]

WHOLE: Final = vocabulary.WHOLE


@dataclasses.dataclass(frozen=True)
class Call(Generic[T]):
    """One operation call: its name, result record, parameters, and how long the room may hold it."""

    op: str
    result: type[T]
    params: Params
    hold: float = 0.0


class BlockingShell:
    """What `Client` provides: carry one call, return its record."""

    def _run(self, call: Call[T]) -> T:
        raise NotImplementedError


class AsyncShell:
    """What `AsyncClient` provides: carry one call under trio, return its record."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError


class Operation(Generic[P, T]):
    """An operation method: `builder` makes the parameters, the shell carries the call."""

    def __init__(self, op: str, result: type[T], builder: Callable[Concatenate[Any, P], Params],
                 hold: str | None) -> None:
        self.op = op
        self.result = result
        self.builder = builder
        self.hold = hold
        self.name = builder.__name__
        self._functions: dict[bool, Callable[..., Any]] = {}

    def call(self, client: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call[T]:
        params = self.builder(client, *args, **kwargs)
        hold = params.get(self.hold) if self.hold else None
        return Call(self.op, self.result, params, float(hold or 0.0))

    @overload
    def __get__(self, client: BlockingShell, owner: type | None = None) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: AsyncShell, owner: type | None = None) -> Callable[P, Awaitable[T]]: ...

    @overload
    def __get__(self, client: None, owner: type | None = None) -> Callable[..., Any]: ...

    def __get__(self, client: Any, owner: type | None = None) -> Any:
        is_async = isinstance(client, AsyncShell) if client is not None \
            else owner is not None and issubclass(owner, AsyncShell)
        function = self._functions.get(is_async) or self._make(is_async)
        return function if client is None else MethodType(function, client)

    def _make(self, is_async: bool) -> Callable[..., Any]:
        import inspect
        import typing

        operation = self

        async def async_method(client: Any, *args: Any, **kwargs: Any) -> Any:
            return await client._run(operation.call(client, args, kwargs))

        def blocking_method(client: Any, *args: Any, **kwargs: Any) -> Any:
            return client._run(operation.call(client, args, kwargs))

        method: Callable[..., Any] = async_method if is_async else blocking_method

        hints = {**typing.get_type_hints(self.builder), "return": self.result}
        signature = inspect.signature(self.builder)
        method.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[p.replace(annotation=hints.get(p.name, p.annotation))
                        for p in signature.parameters.values()],
            return_annotation=self.result)
        method.__annotations__ = hints
        for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(method, attribute, getattr(self.builder, attribute))
        self._functions[is_async] = method
        return method


def operation(op: str, result: type[T], *, hold: str | None = None
              ) -> Callable[[Callable[Concatenate[Any, P], Params]], Operation[P, T]]:
    """Declare an operation method; `hold` names the parameter saying how long the room may hold it."""

    def declare(builder: Callable[Concatenate[Any, P], Params]) -> Operation[P, T]:
        return Operation(op, result, builder, hold)

    return declare


class Operations:
    """The operation methods both clients share (see the module docstring)."""

    # -- reads ------------------------------------------------------------------------

    @operation("workspace.status", r.Status)
    def status(self) -> Params:
        return {}

    @operation("workspace.summary", r.Summary)
    def summary(self) -> Params:
        return {}

    @operation("workspace.regions", r.Regions)
    def regions(self) -> Params:
        return {}

    @operation("workspace.read", r.ReadAnswer)
    def read(self, region: str = WHOLE, *, version: int | None = None,
             max_lines: int | None = None, max_bytes: int | None = None) -> Params:
        return {"region": region, "version": version, "max_lines": max_lines,
                "max_bytes": max_bytes}

    @operation("workspace.diff", r.DiffAnswer)
    def diff(self, base_version: int, *, to_version: int | None = None,
             region: str | None = None) -> Params:
        return {"base_version": base_version, "to_version": to_version, "region": region}

    @operation("workspace.changes_since", r.Changes)
    def changes_since(self, version: int, *, limit: int | None = None) -> Params:
        return {"version": version, "limit": limit}

    @operation("workspace.history", r.History)
    def history(self, *, limit: int | None = None, before_event_id: int | None = None) -> Params:
        return {"limit": limit, "before_event_id": before_event_id}

    @operation("workspace.participants", r.Participants)
    def participants(self) -> Params:
        return {}

    @operation("workspace.leases", r.Leases)
    def leases(self) -> Params:
        return {}

    @operation("workspace.proposals", r.Proposals)
    def proposals(self, *, status: str | None = None, limit: int | None = None) -> Params:
        return {"status": status, "limit": limit}

    @operation("workspace.proposal", r.ProposalDetail)
    def proposal(self, proposal_id: str, *, revision: int | None = None) -> Params:
        """One proposal; `revision` N answers that revision's content (default: the latest)."""
        return {"proposal_id": proposal_id, "revision": revision}

    @operation("workspace.room", r.RoomSnapshot)
    def room(self) -> Params:
        return {}

    @operation("workspace.diagnostics", r.Diagnostics)
    def diagnostics(self) -> Params:
        return {}

    @operation("workspace.invitations", r.Invitations)
    def invitations(self, *, limit: int | None = None) -> Params:
        return {"limit": limit}

    # -- leases (checkout is the shells': it returns a lease bound to the client) --------

    @operation("workspace.renew", r.Lease)
    def renew(self, lease_id: str, *, minutes: int | None = None) -> Params:
        return {"lease_id": lease_id, "minutes": minutes}

    @operation("workspace.release", r.Released)
    def release(self, lease_id: str) -> Params:
        return {"lease_id": lease_id}

    # -- proposals --------------------------------------------------------------------

    @operation("workspace.propose", r.Proposal)
    def propose(self, region: str, content: str, *, base_version: int,
                summary: str | None = None) -> Params:
        """Propose `content` (the region's new text, heading line included) on `base_version`."""
        return {"region": region, "content": content, "base_version": base_version,
                "summary": summary or f"update {region}"}

    @operation("workspace.review", r.Reviewed)
    def review(self, proposal_id: str, decision: str, *, revision: int | None = None,
               comment: str | None = None, content: str | None = None) -> Params:
        """Approve, reject or request_changes (needs `comment`); `content` (approve only) amends
        the text that lands.

        `revision` is the proposal's revision you read (`proposal(id).revision`): approve and
        request_changes need it, and decide nothing (`ProposalConflict`, reason `revised`) when
        the author revised it since. There is no default on purpose: approving without reading
        means reading the proposal first and saying which revision you approve."""
        return {"proposal_id": proposal_id, "decision": decision, "revision": revision,
                "comment": comment, "content": content}

    @operation("workspace.withdraw", r.Proposal)
    def withdraw(self, proposal_id: str) -> Params:
        return {"proposal_id": proposal_id}

    @operation("workspace.commit", r.Committed)
    def commit(self, proposal_id: str | None = None, *, base_version: int | None = None,
               summary: str | None = None, content: str | None = None) -> Params:
        return {"proposal_id": proposal_id, "base_version": base_version, "summary": summary,
                "content": content}

    # -- room -------------------------------------------------------------------------

    @operation("workspace.invite", r.InvitationCreatedAnswer)
    def invite(self, *, capabilities: list[str] | None = None,
               expires_in_minutes: int | None = None, max_uses: int | None = None,
               label: str | None = None, max_sessions: int | None = None) -> Params:
        return {"capabilities": capabilities, "expires_in_minutes": expires_in_minutes,
                "max_uses": max_uses, "label": label, "max_sessions": max_sessions}

    @operation("workspace.revoke_invitation", r.InvitationInfo)
    def revoke_invitation(self, invite_id: str) -> Params:
        return {"invite_id": invite_id}

    @operation("session.revoke", r.SessionsRevoked)
    def revoke_session(self, participant_id: str) -> Params:
        return {"participant_id": participant_id}

    # -- coordination: handoffs, tasks, room text, attachments, surfaces --------------

    @operation("handoff.request", r.Handoff)
    def request_handoff(self, to_participant_id: str, summary: str, *, details: str | None = None,
                        region: str | None = None, attachment_ids: list[str] | None = None,
                        request_id: str | None = None) -> Params:
        """Ask another participant to take something on (they decide).

        A repeated `request_id` with the same body returns the same handoff.
        """
        return {"to_participant_id": to_participant_id, "summary": summary, "details": details,
                "region": region, "attachment_ids": attachment_ids, "request_id": request_id}

    @operation("handoff.respond", r.Handoff)
    def respond_handoff(self, handoff_id: str, decision: str, *,
                        summary: str | None = None) -> Params:
        """Accept or decline a handoff addressed to you (accepting creates its task)."""
        return {"handoff_id": handoff_id, "decision": decision, "summary": summary}

    @operation("handoff.result", r.Handoff)
    def report_handoff(self, handoff_id: str, status: str, summary: str, *,
                       details: str | None = None) -> Params:
        """Report an accepted handoff completed or failed."""
        return {"handoff_id": handoff_id, "status": status, "summary": summary,
                "details": details}

    @operation("handoff.cancel", r.Handoff)
    def cancel_handoff(self, handoff_id: str) -> Params:
        """Cancel a handoff you requested."""
        return {"handoff_id": handoff_id}

    @operation("workspace.handoffs", r.Handoffs)
    def handoffs(self, *, status: str | None = None, limit: int | None = None) -> Params:
        """Handoffs, optionally by status."""
        return {"status": status, "limit": limit}

    @operation("workspace.handoff", r.Handoff)
    def handoff(self, handoff_id: str) -> Params:
        """One handoff."""
        return {"handoff_id": handoff_id}

    @operation("task.get", r.Task)
    def task(self, task_id: str) -> Params:
        """The task of an accepted handoff."""
        return {"task_id": task_id}

    @operation("task.update", r.Task)
    def update_task(self, task_id: str, status: str, *, status_message: str | None = None,
                    result_summary: str | None = None,
                    result_details: str | None = None) -> Params:
        """Report a task's progress (its handoff follows)."""
        return {"task_id": task_id, "status": status, "status_message": status_message,
                "result_summary": result_summary, "result_details": result_details}

    @operation("task.cancel", r.Task)
    def cancel_task(self, task_id: str) -> Params:
        """Cancel a task you requested."""
        return {"task_id": task_id}

    # -- task surfaces (docs/spec/PROTOCOL.md 20)

    @operation("task.live_view", r.LiveViewAnswer)
    def publish_live_view(self, task_id: str, surface: dict[str, Any] | None = None, *,
                          clear: bool = False) -> Params:
        """Publish or replace your task's live view `{surface_id, revision, root, data}`
        (a higher revision replaces it); `clear=True` without a surface removes it."""
        return {"task_id": task_id, "surface": surface, "clear": clear or None}

    @operation("task.app", r.AppPublished)
    def publish_app(self, task_id: str, bundle: dict[str, Any]) -> Params:
        """Publish or replace your task's app `{version: 1, manifest, html, css, js, initialState}`."""
        return {"task_id": task_id, "bundle": bundle}

    @operation("task.app_state", r.AppState)
    def set_app_state(self, task_id: str, revision: int, state: Any) -> Params:
        """Compare-and-set the task app's shared state on the revision you last saw
        (`StaleVersion` when it moved)."""
        return {"task_id": task_id, "revision": revision, "state": state}

    @operation("task.app_request", r.AppReply)
    def ask_app(self, task_id: str, payload: Any) -> Params:
        """Ask the task's app, open in the host's page, and wait (<= 15 s) for its reply;
        `TransportUnavailable` (`details["reason"]`: no_app_host, app_timeout, app_error)."""
        return {"task_id": task_id, "payload": payload}

    @operation("task.surfaces", r.TaskSurfacesList)
    def task_surfaces(self, task_id: str | None = None) -> Params:
        """The tasks' live views, apps and app states (one task's with `task_id`)."""
        return {"task_id": task_id}

    @operation("workspace.message", r.Message)
    def send_message(self, text: str, *, to: list[str] | None = None,
                     handoff_id: str | None = None) -> Params:
        """Room text, visible to everyone; `to` makes it an addressed turn for those participants."""
        return {"text": text, "to": to, "handoff_id": handoff_id}

    @operation("workspace.messages", r.Messages)
    def messages(self, *, after: int | None = None, limit: int | None = None,
                 handoff_id: str | None = None) -> Params:
        """Room text after a seq, ascending."""
        return {"after": after, "limit": limit, "handoff_id": handoff_id}

    @operation("workspace.advertise", r.Participant)
    def advertise(self, capabilities: list[str]) -> Params:
        """Replace your self-reported capability tokens (hints, never authority)."""
        return {"capabilities": capabilities}

    @operation("attachment.add", r.Attachment)
    def add_attachment(self, file_name: str, mime_type: str, data_base64: str, *,
                       handoff_id: str | None = None) -> Params:
        """Upload one file (text-like or png/jpeg/webp, at most 768 KiB; its type is sniffed)."""
        return {"file_name": file_name, "mime_type": mime_type, "data_base64": data_base64,
                "handoff_id": handoff_id}

    @operation("attachment.get", r.AttachmentData)
    def attachment(self, attachment_id: str) -> Params:
        """One attachment with its data."""
        return {"attachment_id": attachment_id}

    @operation("attachment.delete", r.AttachmentDeleted)
    def delete_attachment(self, attachment_id: str) -> Params:
        """Delete an attachment you uploaded (the host deletes any)."""
        return {"attachment_id": attachment_id}

    @operation("surface.publish", r.Surface)
    def publish_surface(self, data_base64: str, *, mime_type: str | None = None) -> Params:
        """Publish (replace) your one snapshot image of your own workspace."""
        return {"data_base64": data_base64, "mime_type": mime_type}

    @operation("surface.read", r.SurfaceData)
    def surface(self, participant_id: str | None = None) -> Params:
        """A participant's current snapshot."""
        return {"participant_id": participant_id}

    @operation("surface.clear", r.SurfaceClearedAnswer)
    def clear_surface(self) -> Params:
        """Remove your snapshot."""
        return {}

    # -- provenance: blame, revert and restore, policies (docs/spec/PROTOCOL.md 18) ------------------

    @operation("workspace.blame", r.BlameAnswer)
    def blame(self, region: str = "workspace", *, version: int | None = None) -> Params:
        """Who last changed each line of `region` (at `version`, default the current one)."""
        return {"region": region, "version": version}

    @operation("workspace.revert", r.Reverted)
    def revert(self, version: int, *, region: str | None = None) -> Params:
        """Host: undo what `version` changed (in `region` only when given)."""
        return {"version": version, "region": region}

    @operation("workspace.restore", r.Restored)
    def restore(self, region: str, version: int) -> Params:
        """Host: set `region` back to its text at `version`."""
        return {"region": region, "version": version}

    @operation("workspace.policy_add", r.Policy)
    def add_policy(self, region_pattern: str, max_changed_lines: int, *,
                   participant_id: str | None = None, label: str | None = None,
                   expires_at: str | None = None, name_pattern: str | None = None) -> Params:
        """Host: an auto-approve policy for one participant, or for those who joined through an
        invitation you gave `label`. `name_pattern` is refused (`InvalidRequest`, reason
        `display_name_untrusted`): anyone may join under any name."""
        return {"region_pattern": region_pattern, "max_changed_lines": max_changed_lines,
                "participant_id": participant_id, "label": label,
                "expires_at": expires_at, "name_pattern": name_pattern}

    @operation("workspace.policy_remove", r.PolicyRemoved)
    def remove_policy(self, policy_id: str) -> Params:
        """Host: remove a policy."""
        return {"policy_id": policy_id}

    @operation("workspace.policy_pause", r.PoliciesPaused)
    def pause_policies(self, *, all: bool = False, policy_id: str | None = None,
                       paused: bool = True) -> Params:
        """Host: pause (paused=False: resume) one policy or all of them (the kill switch)."""
        return {"all": all, "policy_id": policy_id, "paused": paused}

    @operation("workspace.policies", r.Policies)
    def policies(self) -> Params:
        """Host: every policy and what it approved."""
        return {}
    # -- the review conversation: threads, revisions, rebase (PROTOCOL.md 17) -------------

    @operation("thread.open", r.Thread)
    def ask(self, region: str, body: str, *, quote: str | None = None,
            blocking: bool = False) -> Params:
        """Open a thread on a region (optionally an exact `quote` of its text); `blocking`: a
        question you then wait on with `wait_for_reply`."""
        return {"region": region, "body": body, "quote": quote, "blocking": blocking}

    @operation("thread.reply", r.Thread)
    def reply(self, thread_id: str, body: str) -> Params:
        """Reply in a thread."""
        return {"thread_id": thread_id, "body": body}

    @operation("thread.resolve", r.Thread)
    def resolve_thread(self, thread_id: str, *, resolved: bool = True) -> Params:
        """Resolve a thread (`resolved=False` reopens it): its author or the host."""
        return {"thread_id": thread_id, "resolved": resolved}

    @operation("workspace.threads", r.Threads)
    def threads(self, *, region: str | None = None, status: str | None = None,
                proposal_id: str | None = None, limit: int | None = None,
                since: str | None = None) -> Params:
        """Threads, newest first, by region, status or proposal; `since` (a thread's
        `updated_at`): only those that changed at or after it."""
        return {"region": region, "status": status, "proposal_id": proposal_id, "limit": limit,
                "since": since}

    @operation("workspace.thread", r.Thread)
    def thread(self, thread_id: str) -> Params:
        """One thread with its comments."""
        return {"thread_id": thread_id}

    @operation("workspace.proposal.revise", r.Proposal)
    def revise(self, proposal_id: str, content: str, *, summary: str | None = None,
               base_version: int | None = None) -> Params:
        """Revise your proposal in place: a new revision, back to pending."""
        return {"proposal_id": proposal_id, "content": content, "summary": summary,
                "base_version": base_version}

    @operation("workspace.proposal.rebase", r.Rebased)
    def rebase(self, proposal_id: str, *, apply: bool = False) -> Params:
        """Three-way merge of a stale proposal onto the region's current text; `apply=True`
        makes a clean merge a new revision."""
        return {"proposal_id": proposal_id, "apply": apply}

    # -- events -------------------------------------------------------------------------

    @operation("workspace.wait", r.WaitAnswer, hold="timeout_seconds")
    def wait(self, cursor: int = 0, *, timeout_seconds: float | None = None) -> Params:
        """The events after `cursor`, held up to `timeout_seconds` (max 25) when there are none."""
        return {"cursor": cursor,
                "timeout_seconds": WAIT_HOLD_SECONDS if timeout_seconds is None else timeout_seconds}

    @operation("workspace.proposal.wait", r.ProposalWaited, hold="timeout_seconds")
    def proposal_wait(self, proposal_id: str, *, timeout_seconds: float | None = None) -> Params:
        """One hold of up to `timeout_seconds` (max 25) until the proposal leaves pending
        (`waiting` false); `wait_for_review` repeats it."""
        return {"proposal_id": proposal_id,
                "timeout_seconds": WAIT_HOLD_SECONDS if timeout_seconds is None else timeout_seconds}

    @operation("workspace.thread.wait", r.ThreadWaited, hold="timeout_seconds")
    def thread_wait(self, thread_id: str, *, timeout_seconds: float | None = None) -> Params:
        """One hold of up to `timeout_seconds` (max 25) until someone else answers the thread
        (`waiting` false); `wait_for_reply` repeats it."""
        return {"thread_id": thread_id,
                "timeout_seconds": WAIT_HOLD_SECONDS if timeout_seconds is None else timeout_seconds}


SHELL_METHODS: Final[dict[str, str]] = {
    "session.join": "join",
    "workspace.checkout": "checkout",
    "workspace.leave": "leave",
    "workspace.observe": "observe",
}
"""Operations the shells carry with methods of their own (sessions, leases, streams)."""
_NOT_A_METHOD: Final = frozenset({"workspace.observe_ws"})  # the client observes over SSE


def method_name(op: str) -> str:
    """`workspace.ping` -> `ping`; `handoff.request` -> `handoff_request`."""
    return op.removeprefix("workspace.").replace(".", "_")


def _generated(spec: OperationSpec) -> Operation[..., Any]:
    """A method for an operation no builder above declares: keyword parameters from its record."""
    import inspect

    record = spec.params
    field_hints = hints(record)
    parameters = [
        inspect.Parameter(
            field.name, inspect.Parameter.KEYWORD_ONLY, annotation=field_hints[field.name],
            default=inspect.Parameter.empty if field.default is attrs.NOTHING
            and not unwrap_optional(field_hints[field.name])[1] else None,
        )
        for field in attrs.fields(record)
    ]

    def builder(self: Any, **params: Any) -> Params:
        return {name: value for name, value in params.items() if value is not None}

    name = method_name(spec.name)
    builder.__name__ = builder.__qualname__ = name
    builder.__doc__ = spec.summary
    builder.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": Params}
    builder.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *parameters])
    assert spec.result is not None
    return Operation(spec.name, spec.result, builder, None)


def _add_generated_operations() -> dict[str, str]:
    declared = {value.op: name for name, value in vars(Operations).items() if isinstance(value, Operation)}
    for spec in OPERATIONS:
        if spec.name in declared or spec.name in SHELL_METHODS or spec.name in _NOT_A_METHOD:
            continue
        method = _generated(spec)
        if hasattr(Operations, method.name):
            raise RuntimeError(f"{spec.name}: the client already has a method {method.name!r}")
        setattr(Operations, method.name, method)
        declared[spec.name] = method.name
    return declared


OPERATION_METHODS: Final[dict[str, str]] = {**_add_generated_operations(), **SHELL_METHODS}
"""op name -> method name, for every operation a client method carries (derived, never typed)."""
