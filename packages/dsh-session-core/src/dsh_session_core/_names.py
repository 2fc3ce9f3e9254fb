"""The project's fixed names: the pluggy project name and the entry-point group."""

from __future__ import annotations

from typing import Final

__all__ = ["DISABLE_AUTOLOAD_ENV", "DISABLE_PLUGINS_ENV", "ENTRY_POINT_GROUP", "PROJECT_NAME"]

#: pluggy project name: implementations are marked ``dsh_session_impl``.
PROJECT_NAME: Final = "dsh_session"
#: Where installed plugins are found. The entry-point name is the plugin's identity.
ENTRY_POINT_GROUP: Final = "dsh_session.plugins"
#: Comma-separated plugin names not to load, e.g. ``compact,mode``.
DISABLE_PLUGINS_ENV: Final = "DSH_SESSION_DISABLE_PLUGINS"
#: Set to a non-empty value to load no entry-point plugin at all.
DISABLE_AUTOLOAD_ENV: Final = "DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD"
