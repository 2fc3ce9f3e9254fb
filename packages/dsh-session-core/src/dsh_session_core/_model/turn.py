"""The turn builder: :class:`Turn`, how a turn starts and ends, and the injection turn.

:class:`Turn` is what ``session.turn()`` returns, after its ``turn/start``; how a turn
starts (its number, the refusal of a second open one), the one-shot injection turn
behind ``session.inject()``, and how a turn ends (its reason from its steps' finishes,
or from the exception its block raised).

The rules it keeps are the builders' (:mod:`.builders`); a turn's steps are
:class:`~.step.Step`.
"""

from __future__ import annotations

__all__ = ["Turn", "inject", "start_turn"]

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

from ..events import (
    ContextMessageData,
    Event,
    OpaqueEvent,
    SteeringMessageData,
    StepData,
    TurnEnd,
    TurnEndData,
    TurnStart,
    TurnStartData,
    UserMessageData,
)
from ..vocabulary import (
    AbortedFinish,
    AbortedReason,
    CompletedReason,
    ErrorFinish,
    ErrorReason,
    FinishReason,
    MaxTokensReason,
    MessageSource,
    TurnEndReason,
    TurnTrigger,
)
from .builders import (
    COMPLETED,
    METHODS,
    SOURCE_TYPES,
    USER,
    Content,
    TurnStateError,
    as_wire,
    check_content,
    check_object,
    content_wire,
    source_wire,
)
from .built import COMPLETED_REASON, MESSAGE_TRIGGER, built_entries, content_blocks
from .built import message_source as source_of
from .step import Step

if TYPE_CHECKING:
    from .._schema.registry import RegisteredEvent
    from .session import Session

#: The payload of each message type, for its fast path (:mod:`.built`).
_MESSAGE_DATA: Final[Mapping[str, Callable[..., Any]]] = {
    "user/message": UserMessageData, "context/message": ContextMessageData,
    "steering/message": SteeringMessageData,
}


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
    fast = built_entries(session)
    entry = fast.get("turn/start")
    if trigger is None and entry is not None and number.__class__ is int:
        start = session._append_built(entry, TurnStartData(turn=number, trigger=MESSAGE_TRIGGER))
        return Turn(session, number, start, fast)
    if trigger is None:
        wire_trigger: Any = {"kind": "message", "source": USER}
    else:
        check_object(session, "turn/start", "$.trigger", "session.turn()", trigger,
                      "a trigger: MessageTrigger(...), InjectionTrigger(...) or its wire "
                      "dict ({\"kind\": \"message\", \"source\": {\"kind\": \"user\"}})")
        wire_trigger = as_wire(trigger)
    start = session.append("turn/start", {"turn": number, "trigger": wire_trigger})
    return Turn(session, number, start, fast)


def inject(
    session: Session,
    content: Content,
    *,
    source: MessageSource | Mapping[str, Any] | None = None,
    number: int | None = None,
) -> Event:
    """The one-shot injection turn (``Session.inject``); returns its ``context/message``."""
    wire_source = source_wire(source)
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

    __slots__ = ("_failed_step", "_fast", "_finish", "_open_step", "_session", "_step_count",
                 "end_event", "number", "start_event")

    def __init__(self, session: Session, number: int, start: Event,
                 fast: Mapping[str, RegisteredEvent]) -> None:
        self._session = session
        # The types its builders may log fast (:mod:`.built`): none unless its number is
        # an int, which each of its events carries.
        self._fast = fast if number.__class__ is int else {}
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
        if self.end_event is not None:
            self._check_open(f"append a {type}")
        entry = self._fast.get(type)
        if entry is not None:
            blocks = content_blocks(content)
            message_source = source_of(source)
            if blocks is not None and message_source is not None:
                payload: Any = (
                    _MESSAGE_DATA[type](content=blocks, source=message_source, **data)
                )
                return self._session._append_built(entry, payload, "append")
        method = f"turn.{METHODS[type]}()"
        check_content(self._session, type, method, content)
        if source is not None:
            check_object(self._session, type, "$.source", method, source,
                          SOURCE_TYPES)
        data["content"] = content_wire(content)
        data["source"] = source_wire(source)
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
        entry = self._fast.get("step/start")
        if entry is not None:
            start = self._session._append_built(entry, StepData(turn=self.number, step=number))
        else:
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
            check_object(self._session, "turn/end", "$.reason", "turn.end()", reason,
                          "a TurnEndReason (CompletedReason(), ErrorReason(...)...) or its "
                          "wire dict ({\"kind\": \"completed\"})")
        if self._open_step is not None:
            self._open_step.end()
        entry = self._fast.get("turn/end")
        if reason is None and self._finish is None and entry is not None:
            event = self._session._append_built(
                entry, TurnEndData(turn=self.number, reason=COMPLETED_REASON))
            self.end_event = event
            return event
        if reason is None:
            wire_reason: Any = COMPLETED if self._finish is None else as_wire(self.reason())
        else:
            wire_reason = as_wire(reason)
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
