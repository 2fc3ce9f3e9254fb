"""The mapping from SDK items to dsh events (:func:`record_items`).

Each item is kept verbatim as ``agents/item`` (what ``get_items`` gives back), then
recorded as the typed event that carries it in the conversation: ``user/message``,
``assistant/message`` (text, a ``reasoning`` block, or a ``tool-call`` block, one message
an item), ``tool/call``, ``tool/result``.

With the SDK's run context (``wrapper``, one per ``Runner.run``), the items one run adds
are one turn: it opens at the run's first saved batch (its trigger says where the input
came from), each model call is one step (told apart by ``wrapper.usage.requests``, its
usage on the step's first ``assistant/message``), and the turn ends when the run is seen
to end (:func:`_finish`): a final assistant message with every call answered
(``completed``), calls left waiting for an approval (``aborted``), or, for a run that
stopped saving without either, when it is seen to have stopped (:mod:`._watch`: the
task running it ended, its run context was collected) or the next run starts, or the
session is popped, cleared or closed (``error``: max turns and an error cannot be told
apart; ``aborted`` when the task running it was cancelled). Without a
wrapper, each ``add_items`` call is closed when it returns, a new turn at each user
message that follows model output (the grouping of direct calls).

The pops and clears of the item view are written by :func:`record_pop` and
:func:`record_clear`, with a surface ``replace`` that makes the derived conversation
the view's (:func:`_resurface`).
"""

from __future__ import annotations

__all__ = ["record_items"]

import weakref
from collections.abc import Sequence
from typing import Any

from msgspec import UNSET

from dsh_session_core import (
    Message,
    ReasoningBlock,
    Session,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    resurface,
    to_wire,
)
from dsh_session_core.errors import AppendError

from ._view import _LogIndex

#: The plugin named as the source of a run's input that is no user message (a run
#: resumed after an approval, a run given tool outputs).
PLUGIN = "openai-agents"
#: The reason of a turn whose calls wait for an approval (the run was interrupted).
APPROVAL = "interrupted: awaiting tool approval"
#: The code of a run's turn closed after it stopped saving without a final message.
INCOMPLETE = "no-final-output"
#: The reason of a run's turn whose task was cancelled before it saved a final message.
CANCELLED = "cancelled: the task running the run was cancelled before its final output"


def _text_blocks(content: Any) -> list[TextBlock]:
    """The text of a message's or an output's content: a string, or the text parts of a
    list (``input_text``, ``output_text``, ``refusal``); other parts are kept in the
    ``agents/item`` only."""
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[TextBlock] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind in ("input_text", "output_text", "text") and isinstance(
                part.get("text"), str
            ):
                blocks.append(TextBlock(text=part["text"]))
            elif kind == "refusal" and isinstance(part.get("refusal"), str):
                blocks.append(TextBlock(text=part["refusal"]))
    return blocks


def _reasoning_block(item: dict[str, Any]) -> ReasoningBlock:
    """A ``reasoning`` item as a block: its summary (and content) texts, its id and its
    ``encrypted_content``, which a Responses request takes back."""
    texts: list[str] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, list):
            texts.extend(p["text"] for p in parts
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    rid, enc = item.get("id"), item.get("encrypted_content")
    return ReasoningBlock(text="\n\n".join(texts),
                          id=rid if isinstance(rid, str) else UNSET,
                          encrypted_content=enc if isinstance(enc, str) else UNSET)


def _kind(item: Any) -> str:
    """What an item is recorded as: ``user``, ``assistant``, ``reasoning``, ``call``,
    ``output``, or ``other`` (kept as ``agents/item`` only)."""
    if not isinstance(item, dict):
        return "other"
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message"):
        if role == "user":
            return "user"
        if role == "assistant":
            return "assistant"
        return "other"
    if kind == "reasoning":
        return "reasoning"
    if (kind == "function_call" and isinstance(item.get("call_id"), str)
            and isinstance(item.get("name"), str) and isinstance(item.get("arguments"), str)):
        return "call"
    if kind == "function_call_output" and isinstance(item.get("call_id"), str):
        return "output"
    return "other"


#: Kinds that are model output: they open a step.
_MODEL = frozenset({"assistant", "reasoning", "call"})


#: How many batches one scratch session checks before a new one is made (it keeps what
#: it checked: a copy of the items).
_SCRATCH_CHECKS = 32


def _check_items(index: _LogIndex, items: Sequence[Any]) -> None:
    """Refuse a batch holding an item the log cannot keep (a value JSON cannot carry,
    nesting too deep) before any of it is appended: each item is appended as
    ``agents/item`` to a scratch session with the same event types and rules, which
    raises what the real append would (:class:`~dsh_session_core.errors.NotJsonError`,
    ``TooDeepError``). The index's scratch session serves several batches (making
    one costs as much as a third of checking one item)."""
    scratch = index.scratch
    if scratch is None or len(scratch.events) >= _SCRATCH_CHECKS:
        session = index.session
        scratch = index.scratch = Session(
            session.id, registry=session.registry, strict=session.strict,
            foreign_types=session.foreign_types)
    try:  # the batch in one append: each item one level deeper than its own
        scratch.append("agents/item", {"item": list(items)})
    except AppendError:
        # Which item, and why: the error its own append raises (when none does, the
        # batch's one extra level was all that was too deep: every item fits).
        for item in items:
            scratch.append("agents/item", {"item": item})


class _Run:
    """The run whose turn is open in the log, as this instance knows it: its run
    context (a weak reference: identity tells runs apart, and a finished run's context
    is not kept alive), the turn's number, the model request its open step records
    (``wrapper.usage.requests`` when the step opened), and what watches for its stop
    (:mod:`._watch`; ``None`` until watched)."""

    __slots__ = ("request", "turn", "watch", "wrapper")

    def __init__(self, wrapper: Any, turn: int) -> None:
        self.wrapper: weakref.ReferenceType[Any] | None = _ref(wrapper)
        self.turn = turn
        self.request = -1
        self.watch: Any = None

    def of(self, wrapper: Any) -> bool:
        """Whether ``wrapper`` is this run's context."""
        return self.wrapper is not None and self.wrapper() is wrapper


def _ref(wrapper: Any) -> weakref.ReferenceType[Any] | None:
    try:
        return weakref.ref(wrapper)
    except TypeError:
        return None


class Runs:
    """What one :class:`~._session.DshSession` knows of the run it is recording: the
    open run (``None`` when none of its runs has a turn open)."""

    __slots__ = ("run",)

    def __init__(self) -> None:
        self.run: _Run | None = None

    def open_in(self, index: _LogIndex) -> bool:
        """Whether this instance's run still has its turn open in ``index``'s log."""
        run = self.run
        return run is not None and index.turn == run.turn

    def stale(self, index: _LogIndex, wrapper: Any) -> bool:
        """Whether the log has a turn open that a call with ``wrapper`` must end first:
        a turn of another run (or of no run of this instance)."""
        if index.turn is None:
            return False
        run = self.run
        return not (wrapper is not None and run is not None and run.turn == index.turn
                    and run.of(wrapper))


def end_open_turn(index: _LogIndex, runs: Runs, *, cancelled: bool = False) -> None:
    """Close the log's open turn, if any: a run that stopped saving before a final
    message (``error``, code ``no-final-output``; its calls all answered, or a call
    without its output when the process running it died meanwhile); ``aborted`` when
    ``cancelled`` (the task running it was cancelled)."""
    index.update()
    turn = index.turn
    if turn is None:
        runs.run = None  # no turn open: none of a run of ours either
        return
    session = index.session
    step = index.steps
    run = runs.run
    wrapper = run.wrapper() if run is not None and run.wrapper is not None else None
    requests = getattr(getattr(wrapper, "usage", None), "requests", None)
    if isinstance(requests, int) and run is not None and requests > run.request >= 0:
        message = (f"the run stopped after model call {requests}, whose response it "
                   f"never saved: an error")
    else:
        message = ("the run stopped before a final output: max turns exceeded, or an "
                   "error (the session cannot tell which)")
    reason: dict[str, Any] = {"kind": "error", "step": max(step, 1), "message": message,
                              "code": INCOMPLETE}
    if cancelled:
        reason = {"kind": "aborted", "reason": CANCELLED}
    if index.step is not None:
        session.append("step/end", {"turn": turn, "step": index.step})
    session.append("turn/end", {"turn": turn, "reason": reason})
    runs.run = None
    index.update()


def record_items(session: Session, items: Sequence[Any]) -> None:
    """Append ``items`` to ``session`` as one ``add_items`` call without a run context
    does: each as ``agents/item``, followed by the typed event recording it, in turns
    closed when this returns (a new turn at each user message that follows model
    output).

    A batch holding an item the log cannot keep (a value JSON cannot carry, nesting too
    deep) is refused whole, before any of it is appended."""
    _record(_LogIndex(session).update(), items, None, Runs())


def _usage(wrapper: Any, request: int) -> TokenUsage | None:
    """The usage of model call ``request`` (1-based) of a run, from its context's
    per-request entries (none when the model reported none)."""
    entries = getattr(getattr(wrapper, "usage", None), "request_usage_entries", None)
    if not isinstance(entries, list) or not 0 < request <= len(entries):
        return None
    entry = entries[request - 1]
    try:
        cached = entry.input_tokens_details.cached_tokens or 0
        reasoning = entry.output_tokens_details.reasoning_tokens or 0
        return TokenUsage(
            input_tokens=max(entry.input_tokens - cached, 0),
            output_tokens=entry.output_tokens,
            cache_read_tokens=cached if cached else UNSET,
            reasoning_tokens=reasoning if reasoning else UNSET,
        )
    except (AttributeError, TypeError):
        return None


def _record(index: _LogIndex, items: Sequence[Any], wrapper: Any, runs: Runs) -> None:
    """:func:`record_items` on an up-to-date index of the session's log, which it
    leaves up to date; with ``wrapper``, the batch joins its run's turn (see the module
    docstring), and ``runs`` says whether that turn is still open."""
    _check_items(index, items)  # refused here, the session and index are untouched
    try:
        if runs.stale(index, wrapper):
            end_open_turn(index, runs)
        if wrapper is None:
            _record_direct(index, items)
        else:
            _record_run(index, items, wrapper, runs)
    except BaseException:
        index.reset()  # what it kept of a half-appended batch: folded afresh next
        raise
    index.update()


class _Writer:
    """Appends the typed events of items into the log's open turn, opening steps as
    told: the state of one batch (the open step, whether it holds an answer, whether
    its first assistant message has been written)."""

    def __init__(self, index: _LogIndex, turn: int) -> None:
        self.index = index
        self.session = index.session
        self.turn = turn
        self.step: int | None = index.step
        self.answered = False
        self.usage: TokenUsage | None = None

    def open_step(self, usage: TokenUsage | None = None) -> int:
        if self.step is not None:
            self.session.append("step/end", {"turn": self.turn, "step": self.step})
        self.index.update()
        self.step = self.index.steps + 1
        self.session.append("step/start", {"turn": self.turn, "step": self.step})
        self.answered = False
        self.usage = usage
        return self.step

    def close_step(self) -> None:
        if self.step is not None:
            self.session.append("step/end", {"turn": self.turn, "step": self.step})
            self.step = None

    def assistant(self, blocks: list[Any]) -> None:
        data: dict[str, Any] = {"turn": self.turn, "step": self.step,
                                "content": [to_wire(b) for b in blocks]}
        if self.usage is not None:
            data["usage"] = to_wire(self.usage)
            self.usage = None
        self.session.append("assistant/message", data, surface_op="append")

    def item(self, item: Any, kind: str) -> None:
        session, calls = self.session, self.index.calls
        session.append("agents/item", {"item": item})
        if kind == "user":
            blocks = _text_blocks(item.get("content"))
            if not blocks:
                return
            # A user message inside a run's turn too (its input given again, a
            # resumed run's): the conversation reads it as the user's, as the SDK does.
            session.append("user/message", {"content": [to_wire(b) for b in blocks],
                                            "source": {"kind": "user"}},
                           surface_op="append")
            return
        if kind == "assistant":
            blocks = _text_blocks(item.get("content"))
            if blocks:
                self.assistant(blocks)
        elif kind == "reasoning":
            self.assistant([_reasoning_block(item)])
        elif kind == "call":
            block = ToolCallBlock(id=item["call_id"], name=item["name"],
                                  arguments=item["arguments"])
            self.assistant([block])
            session.append("tool/call", {"turn": self.turn, "step": self.step,
                                         "callId": block.id, "name": block.name,
                                         "arguments": block.arguments})
        elif kind == "output":
            call_id = item["call_id"]
            self.index.update()  # the calls this batch recorded (folded, not set here)
            open_seqs = calls.open.get(call_id)
            if not open_seqs:
                return  # an output of no recorded call: kept as the item only
            seq = open_seqs[-1]  # the newest (the SDK does not keep call ids unique)
            if self.step is None:
                self.open_step()
            output = item.get("output")
            blocks = _text_blocks(output) if output is not None else []
            session.append(
                "tool/result",
                {"turn": self.turn, "step": self.step, "callId": call_id,
                 "content": [to_wire(b) for b in blocks], "isError": False},
                surface_op="append", source_event_seqs=[seq])
            self.answered = True


def _start_turn(index: _LogIndex, first: Any) -> int:
    """Append ``turn/start`` (its trigger: a user message when ``first`` is one, else
    this plugin) and return its number."""
    index.update()
    number = index.last_turn + 1
    source = ({"kind": "user"} if _kind(first) == "user"
              else {"kind": "plugin", "plugin": PLUGIN})
    index.session.append("turn/start", {"turn": number,
                                        "trigger": {"kind": "message", "source": source}})
    index.update()
    return number


def _record_direct(index: _LogIndex, items: Sequence[Any]) -> None:
    """A batch without a run context: turns closed when it ends (``completed``), a new
    one at each user message that follows model output."""
    groups: list[list[Any]] = []
    model_output = False
    for item in items:
        user = _kind(item) == "user"
        if not groups or (user and model_output):
            groups.append([])
            model_output = False
        groups[-1].append(item)
        model_output = model_output or not user
    for group in groups:
        turn = _start_turn(index, group[0])
        writer = _Writer(index, turn)
        for item in group:
            kind = _kind(item)
            if kind in _MODEL and (writer.step is None or writer.answered):
                writer.open_step()
            writer.item(item, kind)
        writer.close_step()
        index.session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        index.update()


def _record_run(index: _LogIndex, items: Sequence[Any], wrapper: Any, runs: Runs) -> None:
    """A batch of a run (``wrapper``): into its open turn, or a new one; each model
    call a step; the turn ended here when the batch shows the run ended."""
    run = runs.run
    if run is None or index.turn is None or run.turn != index.turn or not run.of(wrapper):
        run = runs.run = _Run(wrapper, _start_turn(index, items[0]))
    writer = _Writer(index, run.turn)
    requests = getattr(getattr(wrapper, "usage", None), "requests", 0)
    requests = requests if isinstance(requests, int) else 0
    for item in items:
        kind = _kind(item)
        if kind in _MODEL and (writer.step is None or run.request != requests):
            writer.open_step(_usage(wrapper, requests))
            run.request = requests
        writer.item(item, kind)
    _finish(index, items, wrapper, runs, writer)


def _pending_approval(wrapper: Any, call_ids: Sequence[str]) -> bool:
    """Whether the run holds one of ``call_ids`` as a tool invocation not executed: a
    call the run stopped at to wait for its approval."""
    invocations = getattr(wrapper, "_tool_invocations", None)
    if not isinstance(invocations, dict):
        return False
    for call_id in call_ids:
        record = invocations.get(call_id)
        if record is not None and not getattr(record, "executed", True):
            return True
    return False


def _finish(index: _LogIndex, items: Sequence[Any], wrapper: Any, runs: Runs,
            writer: _Writer) -> None:
    """End the run's turn when its last batch shows how the run ended:

    - its last item a final assistant message and no call of the turn unanswered:
      ``completed``;
    - a call of the turn unanswered that the run holds as waiting for its approval:
      ``aborted`` (``interrupted: awaiting tool approval``); the resumed run (another
      ``Runner.run``) is a turn of its own, triggered by this plugin, and answers the
      call by seq.

    Otherwise the turn stays open: the run goes on (its next model call), or it stopped
    (max turns, an error) and :func:`end_open_turn` closes it later."""
    index.update()
    session, turn = index.session, writer.turn
    open_calls = [call_id for call_id, seqs in index.calls.open.items()
                  if seqs[-1] > index.turn_seq]
    if not open_calls and _kind(items[-1]) == "assistant":
        reason: dict[str, Any] = {"kind": "completed"}
    elif open_calls and _pending_approval(wrapper, open_calls):
        reason = {"kind": "aborted", "reason": APPROVAL}
    else:
        return
    writer.close_step()
    session.append("turn/end", {"turn": turn, "reason": reason})
    runs.run = None
    index.update()


# --- pops and clears: the item view's change, and the surface's -------------------------


def items_to_messages(items: Sequence[Any], like: Session) -> list[Message]:
    """The conversation the mapping records for ``items`` (added without a run
    context), on a scratch session with ``like``'s event types: what
    ``derive_messages()`` of a log whose item view is ``items`` equals."""
    scratch = Session(like.id, registry=like.registry, strict=like.strict,
                      foreign_types=like.foreign_types)
    _record(_LogIndex(scratch).update(), items, None, Runs())
    return scratch.derive_messages()


def _resurface(index: _LogIndex, items: Sequence[Any]) -> None:
    """Make the derived conversation the one of ``items`` (the view after a pop or a
    clear) by one surface ``replace`` (core's ``resurface``: the shadowed events stay in
    the log)."""
    session = index.session
    resurface(session, items_to_messages(items, session), turn=max(index.last_turn, 1))
    index.update()


def _shadow(session: Session, turn: int, seqs: list[int]) -> None:
    """Replace the surface nodes ``seqs`` (consecutive, head to tail) by an empty
    ``assistant/message``: it derives no message."""
    session.append("assistant/message", {"turn": turn, "step": 0, "content": []},
                   surface_op={"op": "replace", "start": seqs[0], "end": seqs[-1]},
                   source_event_seqs=seqs)


def record_pop(index: _LogIndex, runs: Runs, wrapper: Any) -> Any:
    """``pop_item``: an ``agents/pop`` of the view's last item, and the surface made the
    view's; the item (``None`` when the view is empty)."""
    from ._view import _item

    if runs.stale(index, wrapper):
        end_open_turn(index, runs)
    if not index.items:
        return None
    event = index.items[-1]
    index.session.append("agents/pop", {"itemSeq": event.seq})
    index.update()
    if not _unsurface_last(index, event.seq):
        _resurface(index, [e.data.item for e in index.items])
    return _item(event)


def _empty(event: Any) -> bool:
    return event.type == "assistant/message" and not event.data.content


def _unsurface_last(index: _LogIndex, item_seq: int) -> bool:
    """The cheap pop (what it costs is the popped item's events): when the surface ends
    with the nodes of the item at ``item_seq`` (its typed events, between it and the
    next ``agents/item``) and empty replacements only, one ``replace`` of those nodes by
    an empty ``assistant/message`` takes its message off. ``False`` when the surface has
    another shape (then :func:`_resurface` compares the whole conversation)."""
    session = index.session
    events = session.events
    end = item_seq + 1
    while end < len(events) and events[end].type not in ("agents/item", "agents/pop",
                                                            "agents/clear"):
        end += 1
    order = session.surface.order()
    tail: list[int] = []
    for seq in reversed(order):
        if seq <= item_seq:
            break
        if not (seq < end or _empty(events[seq])):
            return False
        tail.append(seq)
    if any(seq <= item_seq for seq in order[len(order) - len(tail):]):
        return False
    if not any(seq < end and session.derive_event_message(events[seq]) is not None
               for seq in tail):
        return True
    tail.reverse()
    _shadow(session, max(index.last_turn, 1), tail)
    index.update()
    return True


def record_clear(index: _LogIndex, runs: Runs, wrapper: Any) -> None:
    """``clear_session``: an ``agents/clear``, and the surface emptied."""
    if runs.stale(index, wrapper):
        end_open_turn(index, runs)
    if index.items:
        index.session.append("agents/clear", {"items": len(index.items)})
        index.update()
    session = index.session
    order = session.surface.order()
    if order and not (len(order) == 1 and _empty(session.events[order[0]])):
        _shadow(session, max(index.last_turn, 1), list(order))
        index.update()
