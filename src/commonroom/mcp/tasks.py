"""The tasks extension (`io.modelcontextprotocol/tasks`) over the room's handoff-owned tasks.

A task is the MCP view of an accepted handoff (docs/spec/PROTOCOL.md section 9). The
MCP methods map onto table operations (`task.get`, `task.update`,
`task.cancel`) run through the room, so the rules (only the target reports,
only the requester cancels, task and handoff stay consistent) are the
engine's:

- `tasks/get {taskId}` -> `task.get {task_id}` -> the MCP Task;
- `tasks/update {taskId, inputResponses: {status, statusMessage, result}}`
  -> `task.update {task_id, status, status_message, result_summary,
  result_details}` (`result` is `{summary, details}` or a text summary)
  -> an empty ack;
- `tasks/cancel {taskId}` -> `task.cancel {task_id}` -> an empty ack; it is
  idempotent: a task already in a terminal state answers the ack too.

A request must declare the extension in `clientCapabilities.extensions`
(-32021 otherwise). An unknown task id (or a room without the task
operations) is -32602; `tasks/list` and `tasks/result` are not served.
"""

from __future__ import annotations

from typing import Any, Final

from commonroom.mcp import wire
from commonroom.protocol import vocabulary
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.operations import OPERATIONS_BY_NAME
from commonroom.protocol.records import to_wire
from commonroom.room.core import Room

POLL_INTERVAL_MS: Final = 2_000
TERMINAL: Final = frozenset(vocabulary.TASK_TERMINAL)
_NOT_FOUND: Final = frozenset({"handoff_not_found", "task_not_found"})
_OPERATION: Final[dict[str, str]] = {
    "tasks/get": "task.get",
    "tasks/update": "task.update",
    "tasks/cancel": "task.cancel",
}
METHODS: Final = frozenset(_OPERATION)


def require_extension(request: wire.McpRequest) -> None:
    if not request.declares_extension(wire.TASKS_EXTENSION):
        raise wire.McpError(
            wire.MISSING_CLIENT_CAPABILITY,
            "MissingRequiredClientCapability",
            {"requiredCapabilities": {"extensions": {wire.TASKS_EXTENSION: {}}}},
        )


def mcp_task(task: dict[str, Any]) -> dict[str, Any]:
    """A commonroom Task record (wire JSON) as an MCP Task."""
    out: dict[str, Any] = {
        "taskId": task["task_id"],
        "status": task["status"],
        "statusMessage": task.get("status_message"),
        "createdAt": task["created_at"],
        "lastUpdatedAt": task["updated_at"],
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
        "_meta": {"commonroom/handoffId": task.get("handoff_id")},
    }
    result = task.get("result")
    if task["status"] == "completed" and result is not None:
        out["result"] = result
    if task["status"] == "failed":
        out["error"] = {"message": task.get("status_message") or "the task failed",
                        "data": result}
    return out


def update_params(task_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """`tasks/update` params -> `task.update` params."""
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise wire.invalid_params("tasks/update needs inputResponses (an object)")
    out: dict[str, Any] = {"task_id": task_id}
    if "status" in responses:
        out["status"] = responses["status"]
    if responses.get("statusMessage") is not None:
        out["status_message"] = responses["statusMessage"]
    result = responses.get("result")
    if isinstance(result, dict):
        if result.get("summary") is not None:
            out["result_summary"] = result["summary"]
        if result.get("details") is not None:
            out["result_details"] = result["details"]
    elif isinstance(result, str):
        out["result_summary"] = result
    elif result is not None:
        raise wire.invalid_params("inputResponses.result must be an object or a string")
    return out


def unknown_task(task_id: str) -> wire.McpError:
    return wire.invalid_params("unknown task", {"taskId": task_id})


async def handle(room: Room, request: wire.McpRequest, bearer: str | None,
                 room_error: Any) -> dict[str, Any]:
    """The result body of a tasks method (without resultType/_meta); raises McpError."""
    require_extension(request)
    task_id = request.params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise wire.invalid_params("taskId must be a non-empty string")
    op_name = _OPERATION[request.method]
    if op_name not in OPERATIONS_BY_NAME:
        raise unknown_task(task_id)  # this room has no task store yet
    params: dict[str, Any] = {"task_id": task_id}
    if request.method == "tasks/update":
        params = update_params(task_id, request.params)
    outcome = await room.execute(op_name, bearer, params)
    error: CommonroomError | None = outcome.error
    if error is not None:
        if error.code in _NOT_FOUND:
            raise unknown_task(task_id)
        if request.method == "tasks/cancel" and error.code == "handoff_conflict":
            return {}  # already terminal: cancel is idempotent
        raise room_error(error)
    if request.method == "tasks/get":
        return mcp_task(to_wire(outcome.result))
    return {}
