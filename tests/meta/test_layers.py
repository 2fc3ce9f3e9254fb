"""Core's rooms and their order, checked on the source (AST), so that the map in
docs/layout.md stays true:

- every run-time import inside core (at module level or in a function; a lazy table's
  entries resolved; what only a ``TYPE_CHECKING`` block imports left out, since it never
  runs) goes from a room to the same room or a lower one (:data:`LAYERS`);
- nothing is added at core's top level, nor at the root of ``_persistence/``, but what
  the allow-lists name: a new module goes into the room of its concern;
- no module of any distribution is over :data:`MAX_LINES` lines;
- core imports no other distribution (the viewer, the demo, a plugin): no run-time
  import of a ``dsh_session_*`` package but its own, nor one made by name
  (``importlib.import_module``, ``importlib.util.find_spec``, ``__import__``); what the
  other distributions add to core, they add through its hooks (entry points).

Each rule is a function over a source tree, so the tests show it fails on a tree that
breaks it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = "dsh_session_core"
CORE_SRC = Path("packages/dsh-session-core/src")

#: The rooms, lowest first: a module may import from its own layer and those before it.
#: A name is a room (a package and everything under it) or a public module; the longest
#: that a module's dotted name starts with places it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_base", "jscompat", "vocabulary", "lazy"),
    ("_errors", "errors"),
    ("_schema", "events"),
    ("_plugins", "hookspecs"),
    ("_model", "invariants"),
    ("_logformat",),
    ("_search",),
    ("_persistence",),  # its root: what the rooms below share
    ("_persistence.backends",),
    ("_persistence.projections",),
    ("_persistence.encryption",),
    # A root module, above the rooms whose rows a copy rebuilds, below the retention
    # that archives with it.
    ("_persistence.copy",),
    ("_persistence.retention",),
    ("_persistence.store",),
    ("_persistence.opening",),
    ("projections", "providers"),
    ("_inspect", "inspect"),
    ("_cli", "cli"),
    ("testing",),
)
#: What may stand at core's top level: the package, its public modules and its rooms.
TOP_LEVEL = frozenset({
    "__init__.py", "__main__.py", "py.typed", "cli.py", "errors.py", "events.py",
    "hookspecs.py", "inspect.py", "invariants.py", "jscompat.py", "lazy.py", "projections.py",
    "vocabulary.py", "_base", "_errors", "_schema", "_plugins", "_model", "_logformat",
    "_search", "_persistence", "_inspect", "_cli", "providers", "testing",
})
#: What may stand at the root of ``_persistence/``: what its rooms share, the modules
#: above them all (``copy``, ``opening``), and the rooms.
PERSISTENCE_ROOT = frozenset({
    "__init__.py", "aio.py", "base.py", "capabilities.py", "copy.py", "file_locks.py",
    "listing.py", "opening.py", "search.py", "urls.py", "backends", "encryption",
    "projections", "retention", "rows.py", "store",
})
#: The longest a module may be, in lines.
MAX_LINES = 600
#: The package modules whose lazy tables (``_LAZY``: name -> relative module) are
#: imports made when a name is first read.
LAZY_TABLE = "_LAZY"


def _rank(name: str) -> int | None:
    """The layer of ``name`` (a dotted name under core, without ``dsh_session_core.``),
    or ``None`` for the package itself and ``__main__`` (above every room)."""
    best: tuple[int, int] | None = None  # (length of the match, layer)
    for layer, names in enumerate(LAYERS):
        for room in names:
            if (name == room or name.startswith(room + ".")) and (
                    best is None or len(room) > best[0]):
                best = (len(room), layer)
    return None if best is None else best[1]


def _modules(src: Path) -> Iterator[tuple[str, bool, Path]]:
    """``(dotted name, is a package, path)`` of every module of core under ``src``."""
    for path in sorted((src / CORE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        yield ".".join(parts), package, path


def _absolute(module: str, package: bool, level: int, name: str | None) -> str:
    if not level:
        return name or ""
    base = module.split(".")
    base = base[: len(base) - level + (1 if package else 0)]
    return ".".join([*base, *([name] if name else [])])


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` but those only a ``TYPE_CHECKING`` block holds."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _run_time_nodes(other)
            continue
        yield child
        yield from _run_time_nodes(child)


def _lazy_entries(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``(line, relative module)`` of each entry of a package's lazy table."""
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
            else None)
        value = node.value if isinstance(node, ast.AnnAssign | ast.Assign) else None
        if (isinstance(target, ast.Name) and target.id == LAZY_TABLE
                and isinstance(value, ast.Dict)):
            for entry in value.values:
                if isinstance(entry, ast.Constant) and isinstance(entry.value, str):
                    yield entry.lineno, entry.value


def run_time_imports(src: Path) -> Iterator[tuple[str, Path, int, str]]:
    """``(importer, path, line, imported)`` for each run-time import of a core module
    by a core module (both dotted, without ``dsh_session_core.``)."""
    known = {module for module, _, _ in _modules(src)}

    def placed(target: str) -> str:
        # "from .x import y": y may be a submodule, else a name of module x.
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target

    for module, package, path in _modules(src):
        tree = ast.parse(path.read_text())
        found: list[tuple[int, str]] = []
        for node in _run_time_nodes(tree):
            if isinstance(node, ast.ImportFrom):
                target = _absolute(module, package, node.level, node.module)
                found.extend((node.lineno, placed(f"{target}.{a.name}")) for a in node.names)
            elif isinstance(node, ast.Import):
                found.extend((node.lineno, placed(a.name)) for a in node.names)
        if package:
            found.extend(
                (line, placed(_absolute(module, True, len(entry) - len(entry.lstrip(".")),
                                        entry.lstrip("."))))
                for line, entry in _lazy_entries(tree) if entry.startswith("."))
        for line, target in found:
            if target.startswith(CORE + ".") and target != module:
                yield (module.removeprefix(CORE + "."), path, line,
                       target.removeprefix(CORE + "."))


def upward_imports(src: Path) -> list[str]:
    """Every run-time import from a room to a higher one, as ``path:line: a -> b``."""
    offences = []
    for importer, path, line, imported in run_time_imports(src):
        low, high = _rank(imported), _rank(importer)
        if low is not None and ((high is None and importer not in (CORE, "__main__"))
                                or (high is not None and low > high)):
            offences.append(f"{path}:{line}: {importer} -> {imported}")
    return offences


def unlisted_entries(src: Path) -> list[str]:
    """What stands at core's top level or ``_persistence/``'s root and is not listed."""
    offences = []
    for folder, allowed in ((src / CORE, TOP_LEVEL),
                            (src / CORE / "_persistence", PERSISTENCE_ROOT)):
        for entry in sorted(folder.iterdir()):
            if entry.name == "__pycache__" or entry.name in allowed:
                continue
            offences.append(str(entry))
    return offences


def long_modules(root: Path) -> list[str]:
    """Every module of every distribution over :data:`MAX_LINES` lines."""
    offences = []
    for src in [*sorted(root.glob("packages/*/src")), root / "src"]:
        for path in sorted(src.rglob("*.py")):
            lines = path.read_text().count("\n")
            if lines > MAX_LINES:
                offences.append(f"{path}: {lines} lines")
    return offences


#: The functions that import (or find) a module named by a string.
BY_NAME = frozenset({"import_module", "find_spec", "__import__"})


def _foreign(name: str) -> bool:
    """Whether a dotted module name is another distribution's package (``dsh_session_view``,
    ``dsh_session_demo.plugin``...): a ``dsh_session`` package that is not core."""
    top = name.split(".")[0]
    return top.startswith("dsh_session") and top != CORE


def _named(node: ast.expr) -> str | None:
    """The module name a string argument gives (an f-string: its literal start)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def foreign_imports(src: Path) -> list[str]:
    """Every run-time import of another distribution's package by a core module, as
    ``path:line: importer -> name``: an ``import`` statement (at module level or in a
    function; what only a ``TYPE_CHECKING`` block imports left out), or a call of
    :data:`BY_NAME` with the package's name as a string."""
    offences = []
    for module, _, path in _modules(src):
        for node in _run_time_nodes(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and node.args:
                func = node.func
                called = (func.id if isinstance(func, ast.Name)
                          else func.attr if isinstance(func, ast.Attribute) else None)
                named = _named(node.args[0]) if called in BY_NAME else None
                names = [named] if named is not None else []
            offences += [f"{path}:{getattr(node, 'lineno', 0)}: {module} -> {name}"
                         for name in names if _foreign(name)]
    return offences


# --- the tree as it is ----------------------------------------------------------------------


def test_every_import_goes_to_the_same_room_or_a_lower_one() -> None:
    pairs = {(a, b) for a, _, _, b in run_time_imports(ROOT / CORE_SRC)}
    # The walk sees the imports it must: in functions, and through the lazy table.
    assert ("_cli.main", "_cli.parser") in pairs
    assert (CORE, "_persistence.store.durable") in pairs  # DurableStore, lazily
    assert upward_imports(ROOT / CORE_SRC) == []


def test_nothing_new_at_the_top_level_or_at_persistence_root() -> None:
    assert unlisted_entries(ROOT / CORE_SRC) == []


def test_no_module_is_over_the_line_cap() -> None:
    assert long_modules(ROOT) == []


def test_core_imports_no_other_distribution() -> None:
    assert foreign_imports(ROOT / CORE_SRC) == []


# --- each rule bites -------------------------------------------------------------------------


def _plant(root: Path, relative: str, text: str) -> Path:
    path = root / CORE_SRC / CORE / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_an_upward_import_is_caught_wherever_it_is_made(tmp_path: Path) -> None:
    _plant(tmp_path, "__init__.py", '_LAZY = {"Thing": "._model.session"}\n')
    _plant(tmp_path, "_base/__init__.py", "")
    _plant(tmp_path, "_base/names.py", "X = 1\n")
    _plant(tmp_path, "_model/__init__.py", "")
    _plant(tmp_path, "_model/session.py",
           "from typing import TYPE_CHECKING\n"
           "from .._base.names import X\n"  # down: allowed
           "if TYPE_CHECKING:\n"
           "    from .._persistence.store.durable import DurableStore\n"  # never runs
           "def f():\n"
           "    from .._persistence.base import Backend\n")  # up, in a function
    _plant(tmp_path, "_persistence/__init__.py", "")
    _plant(tmp_path, "_persistence/base.py", "from .store import durable\n")  # up a room
    _plant(tmp_path, "_persistence/store/__init__.py", "")
    _plant(tmp_path, "_persistence/store/durable.py", "from ..base import Backend\n")
    _plant(tmp_path, "_base/lazy_user.py", "import dsh_session_core._model.session\n")
    found = [o.split(": ", 1)[1] for o in upward_imports(tmp_path / CORE_SRC)]
    assert found == [
        "_base.lazy_user -> _model.session",
        "_model.session -> _persistence.base",
        "_persistence.base -> _persistence.store.durable",
    ]


def test_a_lazy_table_entry_counts_as_an_import(tmp_path: Path) -> None:
    _plant(tmp_path, "providers/__init__.py", '_LAZY = {"X": "..testing.stores"}\n')
    _plant(tmp_path, "testing/__init__.py", "")
    _plant(tmp_path, "testing/stores.py", "")
    found = [o.split(": ", 1)[1] for o in upward_imports(tmp_path / CORE_SRC)]
    assert found == ["providers -> testing.stores"]


def test_a_module_added_at_the_top_or_at_persistence_root_is_caught(
        tmp_path: Path) -> None:
    for name in TOP_LEVEL:
        _plant(tmp_path, name if "." in name else f"{name}/__init__.py", "")
    for name in PERSISTENCE_ROOT:
        _plant(tmp_path, f"_persistence/{name if '.' in name else name + '/__init__.py'}",
               "")
    assert unlisted_entries(tmp_path / CORE_SRC) == []
    _plant(tmp_path, "_helpers.py", "")
    _plant(tmp_path, "_persistence/jsonl_extra.py", "")
    found = [Path(o).relative_to(tmp_path / CORE_SRC / CORE).as_posix()
             for o in unlisted_entries(tmp_path / CORE_SRC)]
    assert found == ["_helpers.py", "_persistence/jsonl_extra.py"]


def test_a_module_over_the_cap_is_caught(tmp_path: Path) -> None:
    _plant(tmp_path, "_base/short.py", "x = 1\n" * MAX_LINES)
    assert long_modules(tmp_path) == []
    view = tmp_path / "packages/dsh-session-view/src/dsh_session_view/_long.py"
    view.parent.mkdir(parents=True)
    view.write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(tmp_path) == [f"{view}: {MAX_LINES + 1} lines"]


def test_an_import_of_another_distribution_by_core_is_caught(tmp_path: Path) -> None:
    _plant(tmp_path, "_cli/__init__.py", "")
    _plant(tmp_path, "_cli/view.py",
           "import importlib\n"
           "import importlib.util\n"
           "from typing import TYPE_CHECKING\n"
           "from importlib import import_module\n"
           "import dsh_session_core.errors\n"  # core's own: allowed
           "if TYPE_CHECKING:\n"
           "    import dsh_session_view\n"  # never runs
           '"""The viewer (dsh_session_view) is a plugin."""\n'  # a mention, no import
           "import dsh_session_view._cli\n"
           "def run(args):\n"
           "    from dsh_session_view import run_view\n"
           "    if importlib.util.find_spec('dsh_session_view') is None:\n"
           "        return 1\n"
           "    importlib.import_module('dsh_session_core.cli')\n"  # core's own
           "    return import_module('dsh_session_demo').main()\n"
           "def other(name):\n"
           "    return __import__(f'dsh_session_{name}.plugin')\n")
    found = [o.split(": ", 1)[1] for o in foreign_imports(tmp_path / CORE_SRC)]
    assert found == [
        "dsh_session_core._cli.view -> dsh_session_view._cli",
        "dsh_session_core._cli.view -> dsh_session_view",
        "dsh_session_core._cli.view -> dsh_session_view",
        "dsh_session_core._cli.view -> dsh_session_demo",
        "dsh_session_core._cli.view -> dsh_session_",
    ]
