"""The plugin's log-only event types: the SDK's items kept verbatim, and the pops and
clears that the item view folds.

``agents/item`` holds one item exactly as it was added (its JSON, unchanged);
``agents/pop`` and ``agents/clear`` record ``pop_item`` and ``clear_session``: nothing is
ever deleted from the log, the item list is a fold of these three.
"""

from __future__ import annotations

__all__ = ["AgentsClear", "AgentsClearData", "AgentsItem", "AgentsItemData", "AgentsPop",
           "AgentsPopData"]

from typing import Any

from msgspec import Struct

from dsh_session_core import Event


class AgentsItemData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``agents/item``: ``{"item": <the item's JSON>}``."""

    item: Any


class AgentsItem(Event, tag="agents/item", frozen=True):
    """One OpenAI Agents SDK session item (a ``TResponseInputItem``), kept verbatim as it
    was added; the typed events recording it follow it in the same turn. Log-only: the
    conversation is derived from those typed events."""

    data: AgentsItemData


class AgentsPopData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``agents/pop``: the seq of the ``agents/item`` it takes off."""

    item_seq: int


class AgentsPop(Event, tag="agents/pop", frozen=True):
    """``pop_item`` took the most recent item off the SDK's item view (the item's event
    stays in the log). Log-only."""

    data: AgentsPopData


class AgentsClearData(
    Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, gc=False
):
    """The payload of ``agents/clear``: how many items the view held."""

    items: int


class AgentsClear(Event, tag="agents/clear", frozen=True):
    """``clear_session`` emptied the SDK's item view (every earlier event stays in the
    log). Log-only."""

    data: AgentsClearData
