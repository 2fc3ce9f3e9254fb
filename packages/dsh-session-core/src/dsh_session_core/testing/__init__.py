"""The testing kit: what a test of dsh-session, or of a plugin or backend built on it,
needs and would otherwise write again.

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

if _typing.TYPE_CHECKING:
    from .cli import run_cli
    from .contract import BackendContract
    from .events import (
        USER_SOURCE,
        assistant,
        assistant_data,
        call_block,
        exchange,
        one_turn_log,
        session_header,
        step_data,
        step_end,
        step_start,
        text_block,
        tool_call,
        tool_call_data,
        tool_result,
        tool_result_data,
        turn_end,
        turn_end_data,
        turn_start,
        turn_start_data,
        user,
        user_data,
        user_turn,
        wire_event,
    )
    from .plugins import PluginReport, check_plugin
    from .stores import (
        DURABLE_KINDS,
        KINDS,
        BackendFactory,
        make_backend_factory,
        make_store_url,
    )

_LAZY: dict[str, str] = {
    "BackendContract": ".contract",
    "BackendFactory": ".stores",
    "DURABLE_KINDS": ".stores",
    "KINDS": ".stores",
    "PluginReport": ".plugins",
    "USER_SOURCE": ".events",
    "assistant": ".events",
    "assistant_data": ".events",
    "call_block": ".events",
    "check_plugin": ".plugins",
    "exchange": ".events",
    "make_backend_factory": ".stores",
    "make_store_url": ".stores",
    "one_turn_log": ".events",
    "run_cli": ".cli",
    "session_header": ".events",
    "step_data": ".events",
    "step_end": ".events",
    "step_start": ".events",
    "text_block": ".events",
    "tool_call": ".events",
    "tool_call_data": ".events",
    "tool_result": ".events",
    "tool_result_data": ".events",
    "turn_end": ".events",
    "turn_end_data": ".events",
    "turn_start": ".events",
    "turn_start_data": ".events",
    "user": ".events",
    "user_data": ".events",
    "user_turn": ".events",
    "wire_event": ".events",
}

__all__ = [
    "DURABLE_KINDS",
    "KINDS",
    "USER_SOURCE",
    "BackendContract",
    "BackendFactory",
    "PluginReport",
    "assistant",
    "assistant_data",
    "call_block",
    "check_plugin",
    "exchange",
    "make_backend_factory",
    "make_store_url",
    "one_turn_log",
    "run_cli",
    "session_header",
    "step_data",
    "step_end",
    "step_start",
    "text_block",
    "tool_call",
    "tool_call_data",
    "tool_result",
    "tool_result_data",
    "turn_end",
    "turn_end_data",
    "turn_start",
    "turn_start_data",
    "user",
    "user_data",
    "user_turn",
    "wire_event",
]

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__)
