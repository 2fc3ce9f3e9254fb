"""dsh-session as the session store of the OpenAI Agents SDK: :class:`DshSession`, the
SDK's ``Session`` protocol on any dsh-session store, and the plugin's event types.

::

    from agents import Agent, Runner
    from dsh_session_openai_agents import DshSession

    session = DshSession("chat-1", store="sqlite:///agents.db")
    await Runner.run(Agent(name="a"), "hello", session=session)
"""

from __future__ import annotations

from ._session import DshSession, fold_items, record_items
from .events import (
    AgentsClear,
    AgentsClearData,
    AgentsItem,
    AgentsItemData,
    AgentsPop,
    AgentsPopData,
)

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
