"""The facts of the operation table hold for the code they describe.

`OperationSpec.writes_document` is the only thing that lets an operation's transaction stage a
document write (`Engine.transaction` refuses a staged write without it, a RuntimeError: an
internal error at run time). So a handler that reaches a version write must have the flag, and
this test finds every one by walking the engine's call graph from each handler: a new
document-writing operation without the flag fails here, by name, instead of as a 500.
"""

from __future__ import annotations

import ast
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import commonroom.engine
from commonroom.engine.operations import HANDLERS
from commonroom.protocol.operations import OPERATIONS

# The engine calls through which a transaction stages a document write (`tx.staged`).
_STAGING_CALLS = frozenset({"write_version", "write_replacement"})

Function = tuple[str, str]  # (module, function name)


def _engine_modules() -> Iterator[tuple[str, ast.Module]]:
    package = Path(commonroom.engine.__file__).parent
    for info in pkgutil.iter_modules([str(package)]):
        yield f"commonroom.engine.{info.name}", ast.parse((package / f"{info.name}.py").read_text())


class _CallGraph:
    """Which engine function calls which (by name, as the source spells it), and which stage."""

    def __init__(self) -> None:
        self.calls: dict[Function, set[Function]] = {}
        self.stages: set[Function] = set()
        for module, tree in _engine_modules():
            modules, names = self._imports(tree)
            defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
            for node in tree.body:
                if not isinstance(node, ast.FunctionDef):
                    continue
                callees: set[Function] = set()
                for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                    func = call.func
                    if isinstance(func, ast.Name):
                        if func.id in defined:
                            callees.add((module, func.id))
                        elif func.id in names:
                            callees.add(names[func.id])
                    elif isinstance(func, ast.Attribute):
                        if func.attr in _STAGING_CALLS:
                            self.stages.add((module, node.name))
                        if isinstance(func.value, ast.Name) and func.value.id in modules:
                            callees.add((modules[func.value.id], func.attr))
                self.calls[(module, node.name)] = callees

    @staticmethod
    def _imports(tree: ast.Module) -> tuple[dict[str, str], dict[str, Function]]:
        """Engine modules imported by alias, and engine functions imported by name (any depth:
        a handler may import inside a function)."""
        modules: dict[str, str] = {}
        names: dict[str, Function] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "commonroom.engine":
                for alias in node.names:
                    modules[alias.asname or alias.name] = f"commonroom.engine.{alias.name}"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "commonroom.engine."):
                for alias in node.names:
                    names[alias.asname or alias.name] = (str(node.module), alias.name)
        return modules, names

    def reaches_a_staging_call(self, start: Function) -> bool:
        seen: set[Function] = set()
        todo = [start]
        while todo:
            function = todo.pop()
            if function in seen:
                continue
            seen.add(function)
            if function in self.stages:
                return True
            todo.extend(self.calls.get(function, ()))
        return False


def test_every_operation_that_stages_a_document_write_has_writes_document() -> None:
    graph = _CallGraph()
    staging = {name for name, handler in HANDLERS.items()
               if graph.reaches_a_staging_call((handler.__module__, handler.__name__))}
    flagged = {spec.name for spec in OPERATIONS if spec.writes_document}
    assert staging, "the call graph found no handler that writes a version: the walk is broken"
    assert not staging - flagged, (
        f"{sorted(staging - flagged)} stage a document write but their OperationSpec lacks"
        " writes_document=True: the engine would refuse the write at run time (an internal"
        " error). Add the flag in protocol/operations.py."
    )
    # The flag costs undo triggers and a store-thread hop: only what writes carries it.
    assert not flagged - staging, f"{sorted(flagged - staging)} carry writes_document needlessly"


def test_the_document_writers_are_the_commit_and_the_host_s_undo_tools() -> None:
    assert {spec.name for spec in OPERATIONS if spec.writes_document} == {
        "workspace.commit", "workspace.revert", "workspace.restore", "workspace.reapply"}


def test_mcp_tools_are_the_calls_and_long_polls_an_agent_may_call() -> None:
    from commonroom.mcp.tools import TOOLS_BY_NAME

    listed = {spec.name for spec in TOOLS_BY_NAME.values()}
    assert {"workspace.wait", "workspace.proposal.wait", "workspace.thread.wait"} <= listed
    assert not listed & {"workspace.observe", "workspace.observe_ws"}
    # Joining is the bridge's; a runtime's own reports and permission prompts go over REST
    # from `ce agent`: an agent calling them as tools would speak for its runtime.
    assert not listed & {"session.join", "workspace.runtime", "permission.request",
                         "permission.withdraw"}
    assert listed == {spec.name for spec in OPERATIONS if spec.tool}
    # An answer to a permission request is the host's (or an approver's), a tool like any other.
    assert "permission.answer" in listed
