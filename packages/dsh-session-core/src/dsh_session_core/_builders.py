"""Builders: a small typed API over ``Session.append`` that keeps turns balanced.

This module owns :class:`Turn` and :class:`Step` (what ``session.turn()`` and
``turn.step()`` return), the one-shot injection turn behind ``session.inject()``, and
:class:`TurnStateError`, the error a misuse of them raises. It owns no wire shape: every
builder writes through ``Session.append`` exactly the payload a harness would write by
hand (``bench/run.py``'s standard turn, byte for byte), so each append is validated as
any other and a store's plugins see every event.

The rules it keeps, from the reference's seeds:

- a turn is ``turn/start`` ... ``turn/end``; each step in it is ``step/start`` ...
  ``step/end``, numbered from 1; turns are numbered 1 + the last ``turn/start``'s;
- a block that raises ends the open step, then the turn: ``error`` (the step it failed
  on and the message, and its ``code`` when it has a string one) for an
  :class:`Exception`, ``aborted`` for any other ``BaseException``: a cancellation
  (``KeyboardInterrupt``, ``asyncio.CancelledError``, a closed generator's
  ``GeneratorExit``, ``SystemExit``); the exception propagates;
- a block that returns ends the turn ``completed``, or ``max-tokens`` when a step of it
  finished ``max-tokens`` (the cut-short fact wins over ``completed`` only); a step the
  model finished ``error`` makes it end ``error`` (the seeds: a turn fails when "a step
  threw or the model reported a failure"), and one it finished ``aborted``, ``aborted``:
  both take precedence over ``max-tokens``, as the seeds rank them (this mapping of
  finish reasons is the builders' reading; ``turn.end(reason)`` overrides it);
- a step that ends with a tool call unanswered (announced by its ``assistant/message``
  or logged by ``tool/call``, and no ``tool/result``) answers it first, as crash repair
  does: an error result saying no result was recorded (every provider refuses a
  request holding a call without its result; docs/decisions.md);
- an idle injection is its own turn: ``turn/start`` (trigger ``injection``),
  ``context/message``, ``turn/end`` (``completed``).
"""

from __future__ import annotations

__all__ = ["Step", "ToolCallRef", "Turn", "TurnStateError", "inject", "start_turn"]

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET

from ._unanswered import UNANSWERED_TOOL_TEXT, unanswered_calls
from .errors import DshSessionError, SchemaError
from .events import AssistantChunkData, Event, OpaqueEvent, TurnEnd, TurnStart
from .vocabulary import (
    AbortedFinish,
    AbortedReason,
    CompletedReason,
    ContentBlock,
    ErrorFinish,
    ErrorReason,
    FinishChunk,
    FinishReason,
    MaxTokensFinish,
    MaxTokensReason,
    MessageSource,
    PluginSource,
    ReasoningBlock,
    ReasoningDeltaChunk,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    TurnEndReason,
    TurnTrigger,
    UserSource,
)

if TYPE_CHECKING:
    from ._session import Session

#: Content as a builder takes it: a string (one text block), or blocks, each a
#: vocabulary Struct (:class:`~dsh_session_core.TextBlock`...) or its wire dict.
Content: TypeAlias = str | Sequence[ContentBlock | Mapping[str, Any] | str]

_to_builtins = msgspec.to_builtins
_USER: Final = {"kind": "user"}
_COMPLETED: Final = {"kind": "completed"}


class TurnStateError(DshSessionError, RuntimeError):
    """A builder was used out of order (a step after its turn ended, a result for a call
    never made, a second open turn...). Nothing was appended."""


def _wire(value: Any, trusted: Mapping[type, Callable[[Any], bool]] | None = None) -> Any:
    """A caller's value as ``append`` should get it.

    A dict is passed on as is (``append`` checks it fully). A Struct nested in a dict is
    taken by ``append`` as is, unchecked (a Struct constructor does not validate), so a
    Struct is passed on only when it is of a kind ``trusted`` lists for this position and
    its fields pass that kind's check (a type test per field: far cheaper than making
    builtins of it, which the chunks of a long stream would pay per token); any other
    Struct becomes builtins, for ``append`` to check. Anything else is left to
    ``append`` to judge.
    """
    cls = value.__class__
    if cls is dict:
        return value
    if trusted is not None:
        check = trusted.get(cls)
        if check is not None and check(value):
            return value
    if isinstance(value, msgspec.Struct):
        return _to_builtins(value)
    if isinstance(value, Mapping):  # a read-only JSON object of a logged event
        return dict(value)
    return value


def _is_count(value: object) -> bool:
    return value.__class__ is int or value is UNSET


def _text_ok(b: Any) -> bool:
    return b.text.__class__ is str


def _call_ok(b: ToolCallBlock) -> bool:
    return b.id.__class__ is str and b.name.__class__ is str and b.arguments.__class__ is str


def _delta_ok(c: Any) -> bool:
    return c.index.__class__ is int and c.text.__class__ is str


def _usage_ok(u: TokenUsage) -> bool:
    return (u.input_tokens.__class__ is int and u.output_tokens.__class__ is int
            and _is_count(u.cache_read_tokens) and _is_count(u.cache_write_tokens)
            and _is_count(u.reasoning_tokens))


def _plugin_ok(s: PluginSource) -> bool:
    return s.plugin.__class__ is str


def _always(_: object) -> bool:
    return True


#: The Structs passed on as they are, per position, with the check each must pass.
_BLOCKS: Final[Mapping[type, Callable[[Any], bool]]] = {
    TextBlock: _text_ok, ReasoningBlock: _text_ok, ToolCallBlock: _call_ok,
}
_CHUNKS: Final[Mapping[type, Callable[[Any], bool]]] = {
    TextDeltaChunk: _delta_ok, ReasoningDeltaChunk: _delta_ok,
}
_USAGE: Final[Mapping[type, Callable[[Any], bool]]] = {TokenUsage: _usage_ok}
_SOURCES: Final[Mapping[type, Callable[[Any], bool]]] = {
    UserSource: _always, PluginSource: _plugin_ok,
}


def _content(content: Content) -> Any:
    """Content in its wire shape: a string is one text block; a string in a list, too."""
    if content.__class__ is str:
        return [{"type": "text", "text": content}]
    if isinstance(content, msgspec.Struct):  # one block, not a list of them
        return [_wire(content, _BLOCKS)]
    if isinstance(content, Mapping) or not isinstance(content, Iterable):
        return content  # append refuses it with its path
    return [
        {"type": "text", "text": b} if b.__class__ is str else _wire(b, _BLOCKS)
        for b in content
    ]


def _source(source: MessageSource | Mapping[str, Any] | None) -> Any:
    return _USER if source is None else _wire(source, _SOURCES)


def _kind_of(value: object) -> str:
    """What a wrong argument is, for a message: ``int (123)``, ``dict``."""
    name = type(value).__name__
    if isinstance(value, bool | int | float) or value is None:
        return f"{name} ({value!r})"
    if isinstance(value, str):
        return f"str ({value[:40]!r})"
    return name


def _schema_error(session: Session, event_type: str, path: str, message: str) -> SchemaError:
    """The error of a builder argument of the wrong type: what the append would refuse,
    said in the builder's terms (a store's ``strict=False`` would refuse it too, so
    unlike an unknown key it does not suggest one). Nothing was appended."""
    return SchemaError(message, event_type=event_type, seq=len(session._events), path=path,
                       plugin="core")


def _wrong_type(session: Session, event_type: str, path: str, method: str, value: object,
                accepted: str) -> SchemaError:
    return _schema_error(session, event_type, path,
                         f"{method} takes {accepted}; got {_kind_of(value)}")


#: The builder method of each message type, for messages.
_METHODS: Final = {"user/message": "user", "context/message": "context",
                   "steering/message": "steer"}
_SOURCE_TYPES: Final = ("a source: UserSource(), PluginSource(plugin=...) or its wire dict "
                        "({\"kind\": \"user\"})")

#: What each content-taking builder accepts, for its message.
_CONTENT_TYPES: Final = ("a str (one text block) or a list of blocks, each a str, a "
                         "vocabulary block (TextBlock, ToolCallBlock...) or its wire dict")


def _check_content(session: Session, event_type: str, method: str, content: object,
                   path: str = "$.content") -> None:
    """Refuse content of a type no builder takes, naming the types it takes."""
    cls = content.__class__
    if cls is str or isinstance(content, msgspec.Struct):
        return
    if isinstance(content, Mapping | str | bytes | bytearray) or not isinstance(
            content, Iterable):
        raise _wrong_type(session, event_type, path, method, content, _CONTENT_TYPES)
    if isinstance(content, Sequence):
        for i, block in enumerate(content):
            if not (block.__class__ is str or isinstance(block, msgspec.Struct | Mapping)):
                raise _schema_error(
                    session, event_type, f"{path}[{i}]",
                    f"{method}: block {i} of the content is {_kind_of(block)}; a block is a "
                    f"str, a vocabulary block (TextBlock, ToolCallBlock...) or its wire dict")


def _check_object(session: Session, event_type: str, path: str, method: str, value: object,
                  accepted: str) -> None:
    """Refuse a value that is neither a Struct nor a mapping (a source, a usage...)."""
    if not isinstance(value, msgspec.Struct | Mapping):
        raise _wrong_type(session, event_type, path, method, value, accepted)


def _finish_of(session: Session, finish: object) -> FinishReason:
    """``step.assistant(finish=...)`` read before anything is appended: it is not logged,
    so nothing else would check it."""
    accepted = ("finish= as a FinishReason (StopFinish(), MaxTokensFinish()...) or its "
                "wire dict ({\"kind\": \"stop\"})")
    _check_object(session, "assistant/message", "finish", "step.assistant()", finish,
                  accepted)
    try:
        finished: FinishReason = msgspec.convert(_wire(finish), FinishReason)
    except (msgspec.ValidationError, TypeError) as exc:
        raise _schema_error(session, "assistant/message", "finish",
                            f"step.assistant() takes {accepted}: {exc}") from None
    return finished


def _open_turn_and_last(events: list[Event]) -> tuple[Event | None, Event | None]:
    """The log's open ``turn/start`` (``None`` when its last turn ended) and its last
    ``turn/start`` (``None`` when none). Scans back from the end, by class first: a
    balanced log costs the length of its last turn."""
    ended = False
    for ev in reversed(events):
        cls = ev.__class__
        if cls is TurnEnd:
            ended = True
            continue
        if cls is not TurnStart:
            if cls is not OpaqueEvent:
                continue
            etype = ev.type
            if etype == "turn/end":
                ended = True
                continue
            if etype != "turn/start":
                continue
        return (None if ended else ev), ev
    return None, None


def _field(event: Event, name: str) -> Any:
    data = event.data
    if isinstance(data, Mapping):  # an opaque event: its payload is read-only JSON
        return data.get(name)
    return getattr(data, name, None)


def start_turn(
    session: Session,
    trigger: TurnTrigger | Mapping[str, Any] | None = None,
    *,
    number: int | None = None,
) -> Turn:
    """Append ``turn/start`` and return the open :class:`Turn` (``Session.turn``)."""
    open_start, last = _open_turn_and_last(session._events)  # the list: no view per item
    if open_start is not None:
        msg = (
            f"turn {_field(open_start, 'turn')} (turn/start at seq {open_start.seq}) is "
            f"still open: end it first (leave its with block, or call turn.end()); a "
            f"log read back open was cut short by a crash: read it with recover=True"
        )
        raise TurnStateError(msg)
    if number is None:
        number = 1
        if last is not None:
            last_number = _field(last, "turn")
            if last_number.__class__ is not int:
                msg = (
                    f"the last turn/start (seq {last.seq}) has no integer turn number "
                    f"({last_number!r}): pass one, session.turn(number=...)"
                )
                raise TurnStateError(msg)
            number = last_number + 1
    if trigger is None:
        wire_trigger: Any = {"kind": "message", "source": _USER}
    else:
        _check_object(session, "turn/start", "$.trigger", "session.turn()", trigger,
                      "a trigger: MessageTrigger(...), InjectionTrigger(...) or its wire "
                      "dict ({\"kind\": \"message\", \"source\": {\"kind\": \"user\"}})")
        wire_trigger = _wire(trigger)
    start = session.append("turn/start", {"turn": number, "trigger": wire_trigger})
    return Turn(session, number, start)


def inject(
    session: Session,
    content: Content,
    *,
    source: MessageSource | Mapping[str, Any] | None = None,
    number: int | None = None,
) -> Event:
    """The one-shot injection turn (``Session.inject``); returns its ``context/message``."""
    wire_source = _source(source)
    turn = start_turn(session, {"kind": "injection", "source": wire_source}, number=number)
    with turn:
        message = turn.context(content, source=wire_source)
    return message


class Turn:
    """An open turn: what ``session.turn()`` returns, after appending its ``turn/start``.

    Use it as a context manager (``with session.turn() as turn:``), which ends it on exit,
    or call :meth:`end`. Events appended by hand in between are fine; the turn only
    keeps its own steps and its ``turn/end``.
    """

    __slots__ = ("_failed_step", "_finish", "_open_step", "_session", "_step_count",
                 "end_event", "number", "start_event")

    def __init__(self, session: Session, number: int, start: Event) -> None:
        self._session = session
        #: The turn number (``data.turn`` of each of its events).
        self.number = number
        #: The logged ``turn/start``.
        self.start_event = start
        #: The logged ``turn/end``, once the turn ended.
        self.end_event: Event | None = None
        self._step_count = 0
        self._open_step: Step | None = None
        self._failed_step: int | None = None
        # The first step the model finished error or aborted, else the first max-tokens.
        self._finish: tuple[int, FinishReason] | None = None

    def __repr__(self) -> str:
        state = "ended" if self.end_event is not None else "open"
        return f"<Turn {self.number} of {self._session.id!r}, {state}>"

    @property
    def session(self) -> Session:
        """The session it writes to."""
        return self._session

    @property
    def ended(self) -> bool:
        """Whether its ``turn/end`` is logged."""
        return self.end_event is not None

    def _check_open(self, what: str) -> None:
        if self.end_event is not None:
            msg = (
                f"turn {self.number} has ended (turn/end at seq {self.end_event.seq}): "
                f"cannot {what}; start a new turn with session.turn()"
            )
            raise TurnStateError(msg)

    # --- messages of the turn ----------------------------------------------------------

    def user(
        self, content: Content, *, source: MessageSource | Mapping[str, Any] | None = None
    ) -> Event:
        """Append a ``user/message`` (a prompt of the turn's batch); the source is the
        user unless given."""
        return self._message("user/message", content, source, {})

    def context(
        self, content: Content, *, source: MessageSource | Mapping[str, Any] | None = None
    ) -> Event:
        """Append a ``context/message`` (injected context: a file-change notice...)."""
        return self._message("context/message", content, source, {})

    def steer(
        self, content: Content, *, source: MessageSource | Mapping[str, Any] | None = None
    ) -> Event:
        """Append a ``steering/message`` (sent while the turn runs, between steps)."""
        return self._message("steering/message", content, source, {"turn": self.number})

    def _message(self, type: str, content: Content,
                 source: MessageSource | Mapping[str, Any] | None,
                 data: dict[str, Any]) -> Event:
        """Append one of the three message types: ``data`` (its other fields, first on
        the wire), then the content and the source (the user unless given)."""
        self._check_open(f"append a {type}")
        method = f"turn.{_METHODS[type]}()"
        _check_content(self._session, type, method, content)
        if source is not None:
            _check_object(self._session, type, "$.source", method, source,
                          _SOURCE_TYPES)
        data["content"] = _content(content)
        data["source"] = _source(source)
        return self._session.append(type, data, surface_op="append")

    # --- steps -------------------------------------------------------------------------

    def step(self) -> Step:
        """Append ``step/start`` of the next step (1, 2, ...) and return it, open.

        :raises TurnStateError: the turn ended, or a step of it is still open.
        """
        self._check_open("start a step")
        if self._open_step is not None:
            msg = (
                f"step {self._open_step.number} of turn {self.number} is still open: end "
                f"it (leave its with block, or call step.end()) before starting another"
            )
            raise TurnStateError(msg)
        number = self._step_count + 1
        start = self._session.append("step/start", {"turn": self.number, "step": number})
        self._step_count = number
        self._failed_step = None  # a failure caught inside the turn is behind it
        step = Step(self, number, start)
        self._open_step = step
        return step

    @property
    def steps(self) -> int:
        """How many steps it started."""
        return self._step_count

    # --- ending ------------------------------------------------------------------------

    def reason(self) -> TurnEndReason:
        """The reason :meth:`end` writes when given none: ``completed``, unless a step
        finished ``error`` or ``aborted`` (that, with its step), else ``max-tokens``."""
        if self._finish is None:
            return CompletedReason()
        step, finish = self._finish
        if isinstance(finish, ErrorFinish):
            return ErrorReason(step=step, message=finish.message, code=finish.code)
        if isinstance(finish, AbortedFinish):
            return AbortedReason()
        return MaxTokensReason()

    def end(self, reason: TurnEndReason | Mapping[str, Any] | None = None) -> Event:
        """End the open step, if any, then append ``turn/end``; return it.

        :param reason: a :data:`~dsh_session_core.vocabulary.TurnEndReason` (or its wire
            dict); by default :meth:`reason`.
        :raises TurnStateError: the turn has ended already.
        """
        self._check_open("end it again")
        if reason is not None:  # before anything is appended
            _check_object(self._session, "turn/end", "$.reason", "turn.end()", reason,
                          "a TurnEndReason (CompletedReason(), ErrorReason(...)...) or its "
                          "wire dict ({\"kind\": \"completed\"})")
        if self._open_step is not None:
            self._open_step.end()
        if reason is None:
            wire_reason: Any = _COMPLETED if self._finish is None else _wire(self.reason())
        else:
            wire_reason = _wire(reason)
        event = self._session.append("turn/end", {"turn": self.number, "reason": wire_reason})
        self.end_event = event
        return event

    def __enter__(self) -> Turn:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if self.end_event is not None:  # ended by hand inside the block
            return False
        if exc is not None and self._open_step is not None:
            # Its calls answered (or tried: the block's error is the one to raise), then
            # closed without answering again; the turn's error names it.
            failed = self._open_step
            failed._answer_pending(exc)
            failed._close()
            self._failed_step = failed.number
        if exc is None:
            self.end()
        elif isinstance(exc, Exception):
            # The step it failed on: the open one, else the one a step's with block
            # recorded as it closed, else the last started (0 before any step).
            if self._open_step is not None:
                step = self._open_step.number
            elif self._failed_step is not None:
                step = self._failed_step
            else:
                step = self._step_count
            reason: dict[str, Any] = {"kind": "error", "step": step,
                                      "message": str(exc) or type(exc).__name__}
            code = getattr(exc, "code", None)
            if isinstance(code, str):
                reason["code"] = code
            self.end(reason)
        else:  # KeyboardInterrupt, CancelledError, GeneratorExit, SystemExit: cancelled
            self.end({"kind": "aborted"})
        return False


class ToolCallRef(msgspec.Struct, frozen=True, gc=False):
    """A logged ``tool/call``, as :meth:`Step.tool_call` returns it: pass it to
    :meth:`Step.tool_result`."""

    #: The seq of the ``tool/call`` (the result's ``sourceEventSeqs``).
    seq: int
    call_id: str
    name: str
    arguments: str


class Step:
    """An open step of a turn: what ``turn.step()`` returns, after its ``step/start``.

    Use it as a context manager (``with turn.step() as step:``), or call :meth:`end`.
    """

    __slots__ = ("_append", "_calls", "_chunk_seqs", "_results", "_session", "_turn",
                 "_turn_number", "end_event", "number", "start_event")

    def __init__(self, turn: Turn, number: int, start: Event) -> None:
        self._turn = turn
        self._session = turn.session
        self._append = turn.session.append  # bound once: chunks come by the thousand
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
            event = self._append(
                "assistant/chunk", {"turn": self._turn_number, "step": self.number, "chunk": chunk}
            )
            self._chunk_seqs.append(event.seq)
            return event
        if not isinstance(chunk, msgspec.Struct | Mapping):
            raise _wrong_type(self._session, "assistant/chunk", "$.chunk", "step.chunk()",
                              chunk, "a StreamChunk (TextDeltaChunk, FinishChunk...) or its "
                              "wire dict")
        event = self._append(
            "assistant/chunk",
            {"turn": self._turn_number, "step": self.number, "chunk": _wire(chunk, _CHUNKS)},
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
        self._check_open("append an assistant/message")
        session = self._session
        _check_content(session, "assistant/message", "step.assistant()", content)
        if usage is not None:
            _check_object(session, "assistant/message", "$.usage", "step.assistant()", usage,
                          "usage= as a TokenUsage or its wire dict")
        finished = None if finish is None else _finish_of(session, finish)
        data: dict[str, Any] = {"turn": self._turn_number, "step": self.number,
                                "content": _content(content)}
        if usage is not None:
            data["usage"] = _wire(usage, _USAGE)
        if source_event_seqs is None and self._chunk_seqs:
            source_event_seqs = self._chunk_seqs
        event = self._session.append("assistant/message", data, surface_op="append",
                                     source_event_seqs=source_event_seqs)
        self._chunk_seqs = []
        if finished is not None:
            self._finished(finished)
        return event

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
        self._check_open("append a tool/call")
        if isinstance(call, ToolCallBlock):
            call_id, name, arguments = call.id, call.name, call.arguments
        elif isinstance(call, str):
            call_id = call
        elif isinstance(call, Mapping):
            call_id, name, arguments = self._call_of(call, name, arguments)
        else:
            raise _wrong_type(self._session, "tool/call", "$", "step.tool_call()", call,
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
        event = self._session.append(
            "tool/call",
            {"turn": self._turn_number, "step": self.number, "callId": call_id,
             "name": name, "arguments": arguments},
        )
        ref = ToolCallRef(event.seq, call_id, name, arguments)
        self._calls[call_id] = ref
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
            raise _wrong_type(self._session, "tool/call", "$.type", "step.tool_call()",
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
                raise _schema_error(self._session, "tool/call", f"$.{key}", msg)
        for key in ("id", "name", "arguments"):
            value = wire.get(key)
            if value.__class__ is not str:
                given = "missing" if key not in wire else _kind_of(value)
                msg = (f"step.tool_call(): the tool-call block's {key!r} must be a string"
                       f"{' (the raw JSON text of the arguments)' if key == 'arguments' else ''}"
                       f", got {given}")
                raise _schema_error(self._session, "tool/call", f"$.{key}", msg)
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
        self._check_open("append a tool/result")
        _check_content(self._session, "tool/result", "step.tool_result()", content)
        if not isinstance(call, ToolCallRef | str):
            raise _wrong_type(self._session, "tool/result", "$.callId", "step.tool_result()",
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
        data: dict[str, Any] = {"turn": self._turn_number, "step": self.number,
                                "callId": call_id, "content": _content(content),
                                "isError": is_error}
        if error is not None:
            data["error"] = _wire(error)
        if meta is not UNSET:
            data["meta"] = meta
        event = self._session.append("tool/result", data, surface_op="append",
                                     source_event_seqs=(ref.seq,))
        self._results[call_id] = event.seq
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
        # The step's own events, read in place: a step of many chunks is not copied.
        step = itertools.islice(self._session._events, self.start_event.seq + 1, None)
        for call in unanswered_calls(step):
            data: dict[str, Any] = {
                "turn": self._turn_number, "step": self.number, "callId": call.call_id,
                "content": [{"type": "text", "text": text}], "isError": True,
                "error": {"name": "UnansweredError", "code": "interrupted"}}
            seqs = (call.seq,) if call.message_seq != call.seq else None
            event = self._session.append("tool/result", data, surface_op="append",
                                         source_event_seqs=seqs)
            self._results[call.call_id] = event.seq
