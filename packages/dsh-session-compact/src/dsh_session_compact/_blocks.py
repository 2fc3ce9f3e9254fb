"""Reading content blocks and event payloads whether they are typed or opaque.

A block of a kind core knows is a typed Struct; a block of an unknown kind (or any block
inside an opaque event) is read-only JSON. Rendering and token estimation must handle
both, and must never raise on odd data, so every field read here falls back to a
neutral value (``""``, ``()``) when it is missing or has the wrong type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from dsh_session_core.jscompat import json_stringify
from dsh_session_core.vocabulary import (
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["content_of", "field", "js_json", "kind_of", "seq_of_blocks", "text_field"]

_TAGS: dict[type, str] = {
    TextBlock: "text",
    ReasoningBlock: "reasoning",
    ToolCallBlock: "tool-call",
    ToolResultBlock: "tool-result",
}

# Wire names of the typed fields read below (typed blocks use snake_case attributes).
_ATTRS = {"toolCallId": "tool_call_id", "isError": "is_error", "callId": "call_id"}


def kind_of(block: object) -> str:
    """The block's ``type`` string (``""`` when it has none)."""
    tag = _TAGS.get(type(block))
    if tag is not None:
        return tag
    if isinstance(block, Mapping):
        kind = block.get("type")
        return kind if isinstance(kind, str) else ""
    if isinstance(block, msgspec.Struct):
        kind = block.__struct_config__.tag
        return kind if isinstance(kind, str) else ""
    return ""


def field(value: object, name: str) -> Any:
    """Field ``name`` (its wire name) of a Struct or a mapping, or ``None``."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, _ATTRS.get(name, name), None)


def text_field(value: object, name: str) -> str:
    """A string field, or ``""`` when it is missing or not a string."""
    found = field(value, name)
    return found if isinstance(found, str) else ""


def seq_of_blocks(value: object) -> Sequence[object]:
    """A block list, or ``()`` when ``value`` is not one (a string is not a list)."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return value
    return ()


def content_of(data: object) -> Sequence[object]:
    """The ``content`` blocks of an event payload, typed or opaque."""
    return seq_of_blocks(field(data, "content"))


def js_json(value: object) -> str:
    """The compact JSON text of ``value`` as JS ``JSON.stringify`` writes it (key order
    kept, non-ASCII raw, integral floats without a fraction). Never raises: a value JSON
    cannot hold is written as its ``repr``, which only ever feeds an estimate."""
    try:
        return json_stringify(value, js_numbers=True)
    except (TypeError, ValueError, NotImplementedError, UnicodeError, RecursionError):
        return repr(value)
