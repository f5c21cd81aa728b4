"""The handler of every operation: the engine's half of the operation table.

The wire contract of each operation (name, route, capability, parameter and
result records, hints, constraints) is its `OperationSpec` in
`protocol/operations.py`; here the engine adds only the function that runs it,
`HANDLERS[name]`. Loading this module checks that every spec has a handler and
every handler a spec, so neither half can be added alone. Only
`engine.dispatch` imports this module inside the engine.
"""

from __future__ import annotations

from typing import Final

from commonroom.engine import (
    access,
    attachments,
    blame,
    handoffs,
    leases,
    messages,
    observe,
    policies,
    proposals,
    reads,
    resident,
    restore,
    revisions,
    surfaces,
    task_surfaces,
    tasks,
    threads,
    undoes,
)
from commonroom.engine.tx import Handler
from commonroom.protocol.operations import OPERATIONS_BY_NAME

HANDLERS: Final[dict[str, Handler]] = {
    "session.join": access.join,
    "workspace.status": reads.status,
    "workspace.summary": reads.summary,
    "workspace.regions": reads.regions,
    "workspace.read": reads.read,
    "workspace.diff": reads.diff,
    "workspace.changes_since": reads.changes_since,
    "workspace.history": reads.history,
    "workspace.participants": access.participants,
    "workspace.leases": leases.leases,
    "workspace.proposals": proposals.list_proposals,
    "workspace.proposal": proposals.proposal_detail,
    "workspace.room": reads.room,
    "workspace.diagnostics": reads.diagnostics,
    "workspace.invitations": access.list_invitations,
    "workspace.observe": observe.open_observe,
    "workspace.observe_ws": observe.open_observe,
    "workspace.wait": observe.open_wait,
    "workspace.checkout": leases.checkout,
    "workspace.renew": leases.renew,
    "workspace.release": leases.release,
    "workspace.propose": proposals.propose,
    "workspace.review": proposals.review,
    "workspace.withdraw": proposals.withdraw,
    "workspace.commit": proposals.commit,
    "workspace.invite": access.create_invitation,
    "workspace.revoke_invitation": access.revoke_invitation,
    "session.revoke": access.revoke_sessions,
    "workspace.leave": access.leave,
    # -- handoffs, tasks, room text, attachments, surfaces (docs/spec/PROTOCOL.md 9, 10, 10.1)
    "handoff.request": handoffs.request,
    "handoff.respond": handoffs.respond,
    "handoff.result": handoffs.result,
    "handoff.cancel": handoffs.cancel,
    "workspace.handoffs": handoffs.list_handoffs,
    "workspace.handoff": handoffs.handoff_one,
    "task.get": tasks.get_task,
    "task.update": tasks.update_task,
    "task.cancel": tasks.cancel_task,
    "workspace.message": messages.send,
    "workspace.messages": messages.list_messages,
    "workspace.advertise": access.advertise,
    "attachment.add": attachments.add,
    "attachment.get": attachments.get,
    "attachment.delete": attachments.delete,
    "surface.publish": surfaces.publish,
    "surface.read": surfaces.read,
    "surface.clear": surfaces.clear,
    # -- workspace.ping (the walkthrough's example operation)
    "workspace.ping": reads.ping,
    # -- provenance: blame, revert and restore, auto-approve policies (docs/spec/PROTOCOL.md 18)
    "workspace.blame": blame.blame,
    "workspace.revert": restore.revert,
    "workspace.restore": restore.restore,
    "workspace.undone": undoes.undone_saves,
    "workspace.reapply": undoes.reapply,
    "workspace.policy_add": policies.add,
    "workspace.policy_remove": policies.remove,
    "workspace.policy_pause": policies.pause,
    "workspace.policies": policies.list_policies,
    # -- the review conversation: threads, revisions, rebase (docs/spec/PROTOCOL.md 17)
    "thread.open": threads.open_thread,
    "thread.reply": threads.reply,
    "thread.resolve": threads.resolve,
    "workspace.threads": threads.list_threads,
    "workspace.thread": threads.thread_one,
    "workspace.proposal.revise": revisions.revise,
    # -- resident agents: runtime state, permission requests (docs/spec/PROTOCOL.md 19)
    "workspace.runtime": resident.report,
    "permission.request": resident.request,
    "workspace.permissions": resident.list_permissions,
    "permission.answer": resident.answer,
    "permission.withdraw": resident.withdraw,
    "runtime.interrupt": resident.interrupt,
    "runtime.resume": resident.resume,
    "workspace.proposal.rebase": revisions.rebase,
    # -- task surfaces: live views, generated apps, app requests (docs/spec/PROTOCOL.md 20)
    "task.live_view": task_surfaces.publish_live_view,
    "task.app": task_surfaces.publish_app,
    "task.app_state": task_surfaces.set_app_state,
    "task.app_request": task_surfaces.app_request,
    "task.surfaces": task_surfaces.read_surfaces,

    # -- waiting for a person is one call (docs/spec/PROTOCOL.md 12)
    "workspace.proposal.wait": observe.open_proposal_wait,
    "workspace.thread.wait": observe.open_thread_wait,
}

_missing = OPERATIONS_BY_NAME.keys() - HANDLERS.keys()
_extra = HANDLERS.keys() - OPERATIONS_BY_NAME.keys()
if _missing or _extra:
    raise RuntimeError(
        f"operations without a handler: {sorted(_missing)}; handlers without a spec: {sorted(_extra)}"
    )
