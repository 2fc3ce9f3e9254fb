"""dsh-session as the session store of the OpenAI Agents SDK: :class:`DshSession`, the
SDK's ``Session`` protocol on any dsh-session store, and the plugin's event types.

::

    from agents import Agent, Runner
    from dsh_session_openai_agents import DshSession

    session = DshSession("chat-1", store="sqlite:///agents.db")
    await Runner.run(Agent(name="a"), "hello", session=session)
"""

# Aliased, as every import here: the namespace holds only the names of __all__.
from __future__ import annotations as _annotations

import typing as _typing

from dsh_session_core.lazy import lazy_exports as _lazy_exports

# Imported lazily (PEP 562): loading the plugin through its entry point (every store and
# CLI command does) must not import the SDK, which costs more than a second.
if _typing.TYPE_CHECKING:
    from ._session import DshSession, fold_items, record_items
    from .events import (
        AgentsClear,
        AgentsClearData,
        AgentsItem,
        AgentsItemData,
        AgentsPop,
        AgentsPopData,
    )

_LAZY: dict[str, str] = {
    "AgentsClear": ".events",
    "AgentsClearData": ".events",
    "AgentsItem": ".events",
    "AgentsItemData": ".events",
    "AgentsPop": ".events",
    "AgentsPopData": ".events",
    "DshSession": "._session",
    "fold_items": "._session",
    "record_items": "._session",
}

__all__ = [
    "AgentsClear",
    "AgentsClearData",
    "AgentsItem",
    "AgentsItemData",
    "AgentsPop",
    "AgentsPopData",
    "DshSession",
    "fold_items",
    "record_items",
]


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__,
                                     distribution="dsh-session-openai-agents")
