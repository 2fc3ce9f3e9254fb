"""Each package's public names are one list, its ``__all__``, pinned against the package's
whole namespace (as httpx's tests/test_exported_members.py pins its own).

Every name a package holds that does not start with ``_`` must be in ``__all__``: the
lazily exported names (which ``dir()`` lists before they load) and anything an
``import`` statement leaves behind (``annotations``, ``TYPE_CHECKING``, a helper such as
``lazy_exports``). And every name of ``__all__`` must resolve. The one exception is a
public submodule (``dsh_session_core.jscompat``, ``dsh_session_mode.events``...): the
import system binds it on its package once something imports it, and it is public by its
name (tests/meta/test_meta.py); it need not be listed.

Each package is checked in a fresh interpreter after importing all its modules, so the
namespace holds everything anything could leave there.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PACKAGES = [
    "dsh_session_core",
    "dsh_session_core.testing",
    "dsh_session_compact",
    "dsh_session_hooks",
    "dsh_session_mode",
    "dsh_session_todo",
    "dsh_session_view",
    "dsh_session_adk",
    "dsh_session_langgraph",
    "dsh_session_pydantic_ai",
    "dsh_session_claude_agent",
    "dsh_session_demo",
]

# Runs in the child: import every module of the package (so every submodule is bound and
# every lazy name can load), then report the namespace.
_PROBE = """
import importlib, json, pkgutil, sys, types
name = sys.argv[1]
package = importlib.import_module(name)
before = sorted(vars(package))
for info in pkgutil.walk_packages(package.__path__, name + "."):
    if info.name.endswith(".__main__"):
        continue
    importlib.import_module(info.name)
listed = list(package.__all__)
unresolved = [n for n in listed if not hasattr(package, n)]
namespace = set(vars(package)) | set(dir(package))
submodules = sorted(
    n for n in namespace
    if isinstance(getattr(package, n), types.ModuleType)
    and getattr(package, n).__name__ == f"{name}.{n}"
)
print(json.dumps({
    "all": listed, "unresolved": unresolved, "namespace": sorted(namespace),
    "submodules": submodules, "before": before,
}))
"""


def _probe(package: str) -> dict[str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, package], capture_output=True, text=True, check=True
    )
    result: dict[str, list[str]] = json.loads(out.stdout)
    return result


@pytest.mark.parametrize("package", PACKAGES)
def test_the_public_namespace_is_exactly_all(package: str) -> None:
    found = _probe(package)
    listed = found["all"]
    assert len(listed) == len(set(listed)), "duplicates in __all__"
    assert found["unresolved"] == []
    public = {n for n in found["namespace"] if not n.startswith("_")}
    unlisted = public - set(listed) - set(found["submodules"])
    assert sorted(unlisted) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_the_package_leaves_no_public_helper_behind(package: str) -> None:
    # Right after ``import package``, before any submodule is imported on purpose: the
    # names the package's own imports bind must all be private.
    found = _probe(package)
    leaked = [
        n for n in found["before"]
        if not n.startswith("_") and n not in found["all"] and n not in found["submodules"]
    ]
    assert leaked == []


def test_the_plugin_helpers_are_public_submodules_not_top_level_names() -> None:
    import dsh_session_core
    from dsh_session_core.lazy import lazy_exports

    assert "lazy_exports" not in dsh_session_core.__all__
    assert callable(lazy_exports)
    with pytest.raises(AttributeError):
        dsh_session_core.lazy_exports  # noqa: B018  # the name is gone from the top level


#: The public modules that are doors of their own (not listed in the package's
#: ``__all__``): their whole ``__all__``, pinned, so that a name added or dropped is a
#: decision a test records.
DOORS = {
    "dsh_session_core.inspect": [
        "SORTS", "SearchHit", "SearchQuery", "SessionPage", "SessionQuery", "Source",
        "SourceSpec", "UnansweredCall", "build_timeline", "check_session_id",
        "encode_json", "event_line", "find_session", "is_log_file", "line_wire",
        "load_source",
        "not_found", "one_line", "open_listed_store", "open_store", "parse_when",
        "render_timeline", "resolve_source", "search_lines", "search_page", "search_store",
        "select_sessions", "session_row", "store_url", "timeline_blocks",
        "unanswered_calls", "wire_events", "wire_of",
    ],
    "dsh_session_core.cli": [
        "EXIT_OK", "EXIT_REJECTED", "EXIT_USAGE", "CommandLine", "Failure", "Progress",
        "add_source_arguments", "failure_of", "plugin_manager", "printable_url", "registry",
        "source_spec", "warn", "write",
    ],
}

_DOOR_PROBE = """
import importlib, json, sys
module = importlib.import_module(sys.argv[1])
print(json.dumps({"all": list(module.__all__),
                  "public": sorted(n for n in vars(module) if not n.startswith("_")),
                  "unresolved": [n for n in module.__all__ if not hasattr(module, n)]}))
"""


@pytest.mark.parametrize("module", sorted(DOORS))
def test_a_public_module_exports_exactly_its_pinned_names(module: str) -> None:
    out = subprocess.run([sys.executable, "-c", _DOOR_PROBE, module], capture_output=True,
                         text=True, check=True)
    found = json.loads(out.stdout)
    assert found["all"] == DOORS[module]  # sorted as ruff sorts it (RUF022)
    assert found["unresolved"] == []
    # Nothing public but its names (``annotations`` from the future import aside).
    assert sorted(set(found["public"]) - {"annotations"}) == sorted(DOORS[module])

