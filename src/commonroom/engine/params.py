"""Turning a JSON body or a query string into an operation's parameter record.

Each operation declares its parameters as a frozen attrs class. Supported
field types: `str`, `int`, `float`, `bool`, `list[str]`, and any of them
`| None`. A field may carry `metadata={"choices": (...)}` or `{"min": n,
"max": m}`, and `{"doc": ...}` for its description. Errors are
`invalid_request` naming the field, so a client can fix its call. The JSON
Schema of a record is `protocol.schema.json_schema(cls, params=True)`.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from commonroom.protocol.errors import invalid_request
from commonroom.protocol.schema import hints, unwrap_optional

P = TypeVar("P")


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
    if tp is float:
        if from_query and isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                raise invalid_request(f"{name} must be a number", name) from None
            if number != number or number in (float("inf"), float("-inf")):
                raise invalid_request(f"{name} must be a finite number", name)
            return number
        if type(value) not in (int, float):
            raise invalid_request(f"{name} must be a number", name)
        return float(value)
    if typing.get_origin(tp) is list:
        if from_query and isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise invalid_request(f"{name} must be a list of strings", name)
        return list(value)
    raise TypeError(f"unsupported parameter type {tp!r} for {name}")


def parse_params(cls: type[P], raw: Mapping[str, Any], *, from_query: bool = False) -> P:
    if not isinstance(raw, Mapping):
        raise invalid_request("the request body must be a JSON object")
    field_hints = hints(cls)
    fields = attrs.fields(cls)  # type: ignore[arg-type]
    known = {f.name for f in fields}
    for key in raw:
        if key not in known:
            raise invalid_request(f"unknown field {key!r}", str(key))
    values: dict[str, Any] = {}
    for field in fields:
        name = field.name
        tp, optional = unwrap_optional(field_hints[name])
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
