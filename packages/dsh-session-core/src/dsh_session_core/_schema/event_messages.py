"""The projection (spec §4): how each core event type becomes an LLM message.

A message of the derived history, for typed and opaque events alike.

- ``user/message``: a ``user`` message of its content.
- ``context/message`` and ``steering/message``: a ``user`` message that wraps the content
  in ``<context source="...">`` ... ``</context>`` (``steering`` likewise) text blocks,
  the source being the JSON text of the source's kind.
- ``assistant/message``: an ``assistant`` message of its content; none when it is empty.
- ``tool/result``: a ``user`` message holding one ``tool-result`` block.
- any other type: no message.

The typed rules read the payload Structs; :func:`project_opaque` applies the same rules
to an event no schema fits, by its type string alone, exactly as the reference's
``deriveEventMessage`` does on raw JSON.

Each function here takes the event and is bound as that class's ``message`` method in
:mod:`.events`, so projecting costs one method call, as before. This module imports
:mod:`.events` for type checking only, so the event classes can bind these functions
without an import cycle. A plugin's event type projects by overriding ``message``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from .._base.json_values import JsonObject, freeze, thaw
from ..jscompat import json_stringify
from ..vocabulary import ContentBlock, Message, MessageSource, TextBlock, ToolResultBlock

if TYPE_CHECKING:
    from ..events import (
        AssistantMessage,
        ContextMessage,
        OpaqueEvent,
        SteeringMessage,
        ToolResult,
        UserMessage,
    )

__all__ = [
    "project_assistant_message",
    "project_context_message",
    "project_opaque",
    "project_steering_message",
    "project_tool_result",
    "project_user_message",
]


# --- typed events -------------------------------------------------------------------------


def _envelope(tag: str, source: MessageSource, content: tuple[ContentBlock, ...]) -> Message:
    kind = source.__struct_config__.tag
    opened = TextBlock(text=f"<{tag} source={json_stringify(kind)}>")
    return Message(role="user", content=(opened, *content, TextBlock(text=f"</{tag}>")))


def project_user_message(event: UserMessage) -> Message:
    """``user/message``: its content, as a user message."""
    return Message(role="user", content=event.data.content)


def project_context_message(event: ContextMessage) -> Message:
    """``context/message``: its content in ``<context source=...>`` tags, as a user
    message."""
    return _envelope("context", event.data.source, event.data.content)


def project_steering_message(event: SteeringMessage) -> Message:
    """``steering/message``: its content in ``<steering source=...>`` tags, as a user
    message."""
    return _envelope("steering", event.data.source, event.data.content)


def project_assistant_message(event: AssistantMessage) -> Message | None:
    """``assistant/message``: its content as an assistant message, none when empty."""
    content = event.data.content
    return Message(role="assistant", content=content) if content else None


def project_tool_result(event: ToolResult) -> Message:
    """``tool/result``: one ``tool-result`` block, as a user message."""
    d = event.data
    block = ToolResultBlock(tool_call_id=d.call_id, content=d.content, is_error=d.is_error)
    return Message(role="user", content=(block,))


# --- opaque events ------------------------------------------------------------------------


def _typed_blocks(content: object) -> tuple[Any, ...]:
    """Content as typed blocks when every block fits a schema, else as logged."""
    try:
        return msgspec.convert(thaw(content), tuple[ContentBlock, ...])
    except (msgspec.ValidationError, TypeError):
        return content if isinstance(content, tuple) else (content,)


def _opaque_envelope(tag: str, data: JsonObject) -> Message:
    source = data["source"]
    kind = source["kind"] if isinstance(source, JsonObject) else None
    opened: Any = freeze({"type": "text", "text": f"<{tag} source={json_stringify(kind)}>"})
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
        return _opaque_envelope("context", data)
    if t == "steering/message":
        return _opaque_envelope("steering", data)
    return None
