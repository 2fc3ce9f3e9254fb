"""The historic ``add_hookspecs`` hook: plugins publish hooks for other plugins."""

from __future__ import annotations

import pluggy
import pytest

from dsh_session_core import PROJECT_NAME, PluginManager, create_plugin_manager, hookimpl

_spec = pluggy.HookspecMarker(PROJECT_NAME)


class GreetingSpecs:
    @_spec(firstresult=True)
    def example_greeting(self, name: str) -> str | None:
        """Return a greeting for ``name``."""


class Publisher:
    @hookimpl
    def add_hookspecs(self, plugin_manager: PluginManager) -> None:
        plugin_manager.add_hookspecs(GreetingSpecs)


class Greeter:
    @hookimpl
    def example_greeting(self, name: str) -> str:
        return f"hello {name}"


def test_a_plugin_registered_later_still_publishes_its_hooks() -> None:
    pm = create_plugin_manager(autoload=False)
    pm.register(Publisher())  # after the manager was set up: historic replay
    pm.register(Greeter())
    assert pm.hook.example_greeting(name="ada") == "hello ada"


def test_an_implementation_of_an_unpublished_hook_is_caught() -> None:
    pm = create_plugin_manager(autoload=False)
    pm.register(Greeter())
    with pytest.raises(pluggy.PluginValidationError, match="example_greeting"):
        pm.check_pending()
