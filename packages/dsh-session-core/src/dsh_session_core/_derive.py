"""Derived history: the LLM messages projected from the surface, computed incrementally.

Each surface node is projected once; a new turn costs only its own nodes. A replace (or
``invalidate``) bumps the surface's generation, and the projection starts over, as the
reference's does. Messages are immutable and shared between calls.

Typed events project themselves (``Event.message``). :func:`project_opaque` projects an
event no schema fits, by its type string alone, exactly as the reference's
``deriveEventMessage`` does on raw JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, final

import msgspec

from ._codec import json_string
from ._json import JsonObject, freeze, thaw
from .vocabulary import ContentBlock, Message

if TYPE_CHECKING:
    from ._surface import Surface
    from .events import Event, OpaqueEvent

__all__ = ["Derivation", "project_opaque"]


def _typed_blocks(content: object) -> tuple[Any, ...]:
    """Content as typed blocks when every block fits a schema, else as logged."""
    try:
        return msgspec.convert(thaw(content), tuple[ContentBlock, ...])
    except (msgspec.ValidationError, TypeError):
        return content if isinstance(content, tuple) else (content,)


def _envelope(tag: str, data: JsonObject) -> Message:
    source = data["source"]
    kind = source["kind"] if isinstance(source, JsonObject) else None
    opened: Any = freeze({"type": "text", "text": f"<{tag} source={json_string(kind)}>"})
    closed: Any = freeze({"type": "text", "text": f"</{tag}>"})
    content = _typed_blocks(data.get("content", ()))
    return Message(role="user", content=(opened, *content, closed))


def project_opaque(event: OpaqueEvent) -> Message | None:
    """Project an untyped event by its type string (the reference's projection rules)."""
    data = event.data
    if not isinstance(data, JsonObject):
        return None
    t = event.type
    if t == "user/message":
        return Message(role="user", content=_typed_blocks(data.get("content", ())))
    if t == "assistant/message":
        content = data.get("content", ())
        if isinstance(content, tuple) and not content:
            return None
        return Message(role="assistant", content=_typed_blocks(content))
    if t == "tool/result":
        block: dict[str, Any] = {"type": "tool-result"}
        for wire, key in (("toolCallId", "callId"), ("content", "content"),
                          ("isError", "isError")):
            if key in data:
                block[wire] = data[key]
        return Message(role="user", content=_typed_blocks((freeze(block),)))
    if t == "context/message":
        return _envelope("context", data)
    if t == "steering/message":
        return _envelope("steering", data)
    return None


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
