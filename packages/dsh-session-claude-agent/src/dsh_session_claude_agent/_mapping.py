"""The mapping from transcript entries to dsh events (:func:`record`), and back
(:func:`rebuild`).

Each entry is a ``claude-agent/entry`` (what :mod:`._split` leaves of it), followed by
the typed events holding the rest: a user's text is a ``user/message``, an assistant
entry's blocks one ``assistant/message`` (``text``, ``reasoning`` for thinking,
``tool-call`` for a tool use; the model's ``usage`` on the first message of its call),
a tool result a ``tool/result`` answering its call.

Every event is inside a turn, and each append's events are whole turns (a turn left
open would be closed as a crash's by the next writer's load): a user's prompt (a user
entry with text and no tool result) opens a turn, ended by the next prompt or by the
append's end; entries an append starts with that are no prompt continue the run in a
turn of their own (triggered by this plugin). Inside a turn each model call (the
assistant entries of one ``message.id``, the SDK writing one entry a block) is a step,
and the results of its tool calls are in it. A turn ends ``completed``, or ``aborted``
when calls of it are still unanswered (their results come in a later append: the SDK's
``eager`` flush mode).
"""

from __future__ import annotations

__all__ = ["PLUGIN", "State", "rebuild", "record"]

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
    AssistantMessage,
    AssistantMessageData,
    StepData,
    ToolResult,
    ToolResultData,
    TurnEndData,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
)

from ._split import Group, join, split
from .events import ClaudeEntry, ClaudeSummary

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


class _Writer:
    """Appends one batch's events into turns and steps (see the module docstring)."""

    def __init__(self, session: Session, state: State) -> None:
        self.session = session
        self.state = state
        self.turn: int | None = None
        self.step = 0
        self.step_open = False
        self.message_id: Any = None
        self.answered = False
        self.calls: set[str] = set()

    def open_turn(self, prompt: bool) -> None:
        self.close_turn()
        self.turn = self.state.turns + 1
        source = UserSource() if prompt else PluginSource(plugin=PLUGIN)
        self.session.append("turn/start", TurnStartData(
            turn=self.turn, trigger=MessageTrigger(source=source)))
        self.state.turns = self.turn
        self.step = 0

    def open_step(self) -> None:
        assert self.turn is not None
        self.close_step()
        self.step += 1
        self.session.append("step/start", StepData(turn=self.turn, step=self.step))
        self.step_open, self.answered, self.message_id = True, False, None

    def close_step(self) -> None:
        if self.step_open and self.turn is not None:
            self.session.append("step/end", StepData(turn=self.turn, step=self.step))
            self.step_open = False

    def close_turn(self) -> None:
        if self.turn is None:
            return
        self.close_step()
        reason: Any = (AbortedReason(reason=PENDING) if self.calls else CompletedReason())
        self.session.append("turn/end", TurnEndData(turn=self.turn, reason=reason))
        self.turn, self.calls = None, set()

    def entry(self, entry: Any) -> None:
        parts = split(entry)
        groups = parts.groups
        prompt = bool(groups) and groups[0].kind == "user" and all(
            g.kind == "user" for g in groups)
        if prompt or self.turn is None:
            self.open_turn(prompt)
        assert self.turn is not None
        usage = None
        if groups and groups[0].kind == "assistant":
            message = entry.get("message")
            message_id = message.get("id") if isinstance(message, dict) else None
            if (not self.step_open or self.answered or message_id is None
                    or message_id != self.message_id):
                self.open_step()
                self.message_id = message_id
                usage = _usage(message)
        elif any(g.kind == "result" for g in groups) and not self.step_open:
            self.open_step()
        data: dict[str, Any] = {"entry": parts.residual}
        if groups:
            data["moved"] = parts.count
        self.session.append("claude-agent/entry", data)
        for group in groups:
            self.typed(group, usage)

    def typed(self, group: Group, usage: TokenUsage | None) -> None:
        session, turn = self.session, self.turn
        assert turn is not None
        if group.kind == "user":
            content = tuple(TextBlock(text=t) for t in group.blocks)
            session.append("user/message", UserMessageData(content=content, source=UserSource()),
                           surface_op="append")
        elif group.kind == "assistant":
            blocks = _assistant_blocks(group)
            for block in blocks:
                if type(block) is ToolCallBlock:
                    self.calls.add(block.id)
            session.append("assistant/message", AssistantMessageData(
                turn=turn, step=self.step, content=blocks,
                usage=usage if usage is not None else UNSET), surface_op="append")
        else:
            self.calls.discard(group.call_id)
            session.append("tool/result", ToolResultData(
                turn=turn, step=self.step, call_id=group.call_id,
                content=tuple(TextBlock(text=t) for t in group.blocks),
                is_error=group.is_error), surface_op="append")
            self.answered = True


def record(session: Session, state: State, entries: Sequence[Any],
           summary: dict[str, Any] | None) -> None:
    """Append ``entries`` to ``session`` as whole turns (see the module docstring); with
    ``summary`` (a main transcript's), the SDK's folded summary last, in the last turn.
    ``state`` is brought up to date."""
    if not entries:
        return
    writer = _Writer(session, state)
    for entry in entries:
        writer.entry(entry)
    if summary is not None:
        session.append("claude-agent/summary", {"data": summary})
        state.summary = summary
    writer.close_turn()


#: The typed event types whose content an entry's moved values are.
_TYPED = frozenset({UserMessage, AssistantMessage, ToolResult})


def _values(event: Event, out: list[Any]) -> None:
    for block in event.data.content:
        cls = type(block)
        if cls is TextBlock:
            out.append(block.text)
        elif cls is ReasoningBlock:
            if block.redacted_data is not UNSET:
                out.append(block.redacted_data)
            else:
                out.append(block.text)
                if block.signature is not UNSET:
                    out.append(block.signature)
        elif cls is ToolCallBlock:
            out.append(_decode(block.arguments))


def rebuild(events: Iterable[Event]) -> list[Any]:
    """The entries a log records, each as it was appended.

    :raises ValueError: an entry's typed events do not hold its moved values (a log
        written by something else).
    """
    entries: list[Any] = []
    residual: Any = None
    values: list[Any] | None = None

    def done() -> None:
        if values is not None:
            join(residual, values)

    for event in events:
        cls = type(event)
        if cls is ClaudeEntry:
            done()
            residual = event.data.entry
            values = [] if event.data.moved is not None else None
            entries.append(residual)
        elif values is not None and cls in _TYPED:
            _values(event, values)
    done()
    return entries
