"""How an ADK event is written to a dsh log: ``adk/event`` (the event whole), then the
dsh message events its content maps onto, inside turns and steps.

A turn is an ADK invocation: it opens at the first event of an invocation and closes at
the agent's final response, or when an event of another invocation comes. The service's
own records are turn-enclosed too (:func:`enclosed`).
A model event with content is a step (``step/start``, ``assistant/message``, a
``tool/call`` per function call); the function responses answering its calls are
``tool/result`` events, and the step ends when every call is answered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from google.adk.events.event import Event as AdkEvent

from dsh_session_core import Session

__all__ = ["TurnCursor", "call_id", "enclosed", "end_turn", "map_event", "token_usage"]

_USER = {"kind": "message", "source": {"kind": "user"}}
_AGENT = {"kind": "message", "source": {"kind": "plugin", "plugin": "adk"}}
_SERVICE = {"kind": "injection", "source": {"kind": "plugin", "plugin": "adk"}}


@dataclass
class TurnCursor:
    """Where the log is: the open turn and step, and the step's unanswered calls."""

    turn: int = 0
    turn_open: bool = False
    step: int = 0
    step_open: bool = False
    calls: set[str] = field(default_factory=set)
    invocation: str | None = None

    def see(self, event: Any) -> None:
        """Follow one dsh event of the log (when it is read back)."""
        t = event.type
        if t == "turn/start":
            self.turn, self.turn_open, self.step, self.step_open = event.data.turn, True, 0, False
            self.calls = set()
        elif t == "turn/end":
            self.turn_open = self.step_open = False
            self.calls = set()
        elif t == "step/start":
            self.step, self.step_open, self.calls = event.data.step, True, set()
        elif t == "step/end":
            self.step_open = False
            self.calls = set()
        elif t == "tool/call":
            self.calls.add(event.data.call_id)
        elif t == "tool/result":
            self.calls.discard(event.data.call_id)
        elif t == "adk/event":
            self.invocation = event.data.event.get("invocationId")


def _append(session: Session, cursor: TurnCursor, type: str, data: dict[str, Any],
            **kwargs: Any) -> int:
    event = session.append(type, data, **kwargs)
    cursor.see(event)
    return event.seq


def _end_step(session: Session, cursor: TurnCursor) -> None:
    if cursor.step_open:
        _append(session, cursor, "step/end", {"turn": cursor.turn, "step": cursor.step})


def end_turn(session: Session, cursor: TurnCursor, reason: str = "completed") -> None:
    """Close the open step and turn, if any, with ``reason``'s kind."""
    if cursor.turn_open:
        _end_step(session, cursor)
        _append(session, cursor, "turn/end", {"turn": cursor.turn, "reason": {"kind": reason}})


def _start_turn(session: Session, cursor: TurnCursor, trigger: dict[str, Any],
                invocation: str) -> None:
    if not cursor.turn_open:
        _append(session, cursor, "turn/start", {"turn": cursor.turn + 1, "trigger": trigger})
    cursor.invocation = invocation


def enclosed(session: Session, cursor: TurnCursor, type: str, data: dict[str, Any],
             reason: str = "completed") -> None:
    """Append a record of the service (``adk/session``, ``adk/state``, ``adk/deleted``)
    inside a turn: the open one, else a one-shot turn of its own (triggered by an
    injection from the plugin), so that every event of the log is turn-enclosed."""
    if cursor.turn_open:
        _append(session, cursor, type, data)
        return
    _append(session, cursor, "turn/start", {"turn": cursor.turn + 1, "trigger": _SERVICE})
    _append(session, cursor, type, data)
    end_turn(session, cursor, reason)


def call_id(id: str | None, name: str | None) -> str:
    """A function call's id, or its name when the model gave none."""
    return id or name or "call"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def token_usage(metadata: Any) -> dict[str, int] | None:
    """An ADK event's ``usage_metadata`` (Gemini's counts) as core's ``TokenUsage``
    (its wire form), or ``None`` when the model reported neither input nor output.

    The vocabulary's counts do not overlap: Gemini's ``prompt_token_count`` includes the
    cached part (``cached_content_token_count``), which is taken out of ``inputTokens``.
    ``outputTokens`` counts the thoughts too (``candidates_token_count`` does not), as
    OpenAI's output count does and as core's recorders keep it; ``reasoningTokens`` is
    ``thoughts_token_count``. Tool-use prompt tokens are left out (no field holds them).
    """
    if metadata is None:
        return None
    prompt = _count(metadata.prompt_token_count)
    candidates = _count(metadata.candidates_token_count)
    if prompt is None and candidates is None:
        return None
    cached = _count(metadata.cached_content_token_count)
    thoughts = _count(metadata.thoughts_token_count)
    usage = {"inputTokens": max((prompt or 0) - (cached or 0), 0),
             "outputTokens": (candidates or 0) + (thoughts or 0)}
    if cached is not None:
        usage["cacheReadTokens"] = cached
    if thoughts is not None:
        usage["reasoningTokens"] = thoughts
    return usage


def map_event(session: Session, cursor: TurnCursor, event: AdkEvent,
              dump: dict[str, Any]) -> None:
    """Append ``event`` to ``session``: ``adk/event`` with ``dump``, then the dsh
    events of its content (see the module's docstring)."""
    if cursor.turn_open and event.invocation_id != cursor.invocation:
        end_turn(session, cursor)
    parts = event.content.parts if event.content and event.content.parts else []
    texts = [p.text for p in parts if p.text and not p.thought]
    thoughts = [p.text for p in parts if p.text and p.thought]
    calls = [p.function_call for p in parts if p.function_call]
    responses = [p.function_response for p in parts if p.function_response]
    user = event.author == "user" and not responses
    model = not user and bool(texts or thoughts or calls)
    _start_turn(session, cursor, _USER if user else _AGENT, event.invocation_id)
    if model:
        _end_step(session, cursor)
        _append(session, cursor, "step/start", {"turn": cursor.turn, "step": cursor.step + 1})
    invocation = cursor.invocation
    source = [_append(session, cursor, "adk/event", {"event": dump})]
    cursor.invocation = invocation
    if user and texts:
        _append(session, cursor, "user/message",
                {"content": [{"type": "text", "text": t} for t in texts],
                 "source": {"kind": "user"}},
                surface_op="append", source_event_seqs=source)
    elif model:
        content: list[dict[str, Any]] = [{"type": "reasoning", "text": t} for t in thoughts]
        content += [{"type": "text", "text": t} for t in texts]
        content += [{"type": "tool-call", "id": call_id(c.id, c.name), "name": c.name or "",
                     "arguments": json.dumps(c.args or {})} for c in calls]
        message: dict[str, Any] = {"turn": cursor.turn, "step": cursor.step,
                                   "content": content}
        usage = token_usage(event.usage_metadata)
        if usage is not None:
            message["usage"] = usage
        _append(session, cursor, "assistant/message", message,
                surface_op="append", source_event_seqs=source)
        for c in calls:
            _append(session, cursor, "tool/call",
                    {"turn": cursor.turn, "step": cursor.step, "callId": call_id(c.id, c.name),
                     "name": c.name or "", "arguments": json.dumps(c.args or {})})
        if not calls:
            _end_step(session, cursor)
    if responses and cursor.step_open:
        for r in responses:
            rid = call_id(r.id, r.name)
            if rid not in cursor.calls:
                continue
            _append(session, cursor, "tool/result",
                    {"turn": cursor.turn, "step": cursor.step, "callId": rid,
                     "content": [{"type": "text", "text": json.dumps(r.response or {})}],
                     "isError": False},
                    surface_op="append", source_event_seqs=source)
        if not cursor.calls:
            _end_step(session, cursor)
    if event.author != "user" and not calls and event.is_final_response():
        end_turn(session, cursor)
