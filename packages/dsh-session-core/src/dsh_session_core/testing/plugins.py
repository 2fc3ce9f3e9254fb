"""The plugin check: what every installed dsh-session plugin must hold, in one call.

:func:`check_plugin` checks a plugin as a user's installation sees it: its entry point
in the ``dsh_session.plugins`` group, its event types registered under its name with a
catalog line each, the block list removing it, its errors in one public module, and its
package typed with an explicit public API. A
plugin's own tests call it, then assert what is particular to the plugin (the exact
doc lines, the payload classes) on the :class:`PluginReport` it returns::

    from dsh_session_core.testing import check_plugin

    def test_the_plugin_as_installed():
        report = check_plugin("todo")
        assert report.event_types == ("todo/write",)
"""

from __future__ import annotations

__all__ = ["PluginReport", "check_plugin"]

import importlib
import importlib.metadata
import inspect
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .._base.names import ENTRY_POINT_GROUP
from .._model.store import SessionStore
from .._plugins.manager import create_plugin_manager
from .._schema.catalog import render_catalog
from .._schema.registry import EventRegistry, RegisteredEvent
from ..errors import DshSessionError


@dataclass(frozen=True)
class PluginReport:
    """What :func:`check_plugin` found.

    :ivar name: the entry-point name.
    :ivar distribution: the distribution that declares the entry point.
    :ivar plugin: the object the entry point loads (a module, as a rule).
    :ivar package: the top-level package the plugin lives in.
    :ivar event_types: the types the plugin registers, sorted.
    :ivar registry: the registry of every installed plugin, the checked one among them.
    :ivar errors: the package's ``errors`` module, or ``None`` for a package that
        defines no public exception.
    """

    name: str
    distribution: str
    plugin: object
    package: str
    event_types: tuple[str, ...]
    registry: EventRegistry
    errors: ModuleType | None

    def entry(self, event_type: str) -> RegisteredEvent:
        """The registry's entry of one of the plugin's types."""
        entry = self.registry.get(event_type)
        assert entry is not None, event_type
        return entry


def check_plugin(name: str) -> PluginReport:
    """Check the installed plugin ``name`` (its entry-point name); raise
    :class:`AssertionError` naming every rule it breaks:

    - exactly one entry point of that name is in the ``dsh_session.plugins`` group, and
      :func:`~dsh_session_core.create_plugin_manager` loads what it names;
    - every event type it registers is in the registry under its name, with a doc line,
      and in the generated catalog (``dsh-session events --markdown``);
    - blocked (``create_plugin_manager(blocked=[name])``), it is not loaded and none of
      its types is registered;
    - every public exception class its package defines is defined in the package's
      public ``errors`` module, and derives from core's
      :class:`~dsh_session_core.errors.DshSessionError`;
    - its package ships ``py.typed`` (PEP 561) and states its public names in
      ``__all__``: each once, each resolving, in the order ruff's RUF022 sorts them
      (constants, then the rest).

    The check honours ``DSH_SESSION_DISABLE_PLUGINS`` as every plugin manager does: a
    plugin blocked there fails it.
    """
    problems: list[str] = []
    points = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
              if ep.name == name]
    if len(points) != 1:
        found = sorted(ep.dist.name if ep.dist else "?" for ep in points)
        msg = (f"plugin {name!r}: {len(points)} entry point(s) of that name in the "
               f"{ENTRY_POINT_GROUP} group, not one {found}")
        raise AssertionError(msg)
    [point] = points
    pm = create_plugin_manager()
    loaded = pm.get_plugin(name)
    plugin = point.load()
    if loaded is not plugin:
        msg = (f"plugin {name!r}: create_plugin_manager() did not load its entry point "
               f"{point.value} (is it blocked by DSH_SESSION_DISABLE_PLUGINS?)")
        raise AssertionError(msg)
    registry = SessionStore(pm).registry
    types = tuple(sorted(r.type for r in registry if r.plugin == name))
    catalog = render_catalog(registry)
    for event_type in types:
        entry = registry.get(event_type)
        if entry is None or not entry.doc.strip():
            problems.append(f"{event_type!r} has no doc line")
        if f"#### `{event_type}` " not in catalog:
            problems.append(f"{event_type!r} is not in the generated catalog")
    blocked = create_plugin_manager(blocked=[name])
    if blocked.get_plugin(name) is not None:
        problems.append("the block list does not remove it")
    still = sorted(set(types) & set(SessionStore(blocked).registry.types))
    if still:
        problems.append(f"blocked, its types are still registered: {still}")
    package = point.value.partition(":")[0].split(".")[0]
    errors = _errors_module(package, problems)
    _check_public_api(package, problems)
    if problems:
        msg = f"plugin {name!r}: " + "; ".join(problems)
        raise AssertionError(msg)
    return PluginReport(name=name, distribution=point.dist.name if point.dist else "",
                        plugin=plugin, package=package, event_types=types, registry=registry,
                        errors=errors)


def _errors_module(package: str, problems: list[str]) -> ModuleType | None:
    """The package's ``errors`` module, noting in ``problems`` every public exception
    class defined elsewhere or outside core's hierarchy."""
    root = importlib.import_module(package)
    home = f"{package}.errors"
    modules = [root]
    for info in pkgutil.walk_packages(getattr(root, "__path__", []), package + "."):
        if not info.name.endswith(".__main__"):
            modules.append(importlib.import_module(info.name))
    errors: ModuleType | None = None
    for module in modules:
        if module.__name__ == home:
            errors = module
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if (cls.__module__ != module.__name__ or cls_name.startswith("_")
                    or not issubclass(cls, BaseException)):
                continue
            if module.__name__ != home:
                problems.append(f"{module.__name__}.{cls_name} is an error outside {home}")
            elif not issubclass(cls, DshSessionError):
                problems.append(f"{home}.{cls_name} does not derive from DshSessionError")
    return errors


def _check_public_api(package: str, problems: list[str]) -> None:
    """Note in ``problems`` what the package's typing marker and ``__all__`` lack."""
    root = importlib.import_module(package)
    folder = Path(root.__file__ or "").parent
    if not (folder / "py.typed").is_file():
        problems.append(f"{package} has no py.typed (PEP 561): type checkers ignore it")
    names = getattr(root, "__all__", None)
    if not isinstance(names, (list, tuple)):
        problems.append(f"{package} has no __all__ listing its public names")
        return
    if len(set(names)) != len(names):
        problems.append(f"{package}.__all__ lists a name twice")
    if list(names) != sorted(names, key=lambda n: (not n.isupper(), n)):
        problems.append(f"{package}.__all__ is not sorted as ruff's RUF022 sorts it")
    missing = [n for n in names if not hasattr(root, n)]
    if missing:
        problems.append(f"{package}.__all__ names what it does not define: {missing}")
