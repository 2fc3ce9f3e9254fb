"""The SDK's item view as a projection (``agents/items``): one row per item in the view,
keyed by the seq of its ``agents/item``, kept by the store beside the log.

So ``get_items`` reads the rows it returns (the newest ``limit`` of them, or all), not
the log: ``agents/item`` puts a row, ``agents/pop`` deletes the one it takes off,
``agents/clear`` clears them. Where a store keeps no rows (a third party's backend), or
they do not match the log, the store folds the log instead and answers the same.
"""

from __future__ import annotations

__all__ = ["ITEMS", "ItemRow", "item_key"]

from collections.abc import Iterator
from typing import Any

from msgspec import Struct

from dsh_session_core import Event
from dsh_session_core.projections import Change, Clear, Delete, Projection, Put

from .events import AgentsClear, AgentsItem, AgentsPop


class ItemRow(Struct, array_like=True, frozen=True, gc=False):
    """One item of the view, as it was added."""

    item: Any


def item_key(seq: int) -> str:
    """The row key of the item ``agents/item`` number ``seq`` added (keys sort by seq)."""
    return f"{seq:012d}"


def _fold(event: Event) -> Iterator[Change]:
    cls = event.__class__
    if cls is AgentsItem:
        yield Put(item_key(event.seq), ItemRow(event.data.item))
    elif cls is AgentsPop:
        yield Delete(item_key(event.data.item_seq))
    elif cls is AgentsClear:
        yield Clear()


#: The projection: the view's items by seq.
ITEMS = Projection(
    "agents/items", 1, frozenset({"agents/item", "agents/pop", "agents/clear"}), ItemRow,
    _fold, doc="the OpenAI Agents SDK's item view: its items by the seq that added them")
