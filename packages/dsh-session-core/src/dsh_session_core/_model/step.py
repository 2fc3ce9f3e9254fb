"""The step builder: :class:`Step`, what ``turn.step()`` returns, after its ``step/start``.

A step streams chunks, assembles the assistant message, logs tool calls and their
results, and answers a call left without a result before it closes (the builders'
rules, :mod:`.builders`).
"""

from __future__ import annotations

__all__ = ["Step"]

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import UNSET

from ..errors import DshSessionError
from ..events import (
    AssistantChunkData,
    AssistantMessageData,
    Event,
    StepData,
    ToolCallData,
    ToolResultData,
)
from ..vocabulary import (
    AbortedFinish,
    ErrorFinish,
    FinishChunk,
    FinishReason,
    MaxTokensFinish,
    ReasoningDeltaChunk,
    StreamChunk,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
)
from .append_checks import checked_seqs
from .builders import (
    CHUNKS,
    USAGE,
    Content,
    ToolCallRef,
    TurnStateError,
    as_wire,
    check_content,
    check_object,
    content_wire,
    finish_of,
    kind_of,
    schema_error,
    wrong_type,
)
from .built import content_blocks, usage_of
from .unanswered import UNANSWERED_TOOL_TEXT, announced_calls, unanswered_calls

if TYPE_CHECKING:
    from .turn import Turn

_to_builtins = msgspec.to_builtins


class Step:
    """An open step of a turn: what ``turn.step()`` returns, after its ``step/start``.

    Use it as a context manager (``with turn.step() as step:``), or call :meth:`end`.
    """

    __slots__ = ("_append", "_built", "_calls", "_chunk_entry", "_chunk_seqs", "_fast",
                 "_open_ids", "_own", "_results", "_session", "_turn", "_turn_number",
                 "end_event", "number", "start_event")

    def __init__(self, turn: Turn, number: int, start: Event) -> None:
        self._turn = turn
        self._session = turn.session
        self._append = turn.session.append  # bound once: chunks come by the thousand
        self._built = turn.session._append_built
        # The types it may log fast (:mod:`.built`); assistant/chunk's, read per chunk.
        self._fast = turn._fast
        self._chunk_entry = turn._fast.get("assistant/chunk")
        self._turn_number = turn.number
        #: The step number within its turn (1, 2, ...).
        self.number = number
        #: The logged ``step/start``.
        self.start_event = start
        #: The logged ``step/end``, once the step ended.
        self.end_event: Event | None = None
        # The seqs of the chunks streamed since the last assistant/message: the next
        # message's provenance, as the reference's loop records it.
        self._chunk_seqs: list[int] = []
        self._calls: dict[str, ToolCallRef] = {}
        self._results: dict[str, int] = {}
        # What spares the step's end a scan of its events for unanswered calls: how many
        # events it logged itself besides the chunks in _chunk_seqs, and the call ids its
        # own events announced and did not answer (a superset of what the scan would find,
        # while every event since step/start is the step's own).
        self._own = 0
        self._open_ids: set[object] = set()

    def __repr__(self) -> str:
        state = "ended" if self.end_event is not None else "open"
        return f"<Step {self.number} of turn {self._turn_number}, {state}>"

    @property
    def turn(self) -> Turn:
        """The turn it belongs to."""
        return self._turn

    def _check_open(self, what: str) -> None:
        if self.end_event is not None:
            msg = (
                f"step {self.number} of turn {self._turn_number} has ended (step/end at "
                f"seq {self.end_event.seq}): cannot {what}; start the next with turn.step()"
            )
            raise TurnStateError(msg)

    def chunk(self, chunk: StreamChunk | Mapping[str, Any]) -> Event:
        """Append one ``assistant/chunk`` (a :data:`~dsh_session_core.vocabulary.
        StreamChunk` or its wire dict). A ``finish`` chunk also records how the model
        call ended, for the turn's end reason."""
        if self.end_event is not None:
            self._check_open("append an assistant/chunk")
        cls = chunk.__class__
        if cls is TextDeltaChunk or cls is ReasoningDeltaChunk:
            # The chunks of a stream, one per token or so: checked inline, and no finish.
            if chunk.index.__class__ is not int or chunk.text.__class__ is not str:  # type: ignore[union-attr]
                chunk = _to_builtins(chunk)  # for append to refuse, with its path
            elif self._chunk_entry is not None:
                # Its fields checked: the payload append would decode, made directly.
                event = self._built(self._chunk_entry, AssistantChunkData(
                    turn=self._turn_number, step=self.number, chunk=chunk))  # type: ignore[arg-type]
                self._chunk_seqs.append(event.seq)
                return event
            event = self._append(
                "assistant/chunk", {"turn": self._turn_number, "step": self.number, "chunk": chunk}
            )
            self._chunk_seqs.append(event.seq)
            return event
        if not isinstance(chunk, msgspec.Struct | Mapping):
            raise wrong_type(self._session, "assistant/chunk", "$.chunk", "step.chunk()",
                              chunk, "a StreamChunk (TextDeltaChunk, FinishChunk...) or its "
                              "wire dict")
        event = self._append(
            "assistant/chunk",
            {"turn": self._turn_number, "step": self.number, "chunk": as_wire(chunk, CHUNKS)},
        )
        self._chunk_seqs.append(event.seq)
        data = event.data
        if data.__class__ is AssistantChunkData and data.chunk.__class__ is FinishChunk:
            self._finished(data.chunk.reason)
        return event

    def assistant(
        self,
        content: Content,
        *,
        usage: TokenUsage | Mapping[str, Any] | None = None,
        finish: FinishReason | Mapping[str, Any] | None = None,
        source_event_seqs: Iterable[int] | None = None,
    ) -> Event:
        """Append the step's assembled ``assistant/message``.

        :param content: a string (one text block) or blocks (``TextBlock``,
            ``ToolCallBlock``... or wire dicts).
        :param usage: the call's token accounting, when the adapter reported it.
        :param finish: how the model call ended, when no ``finish`` chunk said so. Not
            logged (the message has no such field): it only sets the turn's end reason
            (``max-tokens``, ``error``, ``aborted``).
        :param source_event_seqs: provenance; by default the seqs of the chunks streamed
            in this step since its last message (omitted when there are none).
        """
        if self.end_event is not None:
            self._check_open("append an assistant/message")
        session = self._session
        entry = self._fast.get("assistant/message")
        if entry is not None and finish is None:
            blocks = content_blocks(content)
            token_usage = usage_of(usage)
            if blocks is not None and token_usage is not None:
                # What the dict path would log: made directly, the provenance checked
                # as append checks it (the step's own chunk seqs are ints).
                if source_event_seqs is not None:
                    seqs = checked_seqs("assistant/message", source_event_seqs,
                                        len(session._events))
                else:
                    seqs = tuple(self._chunk_seqs) if self._chunk_seqs else UNSET
                event = self._built(entry, AssistantMessageData(
                    turn=self._turn_number, step=self.number, content=blocks,
                    usage=token_usage), "append", seqs)
                self._logged_message(event)
                return event
        check_content(session, "assistant/message", "step.assistant()", content)
        if usage is not None:
            check_object(session, "assistant/message", "$.usage", "step.assistant()", usage,
                          "usage= as a TokenUsage or its wire dict")
        finished = None if finish is None else finish_of(session, finish)
        data: dict[str, Any] = {"turn": self._turn_number, "step": self.number,
                                "content": content_wire(content)}
        if usage is not None:
            data["usage"] = as_wire(usage, USAGE)
        if source_event_seqs is None and self._chunk_seqs:
            source_event_seqs = self._chunk_seqs
        event = self._session.append("assistant/message", data, surface_op="append",
                                     source_event_seqs=source_event_seqs)
        self._logged_message(event)
        if finished is not None:
            self._finished(finished)
        return event

    def _logged_message(self, event: Event) -> None:
        """Note a logged assistant/message: its chunks are behind it, its calls open."""
        self._own += len(self._chunk_seqs) + 1
        self._chunk_seqs = []
        for call_id, _ in announced_calls(event.data):
            self._open_ids.add(call_id)

    def _finished(self, finish: FinishReason) -> None:
        turn = self._turn
        if isinstance(finish, ErrorFinish | AbortedFinish):
            if turn._finish is None or isinstance(turn._finish[1], MaxTokensFinish):
                turn._finish = (self.number, finish)
        elif isinstance(finish, MaxTokensFinish) and turn._finish is None:
            turn._finish = (self.number, finish)

    def tool_call(
        self,
        call: ToolCallBlock | Mapping[str, Any] | str,
        name: str | None = None,
        arguments: str | None = None,
    ) -> ToolCallRef:
        """Append a ``tool/call``: from the message's ``ToolCallBlock`` or its wire dict
        (``{"type": "tool-call", "id": ..., "name": ..., "arguments": ...}``, as
        :meth:`assistant` takes it), or its id, name and raw ``arguments`` text. Returns
        the reference :meth:`tool_result` takes.

        :raises TurnStateError: the step ended, or the id was called already in it.
        :raises SchemaError: ``call`` is none of those (or the dict is no tool-call block).
        """
        if self.end_event is not None:
            self._check_open("append a tool/call")
        if isinstance(call, ToolCallBlock):
            call_id, name, arguments = call.id, call.name, call.arguments
        elif isinstance(call, str):
            call_id = call
        elif isinstance(call, Mapping):
            call_id, name, arguments = self._call_of(call, name, arguments)
        else:
            raise wrong_type(self._session, "tool/call", "$", "step.tool_call()", call,
                              "a ToolCallBlock, its wire dict {\"type\": \"tool-call\", "
                              "\"id\", \"name\", \"arguments\"}, or a call id (str) with "
                              "its name and arguments")
        if call_id in self._calls:
            msg = (
                f"tool call {call_id!r} was already logged in step {self.number} of turn "
                f"{self._turn_number} (seq {self._calls[call_id].seq}): each call id once"
            )
            raise TurnStateError(msg)
        if name is None or arguments is None:
            msg = (
                f"tool call {call_id!r} needs its name and arguments: "
                f"step.tool_call(call_id, name, arguments), or pass its ToolCallBlock"
            )
            raise TurnStateError(msg)
        entry = self._fast.get("tool/call")
        if (entry is not None and call_id.__class__ is str and name.__class__ is str
                and arguments.__class__ is str):
            event = self._built(entry, ToolCallData(
                turn=self._turn_number, step=self.number, call_id=call_id, name=name,
                arguments=arguments))
        else:
            event = self._session.append(
                "tool/call",
                {"turn": self._turn_number, "step": self.number, "callId": call_id,
                 "name": name, "arguments": arguments},
            )
        ref = ToolCallRef(event.seq, call_id, name, arguments)
        self._calls[call_id] = ref
        self._own += 1
        self._open_ids.add(call_id)
        return ref

    def _call_of(self, call: Mapping[str, Any], name: str | None,
                 arguments: str | None) -> tuple[str, str, str]:
        """A ``tool-call`` block's wire dict read as the block (its keys as the
        vocabulary spells them), or the error naming what is wrong with it."""
        if name is not None or arguments is not None:
            msg = ("step.tool_call() takes a tool-call block, or a call id with its name and "
                   "arguments: not a block and a name or arguments too")
            raise TurnStateError(msg)
        wire = dict(call)
        kind = wire.pop("type", "tool-call")
        if kind != "tool-call":
            raise wrong_type(self._session, "tool/call", "$.type", "step.tool_call()",
                              call, f'a block of type "tool-call", not {kind!r}')
        spelled = {"toolCallId": "id", "toolName": "name", "input": "arguments",
                   "callId": "id", "args": "arguments"}
        for key in wire:
            if key not in ("id", "name", "arguments"):
                hint = spelled.get(key)
                also = f' (the vocabulary spells it "{hint}")' if hint else ""
                msg = (f'step.tool_call(): unknown key {key!r} in the tool-call block{also}; '
                       f'a tool-call block is {{"type": "tool-call", "id": str, "name": str, '
                       f'"arguments": str (the raw JSON text)}}')
                raise schema_error(self._session, "tool/call", f"$.{key}", msg)
        for key in ("id", "name", "arguments"):
            value = wire.get(key)
            if value.__class__ is not str:
                given = "missing" if key not in wire else kind_of(value)
                msg = (f"step.tool_call(): the tool-call block's {key!r} must be a string"
                       f"{' (the raw JSON text of the arguments)' if key == 'arguments' else ''}"
                       f", got {given}")
                raise schema_error(self._session, "tool/call", f"$.{key}", msg)
        return wire["id"], wire["name"], wire["arguments"]

    def tool_result(
        self,
        call: ToolCallRef | str,
        content: Content,
        *,
        is_error: bool = False,
        error: Mapping[str, Any] | msgspec.Struct | None = None,
        meta: Any = UNSET,
    ) -> Event:
        """Append the ``tool/result`` answering a call of this step (its
        :class:`ToolCallRef` or call id); its ``sourceEventSeqs`` is the call's seq.

        :param error: ``{"name", "code"}`` of a failed call
            (:class:`~dsh_session_core.events.ToolError`).
        :param meta: the tool's private JSON presentation payload, when it has one.
        :raises TurnStateError: the step ended, the call is not one of this step's, or
            it has a result already.
        """
        if self.end_event is not None:
            self._check_open("append a tool/result")
        blocks = content_blocks(content)
        if blocks is None:  # else a str, or a list of str and blocks: taken
            check_content(self._session, "tool/result", "step.tool_result()", content)
        if not isinstance(call, ToolCallRef | str):
            raise wrong_type(self._session, "tool/result", "$.callId", "step.tool_result()",
                              call, "the call as the ToolCallRef step.tool_call() returned, "
                              "or its call id (str)")
        call_id = call.call_id if isinstance(call, ToolCallRef) else call
        ref = self._calls.get(call_id) if isinstance(call_id, str) else None
        if ref is None or (isinstance(call, ToolCallRef) and ref != call):
            known = ", ".join(repr(c) for c in self._calls) or "none"
            msg = (
                f"no tool/call {call_id!r} in step {self.number} of turn "
                f"{self._turn_number} (its calls: {known}): log the call with "
                f"step.tool_call(...) first, in the same step"
            )
            raise TurnStateError(msg)
        if call_id in self._results:
            msg = (
                f"tool call {call_id!r} has a result already (seq {self._results[call_id]}):"
                f" one tool/result per call"
            )
            raise TurnStateError(msg)
        entry = self._fast.get("tool/result")
        if (entry is not None and blocks is not None and is_error.__class__ is bool
                and error is None and meta is UNSET):
            event = self._built(entry, ToolResultData(
                turn=self._turn_number, step=self.number, call_id=call_id, content=blocks,
                is_error=is_error), "append", (ref.seq,))
        else:
            data: dict[str, Any] = {"turn": self._turn_number, "step": self.number,
                                    "callId": call_id, "content": content_wire(content),
                                    "isError": is_error}
            if error is not None:
                data["error"] = as_wire(error)
            if meta is not UNSET:
                data["meta"] = meta
            event = self._session.append("tool/result", data, surface_op="append",
                                         source_event_seqs=(ref.seq,))
        self._results[call_id] = event.seq
        self._own += 1
        self._open_ids.discard(call_id)
        return event

    def end(self, *, answer: bool = True) -> Event:
        """Append ``step/end``; return it. A tool call of the step left without a result
        is answered first (see :meth:`_answer_unanswered`).

        :param answer: ``False`` leaves the step's unanswered calls as they are, for a
            harness whose results come after the step ends (an SDK session that records
            items as they arrive, a tool still running): it then logs each result
            itself, and until it does the provider conversions answer the call in a
            request (docs/builders.md).
        :raises TurnStateError: the step has ended already.
        """
        self._check_open("end it again")
        if answer:
            self._answer_unanswered(UNANSWERED_TOOL_TEXT)
        return self._close()

    def _close(self) -> Event:
        """Append ``step/end`` (the calls were answered, or a failed block tried to)."""
        entry = self._fast.get("step/end")
        if entry is not None:
            event = self._built(entry, StepData(turn=self._turn_number, step=self.number))
        else:
            event = self._session.append("step/end", {"turn": self._turn_number,
                                                      "step": self.number})
        self.end_event = event
        self._turn._open_step = None
        return event

    def __enter__(self) -> Step:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if self.end_event is None:
            if exc is not None:
                self._turn._failed_step = self.number
                self._answer_pending(exc)
                if self._turn.end_event is None:
                    self._close()
            elif self._turn.end_event is None:
                self.end()
        return False

    def _answer_pending(self, exc: BaseException) -> None:
        """Answer the step's unanswered calls as its block raised: the error result
        names why."""
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        try:
            self._answer_unanswered(f"Tool call not completed: the turn failed ({why}); "
                                    f"no result was recorded.")
        except DshSessionError:  # the block's own error is the one to raise
            return

    def _answer_unanswered(self, text: str) -> None:
        """Answer each call of this step that has no result yet with an error result.

        Every provider refuses a history holding a tool call without its result, and
        crash repair answers such calls the same way, so a step never closes on one. The
        calls are found in the log since ``step/start`` (an ``assistant/message``'s
        tool-call blocks, ``tool/call`` events), so events appended by hand count too.
        The result has the shape of crash repair's (``isError``, ``error.code``
        ``"interrupted"``: the one synthetic result the reference's invariants accept
        for a call with no ``tool/call``), and the call's seq as its provenance when
        it has a ``tool/call``.
        """
        events = self._session._events
        since = self.start_event.seq + 1
        if not self._open_ids and len(events) - since == self._own + len(self._chunk_seqs):
            return  # every event since step/start is the step's own, and no call is open
        # The step's events only: a slice (pointers, once per step) rather than an
        # islice, which would step over the whole log before them at each step's end.
        for call in unanswered_calls(events[since:]):
            data: dict[str, Any] = {
                "turn": self._turn_number, "step": self.number, "callId": call.call_id,
                "content": [{"type": "text", "text": text}], "isError": True,
                "error": {"name": "UnansweredError", "code": "interrupted"}}
            seqs = (call.seq,) if call.message_seq != call.seq else None
            event = self._session.append("tool/result", data, surface_op="append",
                                         source_event_seqs=seqs)
            self._results[call.call_id] = event.seq
