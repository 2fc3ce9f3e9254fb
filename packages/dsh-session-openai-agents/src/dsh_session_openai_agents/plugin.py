"""The ``openai-agents`` plugin's entry point (group ``dsh_session.plugins``): hook
implementations only."""

from __future__ import annotations

from collections.abc import Iterable

from dsh_session_core import EventSpec, hookimpl
from dsh_session_core.projections import Projection

from .events import AgentsClear, AgentsItem, AgentsPop


@hookimpl
def register_event_types() -> Iterable[EventSpec]:
    """Declare ``agents/item``, ``agents/pop`` and ``agents/clear``.

    :returns: the three event specs of this plugin.
    """
    return (EventSpec(AgentsItem, raw=True), EventSpec(AgentsPop), EventSpec(AgentsClear))


@hookimpl
def register_projections() -> Iterable[Projection]:
    """Declare ``agents/items``, the item view kept beside the log.

    :returns: the plugin's one projection.
    """
    from ._projection import ITEMS

    return (ITEMS,)
