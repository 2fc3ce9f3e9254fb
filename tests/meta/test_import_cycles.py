"""No import cycle among core's top-level modules.

The graph is read from the source (AST): an edge for every import of one of core's
top-level modules, wherever it is written, in a function too (a function-level import
that closes a cycle is still a cycle; it only postpones it to the first call). Imports
under ``if TYPE_CHECKING:`` (or ``_TYPE_CHECKING``, ``_typing.TYPE_CHECKING``) do not
count: they never run. The subpackages (``_cli``, ``_persistence``) are leaves here: an
import of one of their modules is not followed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dsh_session_core

CORE = Path(dsh_session_core.__file__).parent
PACKAGE = "dsh_session_core"


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id.lstrip("_") == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _targets(node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The top-level core modules an import statement loads."""
    names: list[str] = []
    if isinstance(node, ast.ImportFrom):
        if node.level == 1:
            if node.module is None:  # from . import x, y
                names = [a.name for a in node.names]
            else:
                names = [node.module.split(".")[0]]
        elif node.level == 0 and node.module is not None:
            parts = node.module.split(".")
            if parts[0] == PACKAGE:
                names = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]
    else:
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] == PACKAGE and len(parts) > 1:
                names.append(parts[1])
    return {n for n in names if n in modules}


def _imports(tree: ast.AST, modules: set[str]) -> set[str]:
    found: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found |= _targets(node, modules)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _graph() -> dict[str, set[str]]:
    files = {p.stem: p for p in CORE.glob("*.py")}
    modules = set(files)
    return {name: _imports(ast.parse(path.read_text()), modules) - {name}
            for name, path in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path (first node repeated at the end), or ``None``."""
    done: set[str] = set()
    for root in sorted(graph):
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        path.append(root)
        on_path.add(root)
        while stack:
            node, todo = stack[-1]
            if not todo:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            nxt = todo.pop()
            if nxt in on_path:
                return [*path[path.index(nxt):], nxt]
            if nxt in done:
                continue
            stack.append((nxt, sorted(graph[nxt])))
            path.append(nxt)
            on_path.add(nxt)
    return None


def test_core_modules_import_without_a_cycle() -> None:
    graph = _graph()
    assert {"events", "_derive", "_projection", "_codec", "jscompat"} <= set(graph)
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_check_sees_function_level_imports() -> None:
    source = "def f():\n    from .b import x\n"
    assert _imports(ast.parse(source), {"b"}) == {"b"}
    hidden = "import typing as _typing\nif _typing.TYPE_CHECKING:\n    from . import b\n"
    assert _imports(ast.parse(hidden), {"b"}) == set()
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_projection_needs_no_event_class_at_run_time() -> None:
    # events binds the projection's functions as its classes' message methods, so the
    # projection may know the event classes only for type checking.
    graph = _graph()
    assert "_projection" in graph["events"]
    assert "events" not in graph["_projection"]
    assert "_derive" not in graph["events"]
    assert "_codec" not in graph["events"]
