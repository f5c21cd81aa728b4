"""Turning a JSON body or a query string into an operation's parameter record.

Each operation declares its parameters as a frozen attrs class. Supported
field types: `str`, `int`, `bool`, `list[str]`, and any of them `| None`.
A field may carry `metadata={"choices": (...)}` or `{"min": n, "max": m}`.
Errors are `invalid_request` naming the field, so a client can fix its call.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from commonroom.protocol.errors import invalid_request

P = TypeVar("P")


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _coerce(name: str, tp: Any, value: Any, from_query: bool) -> Any:
    if tp is str:
        if not isinstance(value, str):
            raise invalid_request(f"{name} must be a string", name)
        return value
    if tp is bool:
        if from_query and isinstance(value, str):
            if value in ("true", "1"):
                return True
            if value in ("false", "0"):
                return False
        if not isinstance(value, bool):
            raise invalid_request(f"{name} must be a boolean", name)
        return value
    if tp is int:
        if from_query and isinstance(value, str):
            try:
                return int(value, 10)
            except ValueError:
                raise invalid_request(f"{name} must be an integer", name) from None
        if type(value) is not int:
            raise invalid_request(f"{name} must be an integer", name)
        return value
    if typing.get_origin(tp) is list:
        if from_query and isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise invalid_request(f"{name} must be a list of strings", name)
        return list(value)
    raise TypeError(f"unsupported parameter type {tp!r} for {name}")


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    # get_type_hints evaluates the string annotations: once per class, not per request.
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def parse_params(cls: type[P], raw: Mapping[str, Any], *, from_query: bool = False) -> P:
    if not isinstance(raw, Mapping):
        raise invalid_request("the request body must be a JSON object")
    hints = _hints(cls)
    fields = attrs.fields(cls)  # type: ignore[arg-type]
    known = {f.name for f in fields}
    for key in raw:
        if key not in known:
            raise invalid_request(f"unknown field {key!r}", str(key))
    values: dict[str, Any] = {}
    for field in fields:
        name = field.name
        tp, optional = _unwrap_optional(hints[name])
        if name in raw and raw[name] is None and optional:
            values[name] = None  # an explicit null (e.g. max_uses: null = unlimited)
            continue
        if name not in raw:
            if field.default is not attrs.NOTHING:
                continue
            if optional:
                values[name] = None
                continue
            raise invalid_request(f"{name} is required", name)
        value = _coerce(name, tp, raw[name], from_query)
        meta = field.metadata
        if "choices" in meta and value not in meta["choices"]:
            raise invalid_request(f"{name} must be one of {', '.join(meta['choices'])}", name)
        if "min" in meta and value < meta["min"]:
            raise invalid_request(f"{name} must be at least {meta['min']}", name)
        if "max" in meta and value > meta["max"]:
            raise invalid_request(f"{name} must be at most {meta['max']}", name)
        values[name] = value
    return cls(**values)


def json_schema(cls: type[Any]) -> dict[str, Any]:
    """The JSON Schema of a parameter record (for MCP tools and the docs)."""
    hints = _hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        tp, optional = _unwrap_optional(hints[field.name])
        if tp is str:
            schema: dict[str, Any] = {"type": "string"}
        elif tp is int:
            schema = {"type": "integer"}
        elif tp is bool:
            schema = {"type": "boolean"}
        else:
            schema = {"type": "array", "items": {"type": "string"}}
        meta = field.metadata
        if "choices" in meta:
            schema["enum"] = list(meta["choices"])
        if "min" in meta:
            schema["minimum"] = meta["min"]
        if "max" in meta:
            schema["maximum"] = meta["max"]
        if "doc" in meta:
            schema["description"] = meta["doc"]
        props[field.name] = schema
        if field.default is attrs.NOTHING and not optional:
            required.append(field.name)
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out
