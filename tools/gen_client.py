"""Write `client/generated.py`: every operation of the table as a method of both Python clients.

    .venv/bin/python tools/gen_client.py            # rewrite it
    .venv/bin/python tools/gen_client.py --check    # exit 1 when the committed file is stale

`tests/unit/test_client_generated.py` fails when the committed file differs from what this
writes, as `tests/unit/test_openapi.py` does for docs/openapi.json. One method per operation of
`protocol.operations.OPERATIONS` (but those the shells carry with methods of their own,
`client.operations.SHELL_METHODS`, and `NOT_A_METHOD`), once as `def` on `BlockingOperations`
(`Client`) and once as `async def` on `AsyncOperations` (`AsyncClient`), each returning the
operation's result record. From the operation's parameter record (`protocol/requests.py`):

- required fields are positional-or-keyword, in the record's order;
- every other field is keyword-only: a `bool` with its record default; anything else
  `X | None = None`, where None is not sent, so the room applies the record's default (the
  client never restates a default the room owns; a null the room reads as a value of its own,
  `max_uses: null` = unlimited, is not reachable from the client);
- annotations are the record's; the docstring is the operation's summary, then each
  parameter's doc, choices, bounds and the room's default, from the field's metadata;
- a long-poll (`framing="long_poll"`) holds `timeout_seconds`: None is `WAIT_HOLD_SECONDS`,
  sent, and it is the call's `hold` (how much longer than a call it may take).

The method's name is `method_name(op)` (`workspace.ping` -> `ping`) unless `NAMES` says
otherwise; `OVERRIDES` keeps the few signatures written before the methods were generated.
Both tables keep today's public surface: scripts, the README and docs/ call these names, and
`tests/unit/test_client_signatures.py` pins every signature.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import textwrap
import types
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import attrs

from commonroom.client.operations import NOT_A_METHOD, SHELL_METHODS
from commonroom.protocol import records, requests
from commonroom.protocol.operations import OPERATIONS, OperationSpec
from commonroom.protocol.schema import hints, unwrap_optional
from commonroom.wire.plans import WAIT_HOLD_SECONDS

TARGET: Final = Path(__file__).resolve().parents[1] / "src" / "commonroom" / "client" / "generated.py"
WIDTH: Final = 100
"""Generated lines stay within this (ruff allows 120; the rest of the client keeps to ~100)."""

NAMES: Final[dict[str, str]] = {
    # Published names that are not `method_name(op)`: each was chosen, when its method was
    # first written by hand, to read as what a script does (`room.ask(...)`, `room.task(id)`);
    # scripts, README.md and docs/ call them, so they stay.
    "session.revoke": "revoke_session",
    "handoff.request": "request_handoff",
    "handoff.respond": "respond_handoff",
    "handoff.result": "report_handoff",
    "handoff.cancel": "cancel_handoff",
    "task.get": "task",
    "task.update": "update_task",
    "task.cancel": "cancel_task",
    "task.live_view": "publish_live_view",
    "task.app": "publish_app",
    "task.app_state": "set_app_state",
    "task.app_request": "ask_app",
    "workspace.message": "send_message",
    "attachment.add": "add_attachment",
    "attachment.get": "attachment",
    "attachment.delete": "delete_attachment",
    "surface.publish": "publish_surface",
    "surface.read": "surface",
    "surface.clear": "clear_surface",
    "workspace.policy_add": "add_policy",
    "workspace.policy_remove": "remove_policy",
    "workspace.policy_pause": "pause_policies",
    "thread.open": "ask",
    "thread.reply": "reply",
    "thread.resolve": "resolve_thread",
    "workspace.proposal.revise": "revise",
    "workspace.proposal.rebase": "rebase",
}


@attrs.frozen
class Override:
    """Where a method's published signature differs from what its record gives, and why."""

    reason: str
    positional: tuple[str, ...] | None = None
    """The parameters a caller may pass by position, in this order (default: the record's
    required fields). One with a record default keeps it (`region: str = "workspace"`)."""
    fallback: dict[str, str] = attrs.field(factory=dict)
    """A required field the client makes optional: field -> the expression sent when the
    caller passes nothing (or an empty value)."""
    note: str = ""
    """A sentence for the docstring: what the client does beyond the wire."""


OVERRIDES: Final[dict[str, Override]] = {
    "workspace.read": Override(
        "`room.read()` reads the whole document, `room.read(\"Problem\")` one region: the"
        " README's first call", positional=("region",)),
    "workspace.blame": Override(
        "`room.blame(\"Problem\")`, like `read`", positional=("region",)),
    "workspace.commit": Override(
        "`room.commit(proposal_id)` lands an approved proposal (without one, a host's raw"
        " whole-document commit)", positional=("proposal_id",)),
    "workspace.propose": Override(
        "`room.propose(region, content, base_version=...)`: the text is the call's point, the"
        " version a keyword so it is never swapped with a line count; a summary is optional",
        positional=("region", "content"), fallback={"summary": 'f"update {region}"'},
        note='`summary` defaults to "update REGION".'),
    "workspace.wait": Override(
        "`room.wait(cursor)` is a long-poll loop's one argument", positional=("cursor",)),
    "surface.read": Override(
        "`room.surface(participant_id)` (none: your own)", positional=("participant_id",)),
    "task.surfaces": Override(
        "`room.task_surfaces(task_id)` (none: every task's)", positional=("task_id",)),
    "task.live_view": Override(
        "`room.publish_live_view(task_id, surface)`: the view is the call's point",
        positional=("task_id", "surface")),
}


def method_name(op: str) -> str:
    """`workspace.ping` -> `ping`; `handoff.request` -> `handoff_request` (unless `NAMES` says)."""
    return NAMES.get(op) or op.removeprefix("workspace.").replace(".", "_")


@attrs.frozen
class Parameter:
    name: str
    annotation: str
    default: str | None
    """The default's source; None: required."""
    keyword_only: bool
    wire: str
    """The expression of the value sent."""
    doc: str

    def source(self) -> str:
        return self.name + f": {self.annotation}" + ("" if self.default is None else f" = {self.default}")


@attrs.define
class Imports:
    """The names the generated module uses, so it imports exactly those."""

    typing: set[str] = attrs.field(factory=lambda: {"Final"})
    requests: bool = False
    wait_hold: bool = False


def annotation(tp: Any, imports: Imports) -> str:
    """`tp` as the generated module writes it (records as `r.X`, parameter records as `rq.X`)."""
    if tp is type(None):
        return "None"
    if tp is Any:
        imports.typing.add("Any")
        return "Any"
    if tp in (str, int, float, bool):
        return str(tp.__name__)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(annotation(arg, imports) for arg in typing.get_args(tp))
    if origin is list or origin is dict:
        arguments = ", ".join(annotation(arg, imports) for arg in typing.get_args(tp))
        return f"{'list' if origin is list else 'dict'}[{arguments}]"
    name: str = getattr(tp, "__name__", "")
    if attrs.has(tp) and getattr(requests, name, None) is tp:
        imports.requests = True
        return f"rq.{name}"
    raise TypeError(f"no source for the parameter type {tp!r}: teach tools/gen_client.annotation")


def literal(value: Any) -> str:
    """A default as source, strings in double quotes as the rest of the package writes them."""
    if isinstance(value, str) and not set(value) & {'"', "\\", "\n"}:
        return f'"{value}"'
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    raise TypeError(f"no source for the default {value!r}")


def field_doc(field: attrs.Attribute[Any], room_default: Any, nullable: bool = False) -> str:
    """What the field's metadata says a caller needs: its doc, choices, bounds, the room's default.

    `nullable`: the record takes null as a value of its own (`max_uses: null` = unlimited), which
    this client cannot send (None is left out), so the field's doc about null is not repeated.
    """
    meta = field.metadata
    parts = [str(meta["doc"])] if "doc" in meta and not nullable else []
    if "choices" in meta:
        parts.append("one of " + ", ".join(meta["choices"]))
    if "min" in meta and "max" in meta:
        parts.append(f"{meta['min']} to {meta['max']}")
    elif "min" in meta or "max" in meta:
        parts.append(f"at least {meta['min']}" if "min" in meta else f"at most {meta['max']}")
    if room_default is not None:
        parts.append(f"the room's default {literal(room_default)}")
    return "; ".join(parts)


def parameters(spec: OperationSpec, imports: Imports) -> list[Parameter]:
    """The method's parameters: positional ones first, in order, then the keyword-only ones."""
    override = OVERRIDES.get(spec.name, Override(""))
    field_hints = hints(spec.params)
    fields = attrs.fields(spec.params)

    def is_required(field: attrs.Attribute[Any]) -> bool:
        return field.default is attrs.NOTHING and not unwrap_optional(field_hints[field.name])[1]

    positional = override.positional if override.positional is not None else tuple(
        field.name for field in fields if is_required(field))
    unknown = (set(positional) | set(override.fallback)) - {field.name for field in fields}
    if unknown:
        raise ValueError(f"{spec.name}: OVERRIDES names no field {sorted(unknown)}")
    made: dict[str, Parameter] = {}
    for field in fields:
        tp = field_hints[field.name]
        inner, optional = unwrap_optional(tp)
        record_default = None if isinstance(field.default, attrs.Factory) else field.default  # type: ignore[arg-type]
        wire = field.name
        room_default = None
        if field.name in override.fallback:
            written, default = f"{annotation(inner, imports)} | None", "None"
            wire = f"{field.name} or {override.fallback[field.name]}"
        elif is_required(field):
            written, default = annotation(tp, imports), None
        elif field.name in positional:
            written, default = annotation(tp, imports), literal(record_default)
        elif inner is bool and not optional:
            written, default = "bool", literal(record_default)
        else:
            written, default = f"{annotation(inner, imports)} | None", "None"
            room_default = record_default if record_default is not attrs.NOTHING else None
        nullable = optional and room_default is not None
        made[field.name] = Parameter(field.name, written, default, field.name not in positional,
                                     wire, field_doc(field, room_default, nullable))
    if spec.framing == "long_poll":
        if "timeout_seconds" not in made or made["timeout_seconds"].default != "None":
            raise ValueError(f"{spec.name}: a long-poll holds an optional timeout_seconds")
        imports.wait_hold = True
        hold_field = attrs.fields_dict(spec.params)["timeout_seconds"]
        made["timeout_seconds"] = attrs.evolve(
            made["timeout_seconds"], wire="hold", doc=field_doc(hold_field, None))
    ordered = [made[name] for name in positional] + [p for p in made.values() if p.keyword_only]
    for before, after in itertools.pairwise(ordered):
        if not after.keyword_only and before.default is not None and after.default is None:
            raise ValueError(f"{spec.name}: positional {after.name} without a default follows one with")
    return ordered


def wrapped(head: str, items: list[str], tail: str, indent: str) -> list[str]:
    """`head + ", ".join(items) + tail` on one line when it fits, else the items filled below."""
    line = head + ", ".join(items) + tail
    if len(line) <= WIDTH:
        return [line]
    lines, current = [head.rstrip()], ""
    for item in items:
        candidate = f"{current} {item}," if current else f"{indent}    {item},"
        if len(candidate) > WIDTH and current:
            lines.append(current)
            candidate = f"{indent}    {item},"
        current = candidate
    lines.append(current)
    lines.append(indent + tail.lstrip())
    return lines


def docstring(spec: OperationSpec, params: list[Parameter], indent: str) -> list[str]:
    override = OVERRIDES.get(spec.name, Override(""))
    paragraphs = [spec.summary, *([override.note] if override.note else [])]
    if spec.framing == "long_poll":
        paragraphs.append(f"`timeout_seconds` None holds it up to {WAIT_HOLD_SECONDS} s"
                          " (`WAIT_HOLD_SECONDS`).")
    lines: list[str] = []
    width = WIDTH - len(indent) - len('"""')
    for paragraph in paragraphs:
        lines += [*textwrap.wrap(paragraph, width), ""]
    for parameter in params:
        if parameter.doc:
            lines += textwrap.wrap(f"`{parameter.name}`: {parameter.doc}.", width,
                                   subsequent_indent="    ")
    while lines and not lines[-1]:
        lines.pop()
    text = "\n".join(lines)
    if "\\" in text or '"""' in text:
        raise ValueError(f"{spec.name}: its summary or a field doc holds a backslash or triple quote")
    body = [indent + '"""' + lines[0], *[(indent + line) if line else "" for line in lines[1:]]]
    if len(body) == 1 and len(body[0]) + 3 <= WIDTH and not lines[0].endswith('"'):
        return [body[0] + '"""']
    return [*body, indent + '"""']


def method(spec: OperationSpec, is_async: bool, imports: Imports) -> list[str]:
    params = parameters(spec, imports)
    name: str = getattr(spec.result, "__name__", "")
    if spec.result is None or getattr(records, name, None) is not spec.result:
        raise ValueError(f"{spec.name}: a call's result is a record of protocol/records.py")
    result = f"r.{name}"
    items = ["self"]
    for parameter in params:
        if parameter.keyword_only and "*" not in items:
            items.append("*")
        items.append(parameter.source())
    head = f"    {'async ' if is_async else ''}def {method_name(spec.name)}("
    lines = wrapped(head, items, f") -> {result}:", "    ")
    lines += docstring(spec, params, "        ")
    hold = ""
    if spec.framing == "long_poll":
        lines.append("        hold = WAIT_HOLD_SECONDS if timeout_seconds is None else timeout_seconds")
        hold = ", float(hold)"
    run = f"        return {'await ' if is_async else ''}self._run(Call({quoted(spec.name)}, {result}, "
    sent = [f"{quoted(p.name)}: {p.wire}" for p in params]
    return lines + wrapped(run + "{", sent, "}" + hold + "))", "        ")


def quoted(name: str) -> str:
    """An operation's or a field's name as a string literal (names hold no quotes or backslashes)."""
    if not name.replace(".", "").replace("_", "").isalnum():
        raise ValueError(f"unexpected name {name!r}")
    return f'"{name}"'


def generated_operations() -> list[OperationSpec]:
    return [spec for spec in OPERATIONS
            if spec.name not in SHELL_METHODS and spec.name not in NOT_A_METHOD]


def _class(name: str, shell: str, doc: str, is_async: bool, imports: Imports) -> Iterator[str]:
    yield ""
    yield ""
    yield f"class {name}({shell}):"
    yield f'    """{doc}"""'
    for spec in generated_operations():
        yield ""
        yield from method(spec, is_async, imports)


def generate() -> str:
    imports = Imports()
    names = {spec.name: method_name(spec.name) for spec in generated_operations()}
    clashes = set(names.values()) & set(SHELL_METHODS.values()) or {
        n for n in names.values() if list(names.values()).count(n) > 1}
    if clashes:
        raise ValueError(f"two operations would be the client's method {sorted(clashes)}")
    stale = (set(NAMES) | set(OVERRIDES)) - set(names)
    if stale:
        raise ValueError(f"NAMES / OVERRIDES name operations the client does not generate: {sorted(stale)}")
    blocking = list(_class(
        "BlockingOperations", "BlockingShell",
        "`Client`'s operation methods: each carries one call and returns its result record.",
        False, imports))
    asynchronous = list(_class(
        "AsyncOperations", "AsyncShell",
        "`AsyncClient`'s operation methods: each carries one call under trio and returns its result.",
        True, imports))
    header = [
        '"""Every operation of the table as a method of `Client` and `AsyncClient`.',
        "",
        "GENERATED by `tools/gen_client.py` from `protocol.operations.OPERATIONS` and each",
        "operation's parameter record: do not edit. Change the table, or the tool's `NAMES` /",
        "`OVERRIDES`, and run `.venv/bin/python tools/gen_client.py`;",
        "`tests/unit/test_client_generated.py` fails while this file is stale. The tool's docstring",
        "says how a record becomes a signature. The methods the shells write by hand (joining,",
        "leases as context managers, observe, the waits for a person) are in `sync.py` / `aio.py`.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f"from typing import {', '.join(sorted(imports.typing))}",
        "",
        "from commonroom.client.operations import SHELL_METHODS, AsyncShell, BlockingShell, Call",
        "from commonroom.protocol import records as r",
        *(["from commonroom.protocol import requests as rq"] if imports.requests else []),
        *(["from commonroom.wire.plans import WAIT_HOLD_SECONDS"] if imports.wait_hold else []),
        "",
        "GENERATED_METHODS: Final[dict[str, str]] = {",
        *[f"    {quoted(op)}: {quoted(name)}," for op, name in names.items()],
        "}",
        '"""Operation -> the method generated for it."""',
        "OPERATION_METHODS: Final[dict[str, str]] = {**GENERATED_METHODS, **SHELL_METHODS}",
        '"""Operation -> the method of both clients that carries it (generated or the shells\')."""',
    ]
    return "\n".join([*header, *blocking, *asynchronous]) + "\n"


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the file is current")
    args = parser.parse_args(None if argv is None else list(argv))
    wanted = generate()
    if args.check:
        if TARGET.read_text(encoding="utf-8") != wanted:
            print(f"{TARGET} is stale: run .venv/bin/python tools/gen_client.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(wanted, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
