"""Turning a JSON body or a query string into an operation's parameter record.

Each operation declares its parameters as a frozen attrs class
(`protocol/requests.py`). Supported field types: `str`, `int`, `float`,
`bool`, `list[str]`, and any of them `| None`; `dict[str, Any]` (a JSON object)
and `Any` (any JSON value) are passed whole to the handler, which checks them
(the task surfaces' views, bundles and states: `protocol/task_surfaces.py`). A field may carry
`metadata={"choices": (...)}`, `{"min": n, "max": m}`, `{"max_length": n}`
(characters), `{"pattern": regex}` (a match somewhere in the value),
`{"max_items": n, "item_max_length": m}` (a list), and `{"doc": ...}` for
its description; each one is enforced here and advertised in the schemas. Errors are
`invalid_request` naming the field, so a client can fix its call. The JSON
Schema of a record is `protocol.schema.json_schema(cls, params=True)`.
This is the one edge check of a value: integers are bounded to SQLite's
64-bit range, strings must be valid Unicode (no lone surrogates) without
control characters (the terminal rule: an ESC in a summary or a proposal could hide
text from the host at a terminal). Tab and newline are text; carriage return
is text only in document content (fields with `metadata={"document": True}`),
where a CRLF file's lines end with it.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Any, Final, TypeVar

import attrs

from commonroom.protocol.errors import CommonroomError, invalid_request
from commonroom.protocol.schema import NONBLANK, hints, unwrap_optional

P = TypeVar("P")


# Every integer parameter fits SQLite's INTEGER (a signed 64-bit value): a
# larger one is refused here, naming the field, not by the database later.
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1
_QUERY_INT = re.compile(r"-?[0-9]{1,19}")
# C0 and C1 control characters and DEL, less tab and newline (and carriage return in
# document content). One C-speed search per string.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_DOCUMENT_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@attrs.frozen
class NumberTooLarge:
    """What a JSON body's integer literal of more than 19 digits parses to (see `json_int`)."""

    digits: int


def json_int(literal: str) -> int | NumberTooLarge:
    """`json.loads(parse_int=...)`: no 4,300-digit conversion, and the field is named later."""
    if len(literal.lstrip("-")) > 19:
        return NumberTooLarge(len(literal))
    return int(literal)


def _text(name: str, value: str, document: bool = False) -> str:
    # A lone surrogate ("\ud800" in JSON) is not text: it cannot be stored,
    # hashed or written to the file as UTF-8.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_request(f"{name} must be valid Unicode text (no lone surrogates)", name) from None
    found = (_DOCUMENT_CONTROL if document else _CONTROL).search(value)
    if found is not None:
        allowed = "tab, newline and carriage return" if document else "tab and newline"
        error = invalid_request(
            f"{name} holds the control character U+{ord(found.group()):04X} at offset"
            f" {found.start()}; of the control characters only {allowed} are text", name,
        )
        error.details.update(reason="control_character", offset=found.start())
        raise error
    return value


def _integer_error(name: str) -> Exception:
    return invalid_request(f"{name} must be an integer from {INT_MIN} to {INT_MAX}", name)


def _coerce(name: str, tp: Any, value: Any, from_query: bool, document: bool = False) -> Any:
    if tp is str:
        if not isinstance(value, str):
            raise invalid_request(f"{name} must be a string", name)
        return _text(name, value, document)
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
            if not _QUERY_INT.fullmatch(value):
                raise _integer_error(name)
            value = int(value, 10)
        if isinstance(value, NumberTooLarge):
            raise _integer_error(name)
        if type(value) is not int:
            raise invalid_request(f"{name} must be an integer", name)
        if not INT_MIN <= value <= INT_MAX:
            raise _integer_error(name)
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
    if tp is Any:
        return value  # a JSON value the handler checks as a whole (task surfaces, section 20)
    if typing.get_origin(tp) is dict:
        if not isinstance(value, dict):
            raise invalid_request(f"{name} must be a JSON object", name)
        return value

    if typing.get_origin(tp) is list and attrs.has(typing.get_args(tp)[0]):
        # A list of small records (a permission request's options): each parsed like a body.
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise invalid_request(f"{name} must be a list of objects", name)
        item_cls = typing.get_args(tp)[0]
        return [_record_item(name, item_cls, v) for v in value]
    if typing.get_origin(tp) is list:
        if from_query and isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise invalid_request(f"{name} must be a list of strings", name)
        return [_text(name, v) for v in value]
    raise TypeError(f"unsupported parameter type {tp!r} for {name}")


def _record_item(name: str, item_cls: type[Any], value: Mapping[str, Any]) -> Any:
    try:
        return parse_params(item_cls, value)
    except CommonroomError as error:
        field = error.details.get("field")
        raise invalid_request(f"{name}: {error.message}", f"{name}.{field}" if field else name
                              ) from None


def _check_text_constraints(name: str, value: Any, meta: Mapping[str, Any]) -> None:
    """`max_length` (characters of a string), `max_items` and `item_max_length` (of a list),
    `pattern` (the string must contain a match): the limits the schemas advertise."""
    if isinstance(value, str):
        if "max_length" in meta and len(value) > meta["max_length"]:
            raise invalid_request(
                f"{name} is {len(value)} characters; at most {meta['max_length']} are allowed", name)
        if "pattern" in meta and re.search(meta["pattern"], value) is None:
            raise invalid_request(_pattern_message(name, meta["pattern"]), name)
    elif isinstance(value, list):
        if "max_items" in meta and len(value) > meta["max_items"]:
            raise invalid_request(f"{name} holds at most {meta['max_items']} items", name)
        if "item_max_length" in meta:
            for item in value:
                if len(item) > meta["item_max_length"]:
                    raise invalid_request(
                        f"each of {name} is at most {meta['item_max_length']} characters", name)


def _pattern_message(name: str, pattern: str) -> str:
    return f"{name} must not be blank" if pattern == NONBLANK else f"{name} must match {pattern}"


def parse_params(cls: type[P], raw: Mapping[str, Any], *, from_query: bool = False) -> P:
    if not isinstance(raw, Mapping):
        raise invalid_request("the request body must be a JSON object")
    field_hints = hints(cls)
    fields = attrs.fields(cls)  # type: ignore[arg-type]
    known = {f.name for f in fields}
    for key in raw:
        if key not in known:
            shown = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
            raise invalid_request(f"unknown field {shown!r}", shown)
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
        meta = field.metadata
        value = _coerce(name, tp, raw[name], from_query, bool(meta.get("document")))
        if "choices" in meta and value not in meta["choices"]:
            raise invalid_request(f"{name} must be one of {', '.join(meta['choices'])}", name)
        if "min" in meta and value < meta["min"]:
            raise invalid_request(f"{name} must be at least {meta['min']}", name)
        if "max" in meta and value > meta["max"]:
            raise invalid_request(f"{name} must be at most {meta['max']}", name)
        if value is not None:
            _check_text_constraints(name, value, meta)
        values[name] = value
    return cls(**values)
