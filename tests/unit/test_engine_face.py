"""Above the engine, an open engine is an `EngineFace` (engine/facade.py), and only that.

The room, the adapters, the service and the host CLI never name the `Engine` class,
and reach nothing of an engine that the face does not list; the face lists nothing
they do not use. `mypy --strict` holds the same for every annotated use; this test
also sees a use that an `Any` would hide from it (`Room.run_sync`'s arguments).
"""

from __future__ import annotations

import ast
from pathlib import Path

from commonroom.engine import facade
from commonroom.engine.facade import EngineFace, PortsFace, PresenceFace

SRC = Path(facade.__file__).resolve().parents[1]
# The engine and its storage half are the engine; the protocol imports neither.
BELOW = ("engine", "store", "protocol")
# An engine attribute that is itself a face: what may be reached on it.
PARTS: dict[str, type] = {"ports": PortsFace, "presence": PresenceFace}


def _members(face: type) -> set[str]:
    return {name for name in vars(face) if not name.startswith("_")}


def _modules_above() -> list[Path]:
    return sorted(path for path in SRC.rglob("*.py")
                  if path.relative_to(SRC).parts[0] not in BELOW)


def _is_engine(node: ast.expr) -> bool:
    """`engine`, or `<anything>.engine`: how code above the engine holds one."""
    return ((isinstance(node, ast.Name) and node.id == "engine")
            or (isinstance(node, ast.Attribute) and node.attr == "engine"))


def _reached(tree: ast.AST) -> list[tuple[str, ...]]:
    """Every (member,) or (part, member) reached on an engine in `tree`."""
    found: list[tuple[str, ...]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if _is_engine(node.value):
            found.append((node.attr,))
        elif isinstance(node.value, ast.Attribute) and _is_engine(node.value.value):
            found.append((node.value.attr, node.attr))
    return found


def _engine_class_named(tree: ast.AST) -> list[str]:
    """Where `tree` names the concrete class or a module of the engine other than the facade."""
    named = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("commonroom.engine"):
            if node.module not in ("commonroom.engine", "commonroom.engine.facade"):
                named.append(f"from {node.module} import ...")
            named += [f"import {alias.name} from {node.module}" for alias in node.names
                      if alias.name == "Engine" or (node.module == "commonroom.engine"
                                                     and alias.name != "facade")]
        elif isinstance(node, ast.Import):
            named += [f"import {alias.name}" for alias in node.names
                      if alias.name.startswith("commonroom.engine")
                      and alias.name != "commonroom.engine.facade"]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "facade" and node.attr not in facade.__all__):
            named.append(f"facade.{node.attr}")
    return named


def test_nothing_above_the_engine_names_the_engine_class() -> None:
    assert "Engine" not in facade.__all__
    named = {str(path.relative_to(SRC)): found for path in _modules_above()
             if (found := _engine_class_named(ast.parse(path.read_text())))}
    assert named == {}


def test_what_is_reached_of_an_engine_above_it_is_exactly_the_face() -> None:
    reached: dict[tuple[str, ...], list[str]] = {}
    for path in _modules_above():
        for chain in _reached(ast.parse(path.read_text())):
            reached.setdefault(chain, []).append(str(path.relative_to(SRC)))
    members = _members(EngineFace)
    beyond = {chain: where for chain, where in reached.items()
              if chain[0] not in members
              or (len(chain) == 2 and chain[0] in PARTS and chain[1] not in _members(PARTS[chain[0]]))}
    assert beyond == {}, "reached above the engine but not on its face (engine/facade.py)"
    used = {chain[0] for chain in reached}
    used_parts = {(part, member) for part, *rest in reached if part in PARTS for member in rest}
    unused = members - used
    unused |= {f"{part}.{member}" for part, face in PARTS.items() for member in _members(face)
               if (part, member) not in used_parts}
    assert unused == set(), "on the face but used by nothing above the engine: drop it"


def test_the_scan_sees_a_reach_beyond_the_face() -> None:
    """The two checks above can fail: a reach of an engine-only member, the class, a module."""
    tree = ast.parse("import commonroom.engine.core\n"
                     "from commonroom.engine.facade import Engine\n"
                     "from commonroom.engine import sessions\n"
                     "def f(room):\n"
                     "    room.engine.settle.deadline\n"
                     "    room.engine.ports.conn\n"
                     "    facade.Engine\n")
    assert _engine_class_named(tree) == [
        "import commonroom.engine.core", "import Engine from commonroom.engine.facade",
        "import sessions from commonroom.engine", "facade.Engine"]
    assert set(_reached(tree)) == {("settle",), ("settle", "deadline"), ("ports",), ("ports", "conn")}
    assert "settle" not in _members(EngineFace) and "conn" not in _members(PortsFace)


def test_an_open_engine_has_every_member_of_its_face(tmp_path: Path) -> None:
    """`Engine` conforms at run time too (mypy checks it at `facade._conforms`)."""
    doc = tmp_path / "idea.md"
    doc.write_text("# Idea\n")
    engine = facade.open_engine(doc)
    try:
        for name in _members(EngineFace):
            assert hasattr(engine, name), name
        for part, face in PARTS.items():
            for name in _members(face):
                assert hasattr(getattr(engine, part), name), f"{part}.{name}"
    finally:
        engine.close()
