"""The shapes of a task's surfaces, checked whole (docs/spec/PROTOCOL.md section 20).

A live view is data the page renders with its own code, never agent HTML, so
the room refuses anything the page would not know how to draw: a node is one
of `COMPONENTS` with exactly its fields, a button's action one of `ACTIONS`,
and every binding (`Value.path`, `Input.path`, an action's `path`) a key of
the view's `data`. A bundle is one self-contained app with no network
(`networkOrigins` empty). States, request payloads and replies are any JSON
within their byte bounds.

Every refusal is `invalid_request` with `details.field` (the parameter) and
`details.path`, the place of the *first* fault in document order, written the
way a person reads it: `root.children[2].action.path`, `manifest.title`
(`""` is the value as a whole: its size). Sizes are the compact UTF-8 JSON the
room stores. Pure functions over parsed JSON: the engine calls them, the
client may too.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from commonroom.protocol import limits
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.params import NumberTooLarge

CONTAINERS: Final = ("Row", "Column", "Card")
COMPONENTS: Final = ("Text", "Value", "Button", "Input", *CONTAINERS)
ACTIONS: Final = ("increment", "set")
# node type -> its fields: required, optional
_FIELDS: Final[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
    "Text": (frozenset({"type", "text"}), frozenset()),
    "Value": (frozenset({"type", "path"}), frozenset({"label"})),
    "Input": (frozenset({"type", "path"}), frozenset({"label"})),
    "Button": (frozenset({"type", "label", "action"}), frozenset()),
    "Row": (frozenset({"type", "children"}), frozenset()),
    "Column": (frozenset({"type", "children"}), frozenset()),
    "Card": (frozenset({"type", "children"}), frozenset({"title"})),
}
_ACTION_FIELDS: Final[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
    "increment": (frozenset({"type", "path"}), frozenset({"amount"})),
    "set": (frozenset({"type", "path", "value"}), frozenset()),
}
SURFACE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
# Text the page shows: no control characters but tab and newline (as every parameter).
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A manifest title is one line.
_TITLE_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
AMOUNT_MAX: Final = 1e12


class Fault(Exception):
    """The first fault of a value: where (`path`) and what (`message`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def refusal(field: str, fault: Fault, **details: Any) -> CommonroomError:
    where = f"{field}.{fault.path}" if fault.path else field
    return CommonroomError("invalid_request", f"{where}: {fault.message}",
                           {"field": field, "path": fault.path, **details})


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def compact(value: Any) -> str:
    """The JSON the room stores and measures (checked plain first: `plain`)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def plain(value: Any, path: str = "") -> None:
    """Refuse what is not plain JSON: a number past 19 digits, NaN or infinity, a lone surrogate."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            for key, child in reversed(item.items()):
                _unicode(key, where)
                stack.append((_join(where, key), child))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append((f"{where}[{index}]", item[index]))
        elif isinstance(item, str):
            _unicode(item, where)
        elif isinstance(item, NumberTooLarge):
            raise Fault(where, "a number of more than 19 digits")
        elif isinstance(item, float) and not math.isfinite(item):
            raise Fault(where, "a number must be finite")
        elif item is not None and not isinstance(item, bool | int | float):
            raise Fault(where, "not a JSON value")


def _unicode(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Fault(path, "text must be valid Unicode (no lone surrogates)") from None


def bounded_json(value: Any, field: str, maximum: int) -> str:
    """`value` as stored: plain JSON of at most `maximum` bytes, else `invalid_request`."""
    try:
        plain(value)
    except Fault as fault:
        raise refusal(field, fault) from None
    text = compact(value)
    size = len(text.encode("utf-8"))
    if size > maximum:
        raise refusal(field, Fault("", f"is {size} bytes of JSON; at most {maximum} are allowed"),
                      limit_bytes=maximum, size_bytes=size)
    return text


# -- live views ---------------------------------------------------------------------


def check_live_view(surface: dict[str, Any]) -> str:
    """A live view draft `{surface_id, revision, root, data}`: its stored JSON, or the refusal."""
    text = bounded_json(surface, "surface", limits.LIVE_VIEW_MAX_BYTES)
    try:
        _check_live_view(surface)
    except Fault as fault:
        raise refusal("surface", fault) from None
    return text


def _exact_fields(value: Any, path: str, required: frozenset[str], optional: frozenset[str],
                  what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Fault(path, f"{what} must be a JSON object")
    for key in value:
        if key not in required and key not in optional:
            known = ", ".join(sorted(required | optional))
            raise Fault(_join(path, key), f"{what} has no field {key!r} (its fields: {known})")
    for key in sorted(required):
        if key not in value:
            raise Fault(_join(path, key), f"{what} needs {key!r}")
    return value


def _text(value: Any, path: str, *, required: bool = True) -> None:
    if not isinstance(value, str):
        raise Fault(path, "must be a string")
    if required and not value.strip():
        raise Fault(path, "must not be blank")
    if len(value) > limits.LIVE_VIEW_TEXT_MAX:
        raise Fault(path, f"is {len(value)} characters; at most {limits.LIVE_VIEW_TEXT_MAX}")
    found = _CONTROL.search(value)
    if found is not None:
        raise Fault(path, f"holds the control character U+{ord(found.group()):04X}")


def _check_live_view(surface: dict[str, Any]) -> None:
    _exact_fields(surface, "", frozenset({"surface_id", "revision", "root", "data"}), frozenset(),
                  "a live view")
    surface_id = surface["surface_id"]
    if not isinstance(surface_id, str) or SURFACE_ID.fullmatch(surface_id) is None:
        raise Fault("surface_id", "must be 1-64 letters, digits, '_', '.', ':' or '-'")
    revision = surface["revision"]
    if type(revision) is not int or not 1 <= revision <= 2**53:
        raise Fault("revision", "must be an integer from 1")
    data = surface["data"]
    if not isinstance(data, dict):
        raise Fault("data", "must be a JSON object")
    if len(data) > limits.LIVE_VIEW_DATA_KEYS_MAX:
        raise Fault("data", f"holds at most {limits.LIVE_VIEW_DATA_KEYS_MAX} keys")
    for key, item in data.items():
        _text(key, "data", required=True)
        if isinstance(item, str):
            _text(item, _join("data", key), required=False)
        elif isinstance(item, dict | list):
            raise Fault(_join("data", key), "a data value is a string, number, boolean or null")
    nodes = 0
    # Depth-first in document order, so the first fault reported is the first a reader meets.
    stack: list[tuple[str, Any, int]] = [("root", surface["root"], 1)]
    while stack:
        path, node, depth = stack.pop()
        nodes += 1
        if nodes > limits.LIVE_VIEW_MAX_NODES:
            raise Fault(path, f"a live view has at most {limits.LIVE_VIEW_MAX_NODES} nodes")
        if depth > limits.LIVE_VIEW_MAX_DEPTH:
            raise Fault(path, f"a live view nests at most {limits.LIVE_VIEW_MAX_DEPTH} levels")
        if not isinstance(node, dict):
            raise Fault(path, "a node must be a JSON object")
        kind = node.get("type")
        if not isinstance(kind, str) or kind not in _FIELDS:
            raise Fault(_join(path, "type"),
                        f"unknown component {kind!r}; one of {', '.join(COMPONENTS)}")
        required, optional = _FIELDS[kind]
        _exact_fields(node, path, required, optional, f"a {kind}")
        if kind == "Text":
            _text(node["text"], _join(path, "text"), required=False)
        elif kind in ("Value", "Input"):
            _binding(node["path"], _join(path, "path"), data)
            if "label" in node:
                _text(node["label"], _join(path, "label"))
        elif kind == "Button":
            _text(node["label"], _join(path, "label"))
            _action(node["action"], _join(path, "action"), data)
        else:
            if "title" in node:
                _text(node["title"], _join(path, "title"))
            children = node["children"]
            if not isinstance(children, list):
                raise Fault(_join(path, "children"), "must be a list of nodes")
            for index in range(len(children) - 1, -1, -1):
                stack.append((f"{path}.children[{index}]", children[index], depth + 1))


def _binding(key: Any, path: str, data: dict[str, Any]) -> str:
    if not isinstance(key, str) or key not in data:
        raise Fault(path, f"binds {key!r}, which is not a key of data")
    return key


def _action(action: Any, path: str, data: dict[str, Any]) -> None:
    if not isinstance(action, dict):
        raise Fault(path, "an action must be a JSON object")
    kind = action.get("type")
    if not isinstance(kind, str) or kind not in _ACTION_FIELDS:
        raise Fault(_join(path, "type"), f"unknown action {kind!r}; one of {', '.join(ACTIONS)}")
    required, optional = _ACTION_FIELDS[kind]
    _exact_fields(action, path, required, optional, f"an {kind} action")
    key = _binding(action["path"], _join(path, "path"), data)
    if kind == "increment":
        if type(data[key]) not in (int, float):
            raise Fault(_join(path, "path"), f"increments {key!r}, which is not a number in data")
        amount = action.get("amount", 1)
        if type(amount) not in (int, float) or not -AMOUNT_MAX <= amount <= AMOUNT_MAX:
            raise Fault(_join(path, "amount"), "must be a number")
    else:
        value = action["value"]
        if isinstance(value, dict | list):
            raise Fault(_join(path, "value"), "sets a string, number, boolean or null")
        if isinstance(value, str):
            _text(value, _join(path, "value"), required=False)


# -- generated apps -------------------------------------------------------------------


def check_bundle(bundle: dict[str, Any]) -> tuple[str, str, Any]:
    """An app bundle: (its stored JSON, its title, its initialState), or the refusal."""
    text = bounded_json(bundle, "bundle", limits.APP_BUNDLE_MAX_BYTES)
    try:
        _exact_fields(bundle, "", frozenset({"version", "manifest", "html", "css", "js"}),
                      frozenset({"initialState"}), "a bundle")
        if type(bundle["version"]) is not int or bundle["version"] != 1:
            raise Fault("version", "must be 1")
        manifest = _exact_fields(bundle["manifest"], "manifest",
                                 frozenset({"title", "networkOrigins"}), frozenset(), "the manifest")
        title = manifest["title"]
        if not isinstance(title, str) or not title.strip():
            raise Fault("manifest.title", "must be a non-blank string")
        if len(title) > limits.APP_TITLE_MAX:
            raise Fault("manifest.title", f"is at most {limits.APP_TITLE_MAX} characters")
        found = _TITLE_CONTROL.search(title)
        if found is not None:
            raise Fault("manifest.title",
                        f"holds the control character U+{ord(found.group()):04X}")
        origins = manifest["networkOrigins"]
        if not isinstance(origins, list):
            raise Fault("manifest.networkOrigins", "must be a list")
        if origins:
            raise Fault("manifest.networkOrigins[0]",
                        "an app has no network: networkOrigins must be empty")
        for part in ("html", "css", "js"):
            if not isinstance(bundle[part], str):
                raise Fault(part, "must be a string")
    except Fault as fault:
        raise refusal("bundle", fault) from None
    return text, title, bundle.get("initialState")
