"""How a LangGraph run becomes one turn of its thread's log.

A checkpointer sees ``put`` and ``put_writes`` only, so a run (one ``invoke`` or
``stream``) is told by what they carry, in the root namespace:

- **a run starts** with a ``put`` whose metadata ``source`` is ``input`` (a graph given
  an input), ``update`` (``update_state``) or ``fork``; with a write of ``__resume__``
  by the null task (``Command(resume=...)``, its value recorded as ``langgraph/resume``);
  or with a ``put`` whose ``versions_seen["__interrupt__"]`` differs from its parent's
  (LangGraph marks so the first checkpoint of a run that continued a paused one, as
  ``invoke(None)`` after ``interrupt_before``). A start closes the turn still open when
  it holds a checkpoint (see :func:`stop_reason`); otherwise it goes on in it (a run's
  write stored ahead of its input checkpoint's ``put``, which LangGraph makes in
  parallel).
- **a run ends** when its latest root checkpoint shows it, once the writes of the tasks
  that made that checkpoint are stored (their ``put_writes`` may come after the
  ``put``): an ``__interrupt__`` write on it made in the turn (``interrupt()``: the turn
  ends ``aborted``, ``awaiting input: interrupt(...)`` with the interrupt's value), an
  ``__error__`` write (``error``), or nothing next (``completed``): none of the channels
  the checkpoint's step updated triggers a node (a ``branch:to:``/``join:`` channel,
  ``__start__``, ``__pregel_tasks``, or a channel a node's ``versions_seen`` names).
- **otherwise** the turn stays open: the run goes on, or it paused before its next
  tasks (``interrupt_before``/``interrupt_after``, which store nothing), or it stopped
  (an exception outside a task, a dead process). The next run's start, or the saver's
  :meth:`~._saver.DshCheckpointSaver.close`, ends it with :func:`stop_reason`.

Any other write goes into the open turn, or opens one (its trigger a message from this
plugin). Messages (``._messages``) make the steps: a step per model call (an
``AIMessage``), holding the ``tool/call`` and ``tool/result`` of each call it made whose
``ToolMessage`` comes while it is open; a result for a call of an earlier step (a run
resumed before its tools) opens a step of its own.
"""

from __future__ import annotations

__all__ = ["close_open", "record_put", "record_writes", "stop_reason"]

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from dsh_session_core import Event, Session

from ._index import ThreadIndex
from ._messages import ai_content, blocks, usage
from .events import LanggraphCheckpointData, LanggraphResumeData, LanggraphWritesData, TypedBlob

INTERRUPT, ERROR, RESUME = "__interrupt__", "__error__", "__resume__"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
#: The reason's prefix of a turn that ended waiting for the graph's caller.
AWAITING = "awaiting input"
_USER = {"kind": "message", "source": {"kind": "user"}}
_PLUGIN = {"kind": "message", "source": {"kind": "plugin", "plugin": "langgraph"}}
_TRIGGER_PREFIXES = ("branch:to:", "join:")
_TRIGGERS = frozenset({"__start__", "__pregel_tasks"})
_STARTS = frozenset({"input", "update", "fork"})

#: Decodes a stored blob (the saver's serializer).
Decode = Callable[[TypedBlob], Any]


def _append(session: Session, index: ThreadIndex, type: str, data: Any,
            **kwargs: Any) -> Event:
    event = session.append(type, data, **kwargs)
    index.fold((event,))
    return event


# --- what a checkpoint says ---------------------------------------------------------


def _next(d: LanggraphCheckpointData) -> list[str] | None:
    """The channels updated by ``d``'s step that trigger a node (``[]``: nothing runs
    next), or ``None`` when ``d`` does not say (no ``updated_channels``)."""
    if d.updated_channels is None:
        return None
    watched = {c for node, seen in d.versions_seen.items() if node != INTERRUPT
               for c in seen}
    return [c for c in d.updated_channels
            if c in _TRIGGERS or c in watched or c.startswith(_TRIGGER_PREFIXES)]


def _writes_in(index: ThreadIndex, d: LanggraphCheckpointData) -> bool:
    """Whether the writes of the tasks that made ``d`` (the nodes whose
    ``versions_seen`` changed from its parent's) are stored on its parent."""
    parent = index.checkpoints.get(("", d.parent_id)) if d.parent_id else None
    if parent is None:
        return True
    stored = {path.rsplit(", ", 1)[-1]
              for _, _, _, path, _ in index.writes.get(("", parent.id), {}).values()}
    return all(node in stored for node, seen in d.versions_seen.items()
               if node != INTERRUPT and parent.versions_seen.get(node) != seen)


def _shown(value: Any) -> str:
    """A value as short text: a string as it is, else its JSON (else its repr)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = msgspec.json.encode(value, enc_hook=repr).decode()
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= 200 else text[:199] + "…"


def _mark(index: ThreadIndex, d: LanggraphCheckpointData, channel: str) -> Any:
    """The stored write of ``channel`` on root checkpoint ``d`` made in the open turn,
    or ``None``."""
    seq = index.marks.get(d.id, {}).get(channel)
    if seq is None or seq <= index.turn_seq:
        return None
    return next((value for _, ch, value, _, _ in index.writes.get(("", d.id), {}).values()
                 if ch == channel), None)


def _interrupted(value: Any) -> str:
    items = value if isinstance(value, list | tuple) else [value]
    return f"{AWAITING}: interrupt({', '.join(_shown(getattr(i, 'value', i)) for i in items)})"


def _reason(index: ThreadIndex, decode: Decode, *, eager: bool) -> dict[str, Any] | None:
    """How the open turn ends, by the thread's latest root checkpoint: ``None`` while
    ``eager`` and the run is not seen to have ended (see the module's docstring)."""
    latest = index.latest("")
    d = index.checkpoints.get(("", latest)) if latest is not None else None
    if d is None:
        return None if eager else {"kind": "completed"}
    if eager and not _writes_in(index, d):
        return None
    interrupt = _mark(index, d, INTERRUPT)
    if interrupt is not None:
        return {"kind": "aborted", "reason": _interrupted(decode(interrupt))}
    error = _mark(index, d, ERROR)
    if error is not None:
        failure = decode(error)
        message = (f"{type(failure).__name__}: {failure}" if isinstance(failure, BaseException)
                   else _shown(failure))
        return {"kind": "error", "step": index.steps, "message": message}
    pending = _next(d)
    if pending == [] and (not eager or d.id in index.turn_checkpoints):
        return {"kind": "completed"}
    if eager:
        return None
    nodes = sorted({c.removeprefix("branch:to:") for c in pending or ()
                    if c.startswith("branch:to:")})
    where = f"before {', '.join(nodes)}" if nodes else "before its next tasks"
    return {"kind": "aborted", "reason": f"{AWAITING}: the run stopped {where}"}


def stop_reason(index: ThreadIndex, decode: Decode) -> dict[str, Any]:
    """How the open turn ends when its run is known to have stopped (the next run
    started, or the saver closed): as the run was seen to end, else ``completed`` when
    its latest checkpoint has nothing next, else ``aborted`` ``awaiting input: the run
    stopped before ...`` (a pause before its next tasks; a run stopped otherwise, by an
    exception outside its tasks, cannot be told from it)."""
    reason = _reason(index, decode, eager=False)
    assert reason is not None
    return reason


# --- turns and steps ------------------------------------------------------------------


def _close(session: Session, index: ThreadIndex, reason: dict[str, Any]) -> None:
    turn = index.open_turn
    if index.open_step is not None:
        _append(session, index, "step/end", {"turn": turn, "step": index.open_step})
    _append(session, index, "turn/end", {"turn": turn, "reason": reason})


def close_open(session: Session, index: ThreadIndex, decode: Decode) -> bool:
    """End the open turn, if any, with :func:`stop_reason`; whether one was open."""
    if index.open_turn is None:
        return False
    _close(session, index, stop_reason(index, decode))
    return True


def _begin(session: Session, index: ThreadIndex, start: bool, trigger: dict[str, Any],
           decode: Decode, paused: str | None = None) -> None:
    """Before a write: end the open turn if the write starts a run and the turn is
    another run's (it holds a checkpoint, or is not a run's early write; for a run that
    continued checkpoint ``paused``, it holds that one), then open one if none is."""
    turn = index.open_turn is not None
    if start and turn and (paused in index.turn_checkpoints if paused is not None
                           else index.turn_checkpoints or not index.turn_early):
        close_open(session, index, decode)
    if index.open_turn is None:
        _append(session, index, "turn/start", {"turn": index.turn + 1, "trigger": trigger})


def _end(session: Session, index: ThreadIndex, decode: Decode) -> None:
    """After a write: end the turn if its run is seen to have ended."""
    if index.open_turn is not None:
        reason = _reason(index, decode, eager=True)
        if reason is not None:
            _close(session, index, reason)


def record_put(session: Session, index: ThreadIndex, data: LanggraphCheckpointData,
               messages: Sequence[Any], human: bool, decode: Decode) -> None:
    """Append a ``put``: its ``langgraph/checkpoint`` and the events of its new
    ``messages``, in the open turn or the one it starts (``human``: the input holds a
    human message, the trigger is then a message from the user)."""
    start, paused = False, None
    if data.ns == "":
        parent = index.checkpoints.get(("", data.parent_id)) if data.parent_id else None
        start = data.metadata.get("source") in _STARTS
        if (not start and parent is not None and INTERRUPT in data.versions_seen
                and data.versions_seen[INTERRUPT] != parent.versions_seen.get(INTERRUPT)):
            start, paused = True, parent.id
    _begin(session, index, start,
           _USER if human and data.metadata.get("source") == "input" else _PLUGIN, decode,
           paused)
    source = (_append(session, index, "langgraph/checkpoint", data).seq,)
    for message in messages:
        _record(session, index, message, source)
    if data.ns == "":
        _end(session, index, decode)


def record_writes(session: Session, index: ThreadIndex, data: LanggraphWritesData,
                  resume: Any, resumed: bool, decode: Decode) -> None:
    """Append a ``put_writes``: its ``langgraph/writes`` (and, for a
    ``Command(resume=...)``, its value as ``langgraph/resume``), in the open turn or
    the one it starts."""
    start = resumed and data.ns == "" and data.task_id == NULL_TASK_ID
    _begin(session, index, start, _PLUGIN, decode)
    _append(session, index, "langgraph/writes", data)
    if start:
        _append(session, index, "langgraph/resume", LanggraphResumeData(
            checkpoint_id=data.checkpoint_id, value=_shown(resume)))
    if data.ns == "":
        _end(session, index, decode)


def _step(session: Session, index: ThreadIndex) -> int:
    """Open the turn's next step (ending the open one)."""
    if index.open_step is not None:
        _append(session, index, "step/end", {"turn": index.open_turn, "step": index.open_step})
    step = index.steps + 1
    _append(session, index, "step/start", {"turn": index.open_turn, "step": step})
    return step


def _record(session: Session, index: ThreadIndex, message: Any,
            source: tuple[int, ...]) -> None:
    """Append the events of one LangChain message (see the module's docstring)."""
    index.messages.add(message.id)
    turn, kind = index.open_turn, message.type
    if kind == "human":
        content = blocks(message.content)
        if content:
            if index.open_step is not None:
                _append(session, index, "step/end", {"turn": turn, "step": index.open_step})
            _append(session, index, "user/message",
                    {"content": content, "source": {"kind": "user"}},
                    surface_op="append", source_event_seqs=source)
        return
    if kind == "ai":
        content, _ = ai_content(message)
        if not content:
            return
        step = _step(session, index)
        assistant: dict[str, Any] = {"turn": turn, "step": step, "content": content}
        found = usage(message)
        if found is not None:
            assistant["usage"] = found
        _append(session, index, "assistant/message", assistant, surface_op="append",
                source_event_seqs=source)
        return
    # A tool message: its call and result, in the step that asked for the call.
    call_id = getattr(message, "tool_call_id", None) or "call"
    step = (index.open_step if index.open_step is not None and call_id in index.step_calls
            else _step(session, index))
    name, arguments = index.call_info.get(call_id, (getattr(message, "name", None) or "", "{}"))
    call = _append(session, index, "tool/call", {"turn": turn, "step": step, "callId": call_id,
                                                 "name": name, "arguments": arguments})
    _append(session, index, "tool/result",
            {"turn": turn, "step": step, "callId": call_id,
             "content": blocks(message.content) or [{"type": "text", "text": ""}],
             "isError": getattr(message, "status", "success") == "error"},
            surface_op="append", source_event_seqs=(call.seq,))
