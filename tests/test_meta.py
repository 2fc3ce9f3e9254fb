"""Meta-tests: every scenario of the core spec has a test, and the public API is pinned."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dsh_session_core

TESTS = Path(__file__).resolve().parent

# Spec core.md §11: the numbered scenarios, by section letter.
SECTIONS = {
    "a": (1, 12), "b": (13, 26), "c": (27, 30), "d": (31, 35), "e": (36, 52),
    "f": (53, 69), "g": (70, 77), "h": (78, 89), "i": (90, 100), "j": (101, 115),
    "k": (116, 131), "l": (132, 142), "m": (143, 151),
}


def _named_scenarios() -> set[str]:
    """Scenario ids named by a test function (``test_b13_...``, ``test_b13_b21_...``) or by
    a parametrize id string (``"b14-function"``)."""
    found: set[str] = set()
    for path in TESTS.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found.update(re.findall(r"(?<=_)([a-m]\d{1,3})(?=_)", node.name + "_"))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = re.fullmatch(r"([a-m]\d{1,3})-[\w-]+", node.value)
                if m:
                    found.add(m.group(1))
    return found


def test_every_core_scenario_has_a_test() -> None:
    wanted = {f"{s}{n}" for s, (lo, hi) in SECTIONS.items() for n in range(lo, hi + 1)}
    assert len(wanted) == 151
    assert sorted(wanted - _named_scenarios(), key=lambda x: int(x[1:])) == []


def test_public_api_is_explicit() -> None:
    # Ordering is ruff's (RUF022); here: no duplicates, and every name exists.
    names = dsh_session_core.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(dsh_session_core, name), name


def test_private_modules_start_with_an_underscore() -> None:
    public = {"errors", "events", "hookspecs", "vocabulary", "invariants"}
    src = Path(dsh_session_core.__file__).parent
    for module in src.glob("*.py"):
        name = module.stem
        assert name.startswith("_") or name in public, name
    assert (src / "py.typed").is_file()


def test_the_cli_starts_without_loading_the_heavy_parts() -> None:
    # `dsh-session --help` must stay fast: plugins, pluggy and msgspec load on use only.
    import subprocess
    import sys

    code = (
        "import sys, dsh_session_core._cli\n"
        "print(sorted(m for m in ('pluggy', 'msgspec', 'importlib.metadata', 'asyncio')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
