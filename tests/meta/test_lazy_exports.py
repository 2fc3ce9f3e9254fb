"""A package whose names load on first use (``dsh_session_core.lazy``: core, its
``providers`` and ``testing``, every plugin package) lists them three times: the imports
under ``TYPE_CHECKING`` (what type checkers see), the ``_LAZY`` table (what loads at run
time) and ``__all__`` (the public names). They cannot be one list: mypy, strict, takes an
imported name as exported only when a literal ``__all__`` lists it (or it is imported
``as`` itself), and reads neither a table nor an ``__all__`` built from one; so a user's
``from dsh_session_core import X`` would fail to type-check. Here they are checked against
each other instead: the same names, each from the same module, and ``__all__`` exactly the
table's names and the ones the package binds at once (a star import).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2] / "packages"


def _lazy_packages() -> list[Path]:
    """Every ``__init__.py`` that hands its table to ``lazy_exports``."""
    return sorted(p for p in PACKAGES.glob("*/src/**/__init__.py")
                  if "_lazy_exports(__name__, _LAZY" in p.read_text())


def _package_name(init: Path) -> str:
    src = next(parent for parent in init.parents if parent.name == "src")
    return ".".join(init.parent.relative_to(src).parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id.lstrip("_") == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(node: ast.ImportFrom, package: str) -> list[tuple[str, str]]:
    """``(bound name, absolute module it comes from)`` of each name ``node`` binds; a
    submodule imported from its package (``from . import errors``) comes from itself."""
    base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
        if node.level else node.module or ""
    found = []
    for alias in node.names:
        name = alias.asname or alias.name
        whole = f"{base}.{alias.name}"
        found.append((name, whole if node.module is None else base))
    return found


def _lists(init: Path) -> tuple[dict[str, str], dict[str, str], set[str], list[str]]:
    """The package's names as type checkers see them (name -> absolute module), as its
    table loads them, the public names it binds at once, and the table's keys as written
    (a literal dict keeps only the last of two equal keys)."""
    package = _package_name(init)
    tree = ast.parse(init.read_text())
    typed: dict[str, str] = {}
    eager: set[str] = set()
    written: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for inner in node.body:
                assert isinstance(inner, ast.ImportFrom), ast.unparse(inner)
                for name, module in _imported(inner, package):
                    assert name not in typed, f"{name} imported twice"
                    typed[name] = module
        elif isinstance(node, ast.ImportFrom):
            if node.names[0].name == "*":
                module = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                     package)
                eager |= set(importlib.import_module(module).__all__)
            else:
                eager |= {n for n, _ in _imported(node, package) if not n.startswith("_")}
        elif isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if isinstance(target, ast.Name) and target.id == "_LAZY":
                assert isinstance(node.value, ast.Dict)
                written = [k.value for k in node.value.keys
                           if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    table = vars(importlib.import_module(package))["_LAZY"]
    lazy = {name: importlib.util.resolve_name(module, package)
            for name, module in table.items()}
    return typed, lazy, eager, written


@pytest.mark.parametrize("init", _lazy_packages(),
                         ids=lambda p: _package_name(p) if isinstance(p, Path) else "")
def test_the_type_checkers_imports_the_table_and_all_name_the_same(init: Path) -> None:
    typed, lazy, eager, written = _lists(init)
    assert len(written) == len(set(written)), "a name twice in _LAZY"
    assert typed == lazy  # the same names, each from the same module
    listed = importlib.import_module(_package_name(init)).__all__
    assert len(listed) == len(set(listed)), "a name twice in __all__"
    assert not set(lazy) & eager
    assert sorted(listed) == sorted({*lazy, *eager})

