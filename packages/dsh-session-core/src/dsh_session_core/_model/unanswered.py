"""Unanswered tool calls: the calls of a log that no ``tool/result`` answers.

Every provider refuses a request holding a tool call without its result (OpenAI and
Anthropic answer HTTP 400), so such a call is worth a flag wherever a log is looked at:
``validate --strict`` fails on it, ``show`` and the viewer mark it. This module only
finds them; it changes nothing. The builders answer a call left open when its step ends
(:mod:`.builders`), crash repair answers the calls of an interrupted turn
(:mod:`.repair`), and the provider conversions answer whatever is left in
the request they build (:mod:`.providers._source`).

A call is announced by a ``tool-call`` block of an ``assistant/message`` (what derivation
sends to the model) or by a ``tool/call`` event; a later ``tool/result`` with its
``callId`` answers it. It works on typed and opaque events alike, and reads the payload
of those three types only.
"""

from __future__ import annotations

__all__ = ["UNANSWERED_TOOL_TEXT", "UnansweredCall", "announced_calls", "describe_unanswered",
           "unanswered_calls"]

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..events import AssistantMessage, Event, OpaqueEvent, ToolCall, ToolResult, TurnEnd, TurnStart
from ..vocabulary import ToolCallBlock

#: The text of the error result that answers a call nothing answered: the builders' at a
#: step's end, and the provider conversions' in a request (crash repair has its own,
#: :data:`~.repair.INTERRUPTED_TOOL_TEXT`, naming the crash).
UNANSWERED_TOOL_TEXT: Final = "Tool call not answered: no result was recorded."


@dataclass(frozen=True, slots=True)
class UnansweredCall:
    """A tool call of a log with no ``tool/result`` after it.

    :ivar call_id: its ``callId`` (the block's ``id``).
    :ivar name: the tool's name (``"?"`` when the log does not say).
    :ivar seq: the seq of its ``tool/call``, else of the message announcing it.
    :ivar message_seq: the seq of the ``assistant/message`` announcing it (``None`` when
        only a ``tool/call`` names it: derivation then sends no call to the model).
    :ivar open_turn: it is in the log's last turn, still open (a crash cut the log, or
        a writer is running the tool): crash repair answers it on the next load.
    """

    call_id: str
    name: str
    seq: int
    message_seq: int | None
    open_turn: bool

    def describe(self, *, where: bool = True) -> str:
        """One sentence naming the call, where it is (unless ``where`` is false: the
        caller says it), and what to do."""
        return describe_unanswered(self, where=where)


def describe_unanswered(call: UnansweredCall, *, where: bool = True) -> str:
    """``tool call 'c1' (bash, tool/call at seq 59) has no tool/result: ...``"""
    kind = "tool/call" if call.message_seq != call.seq else "assistant/message"
    at = f", {kind} at seq {call.seq}" if where else ""
    head = f"tool call {call.call_id!r} ({call.name}{at}) has no tool/result"
    if call.open_turn:
        return (f"{head}: its turn is still open (a crash, or a writer running the tool); "
                f"`dsh-session repair` answers it")
    return (f"{head}: a provider refuses such a request (the dsh_session_core.providers "
            f"conversions answer it with an error result)")


def _get(data: Any, name: str, wire: str) -> Any:
    if isinstance(data, Mapping):  # an opaque event: read-only JSON
        return data.get(wire)
    return getattr(data, name, None)


def announced_calls(data: Any) -> Iterable[tuple[str, str]]:
    """The ``(id, name)`` of each ``tool-call`` block of an assistant message's data."""
    content = _get(data, "content", "content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return
    for block in content:
        if block.__class__ is ToolCallBlock:
            yield block.id, block.name
        elif isinstance(block, Mapping) and block.get("type") == "tool-call":
            call_id, name = block.get("id"), block.get("name")
            if isinstance(call_id, str):
                yield call_id, name if isinstance(name, str) else "?"


def _type(event: Event) -> str:
    cls = event.__class__
    if cls is AssistantMessage:
        return "assistant/message"
    if cls is ToolCall:
        return "tool/call"
    if cls is ToolResult:
        return "tool/result"
    if cls is TurnStart:
        return "turn/start"
    if cls is TurnEnd:
        return "turn/end"
    return event.type if cls is OpaqueEvent else ""


def unanswered_calls(events: Iterable[Event]) -> list[UnansweredCall]:
    """The calls of a log that no later ``tool/result`` answers, in the order they were
    first announced.

    A call id announced again after its result is a new call; a result with no call
    before it is not this module's concern (``validate`` and derivation name it).
    """
    # call id -> [name, seq, message seq]; insertion-ordered, so the first announcement
    # keeps its place.
    pending: dict[str, list[Any]] = {}
    last_start: int | None = None  # the seq of the last turn/start no turn/end closed
    for event in events:
        t = _type(event)
        if not t:
            continue
        data = event.data
        if t == "assistant/message":
            for call_id, name in announced_calls(data):
                entry = pending.get(call_id)
                if entry is None:
                    pending[call_id] = [name, event.seq, event.seq]
                elif entry[2] is None:  # its tool/call came first
                    entry[2] = event.seq
        elif t == "tool/call":
            call_id = _get(data, "call_id", "callId")
            if not isinstance(call_id, str):
                continue
            name = _get(data, "name", "name")
            entry = pending.get(call_id)
            if entry is None:
                pending[call_id] = [name if isinstance(name, str) else "?", event.seq, None]
            else:
                entry[1] = event.seq  # the tool/call is where it ran
        elif t == "tool/result":
            call_id = _get(data, "call_id", "callId")
            if isinstance(call_id, str):
                pending.pop(call_id, None)
        elif t == "turn/start":
            last_start = event.seq if isinstance(event.seq, int) else last_start
        elif t == "turn/end":  # (an opaque event of another type leaves the turn open)
            last_start = None
    return [
        UnansweredCall(call_id, name, seq, message_seq,
                       last_start is not None and isinstance(seq, int) and seq > last_start)
        for call_id, (name, seq, message_seq) in pending.items()
    ]
