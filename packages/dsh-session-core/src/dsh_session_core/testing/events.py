"""Event shorthands for tests: the core events a test appends, by what they mean.

Three layers, each in the wire shape (camelCase keys):

- payloads: :func:`user_data`, :func:`assistant_data`, :func:`tool_call_data`... the
  ``data`` of one event;
- appenders: :func:`user`, :func:`assistant`, :func:`turn_start`... append one event to
  a :class:`~dsh_session_core.Session` (surface events with ``surface_op="append"``)
  and return it; :func:`user_turn` and :func:`exchange` append a whole turn;
- log lines: :func:`wire_event` builds a complete event (``seq``, ``time``) for seeds
  and for a backend's ``append``; :func:`one_turn_log` is a balanced one-turn log.

Every tool call is named ``bash`` with arguments ``{}`` unless a test says otherwise,
and every user message comes from the user (``{"kind": "user"}``).
"""

from __future__ import annotations

__all__ = [
    "USER_SOURCE",
    "assistant",
    "assistant_data",
    "call_block",
    "exchange",
    "one_turn_log",
    "session_header",
    "step_data",
    "step_end",
    "step_start",
    "text_block",
    "tool_call",
    "tool_call_data",
    "tool_result",
    "tool_result_data",
    "turn_end",
    "turn_end_data",
    "turn_start",
    "turn_start_data",
    "user",
    "user_data",
    "user_turn",
    "wire_event",
]

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .. import Event, Session, SessionHeader

#: The source of a message a person typed.
USER_SOURCE: Mapping[str, str] = {"kind": "user"}

# --- payloads ------------------------------------------------------------------------------


def text_block(text: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": text}


def call_block(call_id: str, name: str = "bash", arguments: str = "{}") -> dict[str, Any]:
    """A tool-call content block, as an assistant message carries it."""
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def _content(content: str | Sequence[Any]) -> list[Any]:
    return [text_block(content)] if isinstance(content, str) else list(content)


def turn_start_data(turn: int) -> dict[str, Any]:
    """``turn/start``: a turn the user's message triggered."""
    return {"turn": turn, "trigger": {"kind": "message", "source": dict(USER_SOURCE)}}


def turn_end_data(turn: int, reason: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``turn/end``, completed unless ``reason`` says otherwise."""
    return {"turn": turn, "reason": dict(reason) if reason is not None else {"kind": "completed"}}


def step_data(turn: int, step: int) -> dict[str, Any]:
    """``step/start`` and ``step/end``."""
    return {"turn": turn, "step": step}


def user_data(content: str | Sequence[Any]) -> dict[str, Any]:
    """``user/message``: a text, or the given blocks, from the user."""
    return {"content": _content(content), "source": dict(USER_SOURCE)}


def assistant_data(turn: int, step: int, content: str | Sequence[Any]) -> dict[str, Any]:
    """``assistant/message``: a text, or the given blocks."""
    return {"turn": turn, "step": step, "content": _content(content)}


def tool_call_data(turn: int, step: int, call_id: str, name: str = "bash",
                   arguments: str = "{}") -> dict[str, Any]:
    """``tool/call``."""
    return {"turn": turn, "step": step, "callId": call_id, "name": name,
            "arguments": arguments}


def tool_result_data(turn: int, step: int, call_id: str, output: str, *,
                     is_error: bool = False) -> dict[str, Any]:
    """``tool/result``: the output as one text block."""
    return {"turn": turn, "step": step, "callId": call_id, "content": [text_block(output)],
            "isError": is_error}


# --- appenders -------------------------------------------------------------------------------


def turn_start(session: Session, turn: int) -> Event:
    return session.append("turn/start", turn_start_data(turn))


def turn_end(session: Session, turn: int, reason: Mapping[str, Any] | None = None) -> Event:
    return session.append("turn/end", turn_end_data(turn, reason))


def step_start(session: Session, turn: int, step: int) -> Event:
    return session.append("step/start", step_data(turn, step))


def step_end(session: Session, turn: int, step: int) -> Event:
    return session.append("step/end", step_data(turn, step))


def user(session: Session, content: str | Sequence[Any]) -> Event:
    return session.append("user/message", user_data(content), surface_op="append")


def assistant(session: Session, turn: int, step: int, content: str | Sequence[Any]) -> Event:
    return session.append("assistant/message", assistant_data(turn, step, content),
                          surface_op="append")


def tool_call(session: Session, turn: int, step: int, call_id: str, name: str = "bash",
              arguments: str = "{}") -> Event:
    return session.append("tool/call", tool_call_data(turn, step, call_id, name, arguments))


def tool_result(session: Session, turn: int, step: int, call_id: str, output: str, *,
                is_error: bool = False) -> Event:
    return session.append("tool/result",
                          tool_result_data(turn, step, call_id, output, is_error=is_error),
                          surface_op="append")


def user_turn(session: Session, turn: int, text: str = "hi", *, end: bool = True) -> None:
    """A turn of one user message: ``turn/start``, ``user/message``, and ``turn/end``
    (completed) unless ``end`` is false (the turn is then left open)."""
    turn_start(session, turn)
    user(session, text)
    if end:
        turn_end(session, turn)


def exchange(session: Session, turn: int, question: str = "hello", answer: str = "hello", *,
             end: bool = True) -> None:
    """A turn of one question and one answer in one step: ``turn/start``,
    ``user/message``, ``step/start``, ``assistant/message``, ``step/end``, ``turn/end``
    (the last two only when ``end``)."""
    turn_start(session, turn)
    user(session, question)
    step_start(session, turn, 1)
    assistant(session, turn, 1, answer)
    if end:
        step_end(session, turn, 1)
        turn_end(session, turn)


# --- log lines -------------------------------------------------------------------------------


def wire_event(type_: str, seq: int, data: Any, *, time: int | None = None,
               surface_op: Any = None,
               source_event_seqs: Sequence[int] | None = None) -> dict[str, Any]:
    """A complete event in its wire shape (for seeds, and a backend's ``append``):
    ``time`` defaults to ``seq + 1``; ``surfaceOp`` and ``sourceEventSeqs`` are written
    only when given, in the order a log line has them."""
    out: dict[str, Any] = {"type": type_, "seq": seq, "time": seq + 1 if time is None else time,
                           "data": data}
    if source_event_seqs is not None:
        out["sourceEventSeqs"] = list(source_event_seqs)
    if surface_op is not None:
        out["surfaceOp"] = surface_op
    return out


def one_turn_log(question: str = "hi", answer: str = "hello") -> list[dict[str, Any]]:
    """A balanced one-turn log, seqs 0-5 at times 1-6 (a new list each call): the turn's
    start, the user's message, one step with the assistant's answer, the turn's end."""
    return [
        wire_event("turn/start", 0, turn_start_data(1)),
        wire_event("user/message", 1, user_data(question), surface_op="append"),
        wire_event("step/start", 2, step_data(1, 1)),
        wire_event("assistant/message", 3, assistant_data(1, 1, answer), surface_op="append"),
        wire_event("step/end", 4, step_data(1, 1)),
        wire_event("turn/end", 5, turn_end_data(1)),
    ]


def session_header(session_id: str, cwd: str | None = None, **fields: Any) -> SessionHeader:
    """A session's header as a backend stores it: format version 0, created at 1000
    (epoch ms), in ``cwd`` if given; ``fields`` adds or overrides any other field
    (``parent_session=``, ``version=``...)."""
    from .. import SessionHeader

    values: dict[str, Any] = {"version": 0, "id": session_id, "created_at": 1000}
    if cwd is not None:
        values["cwd"] = cwd
    values.update(fields)
    return SessionHeader(**values)
