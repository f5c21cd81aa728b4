"""docs/architecture.md is the map for the next engineer: every code reference in it resolves.

A backticked span that names the code is checked against it:

- a path (`engine/core.py`, `tests/unit/test_wire.py`, `gui/static/app.js`) exists;
- `module.NAME` (`proposals.check_outline`, `engine/observe.Watch`, `protocol.operations.OPERATIONS`)
  imports and has the attribute; a short module name may mean any module of that name
  (`operations` is protocol's, the engine's or the client's);
- `Class.member` (`Engine.watch`, `OperationSpec.body_bytes`) is a class of the package with
  that member (a method, a field, or an attribute its code sets on `self`);
- a signature (`Engine.write_replacement(tx, span, content, *, summary) -> Snapshot`) names the
  parameters in the code's order; one written with `*` or `->` is the whole signature.

Wire names (operation names, event types) are not code references and are skipped. The same
module checks that no comment in `src/` points at a tracker's "issue N" (the tracker is not in
the repository): a comment names the rule or decision instead.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import commonroom
from commonroom.protocol.events import EVENTS
from commonroom.protocol.operations import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "commonroom"
MAP = ROOT / "docs" / "architecture.md"

_SPAN = re.compile(r"`([^`]+)`")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# `a/b/c.py`, `a/b.NAME.more`, `a.b.NAME`, `Class.member`, optionally followed by `(params)`.
_PATHLIKE = re.compile(
    rf"^((?:[\w.-]+/)+)({_IDENT})(\.(?:py|json|js|css|html|md|toml|svg|cfg)(?![\w]))?((?:\.{_IDENT})*)(.*)$")
_DOTTED = re.compile(rf"^({_IDENT}(?:\.{_IDENT})+)(.*)$")
_FILE_SUFFIXES = (".py", ".js", ".css", ".html", ".json", ".md", ".toml", ".svg")


@cache
def _modules() -> dict[str, ModuleType]:
    """Every module of the package, by its full name."""
    found: dict[str, ModuleType] = {"commonroom": commonroom}
    for info in pkgutil.walk_packages(commonroom.__path__, "commonroom."):
        found[info.name] = importlib.import_module(info.name)
    return found


@cache
def _by_short_name() -> dict[str, list[ModuleType]]:
    """`proposals` -> [commonroom.engine.proposals]; `engine` -> [commonroom.engine]; ..."""
    out: dict[str, list[ModuleType]] = {}
    for name, module in _modules().items():
        parts = name.split(".")
        for start in range(1, len(parts)):
            out.setdefault(".".join(parts[start:]), []).append(module)
    return out


@cache
def _classes() -> dict[str, list[type]]:
    """Every class defined in the package, by its name."""
    out: dict[str, list[type]] = {}
    for module in _modules().values():
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                out.setdefault(value.__name__, []).append(value)
    return out


@cache
def _wire_names() -> frozenset[str]:
    return frozenset({op.name for op in OPERATIONS} | set(EVENTS))


def _sets_on_self(cls: type, name: str) -> bool:
    """An attribute the class's code sets (`self.name = ...`) or declares (`name: T`)."""
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] != "commonroom":
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{name}\b\s*(?::[^=\n]*)?=|^\s+{name}\s*:", source, re.M):
            return True
    return False


def _member(owner: Any, name: str) -> Any:
    """owner.name, or a marker when it is an attribute its instances get; KeyError if neither."""
    if hasattr(owner, name):
        return getattr(owner, name)
    if inspect.isclass(owner) and _sets_on_self(owner, name):
        return _INSTANCE_ATTRIBUTE
    raise KeyError(name)


_INSTANCE_ATTRIBUTE = object()


def _resolve_chain(start: Any, names: list[str]) -> Any:
    value = start
    for name in names:
        value = _member(value, name)
        if value is _INSTANCE_ATTRIBUTE:
            return value
    return value


def _candidates(first: str) -> Iterator[tuple[Any, int]]:
    """What a reference's leading names may mean: (object, how many names it used)."""
    for module in _by_short_name().get(first, []):
        yield module, 1
    for cls in _classes().get(first, []):
        yield cls, 1


def _resolve_dotted(dotted: str) -> tuple[bool, Any]:
    """(True, object) when some reading of `a.b.c` resolves; (False, why) otherwise."""
    names = dotted.split(".")
    # The longest module prefix first: `protocol.operations.OPERATIONS`, `engine.facade`.
    for length in range(len(names), 0, -1):
        prefix = ".".join(names[:length])
        for module in _by_short_name().get(prefix, []):
            try:
                return True, _resolve_chain(module, names[length:])
            except KeyError:
                continue
    # `tx.emit`, `engine.refresh`, `room.execute`: an instance of the class of that name.
    for cls in [*_classes().get(names[0], []), *_classes().get(names[0].capitalize(), [])]:
        try:
            return True, _resolve_chain(cls, names[1:])
        except KeyError:
            continue
    # `sessions.invite_id`, `policies.label`: a column of the sidecar's schema.
    if len(names) == 2 and names[1] in _sidecar_columns().get(names[0], ()):
        return True, _INSTANCE_ATTRIBUTE
    return False, f"nothing in the package answers {dotted!r}"


@cache
def _sidecar_columns() -> dict[str, frozenset[str]]:
    """Every table of a fresh sidecar and its columns (the migrations, applied)."""
    import sqlite3

    from commonroom.store.schema import migrate

    conn = sqlite3.connect(":memory:")
    migrate(conn)
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {table: frozenset(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
            for table in tables}


def _is_code_reference(dotted: str) -> bool:
    first = dotted.split(".")[0]
    return bool(_by_short_name().get(first) or _classes().get(first)
                or _classes().get(first.capitalize()) or first in _sidecar_columns())


def _parameters(rest: str) -> tuple[list[str], bool] | None:
    """`(tx, span, content, *, summary) -> Snapshot` -> (["tx", "span", "content", "summary"], True)."""
    if not rest.startswith("("):
        return None
    depth, end = 0, -1
    for index, char in enumerate(rest):
        depth += char == "("
        depth -= char == ")"
        if depth == 0:
            end = index
            break
    if end < 0:
        return None
    inner = rest[1:end]
    whole = "*" in inner or rest[end + 1:].lstrip().startswith("->")
    names: list[str] = []
    for part in (p.strip() for p in inner.split(",")):
        if part in ("", "*", "...", "/") or part.startswith("**"):
            continue
        match = re.match(rf"^\*?({_IDENT})\s*(?::|=|$)", part)
        if match is None:
            return None  # not a parameter list (a call with values, an expression): not checked
        names.append(match.group(1))
    return names, whole


def _check_signature(obj: Any, listed: list[str], whole: bool) -> str | None:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    real = [name for name, p in signature.parameters.items()
            if name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if whole:
        return None if listed == real else f"the signature is ({', '.join(real)})"
    positions = [real.index(name) if name in real else -1 for name in listed]
    if -1 in positions or positions != sorted(positions):
        return f"the signature is ({', '.join(real)})"
    return None


def _check_path(path: str) -> str | None:
    """A file or folder of the repository, the package, or the page's static folder."""
    if "<" in path or path.startswith(("http", "~", "$", ".")):
        return None
    if "*" in path:
        return None if next(ROOT.glob(path), None) else f"no file matches {path!r}"
    bases = (ROOT, ROOT / "src", SRC, SRC / "gui" / "static", ROOT / "docs")
    if any((base / path).exists() for base in bases):
        return None
    return f"no file {path!r}"


def _check(span: str) -> str | None:
    """Why a backticked span is stale, or None (fine, or not a code reference)."""
    span = span.strip()
    if " " in span.split("(")[0] or span in _wire_names():
        return None
    if span.startswith("."):
        return None  # `.tox/...`, `.test-artifacts/...`: made by a run, not in the repository
    path_match = _PATHLIKE.match(span)
    first_folder = span.split("/")[0]
    if path_match is not None and not (
            (ROOT / first_folder).is_dir() or (SRC / first_folder).is_dir() or span.startswith(".")):
        return None  # `notifications/resources/updated`, `tasks/get`: MCP methods, not paths
    if "*" in span and "/" in span and " " not in span:
        return _check_path(span)
    if path_match is not None:
        folders, stem, suffix, attributes, rest = path_match.groups()
        if suffix:
            missing = _check_path(folders + stem + suffix)
            if missing or not attributes:
                return missing
            return None  # `file.py.NAME` is not a form the map uses
        module_path = folders + stem
        file = SRC / (module_path + ".py")
        package = SRC / module_path / "__init__.py"
        if not attributes:
            # `engine/observe`, `protocol/jsondepth`: a module of the package (or a folder).
            if file.exists() or package.exists() or (ROOT / module_path).exists() or (SRC / module_path).exists():
                return None
            return f"no module {module_path!r}"
        if not (file.exists() or package.exists()):
            return f"no module {module_path!r}"
        dotted = module_path.replace("/", ".") + attributes
        ok, found = _resolve_dotted(dotted)
        if not ok:
            return str(found)
        return _signature_problem(found, rest)
    if span.endswith(_FILE_SUFFIXES) and "/" not in span and re.fullmatch(r"[\w.-]+", span):
        # A bare file name (`app.js`, `conftest.py`): it exists somewhere in the repository.
        if next(ROOT.glob(f"src/**/{span}"), None) or next(ROOT.glob(f"tests/**/{span}"), None) \
                or next(ROOT.glob(f"tools/**/{span}"), None) or (ROOT / span).exists() \
                or (ROOT / "docs" / span).exists():
            return None
        return f"no file {span!r}"
    dotted_match = _DOTTED.match(span)
    if dotted_match is None:
        return None
    dotted, rest = dotted_match.groups()
    if not _is_code_reference(dotted) or dotted.endswith((".py", ".js", ".css", ".json", ".md", ".html")):
        return None
    ok, found = _resolve_dotted(dotted)
    if not ok:
        return str(found)
    return _signature_problem(found, rest)


def _signature_problem(found: Any, rest: str) -> str | None:
    params = _parameters(rest)
    if params is None or found is _INSTANCE_ATTRIBUTE or not callable(found):
        return None
    return _check_signature(found, *params)


def _spans(text: str) -> Iterator[tuple[int, str]]:
    """Each backticked span (one may break across lines) with the line it starts on."""
    for match in _SPAN.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, " ".join(match.group(1).split())


def stale_references(text: str) -> list[str]:
    return [f"docs/architecture.md:{number}: `{span}`: {problem}"
            for number, span in _spans(text) if (problem := _check(span)) is not None]


def test_every_code_reference_in_the_architecture_map_resolves() -> None:
    assert stale_references(MAP.read_text()) == []


@pytest.mark.parametrize("stale", [
    "`threads.TRANSITIONS`",                      # the machines are `_state.THREAD` and kin
    "`OperationSpec.body_limit`",                  # the field is `body_bytes`
    "`engine/core.py` and `engine/nowhere.py`",    # a file that is not there
    "`Engine.write_replacement(tx, span, content, *, summary, participant_id) -> Snapshot`",
    "`facade.NOT_A_NAME`",
    "`store/schema.MIGRATION`",
])
def test_the_map_check_finds_a_stale_reference(stale: str) -> None:
    """The check can fail: each of these is stale (or was, before the map was made true)."""
    assert stale_references(stale + "\n") != []


@pytest.mark.parametrize("fine", [
    "`proposals.check_outline`", "`engine/observe.Watch`", "`protocol.operations.OPERATIONS`",
    "`OperationSpec.body_bytes`", "`tests/unit/test_wire.py`", "`app.js`", "`workspace.read`",
    "`guard.tripped`", "`Tx.after_commit`", "`Outline.replaced(span, content)`",
    "`ce serve --mcp-legacy`", "`{\"error\", \"message\"}`",
])
def test_the_map_check_accepts_what_resolves_and_skips_what_is_not_code(fine: str) -> None:
    assert stale_references(fine + "\n") == []


# -- comments name rules, not tracker issues ----------------------------------------------------

# The word itself: "issue 24 item 2", "see the issue", "(issue 22)" all point outside the repository.
_ISSUE = re.compile(r"\bissues?\b", re.IGNORECASE)


def test_src_points_at_no_tracker_issue() -> None:
    """A comment names the rule or decision it means; "issue 24 item 2" points at a tracker that
    is not in the repository, so `src/` says "issue" nowhere (third-party vendored files aside)."""
    found = []
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in (".py", ".js", ".css", ".html") or "vendor" in path.parts:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _ISSUE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_the_issue_check_can_fail() -> None:
    assert _ISSUE.search("# the open-streams bound (issue 24 item 2)")
    assert _ISSUE.search("the review conversation (Issue 22)")
    assert not _ISSUE.search("the open-streams bound (docs/protocol.md)")
