"""The mapping from transcript entries to dsh events (:func:`record`), and back
(:func:`rebuild`).

Each turn holds one ``claude-agent/entries``, what :mod:`._split` leaves of its entries,
followed by the typed events holding the rest: a user's text is a ``user/message``; the
consecutive assistant entries of one model call (the SDK writes one entry a content
block, all with the call's ``message.id``) one ``assistant/message`` (``text``,
``reasoning`` for thinking, ``tool-call`` for a tool use; the call's ``usage`` on it);
a tool result a ``tool/result`` answering its call.

Every event is inside a turn, and each append's events are whole turns (a turn left
open would be closed as a crash's by the next writer's load): a user's prompt (a user
entry with text and no tool result) opens a turn, ended by the next prompt or by the
append's end; entries an append starts with that are no prompt continue the run in a
turn of their own (triggered by this plugin), unless only whole entries (a snapshot,
a title) come before the prompt. Inside a turn each model call is a step, and the
results of its tool calls are in it. A turn ends ``completed``, or ``aborted`` when
calls of it are still unanswered (their results come in a later append: the SDK's
``eager`` flush mode).
"""

from __future__ import annotations

__all__ = ["PLUGIN", "REBUILT_FROM", "State", "rebuild", "record"]

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from msgspec import UNSET

from dsh_session_core import (
    AbortedReason,
    CompletedReason,
    Event,
    MessageTrigger,
    PluginSource,
    ReasoningBlock,
    Session,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    UserSource,
)
from dsh_session_core.events import (
    AssistantMessageData,
    StepData,
    ToolResultData,
    TurnEndData,
    TurnStart,
    TurnStartData,
    UserMessageData,
)

from ._split import Group, Split, join, split
from .events import ClaudeSummary

#: The plugin named as the trigger of a turn no prompt opened.
PLUGIN = "claude-agent"
#: The reason of a turn whose tool calls are answered in a later append.
PENDING = "the append ended before the results of its tool calls (a later append holds them)"

_encode = msgspec.json.encode
_decode = msgspec.json.decode


class State:
    """What a writer knows of a session's log between appends: the last turn's number,
    and the SDK's summary ``data`` as the last append left it (``None``: none yet)."""

    __slots__ = ("summary", "turns")

    def __init__(self, turns: int = 0, summary: dict[str, Any] | None = None) -> None:
        self.turns = turns
        self.summary = summary

    @classmethod
    def of(cls, events: Iterable[Event]) -> State:
        """The state of a log, read from its events."""
        state = cls()
        for event in events:
            if type(event) is TurnStart:
                state.turns = max(state.turns, event.data.turn)
            elif type(event) is ClaudeSummary:
                state.summary = event.data.data
        return state


def _usage(message: Any) -> TokenUsage | None:
    """The model call's usage, from an assistant entry's ``message.usage`` (``None``
    when it has no token counts)."""
    usage = message.get("usage") if isinstance(message, dict) else None
    if not isinstance(usage, dict):
        return None
    given, made = usage.get("input_tokens"), usage.get("output_tokens")
    if type(given) is not int or type(made) is not int or given < 0 or made < 0:
        return None
    read, write = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
    return TokenUsage(
        input_tokens=given, output_tokens=made,
        cache_read_tokens=read if type(read) is int and read > 0 else UNSET,
        cache_write_tokens=write if type(write) is int and write > 0 else UNSET)


def _assistant_blocks(group: Group) -> tuple[Any, ...]:
    blocks: list[Any] = []
    for block in group.blocks:
        kind = block[0]
        if kind == "text":
            blocks.append(TextBlock(text=block[1]))
        elif kind == "thinking":
            blocks.append(ReasoningBlock(text=block[1],
                                         signature=block[3] if block[2] else UNSET))
        elif kind == "redacted":
            blocks.append(ReasoningBlock(text="", redacted_data=block[1]))
        else:  # a tool use: its input as the JSON text of the call's arguments
            blocks.append(ToolCallBlock(id=block[1], name=block[2],
                                        arguments=_encode(block[3]).decode()))
    return tuple(blocks)


def _prompt(parts: Split) -> bool:
    """Whether an entry is a user's prompt: user text, and no tool result."""
    return bool(parts.groups) and all(g.kind == "user" for g in parts.groups)


def _turns(splits: Sequence[Split]) -> list[tuple[bool, list[int]]]:
    """The batch's entries grouped into turns: ``(opened by a prompt, indices)``. A
    prompt opens a turn, unless the turn so far holds only whole entries (a snapshot,
    a title before the prompt): it then joins it as its prompt."""
    turns: list[tuple[bool, list[int]]] = []
    for index, parts in enumerate(splits):
        prompt = _prompt(parts)
        if turns and prompt and not turns[-1][0] and not any(
                splits[i].groups for i in turns[-1][1]):
            turns[-1] = (True, [*turns[-1][1], index])
        elif not turns or prompt:
            turns.append((prompt, [index]))
        else:
            turns[-1][1].append(index)
    return turns


class _Writer:
    """Appends one batch's events into turns and steps (see the module docstring)."""

    def __init__(self, session: Session, state: State) -> None:
        self.session = session
        self.state = state
        self.turn = 0
        self.step = 0
        self.step_open = False
        self.message_id: Any = None
        self.answered = False
        self.calls: set[str] = set()
        #: The assistant message being gathered: the consecutive assistant entries of
        #: one model call (the SDK writes one entry a content block), and its usage.
        self.blocks: list[Any] = []
        self.usage: TokenUsage | None = None

    def open_turn(self, prompt: bool) -> None:
        self.turn = self.state.turns + 1
        source = UserSource() if prompt else PluginSource(plugin=PLUGIN)
        self.session.append("turn/start", TurnStartData(
            turn=self.turn, trigger=MessageTrigger(source=source)))
        self.state.turns = self.turn
        self.step, self.step_open, self.calls = 0, False, set()

    def open_step(self) -> None:
        self.close_step()
        self.step += 1
        self.session.append("step/start", StepData(turn=self.turn, step=self.step))
        self.step_open, self.answered, self.message_id = True, False, None

    def close_step(self) -> None:
        self.flush_message()
        if self.step_open:
            self.session.append("step/end", StepData(turn=self.turn, step=self.step))
            self.step_open = False

    def close_turn(self) -> None:
        self.close_step()
        reason: Any = AbortedReason(reason=PENDING) if self.calls else CompletedReason()
        self.session.append("turn/end", TurnEndData(turn=self.turn, reason=reason))

    def flush_message(self) -> None:
        """Append the assistant message gathered so far, if any."""
        if not self.blocks:
            return
        blocks, self.blocks = tuple(self.blocks), []
        usage, self.usage = self.usage, None
        self.session.append("assistant/message", AssistantMessageData(
            turn=self.turn, step=self.step, content=blocks,
            usage=usage if usage is not None else UNSET), surface_op="append")

    def entry(self, entry: Any, parts: Split) -> None:
        """The typed events of one entry (its ``claude-agent/entries`` is written)."""
        for group in parts.groups:
            if group.kind == "assistant":
                message = entry.get("message")
                message_id = message.get("id") if isinstance(message, dict) else None
                if (not self.step_open or self.answered or message_id is None
                        or message_id != self.message_id):
                    self.open_step()
                    self.message_id = message_id
                    self.usage = _usage(message)
                blocks = _assistant_blocks(group)
                self.calls.update(b.id for b in blocks if type(b) is ToolCallBlock)
                self.blocks.extend(blocks)
                continue
            self.flush_message()
            if group.kind == "user":
                content = tuple(TextBlock(text=t) for t in group.blocks)
                self.session.append("user/message", UserMessageData(
                    content=content, source=UserSource()), surface_op="append")
                continue
            if not self.step_open:
                self.open_step()
            self.calls.discard(group.call_id)
            self.session.append("tool/result", ToolResultData(
                turn=self.turn, step=self.step, call_id=group.call_id,
                content=tuple(TextBlock(text=t) for t in group.blocks),
                is_error=group.is_error), surface_op="append")
            self.answered = True


def record(session: Session, state: State, entries: Sequence[Any],
           summary: dict[str, Any] | None) -> None:
    """Append ``entries`` to ``session`` as whole turns (see the module docstring): in
    each, one ``claude-agent/entries`` with what is left of its entries, then their
    typed events; with ``summary`` (a main transcript's), the SDK's folded summary in
    the last turn, when the append changed it. ``state`` is brought up to date."""
    if not entries:
        return
    splits = [split(entry) for entry in entries]
    writer = _Writer(session, state)
    turns = _turns(splits)
    for number, (prompt, indices) in enumerate(turns, 1):
        writer.open_turn(prompt)
        data: dict[str, Any] = {"entries": [splits[i].residual for i in indices]}
        whole = [n for n, i in enumerate(indices) if not splits[i].groups]
        if whole:
            data["whole"] = whole
        session.append("claude-agent/entries", data)
        for i in indices:
            writer.entry(entries[i], splits[i])
        if number == len(turns) and summary is not None and summary != state.summary:
            writer.close_step()
            session.append("claude-agent/summary", {"data": summary})
            state.summary = summary
        writer.close_turn()


#: The event types an entry is rebuilt from: itself, and the typed events after it.
REBUILT_FROM = ("claude-agent/entries", "user/message", "assistant/message", "tool/result")


class _Line(msgspec.Struct):
    """A stored event line, its payload as plain JSON (dicts keep their keys' order)."""

    type: str
    data: Any = None


_decode_lines = msgspec.json.Decoder(_Line).decode


def _values(data: Any, out: list[Any]) -> None:
    """The moved values a typed event's payload (its wire form) holds, in order."""
    if not isinstance(data, dict):
        return
    if "callId" in data:  # a tool/result: the call it answers, then its texts
        out.append(data["callId"])
    content = data.get("content")
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            out.append(block["text"])
        elif kind == "reasoning":
            if "redactedData" in block:
                out.append(block["redactedData"])
            else:
                out.append(block["text"])
                if "signature" in block:
                    out.append(block["signature"])
        elif kind == "tool-call":
            out += (block["id"], block["name"], _decode(block["arguments"]))


def rebuild(lines: Iterable[bytes]) -> list[Any]:
    """The entries a log records, each as it was appended, from the stored lines of its
    events of the types :data:`REBUILT_FROM` (``store.read_lines``).

    :raises ValueError: a turn's typed events do not hold its entries' moved values (a
        log written by something else).
    """
    entries: list[Any] = []
    split_ones: list[Any] = []
    values: list[Any] = []
    for raw in lines:
        line = _decode_lines(raw)
        if line.type == "claude-agent/entries":
            _join_all(split_ones, values)
            data = line.data if isinstance(line.data, dict) else {}
            batch = data.get("entries")
            batch = batch if isinstance(batch, list) else []
            whole = set(data.get("whole") or ())
            entries.extend(batch)
            split_ones = [e for n, e in enumerate(batch) if n not in whole]
            values = []
        elif split_ones:
            _values(line.data, values)
    _join_all(split_ones, values)
    return entries


def _join_all(residuals: list[Any], values: list[Any]) -> None:
    """Put a turn's moved values back into its split entries, in order."""
    start = 0
    for residual in residuals:
        start = join(residual, values, start)
    if start != len(values):
        msg = f"a turn's typed events hold {len(values)} moved values, its entries {start}"
        raise ValueError(msg)
