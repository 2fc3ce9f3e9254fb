"""The plugin manager's own lookup of hook markers (``PluginManager.parse_hookimpl_opts``
and ``parse_hookspec_opts``, read off module and instance namespaces without
``inspect.getattr_static``) answers exactly what pluggy's lookup answers, for every name
of every installed plugin and of plugins shaped to trip it."""

from __future__ import annotations

import types
from typing import Any

import pluggy
import pytest

from dsh_session_core import hookspecs
from dsh_session_core._plugins.manager import PluginManager, create_plugin_manager, hookimpl

spec = pluggy.HookspecMarker("dsh_session")


def _module() -> types.ModuleType:
    module = types.ModuleType("shaped_plugin")

    @hookimpl
    def session_flush(session: Any) -> None:
        return None

    @hookimpl(tryfirst=True)
    def session_created(session: Any) -> None:
        return None

    def plain(session: Any) -> None:
        return None

    class Holder:
        @hookimpl
        def session_flush(self, session: Any) -> None:
            return None

    bound = Holder().session_flush
    module.__dict__.update(
        session_flush=session_flush, session_created=session_created, plain=plain,
        Holder=Holder, bound=bound, number=3, text="x", mod=types,
        static=staticmethod(session_flush), klass=classmethod(session_flush),
        marked_not_callable=types.SimpleNamespace(dsh_session_impl={}),
    )
    return module


class _Base:
    __slots__ = ()

    @hookimpl
    def session_flush(self, session: Any) -> None:
        return None

    @staticmethod
    @hookimpl
    def session_created(session: Any) -> None:
        return None


class _Plugin(_Base):
    __slots__ = ("__dict__", "slot")
    slot: Any
    attr = 5

    @property
    def boom(self) -> int:
        raise AssertionError("a property must not be run by the lookup")

    @hookimpl(hookwrapper=True)
    def register_event_types(self) -> Any:
        yield


def _instances() -> list[object]:
    plain = _Plugin()
    shadowed = _Plugin()

    @hookimpl
    def own(session: Any) -> None:
        return None

    shadowed.__dict__["session_flush"] = own  # the instance's own wins
    shadowed.slot = own
    return [plain, shadowed]


def _plugins() -> list[object]:
    installed = [p for _, p in create_plugin_manager().list_name_plugin()]
    return [*installed, _module(), *_instances(), _Plugin]


@pytest.mark.parametrize(
    "plugin", _plugins(), ids=lambda p: getattr(p, "__name__", type(p).__name__))
def test_hookimpl_lookup_is_pluggys(plugin: object) -> None:
    ours, theirs = PluginManager(), pluggy.PluginManager("dsh_session")
    for name in dir(plugin):
        assert ours.parse_hookimpl_opts(plugin, name) == theirs.parse_hookimpl_opts(
            plugin, name), name


def test_hookspec_lookup_is_pluggys() -> None:
    ours, theirs = PluginManager(), pluggy.PluginManager("dsh_session")
    for namespace in (hookspecs, _module()):
        for name in dir(namespace):
            assert ours.parse_hookspec_opts(namespace, name) == theirs.parse_hookspec_opts(
                namespace, name), name


def test_a_manager_finds_every_installed_hook_as_pluggy_does() -> None:
    """Registered through our lookup and through pluggy's, the same plugins give the
    same implementations, hook by hook."""

    class Plain(pluggy.PluginManager):
        pass

    ours = create_plugin_manager()
    theirs = Plain("dsh_session")
    theirs.add_hookspecs(hookspecs)
    for name, plugin in ours.list_name_plugin():
        theirs.register(plugin, name=name)
    theirs.hook.add_hookspecs.call_historic(kwargs={"plugin_manager": theirs})
    for hook in vars(ours.hook):
        found = [(i.plugin_name, i.function)
                 for i in getattr(ours.hook, hook).get_hookimpls()]
        expected = [(i.plugin_name, i.function)
                    for i in getattr(theirs.hook, hook).get_hookimpls()]
        assert found == expected, hook
