"""The LangChain messages of the ``messages`` channel not recorded yet, their text
blocks and token usage (which :mod:`._turns` records in a run's turn), and the turn a
rewritten log gives each of its events (:func:`write_turn`).

In a log ``prune`` or ``delete_for_runs`` rewrites, each kept ``put`` and each task's
writes is one turn: ``turn/start``,
the plugin's event, then (for a ``put`` of the root namespace whose ``messages`` channel
changed) the messages not recorded before, ``turn/end``. A ``HumanMessage`` is a
``user/message`` (and makes the turn's trigger a message from the user); an
``AIMessage`` a step holding its ``assistant/message`` (text and tool-call blocks, its
token usage) and a ``tool/call`` per call; a ``ToolMessage`` a step holding the
``tool/result`` that answers its call, by the call's seq even when the call was made in
an earlier turn. Other messages (system, function, chat) are kept in the checkpoint's
blob only. So ``derive``, ``show``, search and the viewer read the conversation.
"""

from __future__ import annotations

__all__ = ["ai_content", "blocks", "new_messages", "usage", "write_turn"]

from collections.abc import Sequence
from typing import Any

import msgspec

from dsh_session_core import Event, Session

from ._index import ThreadIndex

_USER = {"kind": "message", "source": {"kind": "user"}}
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


def write_turn(session: Session, index: ThreadIndex, type: str, data: Any,
               messages: Sequence[Any] = ()) -> None:
    """Append one turn: ``type``'s event (``data``), then the events of ``messages``
    (see the module's docstring); ``index`` follows each event appended."""
    first_user = bool(messages) and getattr(messages[0], "type", None) == "human"
    turn = index.turn + 1
    _append(session, index, "turn/start",
            {"turn": turn, "trigger": _USER if first_user else _PLUGIN})
    source = (_append(session, index, type, data).seq,)
    step = 0
    for message in messages:
        step = _record(session, index, turn, step, message, source)
    _append(session, index, "turn/end", {"turn": turn, "reason": {"kind": "completed"}})


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


def _record(session: Session, index: ThreadIndex, turn: int, step: int, message: Any,
            source: tuple[int, ...]) -> int:
    """Append the events of one message; return the turn's last step number."""
    index.messages.add(message.id)
    kind = message.type
    if kind == "human":
        content = blocks(message.content)
        if content:
            _append(session, index, "user/message",
                    {"content": content, "source": {"kind": "user"}},
                    surface_op="append", source_event_seqs=source)
        return step
    step += 1
    if kind == "ai":
        content, calls = ai_content(message)
        if not content:
            return step - 1
        _append(session, index, "step/start", {"turn": turn, "step": step})
        assistant: dict[str, Any] = {"turn": turn, "step": step, "content": content}
        found = usage(message)
        if found is not None:
            assistant["usage"] = found
        _append(session, index, "assistant/message", assistant, surface_op="append",
                source_event_seqs=source)
        for cid, name, args in calls:
            _append(session, index, "tool/call", {"turn": turn, "step": step,
                                                  "callId": cid, "name": name,
                                                  "arguments": args})
    else:  # a tool message answering a call
        call_id = getattr(message, "tool_call_id", None) or "call"
        call_seq = index.calls.get(call_id)
        _append(session, index, "step/start", {"turn": turn, "step": step})
        _append(session, index, "tool/result",
                {"turn": turn, "step": step, "callId": call_id,
                 "content": blocks(message.content) or [{"type": "text", "text": ""}],
                 "isError": getattr(message, "status", "success") == "error"},
                surface_op="append",
                source_event_seqs=(call_seq,) if call_seq is not None else source)
    _append(session, index, "step/end", {"turn": turn, "step": step})
    return step
