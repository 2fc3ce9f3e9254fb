"""Architecture rules, checked on the source (AST), so that they cannot erode unnoticed:

- a module of persistence keeps its private names to itself: no module anywhere under
  ``packages/*/src`` imports (or reads as a module attribute) a leading-underscore name
  of a ``dsh_session_core._persistence`` module other than itself;
- the CLI and ``copy_sessions`` reach backends through the ``Backend`` protocol only: no
  module of ``dsh_session_core._cli``, nor ``_persistence/copy.py``, names a concrete
  backend class, or reads a private attribute of an object (``backend._conn``) other
  than its own (``self._x``) or a standard-library module's
  (``argparse._SubParsersAction``); nor does the demo (``dsh_session_demo``), an
  application of the library like any other: what it says about a store comes from the
  URL rules and the protocol, never from a backend's class;
- a backend's optional capabilities are declared protocols
  (``_persistence/capabilities.py``), found once per backend: no module anywhere probes
  a backend for one with ``getattr`` or ``hasattr`` (``getattr(self.backend, "search",
  None)``);
- core's privacy ends at core: no module outside ``dsh_session_core`` (the viewer, the
  plugins, the integrations, the demo) imports a private module of core (a dotted path
  with a ``_`` segment: ``dsh_session_core._cli.source``), a private name of a public
  one (``from dsh_session_core.inspect import _x``), or reads one as an attribute of a
  core module it imported (``dsh_session_core._codec``, ``inspect._x``); they go
  through the public doors (``dsh_session_core.inspect``, ``dsh_session_core.cli``...).

Each rule is a function over a source tree, so the test can show that it fails on code
that breaks it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = "dsh_session_core"
PERSISTENCE = "dsh_session_core._persistence"
CLI = "dsh_session_core._cli"
DEMO = "dsh_session_demo"
#: The modules that must use backends through the protocol only, besides the CLI's and
#: the demo's.
PROTOCOL_ONLY = frozenset({f"{PERSISTENCE}.copy"})
BACKEND_CLASSES = frozenset({"JsonlBackend", "JsonlZstdBackend", "SqliteBackend",
                             "PostgresBackend", "MemoryBackend"})


def _modules(root: Path) -> Iterator[tuple[str, bool, Path]]:
    """``(dotted name, is a package, path)`` of every module under ``root/packages/*/src``
    and ``root/src`` (the demo, an application of the library like any other)."""
    for src in [*sorted(root.glob("packages/*/src")), root / "src"]:
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            package = parts[-1] == "__init__"
            if package:
                parts.pop()
            yield ".".join(parts), package, path


def _target(module: str, package: bool, node: ast.ImportFrom) -> str:
    """The module an ``import from`` statement imports from, made absolute."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _in_persistence(name: str) -> bool:
    return name == PERSISTENCE or name.startswith(PERSISTENCE + ".")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_persistence_imports(root: Path) -> list[str]:
    """Every import of a private name of another persistence module, as
    ``path:line: what``."""
    offences = []
    for module, package, path in _modules(root):
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # a local name bound to a persistence module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _target(module, package, node)
                for alias in node.names:
                    imported = f"{target}.{alias.name}"
                    if target == PERSISTENCE:  # from .._persistence import jsonl
                        aliases[alias.asname or alias.name] = imported
                        if _private(alias.name):
                            offences.append(f"{path}:{node.lineno}: {imported}")
                    elif _in_persistence(target) and target != module and _private(alias.name):
                        offences.append(f"{path}:{node.lineno}: {imported}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if _in_persistence(alias.name) and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and _private(node.attr)
                    and aliases[node.value.id] != module):
                offences.append(f"{path}:{node.lineno}: {aliases[node.value.id]}.{node.attr}")
    return offences


def cli_backend_internals(root: Path) -> list[str]:
    """Every place the CLI (or ``copy``) names a concrete backend class or reads a
    private attribute of something not its own, as ``path:line: what``."""
    offences = []
    for module, _, path in _modules(root):
        if not (module in (CLI, DEMO) or module.startswith((CLI + ".", DEMO + "."))
                or module in PROTOCOL_ONLY):
            continue
        tree = ast.parse(path.read_text())
        stdlib = {(a.asname or a.name).split(".")[0] for node in ast.walk(tree)
                  if isinstance(node, ast.Import) for a in node.names
                  if not a.name.startswith("dsh_session")}
        for node in ast.walk(tree):
            named = None
            if isinstance(node, ast.Name):
                named = node.id
            elif isinstance(node, ast.Attribute):
                named = node.attr
                owner = node.value
                if _private(node.attr) and not (
                    isinstance(owner, ast.Name) and owner.id in {"self", "cls", *stdlib}
                ):
                    offences.append(f"{path}:{node.lineno}: reads .{node.attr}")
            elif isinstance(node, ast.alias):
                named = node.name.rpartition(".")[2]
            if named in BACKEND_CLASSES:
                offences.append(f"{path}:{getattr(node, 'lineno', 0)}: names {named}")
    return offences


def _backendish(node: ast.expr) -> bool:
    """Whether an expression names a backend: ``backend``, ``self.backend``,
    ``store._backend``, ``src_backend``... (the last name in it says so)."""
    while isinstance(node, ast.Call | ast.Subscript):  # backend_for(url), backends[0]
        node = node.func if isinstance(node, ast.Call) else node.value
    name = node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else "")
    return "backend" in name.lower()


def backend_probes(root: Path) -> list[str]:
    """Every ``getattr``/``hasattr`` of a backend (a capability looked up by name rather
    than declared: :mod:`dsh_session_core._persistence.capabilities`), as ``path:line:
    what``."""
    offences = []
    for _, _, path in _modules(root):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and node.args
                    and _backendish(node.args[0])):
                offences.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return offences


def test_no_module_probes_a_backend_for_a_capability() -> None:
    assert backend_probes(ROOT) == []

def _core_path(dotted: str) -> bool:
    return dotted == CORE or dotted.startswith(CORE + ".")


def _private_path(dotted: str) -> bool:
    return any(_private(part) for part in dotted.split("."))


def private_core_imports(root: Path) -> list[str]:
    """Every use, by a module outside core, of a private module or name of core, as
    ``path:line: what``."""
    offences = []
    for module, package, path in _modules(root):
        if _core_path(module):
            continue
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # a local name bound to a core module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _target(module, package, node)
                if not _core_path(target):
                    continue
                for alias in node.names:
                    imported = f"{target}.{alias.name}"
                    if _private_path(imported):
                        offences.append(f"{path}:{node.lineno}: {imported}")
                    else:  # maybe a module: from dsh_session_core import inspect
                        aliases[alias.asname or alias.name] = imported
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if not _core_path(alias.name):
                        continue
                    if _private_path(alias.name):
                        offences.append(f"{path}:{node.lineno}: {alias.name}")
                    # import a.b binds a; import a.b as c binds c to a.b
                    bound = alias.asname or alias.name.split(".")[0]
                    aliases[bound] = alias.name if alias.asname else alias.name.split(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                dotted = _dotted(node.value)
                if dotted is None:
                    continue
                head, _, rest = dotted.partition(".")
                if head in aliases:
                    full = ".".join(p for p in (aliases[head], rest, node.attr) if p)
                    offences.append(f"{path}:{node.lineno}: {full}")
    return offences


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a chain of attribute reads on a name, or ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def test_no_package_outside_core_uses_a_private_name_of_core() -> None:
    assert private_core_imports(ROOT) == []


def test_no_module_imports_a_private_name_of_another_persistence_module() -> None:
    assert private_persistence_imports(ROOT) == []


def test_the_cli_and_copy_use_backends_through_the_protocol_only() -> None:
    assert cli_backend_internals(ROOT) == []


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    cli = tmp_path / "packages" / "core" / "src" / "dsh_session_core" / "_cli"
    persistence = cli.parent / "_persistence"
    cli.mkdir(parents=True)
    persistence.mkdir()
    for package in (cli.parent, cli, persistence):
        (package / "__init__.py").write_text("")
    (persistence / "jsonl.py").write_text("def _scan(): ...\nclass JsonlBackend: ...\n")
    (persistence / "sqlite.py").write_text(
        "from .jsonl import _scan\nfrom . import jsonl\njsonl._scan()\n")
    (persistence / "copy.py").write_text(
        "import sys\n"
        "def same(a):\n"
        "    return isinstance(a, sys.modules['x'].PostgresBackend)\n")
    (cli / "ls.py").write_text(
        "import argparse\n"
        "from .._persistence.jsonl import JsonlBackend, _scan\n"
        "from dsh_session_core._persistence import jsonl as j\n"
        "def rows(backend):\n"
        "    j._scan()\n"
        "    argparse._SubParsersAction\n"
        "    return backend._conn, isinstance(backend, JsonlBackend)\n")
    imports = private_persistence_imports(tmp_path)
    assert [o.split(": ", 1)[1] for o in imports] == [
        "dsh_session_core._persistence.jsonl._scan",  # cli/ls.py, from-import
        "dsh_session_core._persistence.jsonl._scan",  # cli/ls.py, j._scan
        "dsh_session_core._persistence.jsonl._scan",  # sqlite.py, from-import
        "dsh_session_core._persistence.jsonl._scan",  # sqlite.py, jsonl._scan
    ]
    demo = tmp_path / "src" / "dsh_session_demo"
    demo.mkdir(parents=True)
    (demo / "__init__.py").write_text("")
    (demo / "_run.py").write_text(
        "from dsh_session_core import SqliteBackend\n"
        "def where(store):\n"
        "    backend = store.backend\n"
        "    if hasattr(store.backend, 'root'):\n"
        "        return backend.root\n"
        "    return isinstance(backend, SqliteBackend)\n")
    (persistence / "store.py").write_text(
        "def search(self, query):\n"
        "    own = getattr(self.backend, 'search', None)\n"
        "    kept = getattr(self._backend, 'alist')\n"
        "    if getattr(query, 'terms', None):  # not a backend: allowed\n"
        "        return own(query), kept\n")
    internals = sorted(o.split(": ", 1)[1] for o in cli_backend_internals(tmp_path))
    assert internals == ["names JsonlBackend", "names JsonlBackend", "names PostgresBackend",
                         "names SqliteBackend", "names SqliteBackend",
                         "reads ._conn", "reads ._scan"]
    probes = sorted(o.split(": ", 1)[1] for o in backend_probes(tmp_path))
    assert probes == ["getattr(self._backend, 'alist')",
                      "getattr(self.backend, 'search', None)",
                      "hasattr(store.backend, 'root')"]

    assert private_core_imports(tmp_path) == []  # core's own modules may use its privates
    _plant_private_imports_in_the_viewer(tmp_path)


def _plant_private_imports_in_the_viewer(tmp_path: Path) -> None:
    """The privacy rule, on a viewer that breaks it in every way it names (and a core
    module and a viewer module that keep it)."""
    view = tmp_path / "packages" / "view" / "src" / "dsh_session_view"
    core = tmp_path / "packages" / "core" / "src" / "dsh_session_core"
    view.mkdir(parents=True)
    core.mkdir(parents=True, exist_ok=True)
    (core / "_codec.py").write_text("def encode_line(v): ...\n")
    (core / "_secret.py").write_text("# core may import its own privates\n"
                                     "from ._codec import encode_line\n")
    (view / "__init__.py").write_text("")
    (view / "_fine.py").write_text(
        "from ._model import _page\n"  # the viewer's own private name: its business
        "from dsh_session_core.inspect import load_source\n"
        "import dsh_session_core.inspect as inspect\n"
        "inspect.load_source\n")
    (view / "_model.py").write_text(
        "import dsh_session_core\n"
        "import dsh_session_core._cli.ls\n"
        "from dsh_session_core._cli.source import load_source\n"
        "from dsh_session_core.inspect import _hidden\n"
        "from dsh_session_core import _codec, inspect\n"
        "def page():\n"
        "    from dsh_session_core._cli.ls import _Query\n"
        "    dsh_session_core._unanswered.unanswered_calls\n"
        "    return inspect._cut, _Query\n")
    found = sorted(o.split(": ", 1)[1] for o in private_core_imports(tmp_path))
    assert found == [
        "dsh_session_core._cli.ls",  # import dsh_session_core._cli.ls
        "dsh_session_core._cli.ls._Query",  # from ... import, in a function
        "dsh_session_core._cli.source.load_source",
        "dsh_session_core._codec",  # from dsh_session_core import _codec
        "dsh_session_core._unanswered",  # an attribute of the imported package
        "dsh_session_core.inspect._cut",  # an attribute of a public module
        "dsh_session_core.inspect._hidden",
    ]
    assert all("_fine.py" not in o and "_secret.py" not in o
               for o in private_core_imports(tmp_path))
