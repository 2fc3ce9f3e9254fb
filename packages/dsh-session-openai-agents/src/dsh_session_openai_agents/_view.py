"""The SDK's item view of a log: a fold of its ``agents/item``, ``agents/pop`` and
``agents/clear`` events (:func:`fold_items`), read from stored lines alone
(:func:`stored_view`) or kept up to date on a live session (:class:`_LogIndex`, which
also follows the open tool calls the mapping answers)."""

from __future__ import annotations

__all__ = ["VIEW_TYPES", "OpenCalls", "fold_items", "stored_view", "tail_view"]

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import msgspec

from dsh_session_core import Event, Session, to_wire
from dsh_session_core.events import StepEnd, StepStart, ToolCall, ToolResult, TurnEnd, TurnStart

from .events import AgentsClear, AgentsItem, AgentsPop


class OpenCalls:
    """The tool calls of a log no ``tool/result`` answers yet, as the item view has
    them. The SDK does not keep call ids unique, and ``pop_item`` may take back a call
    or an output, so each id keeps a list: ``open``, the seqs of its open ``tool/call``
    events (oldest first), and ``answered``, (``tool/result`` seq, ``tool/call`` seq)
    pairs, so that popping an output opens its call again."""

    __slots__ = ("answered", "open")

    def __init__(self) -> None:
        self.open: dict[str, list[int]] = {}
        self.answered: dict[str, list[tuple[int, int]]] = {}

    def call(self, call_id: str, seq: int) -> None:
        self.open.setdefault(call_id, []).append(seq)

    def answer(self, call_id: str, result_seq: int) -> None:
        """The newest open call of ``call_id`` answered by the result at ``result_seq``."""
        seqs = self.open.get(call_id)
        if not seqs:
            return
        self.answered.setdefault(call_id, []).append((result_seq, seqs.pop()))
        if not seqs:
            del self.open[call_id]

    def withdraw(self, item: Any, item_seq: int) -> None:
        """Undo what the popped item at ``item_seq`` recorded: a ``function_call``'s
        call is no longer open (an output added later answers nothing); a
        ``function_call_output``'s call is open again. Each found as the first of its
        id recorded after the item (none: the item recorded nothing)."""
        if not isinstance(item, Mapping) or not isinstance(call_id := item.get("call_id"), str):
            return
        kind = item.get("type")
        if kind == "function_call":
            seqs = self.open.get(call_id)
            at = next((i for i, seq in enumerate(seqs or ()) if seq > item_seq), None)
            if seqs is not None and at is not None:
                del seqs[at]
                if not seqs:
                    del self.open[call_id]
        elif kind == "function_call_output":
            pairs = self.answered.get(call_id)
            at = next((i for i, (result, _) in enumerate(pairs or ()) if result > item_seq),
                      None)
            if pairs is not None and at is not None:
                _, call_seq = pairs.pop(at)
                bisect.insort(self.open.setdefault(call_id, []), call_seq)

    def clear(self) -> None:
        self.open.clear()
        self.answered.clear()


def _advance(events: Iterable[Event], items: list[AgentsItem], calls: OpenCalls) -> None:
    """Fold ``events`` into the item view (``items``: the ``agents/item`` events it
    holds) and the open tool calls (``calls``)."""
    for event in events:  # by exact class: a reload folds every event of the log
        cls = event.__class__
        if cls is AgentsItem:
            items.append(event)  # type: ignore[arg-type]  # its class says so
        elif cls is ToolCall:
            calls.call(event.data.call_id, event.seq)
        elif cls is ToolResult:
            calls.answer(event.data.call_id, event.seq)
        elif cls is AgentsPop:
            if items and items[-1].seq == event.data.item_seq:
                popped = items.pop()
                # Out of the SDK's history: what the item recorded is taken back.
                calls.withdraw(popped.data.item, popped.seq)
        elif cls is AgentsClear:
            items.clear()
            calls.clear()


def _item(event: AgentsItem) -> Any:
    """The item an ``agents/item`` holds, as a fresh plain JSON value."""
    return to_wire(event.data)["item"]


def _items(events: Sequence[AgentsItem]) -> list[Any]:
    """The items of ``events``, as fresh plain JSON values: in one encode and one decode
    of the list, where an :func:`_item` each costs two calls an item."""
    return cast(list[Any], to_wire([event.data.item for event in events]))


#: The event types the item view is a fold of: a reload of the view reads only these.
VIEW_TYPES = ("agents/item", "agents/pop", "agents/clear")
#: Their lines, decoded in one call into the plugin's own event classes: every payload
#: checked against its schema, each item coming out as a fresh plain JSON value.
_VIEW_DECODER = msgspec.json.Decoder(list[AgentsItem | AgentsPop | AgentsClear])


def stored_view(lines: list[bytes]) -> list[Any] | None:
    """The item view of a stored log from the lines of its ``agents/item``,
    ``agents/pop`` and ``agents/clear`` events (:meth:`DurableStore.read_lines`), or
    ``None`` when a line does not decode into those classes (a line of another type or
    layout, one msgspec cannot read): the caller then loads the log.

    The items are read once, by msgspec, straight into the values returned: a session
    loaded whole decodes each item, freezes it for the log, then copies it out again.
    (Cutting each item's bytes out of its line and decoding those alone measured no
    faster: the items' own objects are the cost, not the envelopes.)"""
    if not lines:
        return []
    try:
        events = _VIEW_DECODER.decode(b"[" + b",".join(lines) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    items: list[AgentsItem] = []
    _advance(events, items, OpenCalls())
    return [event.data.item for event in items]


def tail_view(events: Sequence[Event], limit: int, whole: bool) -> list[Any] | None:
    """The last ``limit`` items of the view from the last events of a log (``whole``:
    they are all of it), or ``None`` when they do not tell (fewer items in them and the
    log goes on before them: read more). Walked from the end: a pop always follows the
    item it takes off, so the pops seen before an item (walking back) are all there
    are of it; a clear ends the walk (nothing before it is in the view)."""
    popped: set[int] = set()
    found: list[AgentsItem] = []
    for event in reversed(events):
        cls = event.__class__
        if cls is AgentsItem:
            if event.seq not in popped:
                found.append(event)  # type: ignore[arg-type]  # its class says so
                if len(found) == limit:
                    break
        elif cls is AgentsPop:
            popped.add(event.data.item_seq)
        elif cls is AgentsClear:
            whole = True
            break
        elif event.type.startswith("agents/"):
            return None  # an item view event this build cannot type: load the log
    else:
        if not whole:
            return None
    if len(found) < limit and not whole:
        return None
    found.reverse()
    return _items(found)


def fold_items(events: Iterable[Event]) -> list[tuple[int, Any]]:
    """The SDK's item list of a log, as ``(seq of its agents/item, item)`` pairs: every
    ``agents/item`` in order, less what ``agents/pop`` took off the end and what
    ``agents/clear`` emptied. The items are fresh plain JSON values."""
    items: list[AgentsItem] = []
    _advance(events, items, OpenCalls())
    return list(zip([event.seq for event in items], _items(items), strict=True))


class _LogIndex:
    """What the operations read of one session's log, the item view and the open tool
    calls, brought up to date from the events appended since it last looked
    (:meth:`update`): on a session kept open, an operation costs what it appends, not
    the length of the log."""

    __slots__ = ("calls", "items", "last_turn", "scanned", "scratch", "session", "step",
                 "steps", "turn", "turn_seq")

    def __init__(self, session: Session) -> None:
        self.session = session
        #: Where the mapping checks a batch before appending it (:mod:`._mapping`).
        self.scratch: Session | None = None
        self.reset()

    def reset(self) -> None:
        """Forget what was folded: the next :meth:`update` folds the whole log."""
        self.scanned = 0
        self.items: list[AgentsItem] = []
        self.calls = OpenCalls()
        #: The open turn's number (``None`` when the last turn ended), the highest turn
        #: number, the open step's number, how many steps the open turn has, and the
        #: seq of the open turn's ``turn/start``.
        self.turn: int | None = None
        self.last_turn = 0
        self.step: int | None = None
        self.steps = 0
        self.turn_seq = -1

    def update(self) -> _LogIndex:
        """Fold in the events appended since the last update (by anyone)."""
        events = self.session.events
        end = len(events)
        if end > self.scanned:
            fresh = events[self.scanned:end]
            _advance(fresh, self.items, self.calls)
            self._turns(fresh)
            self.scanned = end
        return self

    def _turns(self, events: Iterable[Event]) -> None:
        """Follow the turn and step structure (typed events only: an opaque
        ``turn/start`` of a log this build cannot type is not followed)."""
        for event in events:
            cls = event.__class__
            if cls is TurnStart:
                self.turn = event.data.turn
                self.last_turn = max(self.last_turn, event.data.turn)
                self.step, self.steps, self.turn_seq = None, 0, event.seq
            elif cls is TurnEnd:
                self.turn = self.step = None
            elif cls is StepStart:
                self.step = event.data.step
                self.steps = max(self.steps, event.data.step)
            elif cls is StepEnd:
                self.step = None
