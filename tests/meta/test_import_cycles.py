"""No import cycle among the modules of every distribution of the workspace (core's
rooms, the viewer, the plugins, the integrations); the order of core's rooms is
tests/meta/test_layers.py's.

The graph is read from the source (AST): an edge for every import of one of core's
top-level modules, wherever it is written, in a function too (a function-level import
that closes a cycle is still a cycle; it only postpones it to the first call). Imports
under ``if TYPE_CHECKING:`` (or ``_TYPE_CHECKING``, ``_typing.TYPE_CHECKING``) do not
count: they never run.
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


def test_the_cycle_check_sees_function_level_imports() -> None:
    source = "def f():\n    from .b import x\n"
    assert _imports(ast.parse(source), {"b"}) == {"b"}
    hidden = "import typing as _typing\nif _typing.TYPE_CHECKING:\n    from . import b\n"
    assert _imports(ast.parse(hidden), {"b"}) == set()
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


# --- every module of every distribution, subpackages included -------------------------

ROOT = Path(__file__).resolve().parents[2]


def _sources() -> dict[str, Path]:
    """Every module of the workspace's distributions (``packages/*/src``, ``src``), by
    dotted name; a package by its ``__init__``."""
    found: dict[str, Path] = {}
    for src in [*sorted(ROOT.glob("packages/*/src")), ROOT / "src"]:
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts:
                found[".".join(parts)] = path
    return found


def _import_statements(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module that can run: in functions too (an import
    that closes a cycle from a function only postpones it to the first call), not
    under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))
    return found


def _loaded(module: str, is_package: bool, node: ast.Import | ast.ImportFrom,
            modules: set[str]) -> set[str]:
    """The workspace modules an import statement of ``module`` loads (its targets and
    their packages; a ``from m import name`` also loads ``m.name`` when that is a
    module)."""
    targets: list[str] = []
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[:len(package) - (node.level - 1)]
            base = ".".join([*package, *([base] if base else [])])
        targets = [base, *(f"{base}.{a.name}" for a in node.names)]
    found: set[str] = set()
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            found.add(".".join(parts[:i]))
    return found & modules


def _workspace_graph() -> dict[str, set[str]]:
    sources = _sources()
    modules = set(sources)
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _import_statements(ast.parse(path.read_text())):
            edges |= _loaded(name, is_package, node, modules)
        # A module's own packages are imported before it (and are in sys.modules while
        # it runs): reaching them is no cycle.
        parts = name.split(".")
        own = {".".join(parts[:i]) for i in range(1, len(parts))}
        graph[name] = edges - own - {name}
    return graph


def test_no_module_of_any_distribution_imports_in_a_cycle() -> None:
    graph = _workspace_graph()
    assert {"dsh_session_core._persistence.backends.postgres.backend",
            "dsh_session_core._cli.source", "dsh_session_view._server",
            "dsh_session_compact.plugin"} <= set(graph)
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_workspace_check_follows_subpackages_and_functions() -> None:
    modules = {"p", "p.a", "p.sub", "p.sub.b", "p.sub.c", "p.sub.d"}
    tree = ast.parse("from ..a import x\nfrom . import c\n"
                     "def f():\n    from .d import y\n"
                     "if TYPE_CHECKING:\n    from ..a import z\n")
    edges: set[str] = set()
    for node in _import_statements(tree):
        edges |= _loaded("p.sub.b", False, node, modules)
    assert edges == {"p", "p.a", "p.sub", "p.sub.c", "p.sub.d"}
    assert len(_import_statements(tree)) == 3  # TYPE_CHECKING's skipped
    # A cycle through a function-level import, as the one that was between the errors
    # and the URL rules (errors -> urls, in StoreKindError; urls -> errors).
    assert _cycle({"errors": {"urls"}, "urls": {"errors"}}) == ["errors", "urls", "errors"]


def test_the_projection_needs_no_event_class_at_run_time() -> None:
    # events binds the projection's functions as its classes' message methods, so the
    # projection may know the event classes only for type checking.
    graph = _workspace_graph()
    events, messages = f"{PACKAGE}.events", f"{PACKAGE}._schema.event_messages"
    assert messages in graph[events]
    assert events not in graph[messages]
    assert f"{PACKAGE}._model.derive" not in graph[events]
    assert f"{PACKAGE}._schema.codec" not in graph[events]
