"""JSON Schema (draft 2020-12) of the records: operation parameters and results.

One generator for both, so MCP's `inputSchema`/`outputSchema`, `/protocol`
and the OpenAPI document describe exactly what the code accepts and answers.
Parameter fields may carry metadata: `doc` (description), `choices` (enum),
`min`/`max` (bounds), `pattern` (a regular expression the string must
contain a match of, e.g. `NONBLANK`), `document` (document content: carriage
returns are text). Every parameter string's schema forbids the control
characters the engine refuses (`TEXT_PATTERN` and kin). A field with a default is not required; `X | None` is
nullable.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import attrs

from commonroom.protocol.events import Event

_HINTS: dict[type[Any], dict[str, Any]] = {}
NONBLANK = r"\S"
"""`pattern` of a text the engine strips and then refuses when empty (summaries, names, text)."""
# The control characters a parameter string may not hold (protocol/params.py): C0, DEL and
# C1 less tab and newline, and less carriage return in document content. In the schema
# every parameter string carries one of these patterns (a non-blank one: at least one
# character that is neither blank nor control), so a schema-valid string is one the
# engine accepts.
_CONTROL = "\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f"
_DOCUMENT_CONTROL = "\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f"
TEXT_PATTERN = f"^[^{_CONTROL}]*$"
DOCUMENT_PATTERN = f"^[^{_DOCUMENT_CONTROL}]*$"
NONBLANK_TEXT_PATTERN = f"^[^{_CONTROL}]*[^\\s{_CONTROL}][^{_CONTROL}]*$"


def hints(cls: type[Any]) -> dict[str, Any]:
    """`typing.get_type_hints` of a record, evaluated once per class (not per request)."""
    found = _HINTS.get(cls)
    if found is None:
        found = _HINTS[cls] = typing.get_type_hints(cls)
    return found


def unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """(`X`, True) for `X | None`; (tp, False) otherwise."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event_id": {"type": "integer"},
        "type": {"type": "string"},
        "created_at": {"type": "string"},
        "payload": {"type": "object"},
        "addressed": {"type": "boolean"},
    },
    "required": ["event_id", "type", "created_at", "payload"],
}


def _type_schema(tp: Any) -> dict[str, Any]:
    tp, optional = unwrap_optional(tp)
    schema = _plain_schema(tp)
    if not optional:
        return schema
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _plain_schema(tp: Any) -> dict[str, Any]:
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is Event:
        return dict(EVENT_SCHEMA)
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        args = typing.get_args(tp)
        item = args[0] if args else Any
        return {"type": "array", "items": _type_schema(item) if item is not Any else {}}
    if origin is dict or tp is dict:
        return {"type": "object"}
    if tp is Any:
        return {}
    if attrs.has(tp):
        return json_schema(tp)
    raise TypeError(f"no JSON Schema for {tp!r}")


def _text_pattern(schema: dict[str, Any], meta: Any) -> None:
    """The pattern of a parameter string (or of a list's items): no control characters."""
    if meta.get("pattern") == NONBLANK:
        pattern = NONBLANK_TEXT_PATTERN
    elif "pattern" in meta:
        pattern = meta["pattern"]
    else:
        pattern = DOCUMENT_PATTERN if meta.get("document") else TEXT_PATTERN
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "string" in kinds:
        schema["pattern"] = pattern
    elif "array" in kinds and schema.get("items", {}).get("type") == "string":
        schema["items"] = {**schema["items"], "pattern": pattern}
        if "item_max_length" in meta:
            schema["items"]["maxLength"] = meta["item_max_length"]


def json_schema(cls: type[Any], *, params: bool = False) -> dict[str, Any]:
    """The schema of a result record, or (`params=True`) of a parameter record.

    A result's fields are all present (`X | None` may be null). A parameter
    record refuses unknown fields, and a field is required only when it has
    no default and is not `X | None` (a missing optional parameter is null).
    """
    props: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        tp = hints(cls)[field.name]
        schema = _type_schema(tp)
        item = typing.get_args(unwrap_optional(tp)[0])
        if params and item and attrs.has(item[0]):
            schema["items"] = json_schema(item[0], params=True)  # a list of records
        meta = field.metadata
        if "choices" in meta:
            schema["enum"] = list(meta["choices"])
        if "min" in meta:
            schema["minimum"] = meta["min"]
        if "max" in meta:
            schema["maximum"] = meta["max"]
        if "max_length" in meta:
            schema["maxLength"] = meta["max_length"]
        if "max_items" in meta:
            schema["maxItems"] = meta["max_items"]
        if params:
            _text_pattern(schema, meta)
        elif "pattern" in meta:
            schema["pattern"] = meta["pattern"]
        if "doc" in meta:
            schema["description"] = meta["doc"]
        props[field.name] = schema
        if field.default is attrs.NOTHING and not (params and unwrap_optional(tp)[1]):
            required.append(field.name)
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    if params:
        out["additionalProperties"] = False
    return out
