"""Derived history: the LLM messages projected from the surface, computed incrementally.

Each surface node is projected once; a new turn costs only its own nodes. A replace (or
``invalidate``) bumps the surface's generation, and the projection starts over, as the
reference's does. Messages are immutable and shared between calls.

Every event projects itself (``Event.message``): the core types by the rules of
:mod:`.event_messages`, bound as their methods, and a plugin's types by their own override.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from ..events import Event
    from ..vocabulary import Message
    from .surface import Surface

__all__ = ["Derivation"]


@final
class Derivation:
    """The derived-message cache of one session."""

    __slots__ = ("_consumed", "_events", "_generation", "_messages", "_surface")

    def __init__(self, events: Sequence[Event], surface: Surface) -> None:
        self._events = events
        self._surface = surface
        self._messages: list[Message] = []
        self._consumed = 0
        self._generation = 0

    def messages(self) -> list[Message]:
        """The derived history: a new list of the shared, immutable messages."""
        order = self._surface.order()
        generation = self._surface.replace_generation
        if generation != self._generation:
            self._messages = []
            self._consumed = 0
            self._generation = generation
        consumed = self._consumed
        if consumed < len(order):
            events = self._events
            out = self._messages
            for seq in order[consumed:]:
                message = events[seq].message()
                if message is not None:
                    out.append(message)
            self._consumed = len(order)
        return list(self._messages)
