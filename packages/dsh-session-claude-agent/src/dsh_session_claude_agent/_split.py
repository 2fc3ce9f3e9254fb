"""An entry split into what its typed events hold and the rest, and joined back.

A transcript entry's content (a user's text, the assistant's text, thinking and
signatures, a tool use's id, name and input, a tool result's call id and text) is held
once, by the typed events that record it; the ``claude-agent/entries`` event keeps the
entry with each of those values replaced by ``null`` in its place, so that its keys
keep their order and :func:`join` puts each value back where it was.

Which values move is decided by the entry's shape alone (the ``type`` of the entry and
of each content block, which keys are present), never by the moved values: so the walk
finds the same places in the entry and in what is left of it. An entry whose shape is
ambiguous (a value that would move is not a string where a string is expected, or is
``null`` already) moves nothing: it is kept whole, and has no typed event.
"""

from __future__ import annotations

__all__ = ["Group", "Split", "join", "split"]

from dataclasses import dataclass, field
from typing import Any

import msgspec

_encode = msgspec.json.encode
_decode = msgspec.json.decode

#: What a moved value is: a text (a string), or a tool's input (any JSON, kept as its
#: JSON text in the ``tool-call`` block's ``arguments``).
TEXT, INPUT = "text", "input"


class _Ambiguous(Exception):
    """The entry cannot be split unambiguously: it is kept whole."""


@dataclass
class Group:
    """The values one typed event holds, in the walk's order.

    :ivar kind: ``user`` (a ``user/message``), ``assistant`` (an ``assistant/message``)
        or ``result`` (a ``tool/result``).
    :ivar blocks: for ``user`` and ``result``, the texts; for ``assistant``, one tuple a
        block: ``("text", text)``, ``("thinking", text, signature | None)``,
        ``("redacted", data)``, ``("call", id, name, input)``.
    :ivar call_id: a ``result``'s ``tool_use_id``.
    :ivar is_error: a ``result``'s ``is_error`` (``True`` only when it is ``true``).
    """

    kind: str
    blocks: list[Any] = field(default_factory=list)
    call_id: str = ""
    is_error: bool = False


@dataclass
class Split:
    """An entry split: ``residual`` (the entry, its moved values ``null``), the moved
    ``count``, and the typed events' ``groups`` (none: the entry is whole)."""

    residual: Any
    count: int
    groups: list[Group]


_Slot = tuple[Any, Any]  # (container, key): a place a value moves from


def _text(container: Any, key: Any, residual: bool) -> Any:
    value = container[key]
    if not residual and not isinstance(value, str):
        raise _Ambiguous
    return value


def _walk(entry: Any, residual: bool) -> tuple[list[_Slot], list[Group]]:
    """The places of the values that move, in order, and the groups they form. In the
    entry (``residual`` false) a value found where a text moves must be a string; in
    the residual each such place holds ``null``.

    :raises _Ambiguous: the entry moves nothing (kept whole).
    """
    slots: list[_Slot] = []
    groups: list[Group] = []
    if not isinstance(entry, dict):
        return slots, groups
    kind = entry.get("type")
    message = entry.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        return slots, groups
    if "content" not in message:
        return slots, groups
    content = message["content"]
    whole = content is None if residual else isinstance(content, str)
    if whole:
        slots.append((message, "content"))
        value = content if not residual else None
        if kind == "user":
            groups.append(Group("user", [value]))
        else:
            groups.append(Group("assistant", [("text", value)]))
        return slots, groups
    if not isinstance(content, list):
        return slots, groups
    if kind == "assistant":
        _assistant(content, residual, slots, groups)
    else:
        _user(content, residual, slots, groups)
    return slots, groups


def _assistant(content: list[Any], residual: bool, slots: list[_Slot],
               groups: list[Group]) -> None:
    group = Group("assistant")
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and "text" in block:
            group.blocks.append(("text", _text(block, "text", residual)))
            slots.append((block, "text"))
        elif kind == "thinking" and "thinking" in block:
            text = _text(block, "thinking", residual)
            slots.append((block, "thinking"))
            signature = None
            if "signature" in block:
                signature = _text(block, "signature", residual)
                slots.append((block, "signature"))
            group.blocks.append(("thinking", text, "signature" in block, signature))
        elif kind == "redacted_thinking" and "data" in block:
            group.blocks.append(("redacted", _text(block, "data", residual)))
            slots.append((block, "data"))
        elif kind == "tool_use" and "input" in block and "id" in block and "name" in block:
            call_id, name = _text(block, "id", residual), _text(block, "name", residual)
            group.blocks.append(("call", call_id, name, block["input"]))
            slots += [(block, "id"), (block, "name"), (block, "input")]
    if group.blocks:
        groups.append(group)


def _user(content: list[Any], residual: bool, slots: list[_Slot],
          groups: list[Group]) -> None:
    texts: Group | None = None
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and "text" in block:
            if texts is None:
                texts = Group("user")
                groups.append(texts)
            texts.blocks.append(_text(block, "text", residual))
            slots.append((block, "text"))
        elif kind == "tool_result" and "tool_use_id" in block:
            texts = None
            call_id = _text(block, "tool_use_id", residual)
            slots.append((block, "tool_use_id"))
            result = Group("result", call_id=call_id, is_error=block.get("is_error") is True)
            groups.append(result)
            if "content" not in block:
                continue
            inner = block["content"]
            if (inner is None) if residual else isinstance(inner, str):
                result.blocks.append(inner)
                slots.append((block, "content"))
            elif isinstance(inner, list):
                for part in inner:
                    if isinstance(part, dict) and part.get("type") == "text" and "text" in part:
                        result.blocks.append(_text(part, "text", residual))
                        slots.append((part, "text"))
            elif not residual and inner is None:
                raise _Ambiguous
        else:
            texts = None


def split(entry: Any) -> Split:
    """Split ``entry`` (it is not changed): its residual, and the typed events' values."""
    try:
        copy = _decode(_encode(entry))
        slots, groups = _walk(copy, residual=False)
    except (_Ambiguous, msgspec.EncodeError, msgspec.DecodeError, TypeError, ValueError):
        return Split(entry, 0, [])
    if not groups:
        return Split(entry, 0, [])
    for container, key in slots:
        container[key] = None
    return Split(copy, len(slots), groups)


def join(residual: Any, values: list[Any], start: int = 0) -> int:
    """Put the moved values ``values[start:]`` (in the walk's order) back into
    ``residual``, in place, as many as it has places: the entry as it was split.

    :returns: the index of the first value left.
    :raises ValueError: fewer values than the residual has places.
    """
    slots, _ = _walk(residual, residual=True)
    end = start + len(slots)
    if end > len(values):
        left = len(values) - start
        msg = f"an entry has {len(slots)} moved values, its turn's typed events {left} left"
        raise ValueError(msg)
    for (container, key), value in zip(slots, values[start:end], strict=True):
        container[key] = value
    return end
