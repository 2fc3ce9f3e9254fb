"""Architecture rules, checked on the source (AST), so that they cannot erode unnoticed:

- a module of persistence keeps its private names to itself: no module anywhere under
  ``packages/*/src`` imports (or reads as a module attribute) a leading-underscore name
  of a ``dsh_session_core._persistence`` module other than itself;
- the CLI and ``copy_sessions`` reach backends through the ``Backend`` protocol only: no
  module of ``dsh_session_core._cli``, nor ``_persistence/copy.py``, names a concrete
  backend class, or reads a private attribute of an object (``backend._conn``) other
  than its own (``self._x``) or a standard-library module's
  (``argparse._SubParsersAction``).

Each rule is a function over a source tree, so the test can show that it fails on code
that breaks it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PERSISTENCE = "dsh_session_core._persistence"
CLI = "dsh_session_core._cli"
#: The modules that must use backends through the protocol only, besides the CLI's.
PROTOCOL_ONLY = frozenset({f"{PERSISTENCE}.copy"})
BACKEND_CLASSES = frozenset({"JsonlBackend", "SqliteBackend", "PostgresBackend",
                             "MemoryBackend"})


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
        if not (module == CLI or module.startswith(CLI + ".") or module in PROTOCOL_ONLY):
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
    internals = sorted(o.split(": ", 1)[1] for o in cli_backend_internals(tmp_path))
    assert internals == ["names JsonlBackend", "names JsonlBackend", "names PostgresBackend",
                         "reads ._conn", "reads ._scan"]
