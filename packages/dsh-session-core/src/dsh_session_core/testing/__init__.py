"""The testing kit: what a test of dsh-session, or of a plugin or backend on it, needs.

The pieces such a test would otherwise write again:

- event shorthands (:mod:`.events`): :func:`user`, :func:`assistant`, :func:`tool_call`,
  :func:`tool_result`, :func:`turn_start`... append one event to a session;
  :func:`user_turn` and :func:`exchange` a whole turn; :func:`wire_event` and
  :func:`one_turn_log` build log lines;
- stores of every kind (:mod:`.stores`): :func:`make_store_url`,
  :func:`make_backend_factory`, and as pytest fixtures (``store_kind``, ``store_url``,
  ``store``, ``backend_factory``, ``postgresql_url``) in the plugin
  :mod:`dsh_session_core.testing.fixtures`, which a suite loads by asking for it
  (``pytest_plugins = ["dsh_session_core.testing.fixtures"]`` in its root conftest);
- the backend contract (:mod:`.contract`): :class:`BackendContract`, the cases every
  backend must pass, for a backend's own tests to subclass;
- the plugin check (:mod:`.plugins`): :func:`check_plugin`;
- the ``dsh-session`` command in the test process (:mod:`.cli`): :func:`run_cli`.

Importing this package imports neither pytest nor any backend: the names load on first
use (the contract and the fixtures need pytest, the PostgreSQL helpers psycopg).
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from ..lazy import lazy_exports as _lazy_exports

# The shorthands are plain functions over dicts (no pytest, no backend): imported at
# once, so their names are written in one place, events.__all__.
from .events import *  # noqa: F403
from .events import __all__ as _events_all

if _typing.TYPE_CHECKING:
    from .cli import run_cli
    from .contract import BackendContract
    from .plugins import PluginReport, check_plugin
    from .stores import (
        DURABLE_KINDS,
        KINDS,
        BackendFactory,
        make_backend_factory,
        make_store_url,
    )

# The TYPE_CHECKING imports above, this table and __all__ name the same names, each from
# the same module: tests/meta/test_lazy_exports.py checks it (lazy.py says why __all__
# is not built from this table).
_LAZY: dict[str, str] = {
    "BackendContract": ".contract",
    "BackendFactory": ".stores",
    "DURABLE_KINDS": ".stores",
    "KINDS": ".stores",
    "PluginReport": ".plugins",
    "check_plugin": ".plugins",
    "make_backend_factory": ".stores",
    "make_store_url": ".stores",
    "run_cli": ".cli",
}

__all__ = [
    "DURABLE_KINDS",
    "KINDS",
    "BackendContract",
    "BackendFactory",
    "PluginReport",
    "check_plugin",
    "make_backend_factory",
    "make_store_url",
    "run_cli",
]
__all__ += _events_all

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__)
