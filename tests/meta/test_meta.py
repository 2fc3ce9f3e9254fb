"""Meta-tests: every scenario of the core spec has a test, and the public API is pinned."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dsh_session_core

TESTS = Path(__file__).resolve().parents[1]  # the whole suite

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
    public = {"errors", "events", "hookspecs", "vocabulary", "invariants", "jscompat", "lazy",
              "projections",
              "providers", "inspect", "cli", "testing"}
    src = Path(dsh_session_core.__file__).parent
    for module in src.rglob("*.py"):
        name = module.relative_to(src).parts[0].removesuffix(".py")
        assert name.startswith("_") or name in public, name
    assert (src / "py.typed").is_file()


def test_the_cli_starts_without_loading_the_heavy_parts() -> None:
    # `dsh-session --help` must stay fast: plugins, pluggy and msgspec load on use only.
    import subprocess
    import sys

    code = (
        "import sys, dsh_session_core._cli.main\n"
        "print(sorted(m for m in ('pluggy', 'msgspec', 'importlib.metadata', 'asyncio', 'typing')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- hooks: every hookspec is tested and documented ------------------------------------

PLUGINS = ("dsh_session_compact", "dsh_session_hooks", "dsh_session_mode", "dsh_session_todo",
           "dsh_session_adk", "dsh_session_langgraph", "dsh_session_pydantic_ai")
DOCS = TESTS.parent / "docs"


def _hookspecs() -> dict[str, object]:
    import importlib
    import inspect

    from dsh_session_core import hookspecs

    modules = [hookspecs]
    for plugin in PLUGINS:
        try:
            modules.append(importlib.import_module(f"{plugin}.hookspecs"))
        except ModuleNotFoundError:
            continue
    found: dict[str, object] = {}
    for module in modules:
        for name, fn in vars(module).items():
            if inspect.isfunction(fn) and hasattr(fn, "dsh_session_spec"):
                found[name] = fn
    return found


def _signature(fn: object) -> str:
    import inspect

    sig = str(inspect.signature(fn)).replace("'", "")  # type: ignore[arg-type]
    return f"{fn.__name__}{sig}"  # type: ignore[attr-defined]


def test_every_hookspec_has_a_documentation_entry_with_its_signature() -> None:
    specs = _hookspecs()
    assert {"register_event_types", "session_event", "session_flush"} <= set(specs)
    doc = (DOCS / "hooks.md").read_text()
    missing = [_signature(fn) for fn in specs.values() if f"### `{_signature(fn)}`" not in doc]
    assert missing == []


def test_every_hookspec_has_a_test_implementing_it() -> None:
    sources = "\n".join(p.read_text() for p in TESTS.rglob("*.py"))
    untested = [name for name in _hookspecs() if f"def {name}(" not in sources]
    assert untested == []


# --- import hygiene: plugins reach core only through its public API --------------------


def test_no_plugin_imports_another_plugin_or_a_private_core_module() -> None:
    import importlib

    offences = []
    for plugin in PLUGINS:
        package = Path(str(importlib.import_module(plugin).__file__)).parent
        src = package.parent
        for path in package.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                    if node.module == "dsh_session_core":
                        names += [f"dsh_session_core.{a.name}" for a in node.names]
                for name in names:
                    parts = name.split(".")
                    private_core = parts[0] == "dsh_session_core" and any(
                        p.startswith("_") for p in parts[1:]
                    )
                    other_plugin = parts[0] in PLUGINS and parts[0] != plugin
                    if private_core or other_plugin:
                        offences.append(f"{path.relative_to(src)}: {name}")
    assert offences == []


def test_core_imports_no_plugin() -> None:
    src = Path(dsh_session_core.__file__).parent
    for path in src.rglob("*.py"):
        for plugin in PLUGINS:
            assert plugin not in path.read_text(), path


def test_lazy_exports_load_on_first_use_and_stay() -> None:
    import subprocess
    import sys

    code = (
        "import sys, dsh_session_hooks as h\n"
        "assert 'dsh_session_hooks._matcher' not in sys.modules\n"
        "f = h.matches_matcher\n"
        "assert 'dsh_session_hooks._matcher' in sys.modules and h.matches_matcher is f\n"
        "assert 'matches_matcher' in dir(h)\n"
        "try:\n    h.no_such_name\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "module 'dsh_session_hooks' has no attribute 'no_such_name'"


# The entry-point module of each in-repo plugin: hook implementations only.
ENTRY_POINT_HOOKS = {
    "dsh_session_compact": {"register_event_types", "add_hookspecs"},
    "dsh_session_hooks": {"register_event_types"},
    "dsh_session_mode": {"register_event_types"},
    "dsh_session_todo": {"register_event_types"},
    "dsh_session_adk": {"register_event_types", "register_projections", "hide_session",
                        "label_session", "name_session", "session_labels"},
    "dsh_session_langgraph": {"register_event_types", "register_projections"},
    "dsh_session_pydantic_ai": {"register_event_types"},
    "dsh_session_claude_agent": {"register_event_types", "register_projections"},
    # The viewer and the demo add commands only (view, export --html; demo).
    "dsh_session_view": {"register_commands"},
    "dsh_session_demo": {"register_commands"},
}


def test_entry_point_modules_hold_hook_implementations_only() -> None:
    import importlib
    import inspect

    for package, hooks in ENTRY_POINT_HOOKS.items():
        module = importlib.import_module(f"{package}.plugin")
        functions = [f for _, f in inspect.getmembers(module, inspect.isfunction)
                     if f.__module__ == module.__name__]
        assert {f.__name__ for f in functions} == hooks, package
        assert all(hasattr(f, "dsh_session_impl") for f in functions), package
        classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
                   if c.__module__ == module.__name__]
        assert classes == [], package
