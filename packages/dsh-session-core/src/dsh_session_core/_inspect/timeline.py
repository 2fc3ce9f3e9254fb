"""A session's timeline, turn by turn, as one JSON-ready document.

What ``dsh-session show`` prints and the viewer pages through.

Each turn block holds its trigger, its steps (with how many stream chunks each
streamed), one item per message, tool calls with their results (matched by ``callId``,
errors marked), hook decisions (``hook/invoked`` paired with its ``hook/result`` by
``handlerId``), mode changes, todo state, compactions with what they shadowed, the
tokens its assistant messages used, and why it ended. Events outside any turn are
grouped as such. Which events each block holds is one rule, :func:`timeline_blocks`,
which a reader that needs the blocks of a long log without describing it (the viewer's
first page, its charts) calls alone.

The timeline is built from the wire shape only (see :mod:`.describe`), so it never
fails on an odd log: what cannot be understood is shown as JSON, and what is wrong with
the log (seq gaps, a surface that cannot be folded, a turn that never ended, a tool
call no result answers) is a warning; an unanswered call's item is marked too.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Final

from .describe import (
    LABELS,
    blocks_text,
    compact_head,
    describe,
    field,
    hook_outcome,
    obj,
    reason_text,
    trigger_text,
    usage_sum,
    wire_events,
    wire_of,
)
from .stores import installed_plugins

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._plugins.manager import PluginManager
    from .._schema.registry import EventRegistry
    from ..events import Event
    from .sources import Source

__all__ = ["Block", "Item", "build_timeline", "timeline_blocks"]

Item = dict[str, Any]
Block = dict[str, Any]


def timeline_blocks(events: Sequence[Event]) -> list[range]:
    """The events each block of the timeline holds, in order: one range of indices into
    ``events`` per block, the blocks covering every event once.

    The rule: a ``turn/start`` opens a turn block (one whose data names no ``turn`` is
    shown as outside a turn, and nothing but the next ``turn/start`` ends it); any other
    event with no block open opens a block outside a turn; a ``turn/end`` closes the
    turn block it is in. Only the types of the events and the ``turn`` of each
    ``turn/start`` are read: no event is described.
    """
    starts: list[int] = []
    in_turn = open_ = False
    for i, event in enumerate(events):
        if event.type == "turn/start":
            starts.append(i)
            open_, in_turn = True, _turn_of(event) is not None
        elif not open_:
            starts.append(i)
            open_, in_turn = True, False
        elif event.type == "turn/end" and in_turn:
            open_ = False
    ends = [*starts[1:], len(events)] if starts else []
    return [range(a, b) for a, b in zip(starts, ends, strict=True)]


def _turn_of(event: Event) -> Any:
    """The ``turn`` a ``turn/start``'s data names, as its wire shape has it (``None``:
    none)."""
    return obj(wire_of(event.data)).get("turn")


def _block(turn: Any, start: Any, trigger: str | None) -> Block:
    return {"turn": turn, "startSeq": start, "endSeq": start, "trigger": trigger,
            "end": None, "steps": 0, "chunks": 0, "usage": {}, "items": []}


class _Walk:
    """One pass over the wire events, into the turn blocks :func:`timeline_blocks`
    groups them in."""

    def __init__(
        self, wires: list[dict[str, Any]], opaque: list[bool], warnings: list[str],
        blocks: list[range], raw: frozenset[str], keep_raw: bool,
    ) -> None:
        self.wires = wires
        # The raw records of adapters (EventSpec.raw): items marked ``raw``, or, unless
        # kept, folded away and counted.
        self.raw = raw
        self.keep_raw = keep_raw
        self.folded = 0
        self.opaque = opaque
        self.warnings = warnings
        self.starts = frozenset(b.start for b in blocks)
        self.blocks: list[Block] = []
        self.block: Block | None = None
        self.step: Item | None = None
        self.hooks: dict[Any, Item] = {}
        self.index = 0
        # What the lines need to know ahead: the results of each call id (where they
        # are), and each seq's type (for what a compaction shadowed). Tool names are
        # learnt as calls go by: a result names the latest call with its id.
        self.results: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
        self.names: dict[Any, str] = {}
        self.types: dict[Any, str] = {}
        for i, w in enumerate(wires):
            self.types.setdefault(_key(w.get("seq")), field(w.get("type")))
            if w.get("type") == "tool/result":
                call_id = _key(obj(w.get("data")).get("callId"))
                self.results.setdefault(call_id, []).append((i, w))

    def run(self) -> list[Block]:
        for index, (w, opaque) in enumerate(zip(self.wires, self.opaque, strict=True)):
            self.index = index
            self._event(w, opaque)
        return self.blocks

    def _open(self, turn: Any, seq: Any, trigger: str | None) -> Block:
        self.block = _block(turn, seq, trigger)
        self.blocks.append(self.block)
        self.step = None
        return self.block

    def _event(self, w: dict[str, Any], opaque: bool) -> None:
        kind, seq, data = w.get("type"), w.get("seq"), obj(w.get("data"))
        block = self.block
        if self.index in self.starts:  # a block starts here (a turn/start always does)
            if kind == "turn/start":
                if block is not None and block["turn"] is not None:
                    self.warnings.append(f"turn {field(data.get('turn'))} starts at seq "
                                         f"{field(seq)} before turn {field(block['turn'])} "
                                         f"ended")
                self._open(data.get("turn"), seq, trigger_text(data))
                return
            block = self._open(None, seq, None)
        assert block is not None  # the first event starts a block
        block["endSeq"] = seq
        if kind == "turn/end" and block["turn"] is not None:
            block["end"] = {"seq": seq, "reason": data.get("reason"),
                            "text": reason_text(data.get("reason"))}
            self.block = self.step = None
            return
        if kind == "step/start":
            block["steps"] += 1
            self.step = {"seq": seq, "kind": "step", "type": "step/start",
                         "text": f"step {field(data.get('step'))}", "inStep": False,
                         "endSeq": None, "chunks": 0}
            block["items"].append(self.step)
            return
        if kind == "step/end" and self.step is not None:
            self.step["endSeq"] = seq
            self.step = None
            return
        if kind == "assistant/chunk":
            block["chunks"] += 1
            if self.step is not None:
                self.step["chunks"] += 1
            return
        if kind in self.raw and not self.keep_raw:
            self.folded += 1
            return
        item = self._item(w, kind, seq, data, block)
        if item is not None and kind in self.raw:
            item["raw"] = True
        if item is not None:
            if opaque and field(kind) in LABELS:
                # A known type whose payload fits no schema: show what it holds.
                item["opaque"] = True
                item["text"] += f" · data {describe({'data': w.get('data')})}"
            block["items"].append(item)

    def _item(self, w: dict[str, Any], kind: Any, seq: Any, data: dict[str, Any],
              block: Block) -> Item | None:
        item: Item = {"seq": seq, "kind": LABELS.get(field(kind), field(kind)),
                      "type": field(kind), "text": describe(w, usage=False),
                      "inStep": self.step is not None}
        if obj(w.get("surfaceOp")).get("op") == "replace":
            item["replaces"] = w.get("surfaceOp")
        if kind == "assistant/message":
            usage_sum(block["usage"], data.get("usage"))  # the turn's line shows the sum
            item["usage"] = obj(data.get("usage"))
            for b in data.get("content") or ():
                if obj(b).get("type") == "tool-call":
                    self.names[_key(obj(b).get("id"))] = field(obj(b).get("name"))
        elif kind == "tool/call":
            self.names[_key(data.get("callId"))] = field(data.get("name"))
            later = self.results.get(_key(data.get("callId")), ())
            result = next((r for i, r in later if i > self.index), None)
            item["result"] = None if result is None else {
                "seq": result.get("seq"), "isError": obj(result.get("data")).get("isError") is True}
        elif kind == "tool/result":
            name = self.names.get(_key(data.get("callId")))
            item["error"] = data.get("isError") is True
            item["text"] = f"{name or '(no matching call)'} {item['text']}"
        elif kind == "hook/invoked":
            self.hooks[_key(data.get("handlerId"))] = item
        elif kind == "hook/result":
            invoked = self.hooks.pop(_key(data.get("handlerId")), None)
            if invoked is not None:  # one line per hook: what ran, and what it decided
                invoked["text"] += f" → {hook_outcome(data)}"
                invoked["handlerId"] = data.get("handlerId")
                invoked["decision"] = data.get("decision")
                invoked["resultSeq"] = seq
                return None
            item["decision"] = data.get("decision")
        elif kind == "compact/summary":  # what was shadowed first: the summary is long
            item["shadowedSeqs"] = data.get("shadowedSeqs")
            shadowed = self._shadowed(data.get("shadowedSeqs"))
            item["text"] = f"{compact_head(data, shadowed)}: {blocks_text(data.get('summary'))}"
        elif kind in ("turn/end", "step/end"):  # no turn/start or step/start before it
            item["text"] += f" (without a {field(kind).split('/')[0]}/start)"
        return item

    def _shadowed(self, seqs: Any) -> str:
        """What the shadowed seqs were: ``4 assistant, 2 result, 1 user``."""
        if not isinstance(seqs, list):
            return ""
        counts = Counter(self.types.get(_key(s), "missing") for s in seqs)
        return ", ".join(f"{n} {LABELS.get(t, t)}" for t, n in counts.most_common())


def _key(value: Any) -> Any:
    """A dict key for any JSON scalar (lists and objects are not hashable)."""
    return value if isinstance(value, str | int | float | bool) or value is None else repr(value)


def _surface(source: Source, reg: EventRegistry, warnings: list[str]) -> dict[str, Any]:
    """How the log folds: surface nodes and derived messages, or why it cannot."""
    from .._model.session import Session

    try:
        session = Session(source.header.id, source.events, source.header, registry=reg)
        messages = session.derive_messages()
        return {"nodes": len(session.surface.seqs), "messages": len(messages)}
    except Exception as exc:  # a diagnostic: whatever fails is reported, not raised
        from .text import one_line

        warnings.append(f"the messages cannot be derived: {one_line(exc)}")
        return {"error": one_line(exc)}


def _fits(reg: EventRegistry, event: Event) -> bool:
    """Whether an opaque event's payload fits its type's schema after all (it was kept
    verbatim for its key order, as crash-repair closers are): then its line says all."""
    import msgspec

    entry = reg.get(event.type)
    if entry is None:  # a plugin not installed here: the description reads the wire
        return True
    try:
        msgspec.convert(wire_of(event.data), entry.payload)
    except (msgspec.ValidationError, TypeError):
        return False
    return True


def build_timeline(source: Source, reg: EventRegistry, *,
                   plugins: PluginManager | None = None, raw: bool = False
                   ) -> dict[str, Any]:
    """The timeline of a session, as a JSON-ready document: its ``source``, ``header``,
    ``label`` (a plugin's label for it), ``name`` (the name a plugin gives it, with
    ``deleted: true`` when its framework deleted it), counts, ``surface``, ``warnings``,
    ``closers``, ``unanswered`` calls, the ``timeline``'s blocks, ``rawFolded`` (how
    many raw records of adapters were folded away, when some were), and
    ``retained: true`` (with its ``retainedNote``) when its store marks it never to be
    pruned.

    :param plugins: the plugins that label a session (``label_session``); default: the
        installed ones, loaded once per process.
    :param raw: keep the raw records of adapters (the types registered with
        ``EventSpec(raw=True)``: ``agents/item``, ``adk/event``...), each item marked
        ``raw: true``; by default they are folded away, since their typed twins tell
        what they hold.
    """
    warnings = list(source.warnings)
    surface = _surface(source, reg, warnings)
    from ..events import OpaqueEvent

    opaque = [type(e) is OpaqueEvent and not _fits(reg, e) for e in source.events]
    wires = wire_events(source.events, bare=frozenset({"assistant/chunk"}))
    walk = _Walk(wires, opaque, warnings, timeline_blocks(source.events), reg.raw_types, raw)
    blocks = walk.run()
    for block in blocks:
        if block["turn"] is not None and block["end"] is None:
            block["end"] = {"seq": None, "reason": None, "text": "open (no turn/end)"}
    unanswered = _mark_unanswered(source.events, blocks, warnings)
    from .._persistence.listing import label_of

    label = label_of(source.header, lambda n: source.events[:max(n, 0)],
                     plugins=plugins if plugins is not None else installed_plugins())
    return {
        "source": source.origin,
        "header": wire_of(source.header),
        **({"label": label} if label is not None else {}),
        **_named(source),
        "events": len(source.events),
        "turns": sum(b["turn"] is not None for b in blocks),
        "surface": surface,
        "warnings": warnings,
        "closers": [wire_of(e) for e in source.closers],
        "unanswered": unanswered,
        "timeline": blocks,
        **({"rawFolded": walk.folded} if walk.folded else {}),
        **_retained(source),
    }


def _named(source: Source) -> dict[str, Any]:
    """``name`` (and ``deleted: true``) when a plugin names the session."""
    named = source.name
    if named is None:
        return {}
    return {"name": named.name, **({"deleted": True} if named.deleted else {})}


def _retained(source: Source) -> dict[str, Any]:
    """``retained: true`` when the session's store marks it never to be pruned, with
    the mark's note (``retainedNote``) when it has one; nothing otherwise."""
    if not source.retained:
        return {}
    note = source._retained_note
    return {"retained": True, **({"retainedNote": note} if note is not None else {})}


#: Unanswered calls named one by one in the warnings; the rest are counted.
_NAMED: Final = 5


def _mark_unanswered(events: list[Event], blocks: list[Block], warnings: list[str]
                     ) -> list[dict[str, Any]]:
    """Flag each tool call no ``tool/result`` answers: a warning, and its line (the
    ``tool/call``, else the message that made it) gets ``unanswered``, the ids. The
    calls, as ``--json`` shows them."""
    from .._model.unanswered import unanswered_calls

    calls = unanswered_calls(events)
    if not calls:
        return []
    by_seq: dict[Any, list[str]] = {}
    for call in calls:
        by_seq.setdefault(call.seq, []).append(call.call_id)
    for block in blocks:
        for item in block["items"]:
            ids = by_seq.get(item["seq"])
            if ids is not None and item["type"] in ("tool/call", "assistant/message"):
                item["unanswered"] = ids
    warnings.extend(c.describe() for c in calls[:_NAMED])
    if len(calls) > _NAMED:
        warnings.append(f"... and {len(calls) - _NAMED} more tool call(s) with no tool/result")
    return [{"callId": c.call_id, "name": c.name, "seq": c.seq, "messageSeq": c.message_seq,
             "openTurn": c.open_turn} for c in calls]
