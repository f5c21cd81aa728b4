"""Every constraint a parameter record declares is enforced by the one parser and advertised.

Walks every operation's parameter record (protocol/requests.py): a value one past
a `max_length` / `max_items` / `item_max_length`, a blank value for a `pattern`,
is refused naming the field; the value at the bound passes the parser; and the
served schemas (/protocol, OpenAPI) carry the same bound.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from commonroom import discovery, openapi
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.operations import OPERATIONS
from commonroom.protocol.params import parse_params
from commonroom.protocol.schema import NONBLANK, hints, unwrap_optional

CONSTRAINED = [
    (op.name, op.params, field)
    for op in OPERATIONS
    for field in attrs.fields(op.params)
    if {"max_length", "max_items", "item_max_length", "pattern"} & set(field.metadata)
]


def _valid(cls: type[Any], **override: Any) -> dict[str, Any]:
    """A body with every required field filled with a plain valid value, then `override`."""
    body: dict[str, Any] = {}
    for field in attrs.fields(cls):
        tp, optional = unwrap_optional(hints(cls)[field.name])
        if field.default is not attrs.NOTHING or optional:
            continue
        meta = field.metadata
        body[field.name] = (
            meta["choices"][0] if "choices" in meta else
            meta.get("min", 1) if tp is int else float(meta.get("min", 1)) if tp is float else
            ["x"] if tp == list[str] else "x"
        )
    return {**body, **override}


def _refused(cls: type[Any], body: dict[str, Any], field: str) -> None:
    with pytest.raises(CommonroomError) as caught:
        parse_params(cls, body)
    assert caught.value.code == "invalid_request"
    assert caught.value.details.get("field") == field


def test_there_are_constraints_to_check() -> None:
    names = {(op, field.name) for op, _, field in CONSTRAINED}
    assert ("workspace.propose", "summary") in names and ("workspace.message", "text") in names
    assert ("session.join", "name") in names and ("handoff.request", "attachment_ids") in names


@pytest.mark.parametrize(("op", "cls", "field"), CONSTRAINED, ids=lambda v: getattr(v, "name", v))
def test_each_constraint_is_enforced(op: str, cls: type[Any], field: attrs.Attribute[Any]) -> None:
    meta = field.metadata
    if "max_length" in meta:
        n = meta["max_length"]
        parse_params(cls, _valid(cls, **{field.name: "y" * n}))
        _refused(cls, _valid(cls, **{field.name: "y" * (n + 1)}), field.name)
    if "max_items" in meta:
        n = meta["max_items"]
        parse_params(cls, _valid(cls, **{field.name: [f"i{k}" for k in range(n)]}))
        _refused(cls, _valid(cls, **{field.name: [f"i{k}" for k in range(n + 1)]}), field.name)
    if "item_max_length" in meta:
        n = meta["item_max_length"]
        parse_params(cls, _valid(cls, **{field.name: ["y" * n]}))
        _refused(cls, _valid(cls, **{field.name: ["y" * (n + 1)]}), field.name)
    if meta.get("pattern") == NONBLANK:
        _refused(cls, _valid(cls, **{field.name: " \t\n "}), field.name)


def _openapi_property(op: str, field: str) -> dict[str, Any]:
    document = openapi.openapi_document()
    for path_item in document["paths"].values():
        for operation in path_item.values():
            if isinstance(operation, dict) and operation.get("operationId") == op:
                for parameter in operation.get("parameters", []):
                    if parameter["name"] == field:
                        return dict(parameter["schema"])
                body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
                schema = body.get("schema", {})
                if "$ref" in schema:
                    schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
                return dict(schema["properties"][field])
    raise AssertionError(f"{op} not in the OpenAPI document")


@pytest.mark.parametrize(("op", "cls", "field"), CONSTRAINED, ids=lambda v: getattr(v, "name", v))
def test_each_constraint_is_advertised(op: str, cls: type[Any], field: attrs.Attribute[Any]) -> None:
    meta = field.metadata
    protocol = next(o for o in discovery.protocol_document()["operations"] if o["name"] == op)
    for schema in (protocol["params"]["properties"][field.name], _openapi_property(op, field.name)):
        if "max_length" in meta:
            assert schema["maxLength"] == meta["max_length"]
        if "max_items" in meta:
            assert schema["maxItems"] == meta["max_items"]
        if "item_max_length" in meta:
            assert schema["items"]["maxLength"] == meta["item_max_length"]
        if "pattern" in meta:
            assert "pattern" in schema or "pattern" in schema.get("items", {})
