"""Discovery documents and the agent skill, generated from the operation table.

None of them holds a secret, a session id, a transport address or the document.
"""

from __future__ import annotations

from typing import Any

from commonroom import PROTOCOL_NAME, PROTOCOL_VERSION, __version__
from commonroom.protocol import vocabulary
from commonroom.protocol.capabilities import ALL, DEFAULT_AGENT
from commonroom.protocol.errors import STATUS
from commonroom.protocol.events import EVENTS
from commonroom.protocol.operations import OPERATIONS, tool_name
from commonroom.protocol.schema import json_schema


def operations_document() -> list[dict[str, Any]]:
    return [
        {
            "name": op.name,
            "kind": op.kind,
            "method": op.method,
            "path": op.path,
            "capability": op.capability,
            "summary": op.summary,
            "framing": op.framing,
            "read_only": op.read_only,
            "destructive": op.destructive,
            "idempotent": op.idempotent,
            "params": json_schema(op.params, params=True),
            "result": json_schema(op.result) if op.result is not None else None,
        }
        for op in OPERATIONS
    ]


def agent_workspace() -> dict[str, Any]:
    """GET /.well-known/agent-workspace"""
    return {
        "protocol": PROTOCOL_NAME,
        "protocol_version": PROTOCOL_VERSION,
        "server": {"name": "commonroom", "version": __version__},
        "substrate": "markdown",
        "join": {"method": "POST", "path": "/session/join",
                 "body": {"invite": "secret or commonroom:// URI", "name": "str",
                          "kind": "agent|human"}},
        "auth": "Authorization: Bearer <session_id>",
        "protocol_document": "/protocol",
        "skills": "/skills",
        "capabilities": list(ALL),
        "default_agent_capabilities": list(DEFAULT_AGENT),
    }


def events_document() -> list[dict[str, Any]]:
    """Every event type of the catalogue: the resources it changes, whether it ends streams."""
    return [
        {"type": spec.name, "resources": sorted(spec.resources), "ends_streams": spec.ends_streams}
        for spec in EVENTS.values()
    ]


def vocabulary_document() -> dict[str, Any]:
    """The words a reader branches on, one source: what the page (and any client) reads
    instead of keeping its own lists."""
    return {
        "events": list(EVENTS),
        "statuses": {kind: list(names) for kind, names in vocabulary.STATUSES.items()},
        "open_statuses": {kind: list(names) for kind, names in vocabulary.OPEN_STATUSES.items()},
        "reviewable_statuses": {"proposal": list(vocabulary.PROPOSAL_REVIEWABLE)},
        "rebasable_statuses": {"proposal": list(vocabulary.PROPOSAL_REBASABLE)},
        "overtaken_statuses": {"proposal": list(vocabulary.PROPOSAL_OVERTAKEN)},
        # The named capabilities one may grant; "*" is the host's wildcard, never offered.
        "capabilities": [cap for cap in ALL if cap != "*"],
        "default_agent_capabilities": list(DEFAULT_AGENT),
    }


def protocol_document() -> dict[str, Any]:
    """GET /protocol: every route, its capability and parameters; every error code and event
    type; the vocabularies (docs/architecture.md "The /protocol document")."""
    return {
        "protocol": PROTOCOL_NAME,
        "protocol_version": PROTOCOL_VERSION,
        "errors": dict(STATUS),
        "operations": operations_document(),
        "events": events_document(),
        "vocabulary": vocabulary_document(),
        "limits": {
            "requests_per_minute_per_bearer": 600,
            "requests_per_minute_per_participant": 600,
            "unauthenticated_requests_per_minute_per_address": 60,
            "discovery_requests_per_minute_per_address": 60,
            "joins_per_minute_per_invitation": 60,
            "joins_with_an_unknown_secret_per_minute_per_address": 20,
            "body_bytes": 1024 * 1024,
            "list_limit": [1, 200],
        },
    }


def skills_index() -> dict[str, Any]:
    return {"skills": [{"name": "commonroom", "path": "/skills/commonroom",
                        "description": "How to work on a document in a commonroom."}]}


RECOVERY_ADVICE: tuple[str, ...] = (
    "On `stale_version`, read `diff` and `changes`, read the region again and",
    "propose anew. On `lease_conflict`, the holder is in `details`; pick another",
    "region or ask them. Branch on `error`, never on `message`.",
)
"""Shared by the skill and the MCP instructions, so the two cannot disagree."""

# The review conversation (docs/spec/PROTOCOL.md 17), shared the same way.
REVIEW_ADVICE: tuple[str, ...] = (
    "Unsure what the person wants? Ask on the region (`thread_open`, optionally quoting its",
    "exact text, `blocking: true` for a question you wait on) and wait for the reply with",
    "`workspace_thread_wait`; only you are held. On `changes_requested`, read the review's",
    "thread and `workspace_proposal_revise` in place; on a stale or superseded proposal,",
    "`workspace_proposal_rebase` previews a three-way merge (`apply: true` makes it a revision).",
    "(Names are MCP tools; over HTTP each is the operation with `_` written `.`.)",
)

# Task surfaces (docs/spec/PROTOCOL.md 20), shared the same way: when one helps, and that it is
# never the default.
TASK_SURFACE_ADVICE: tuple[str, ...] = (
    "Working on a task you accepted (a handoff)? Plain room text (`workspace.message` with its",
    "`handoff_id`) and attachments are the default. A surface helps only when structure does:",
    "`task.live_view` for structured progress (a checklist with counts, a small table; publish",
    "again with a higher `revision`), `task.app` for a small form or a choice the host answers",
    "in the page, then `task.app_request` to ask it (15 s; `no_app_host` when the host has it",
    "closed: fall back to text). A refused view names the faulty `details.path`.",
)

# The workflow of the skill, by operation (MCP tool) name: (operation, what to do with it).
MCP_WORKFLOW: tuple[tuple[str, str], ...] = (
    ("workspace.room", "look around: status, participants, leases, open proposals"),
    ("workspace.regions", "the region (heading path) names to read, lease and propose on"),
    ("workspace.read", "read the region you will change; note `version`"),
    ("workspace.checkout", "lease it so others keep out"),
    ("workspace.propose", "propose new text on that version (content replaces the region,"
                          " heading line included)"),
    ("workspace.proposal.wait", "wait for a person's review: one call holds up to 25 s and"
                                " answers once the proposal leaves `pending`; call it again"
                                " while `waiting` is true (never filter raw events)"),
    ("workspace.commit", "commit the approved proposal"),
    ("workspace.release", "release your lease"),
)


def mcp_instructions() -> str:
    """`server/discover` instructions: the skill's workflow in tool names (checked against the table)."""
    names = {op.name for op in OPERATIONS}
    lines = [
        "A commonroom is a temporary room around one markdown file that people share with"
        " agents. The file is the host's: you change it only through proposals a person"
        " approves. Your identity and capabilities come from your session.",
    ]
    for step, (name, what) in enumerate(MCP_WORKFLOW, 1):
        if name not in names:
            raise RuntimeError(f"the MCP workflow names an unknown operation {name!r}")
        lines.append(f"{step}. `{tool_name(name)}`: {what}.")
    lines.append(" ".join(RECOVERY_ADVICE) + " A tool error is an isError result holding the"
                 " same error object; the full skill is skill://commonroom/SKILL.md.")
    lines.append(" ".join(REVIEW_ADVICE))
    lines.append(" ".join(TASK_SURFACE_ADVICE))
    return "\n".join(lines)


def skill_markdown() -> str:
    """GET /skills/commonroom: the agent skill, with the route list from the table."""
    lines = [
        "---",
        "name: commonroom",
        "description: Work with people on one markdown document in a commonroom.",
        "---",
        "",
        "# Working in a commonroom",
        "",
        "A commonroom is a temporary room around one markdown file. The file is the",
        "host's; you change it only through proposals a person approves.",
        "",
        "1. Join: `POST /session/join {invite, name, kind: \"agent\"}` and keep `session_id`",
        "   secret; send it as `Authorization: Bearer <session_id>`.",
        "2. Look around: `GET /workspace/room` (status, participants, leases, open",
        "   proposals, `latest_event_id`), then `GET /workspace/regions`.",
        "3. Read what you will change: `GET /workspace/read?region=Path/To/Heading`;",
        "   note `version`.",
        "4. Lease it so others keep out: `POST /workspace/checkout {region, minutes}`.",
        "5. Propose: `POST /workspace/propose {region, base_version, summary, content}`;",
        "   `content` replaces the region's whole span, heading line included.",
        "6. Wait for a person to approve: `GET /workspace/proposal/wait?proposal_id=P`",
        "   (MCP `workspace_proposal_wait`) holds up to 25 s and answers once the proposal",
        "   leaves `pending`; call it again while `waiting` is true. Then",
        "   `POST /workspace/commit {proposal_id}`.",
        "7. Release your lease: `POST /workspace/release {lease_id}`.",
        "",
        *RECOVERY_ADVICE,
        "",
        *REVIEW_ADVICE,
        "",
        *TASK_SURFACE_ADVICE,
        "",
        "## Operations",
        "",
    ]
    for route in operations_document():
        cap = route["capability"] or "none"
        lines.append(f"- `{route['method']} {route['path']}` ({cap}): {route['summary']}")
    lines.append("")
    return "\n".join(lines)
