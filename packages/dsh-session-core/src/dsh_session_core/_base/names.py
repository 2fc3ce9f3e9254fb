"""The project's fixed names.

The pluggy project name, the entry-point group, the retention ledger's session id."""

from __future__ import annotations

# typing costs ~10 ms to import, and `dsh-session --help` reads these names (the
# entry-point group, to list the installed plugins' commands).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Final

__all__ = ["DISABLE_AUTOLOAD_ENV", "DISABLE_PLUGINS_ENV", "ENTRY_POINT_GROUP", "PROJECT_NAME",
           "RETENTION_LEDGER_ID"]

#: pluggy project name: implementations are marked ``dsh_session_impl``.
PROJECT_NAME: Final = "dsh_session"
#: Where installed plugins are found. The entry-point name is the plugin's identity.
ENTRY_POINT_GROUP: Final = "dsh_session.plugins"
#: Comma-separated plugin names not to load, e.g. ``compact,mode``.
DISABLE_PLUGINS_ENV: Final = "DSH_SESSION_DISABLE_PLUGINS"
#: Set to a non-empty value to load no entry-point plugin at all.
DISABLE_AUTOLOAD_ENV: Final = "DSH_SESSION_DISABLE_PLUGIN_AUTOLOAD"
#: The session in which a store keeps its never-prune marks and removal records
#: (``_persistence/retention/ledger.py``); lists hide it.
RETENTION_LEDGER_ID: Final = "dsh-session.retention"
