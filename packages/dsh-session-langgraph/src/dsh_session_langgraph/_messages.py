"""The LangChain messages of the ``messages`` channel not recorded yet, their text
blocks and token usage, whether a graph's input holds a human message (which
:mod:`._turns` records in a run's turn), and the turn of a rewrite's marker
(:func:`write_turn`).

A ``HumanMessage`` is a ``user/message``; an ``AIMessage`` a step holding its
``assistant/message`` (text and tool-call blocks, its token usage); a ``ToolMessage``
the ``tool/call`` and ``tool/result`` of its call. Other messages (system, function,
chat) are kept in the checkpoint's blob only. So ``derive``, ``show``, search and the
viewer read the conversation.
"""

from __future__ import annotations

__all__ = ["ai_content", "blocks", "human_input", "new_messages", "usage", "write_turn"]

from typing import Any

import msgspec

from dsh_session_core import Event, Session

from ._index import ThreadIndex

_PLUGIN = {"kind": "injection", "source": {"kind": "plugin", "plugin": "langgraph"}}
_RECORDED_TYPES = frozenset({"human", "ai", "tool"})


def new_messages(index: ThreadIndex, value: Any) -> list[Any]:
    """The LangChain messages of a ``messages`` channel value not recorded yet (by
    message id), in order: ``[]`` when the value is not a list of messages."""
    if not isinstance(value, list):
        return []
    found: list[Any] = []
    for message in value:
        kind = getattr(message, "type", None)
        mid = getattr(message, "id", None)
        if not isinstance(kind, str) or not hasattr(message, "content"):
            return []  # not LangChain messages: nothing of it is recorded
        if kind in _RECORDED_TYPES and isinstance(mid, str) and mid not in index.messages:
            found.append(message)
    return found


def _append(session: Session, index: ThreadIndex, type: str, data: Any,
            **kwargs: Any) -> Event:
    event = session.append(type, data, **kwargs)
    index.fold((event,))
    return event


def write_turn(session: Session, index: ThreadIndex, type: str, data: Any) -> None:
    """Append one turn holding ``type``'s event (``data``), an injection from the plugin
    (a rewrite's ``langgraph/removed``); ``index`` follows each event appended."""
    turn = index.turn + 1
    _append(session, index, "turn/start", {"turn": turn, "trigger": _PLUGIN})
    _append(session, index, type, data)
    _append(session, index, "turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def human_input(value: Any) -> bool:
    """Whether a graph's input (the ``__start__`` channel's value) holds a human
    message: in its ``messages``, or as itself (a list of messages)."""
    if isinstance(value, dict):
        value = value.get("messages")
    items = value if isinstance(value, list | tuple) else [value]
    return any(getattr(m, "type", None) == "human" for m in items)


def blocks(content: Any) -> list[dict[str, Any]]:
    """The text blocks of a LangChain message's content (a string, or a list of parts
    of which the text ones are kept)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str) and part:
                blocks.append({"type": "text", "text": part})
            elif (isinstance(part, dict) and part.get("type") == "text"
                  and isinstance(part.get("text"), str) and part["text"]):
                blocks.append({"type": "text", "text": part["text"]})
    return blocks


def usage(message: Any) -> dict[str, int] | None:
    """An AIMessage's ``usage_metadata`` as core's ``TokenUsage`` (its wire form): the
    cached part taken out of the input count, as the vocabulary's counts do not overlap."""
    usage = getattr(message, "usage_metadata", None)
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_token_details") or {}
    cached = details.get("cache_read") if isinstance(details, dict) else None
    out: dict[str, int] = {
        "inputTokens": max(int(usage.get("input_tokens", 0)) - int(cached or 0), 0),
        "outputTokens": int(usage.get("output_tokens", 0))}
    if cached:
        out["cacheReadTokens"] = int(cached)
    return out


def ai_content(message: Any) -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """An ``AIMessage``'s blocks for ``assistant/message`` (its text, then a
    ``tool-call`` block a call) and its calls as (id, name, JSON arguments)."""
    calls = [(c.get("id") or c.get("name") or "call", c.get("name") or "",
              msgspec.json.encode(c.get("args") or {}).decode())
             for c in getattr(message, "tool_calls", None) or []]
    content = blocks(message.content) + [
        {"type": "tool-call", "id": cid, "name": name, "arguments": args}
        for cid, name, args in calls]
    return content, calls
