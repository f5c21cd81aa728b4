"""MCP resources: the room's state as readable URIs, each backed by one table operation.

`commonroom://workspace/{status,document,proposals,leases,participants}` are
the five workspace resources (docs/spec/PROTOCOL.md section 12); the template
`commonroom://workspace/region/{path}` reads one region. All of them are
subscribable (a region URI is hinted when the document changed in that
region, an ancestor or a descendant: `notify.changed_uris`). Each is answered by
running the operation named here through the room, so the capability rule
(`read`) and the answer are the HTTP API's. The skill file
`skill://commonroom/SKILL.md` is a resource too (the skills extension needs
it); it is public and needs no session.

The resource names match `protocol.events.RESOURCES`: an event's resource set
says which of these URIs its commit changed.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any, Final
from urllib.parse import unquote

import attrs

from commonroom import discovery
from commonroom.protocol.events import RESOURCES
from commonroom.protocol.records import to_wire
from commonroom.room.core import Room

PREFIX: Final = "commonroom://workspace/"
REGION_PREFIX: Final = PREFIX + "region/"
REGION_TEMPLATE: Final = REGION_PREFIX + "{path}"
SKILL_URI: Final = "skill://commonroom/SKILL.md"
ROOM_STATE_TTL_MS: Final = 0
STATIC_TTL_MS: Final = 60_000


@attrs.frozen
class ResourceSpec:
    name: str  # one of protocol.events.RESOURCES
    operation: str
    description: str
    mime_type: str = "application/json"

    @property
    def uri(self) -> str:
        return PREFIX + self.name


SUBSCRIBABLE: Final[tuple[ResourceSpec, ...]] = (
    ResourceSpec("status", "workspace.status",
                 "Workspace id, current version and hash, counts of participants, leases, proposals."),
    ResourceSpec("document", "workspace.read", "The whole markdown document at the current version.",
                 "text/markdown"),
    ResourceSpec("proposals", "workspace.proposals", "Proposals, newest first."),
    ResourceSpec("leases", "workspace.leases", "Active leases: who holds which region until when."),
    ResourceSpec("participants", "workspace.participants", "Who is in the room, with presence."),
)
BY_URI: Final[dict[str, ResourceSpec]] = {spec.uri: spec for spec in SUBSCRIBABLE}
assert all(spec.name in RESOURCES for spec in SUBSCRIBABLE)


def is_region_uri(uri: str) -> bool:
    """A URI of the region template (`commonroom://workspace/region/{path}`)."""
    return uri.startswith(REGION_PREFIX) and len(uri) > len(REGION_PREFIX)


def uri_of(resource: str) -> str | None:
    """The subscribable URI of an event-catalogue resource name (None: not subscribable)."""
    uri = PREFIX + resource
    return uri if uri in BY_URI else None


def resource_list() -> list[dict[str, Any]]:
    listed = [
        {"uri": spec.uri, "name": spec.name, "title": f"workspace {spec.name}",
         "description": spec.description, "mimeType": spec.mime_type}
        for spec in SUBSCRIBABLE
    ]
    listed.append({"uri": SKILL_URI, "name": "commonroom-skill", "title": "commonroom skill",
                   "description": "How to work in a commonroom (the agent skill).",
                   "mimeType": "text/markdown"})
    return listed


def template_list() -> list[dict[str, Any]]:
    return [{"uriTemplate": REGION_TEMPLATE, "name": "region",
             "description": "One region of the document by heading path (e.g. Plan/Goals),"
                            " at the current version.",
             "mimeType": "text/markdown"}]


@cache
def skill_file() -> tuple[str, str, int]:
    """(text, "sha256:<hex>", size in bytes) of the skill, generated from the table."""
    text = discovery.skill_markdown()
    data = text.encode("utf-8")
    return text, "sha256:" + hashlib.sha256(data).hexdigest(), len(data)


class NotFound(Exception):
    """No resource has this URI."""


@attrs.frozen
class Target:
    """What a URI reads: an operation with its params (or the skill file)."""

    uri: str
    operation: str | None
    params: dict[str, Any]
    mime_type: str


def resolve(uri: str) -> Target:
    if uri == SKILL_URI:
        return Target(uri, None, {}, "text/markdown")
    spec = BY_URI.get(uri)
    if spec is not None:
        return Target(uri, spec.operation, {}, spec.mime_type)
    if is_region_uri(uri):
        region = unquote(uri[len(REGION_PREFIX):])
        return Target(uri, "workspace.read", {"region": region}, "text/markdown")
    raise NotFound(uri)


def contents(target: Target, answer: Any) -> dict[str, Any]:
    """One `contents` entry from an operation's wire answer."""
    if target.mime_type == "text/markdown":
        return {"uri": target.uri, "mimeType": "text/markdown", "text": answer["content"],
                "_meta": {"commonroom/version": answer["version"],
                          "commonroom/region": answer["region"],
                          "commonroom/truncated": answer["truncated"]}}
    return {"uri": target.uri, "mimeType": "application/json",
            "text": json.dumps(answer, separators=(",", ":"), ensure_ascii=False)}


async def read(room: Room, target: Target, bearer: str | None) -> dict[str, Any]:
    """The `contents` entry of a resolved URI; raises the operation's CommonroomError."""
    if target.operation is None:
        text, _, _ = skill_file()
        return {"uri": target.uri, "mimeType": "text/markdown", "text": text}
    outcome = await room.execute(target.operation, bearer, target.params)
    if outcome.error is not None:
        raise outcome.error
    return contents(target, to_wire(outcome.result))
