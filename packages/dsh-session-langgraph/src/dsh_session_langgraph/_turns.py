"""How a LangGraph run becomes one turn of its thread's log.

A checkpointer sees ``put`` and ``put_writes`` only, so a run (one ``invoke`` or
``stream``) is told by what they carry, in the root namespace:

- **a run starts** with a ``put`` whose metadata ``source`` is ``input`` (a graph given
  an input), ``update`` (``update_state``) or ``fork``; with a write of ``__resume__``
  (``Command(resume=...)``: the null task's, its value recorded as ``langgraph/resume``,
  or that of a task the resume runs again); or with a ``put`` whose
  ``versions_seen["__interrupt__"]`` differs from its parent's (LangGraph marks so the
  first checkpoint of a run that continued a paused one, as ``invoke(None)`` after
  ``interrupt_before``). A start closes the turn still open when it holds a checkpoint
  (see :func:`stop_reason`), and, for a run that continued or resumed a paused
  checkpoint, only when it holds that one; otherwise it goes on in it (a run's writes
  and ``put`` calls stored ahead of the one that starts it, which LangGraph makes in
  parallel).
- **a run ends** when its latest root checkpoint shows it, once every task the run is
  known to have run stored its writes (LangGraph stores a task's writes in a background
  worker, beside its ``put`` calls: they may come after any later ``put``): the tasks
  that made each root checkpoint of the turn (the nodes whose ``versions_seen``
  changed), each having stored a write saying it finished on the checkpoint it ran on
  (:attr:`~._index.ThreadIndex.awaited`), and, for an end by an interrupt or an error,
  the tasks run on the latest (see :func:`_ran_on`). It ends by an ``__interrupt__``
  write on it made in the turn (``interrupt()``: the turn ends ``aborted``, ``awaiting
  input: interrupt(...)`` with the interrupt's value), an ``__error__`` write
  (``error``), or nothing next (``completed``): none of the channels the checkpoint's
  step updated triggers a node (a ``branch:to:``/``join:`` channel, ``__start__``,
  ``__pregel_tasks``, or a channel a node's ``versions_seen`` names). So no write of
  the run's tasks comes after its turn ended.
- **otherwise** the turn stays open: the run goes on, or it paused before its next
  tasks (``interrupt_before``/``interrupt_after``, which store nothing), or it stopped
  (an exception outside a task, a dead process). The next run's start, or the saver's
  :meth:`~._saver.DshCheckpointSaver.close`, ends it with :func:`stop_reason`.

Any other write goes into the open turn, or opens one (its trigger a message from this
plugin, or from the user for the input's write stored ahead of its checkpoint, see
:func:`_trigger`). Messages (``._messages``) make the steps: a step per model call (an
``AIMessage``), holding the ``tool/call`` and ``tool/result`` of each call it made whose
``ToolMessage`` comes while it is open; a result for a call of an earlier step (a run
resumed before its tools) opens a step of its own.
"""

from __future__ import annotations

__all__ = ["AWAITING", "RESUME", "close_open", "record_put", "record_writes", "stop_reason"]

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from dsh_session_core import Event, Session

from ._index import NULL_TASK_ID, ThreadIndex, makers, node_of
from ._messages import ai_content, blocks, human_input, usage
from .events import LanggraphCheckpointData, LanggraphResumeData, LanggraphWritesData, TypedBlob

INTERRUPT, ERROR, RESUME = "__interrupt__", "__error__", "__resume__"
TASKS = "__pregel_tasks"
#: The reason's prefix of a turn that ended waiting for the graph's caller.
AWAITING = "awaiting input"
_USER = {"kind": "message", "source": {"kind": "user"}}
_PLUGIN = {"kind": "message", "source": {"kind": "plugin", "plugin": "langgraph"}}
_TRIGGER_PREFIXES = ("branch:to:", "join:")
_TRIGGERS = frozenset({"__start__", TASKS})
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


def _made(index: ThreadIndex, d: LanggraphCheckpointData) -> bool:
    """Whether the tasks that made ``d``, and those that made each root checkpoint of
    the open turn (:attr:`~._index.ThreadIndex.awaited`), stored the writes saying they
    finished on the checkpoints they ran on (their ``put_writes`` may come after any
    later ``put``)."""
    if index.awaited:
        return False
    parent = index.checkpoints.get(("", d.parent_id)) if d.parent_id else None
    return parent is None or all(index.finished(parent.id, node)
                                 for node in makers(d, parent))


def _ran_on(index: ThreadIndex, d: LanggraphCheckpointData) -> bool:
    """Whether each task run on ``d`` stored a write on it (a run that ends on ``d``
    by an interrupt or an error: the tasks beside the one that paused or failed run to
    their end, or are cancelled, and write all the same). The tasks are the nodes that
    a channel ``d``'s step updated triggers (``branch:to:<node>``, or a channel in the
    node's ``versions_seen``), and one a ``Send`` (``__pregel_tasks``) written on
    ``d``'s parent; ``True`` when ``d`` does not say (no ``updated_channels``)."""
    if not d.updated_channels:
        return True
    stored = index.writes.get(("", d.id), {}).values()
    wrote = {node_of(path) for _, _, _, path, _ in stored}
    updated = set(d.updated_channels)
    for channel in updated:
        if channel.startswith("branch:to:") and channel.removeprefix("branch:to:") not in wrote:
            return False
    if any(node != INTERRUPT and node not in wrote and not updated.isdisjoint(seen)
           for node, seen in d.versions_seen.items()):
        return False
    if TASKS in updated:
        parent = index.writes.get(("", d.parent_id or ""), {}).values()
        sends = sum(1 for _, channel, _, _, _ in parent if channel == TASKS)
        pushed = {task for task, _, _, path, _ in stored if path.startswith("~__pregel_push")}
        return len(pushed) >= sends
    return True


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
    if eager and not _made(index, d):
        return None
    interrupt = _mark(index, d, INTERRUPT)
    error = _mark(index, d, ERROR) if interrupt is None else None
    if (interrupt is not None or error is not None) and eager and not _ran_on(index, d):
        return None
    if interrupt is not None:
        return {"kind": "aborted", "reason": _interrupted(decode(interrupt))}
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
    continued checkpoint ``paused``, or resumed it, it holds that one), then open one if
    none is."""
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
    the one it starts. A write of ``__resume__`` starts a run: the null task's, or that
    of a task the resume ran again, which may be stored first."""
    start = resumed and data.ns == ""
    _begin(session, index, start, _trigger(index, data, decode), decode,
           data.checkpoint_id if start else None)
    _append(session, index, "langgraph/writes", data)
    if start and data.task_id == NULL_TASK_ID:
        _append(session, index, "langgraph/resume", LanggraphResumeData(
            checkpoint_id=data.checkpoint_id, value=_shown(resume)))
    if data.ns == "":
        _end(session, index, decode)


def _trigger(index: ThreadIndex, data: LanggraphWritesData, decode: Decode
             ) -> dict[str, Any]:
    """The trigger of the turn a write opens: a message from the user when it is the
    input's, written by the ``__start__`` task on an input checkpoint not stored yet
    (LangGraph may store it before the checkpoint), and the input holds a human
    message; else a message from the plugin."""
    if (index.open_turn is None and data.ns == "" and node_of(data.task_path) == "__start__"
            and ("", data.checkpoint_id) not in index.checkpoints
            and any(w.channel == "messages" and human_input(decode(w.value))
                    for w in data.writes)):
        return _USER
    return _PLUGIN


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
