"""Crash repair (spec §7): the events that close a log whose last turn never ended.

A backend that reloads a log cut short mid-turn appends these closers, so the log is
balanced again: a synthetic error result for each tool call the model asked for in the
still-open step, then ``step/end`` if a step is open, then ``turn/end`` with reason
``interrupted``. Every event already in the log is kept; nothing is deleted, rewritten or
reordered. Repair knows nothing about compaction.
"""

from __future__ import annotations

__all__ = ["INTERRUPTED_TOOL_TEXT", "interrupted_turn_closers"]

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._base.json_values import thaw
from .._schema.decode import ops_first
from ..events import (
    Event,
    StepData,
    StepEnd,
    ToolError,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
)
from ..vocabulary import InterruptedReason, TextBlock

#: The content of every synthetic tool result.
INTERRUPTED_TOOL_TEXT = "Tool call interrupted by a crash; no result was recorded."

#: The types whose payload the scan reads (``turn/end`` and ``step/end`` it only counts).
_READS_PAYLOAD = frozenset(
    {"turn/start", "step/start", "assistant/message", "tool/call", "tool/result"}
)


@dataclass(slots=True)
class _Pending:
    """A tool call announced by an assistant message and not answered yet."""

    step: Any
    call_seq: int | None = None  # the seq of its ``tool/call``, once one was logged


def _payload(event: Event) -> dict[str, Any]:
    """The wire-shape payload of a typed or opaque event (``{}`` when it is no object)."""
    data = thaw(event.data)
    return data if isinstance(data, dict) else {}


def _call_id(value: Any) -> str | None:
    """A call id, or ``None`` when it is not a string (only a corrupt opaque event holds
    one; a typed result could not carry it anyway)."""
    return value if isinstance(value, str) else None


def interrupted_turn_closers(events: Iterable[Event]) -> list[Event]:
    """The events to append to a loaded log so that its last turn is closed.

    Pure: the input is neither changed nor kept. Works on typed and opaque events alike.

    :param events: the loaded log in order (a committed prefix, perhaps with a crash tail).
    :returns: ``[]`` when the log is empty or its last turn ended (so running this again
        after appending its result gives ``[]``); otherwise the synthetic ``tool/result``
        events (in the order their calls were announced), then ``step/end`` if a step is
        open, then ``turn/end`` (reason ``interrupted``). Their seqs follow the *last
        event's seq* (not the log's length) and they all carry the last event's time.
    """
    log = events if isinstance(events, Sequence) else list(events)
    if not log:
        return []
    # A turn/end resets the whole scan state, so only what follows the last one counts:
    # a reloaded log of any length costs the length of its tail (nothing, when balanced).
    start = len(log)
    while start > 0 and log[start - 1].type != "turn/end":
        start -= 1
    if start == len(log):
        return []
    open_turn: Any = None
    open_step: Any = None
    # Insertion-ordered: a re-announced id keeps its first position (and loses its call).
    pending: dict[str, _Pending] = {}
    last: Event | None = None
    for event in itertools.islice(log, start, None):
        last = event
        t = event.type
        if t == "turn/end":
            open_turn = open_step = None
            pending.clear()
        elif t == "step/end":
            # A call left unanswered in a closed step gets no synthetic result.
            open_step = None
            pending.clear()
        elif t in _READS_PAYLOAD:
            data = _payload(event)
            if t == "turn/start":
                open_turn, open_step = data.get("turn"), None
                pending.clear()
            elif t == "step/start":
                open_step = data.get("step")
            elif t == "assistant/message":
                for block in data.get("content") or ():
                    if not isinstance(block, dict) or block.get("type") != "tool-call":
                        continue
                    call_id = _call_id(block.get("id"))
                    if call_id is not None:
                        pending[call_id] = _Pending(step=data.get("step"))
            else:  # tool/call or tool/result
                call_id = _call_id(data.get("callId"))
                if call_id is None or call_id not in pending:
                    continue  # a call no assistant message announced gets no result
                if t == "tool/call":
                    pending[call_id].call_seq = event.seq
                else:
                    del pending[call_id]  # answered

    if open_turn is None or last is None:
        return []
    # Closers continue from the last event and reuse its time: no clock value is invented.
    seq, time = last.seq + 1, last.time
    closers: list[Event] = []
    for call_id, call in pending.items():
        result = ToolResultData(
            turn=open_turn,
            step=call.step,
            call_id=call_id,
            content=(TextBlock(text=INTERRUPTED_TOOL_TEXT),),
            is_error=True,
            error=ToolError(name="InterruptedError", code="interrupted"),
        )
        closer: Event = ToolResult(seq=seq, time=time, data=result, surface_op="append")
        if call.call_seq is not None:
            # Written as the reference writes it (surfaceOp first), so kept verbatim.
            closer = ops_first(
                ToolResult(
                    seq=seq,
                    time=time,
                    data=result,
                    source_event_seqs=(call.call_seq,),
                    surface_op="append",
                )
            )
        closers.append(closer)
        seq += 1
    # The results come first, so the step is balanced before it closes.
    if open_step is not None:
        closers.append(StepEnd(seq=seq, time=time, data=StepData(turn=open_turn, step=open_step)))
        seq += 1
    reason = InterruptedReason()
    closers.append(TurnEnd(seq=seq, time=time, data=TurnEndData(turn=open_turn, reason=reason)))
    return closers
