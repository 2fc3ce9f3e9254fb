"""The JSON documents the viewer serves and exports: one session's document (its header,
turn blocks, derived messages, charts), its pages by turn block, and its raw events.

Every fact comes from core's readers: the turn blocks are ``dsh-session show``'s
(:func:`dsh_session_core.inspect.build_timeline`, texts kept up to
:data:`TEXT_LIMIT` characters instead of 300), and which events each block holds is its
rule (:func:`dsh_session_core.inspect.timeline_blocks`: the charts' bars, the first page of
a long log); whether the session is ``retained`` (never pruned) is the read model's; the
messages are the session's derived messages, each with the events it came from. This
module only arranges them for the page.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from dsh_session_core import EventRegistry
    from dsh_session_core.events import Event
    from dsh_session_core.inspect import Source

__all__ = ["PAGE_TURNS", "TEXT_LIMIT", "SessionDocument", "build_document", "quick_page"]

#: Texts longer than this are cut (and flagged ``cut``); the raw event has them whole.
TEXT_LIMIT: Final = 4000
#: Turn blocks in a page, by default.
PAGE_TURNS: Final = 50


def _cut(value: Any) -> tuple[Any, bool]:
    """``value`` with every string longer than :data:`TEXT_LIMIT` cut, and whether any was."""
    if isinstance(value, str):
        return (value[:TEXT_LIMIT], True) if len(value) > TEXT_LIMIT else (value, False)
    if isinstance(value, list):
        out, cut = [], False
        for v in value:
            v, c = _cut(v)
            out.append(v)
            cut = cut or c
        return out, cut
    if isinstance(value, dict):
        new, cut = {}, False
        for k, v in value.items():
            new[k], c = _cut(v)
            cut = cut or c
        return new, cut
    return value, False


def _int_list(value: Any) -> list[int]:
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _kind(reason: Any) -> str | None:
    kind = reason.get("kind") if isinstance(reason, dict) else None
    return kind if isinstance(kind, str) else None


def _blocks(timeline: list[dict[str, Any]], open_interrupted: bool) -> None:
    """Mark each block's end kind, cut its texts, in place."""
    for block in timeline:
        end = block["end"]
        if block["turn"] is None:
            block["endKind"] = None
            block["interrupted"] = False
        elif end is None or end["seq"] is None:
            block["endKind"] = "interrupted" if open_interrupted else "open"
            block["interrupted"] = True
        else:
            kind = _kind(end.get("reason")) or "unknown"
            block["endKind"] = kind
            block["interrupted"] = kind == "interrupted"
        for item in block["items"]:
            text = item.get("text")
            if isinstance(text, str) and len(text) > TEXT_LIMIT:
                item["text"] = text[:TEXT_LIMIT]
                item["cut"] = True


def _replaced(events: list[Event], wires: dict[int, Any], start: Any, end: Any) -> list[int]:
    """The seqs a replace op over ``start..end`` shadowed: a compaction summary's own
    account when one names that range, else the surface events in it."""
    for wire in wires.values():
        data = wire.get("data") if isinstance(wire, dict) else None
        if wire.get("type") == "compact/summary" and isinstance(data, dict):
            span = data.get("shadowedRange")
            if isinstance(span, dict) and span.get("start") == start and span.get("end") == end:
                return _int_list(data.get("shadowedSeqs"))
    if not (isinstance(start, int) and isinstance(end, int)):
        return []
    from msgspec import UNSET

    return [e.seq for e in events if isinstance(e.seq, int) and start <= e.seq <= end
            and getattr(e, "surface_op", UNSET) is not UNSET]


def _messages(source: Source, reg: EventRegistry) -> tuple[list[dict[str, Any]], str | None]:
    """The derived messages, each with its node's seq, its ``sourceEventSeqs`` and, for a
    replacing node, what it replaced; or why they cannot be derived."""
    from msgspec import UNSET

    from dsh_session_core import Session
    from dsh_session_core.inspect import encode_json, one_line, wire_of
    from dsh_session_core.jscompat import json_parse

    try:
        session = Session(source.header.id, source.events, source.header, registry=reg)
        derived = session.derive_messages()
        nodes = session.surface.seqs
    except Exception as exc:  # shown as a warning, as show does
        return [], one_line(exc)
    by_seq = {e.seq: e for e in source.events}
    if len(derived) == len(nodes):
        pairs = list(zip(nodes, derived, strict=True))
    else:  # a node that projects to nothing: pair each node with its own projection
        pairs = [(s, m) for s in nodes if (m := by_seq[s].message()) is not None]
    summaries = {e.seq: wire_of(e) for e in source.events if e.type == "compact/summary"}
    out = []
    for seq, message in pairs:
        event = by_seq[seq]
        line = encode_json(message)
        wire, cut = json_parse(line), False
        if len(line) > TEXT_LIMIT:  # only then can a text be too long
            wire, cut = _cut(wire)
        row: dict[str, Any] = {"seq": seq, **wire}
        if cut:
            row["cut"] = True
        sources = [seq]
        for s in _int_list(getattr(event, "source_event_seqs", UNSET)):
            if s not in sources:
                sources.append(s)
        row["sourceEventSeqs"] = sources
        op = getattr(event, "surface_op", UNSET)
        op = wire_of(op) if op is not UNSET else None
        if isinstance(op, dict) and op.get("op") == "replace":
            row["replaces"] = {"start": op.get("start"), "end": op.get("end")}
            row["replacedSeqs"] = _replaced(source.events, summaries, op.get("start"),
                                            op.get("end"))
        out.append(row)
    return out, None


def _charts(events: list[Event], blocks: list[range]) -> dict[str, Any]:
    """Per turn block (``blocks``: :func:`~dsh_session_core.inspect.timeline_blocks` of
    ``events``): tokens in, out and cache read (the sum of its assistant messages'
    ``usage``), and its events counted by type."""
    from dsh_session_core.inspect import wire_of

    def number(value: Any) -> int | float:
        return value if isinstance(value, int | float) and not isinstance(value, bool) else 0

    turns: list[Any] = []
    tokens: list[list[int | float]] = []
    counts: list[Counter[str]] = []
    for span in blocks:
        block = events[span.start:span.stop]
        first = block[0]
        data = wire_of(first.data) if first.type == "turn/start" else None
        turns.append(data.get("turn") if isinstance(data, dict) else None)
        used: list[int | float] = [0, 0, 0]
        for event in block:
            if event.type == "assistant/message":
                wire = wire_of(event.data)
                usage = wire.get("usage") if isinstance(wire, dict) else None
                if isinstance(usage, dict):
                    used[0] += number(usage.get("inputTokens"))
                    used[1] += number(usage.get("outputTokens"))
                    used[2] += number(usage.get("cacheReadTokens"))
        tokens.append(used)
        counts.append(Counter(e.type for e in block))
    totals: Counter[str] = Counter()
    for c in counts:
        totals.update(c)
    types = [t for t, _ in totals.most_common()]
    return {"turns": turns, "tokens": tokens, "types": types,
            "counts": [[c.get(t, 0) for t in types] for c in counts]}


class SessionDocument:
    """One session, arranged for the page: built once, then served by pages of turn blocks.

    :ivar session_id: its id.
    :ivar head: what every page carries (header, counts, surface, warnings, closers).
    :ivar timeline: every turn block (show's, texts up to :data:`TEXT_LIMIT`).
    :ivar messages: the derived messages, in surface order.
    :ivar charts: tokens and event types per block.
    :ivar seqs: each event's seq, in log order (aligned with ``lines``).
    """

    def __init__(self, source: Source, reg: EventRegistry, *, charts: bool = True) -> None:
        from dsh_session_core.inspect import build_timeline, timeline_blocks, wire_of

        # The raw records of adapters kept, marked: the page folds them away until its
        # toggle shows them (as `show` does until --raw).
        doc = build_timeline(source, reg, raw=True)
        timeline: list[dict[str, Any]] = doc["timeline"]
        _blocks(timeline, open_interrupted=bool(source.closers))
        messages, problem = _messages(source, reg)
        warnings: list[str] = doc["warnings"]
        if problem is not None and not any("cannot be derived" in w for w in warnings):
            warnings.append(f"the messages cannot be derived: {problem}")
        self.session_id: str = source.header.id
        self.timeline = timeline
        self.messages = messages
        self.charts = (_charts(source.events, timeline_blocks(source.events)) if charts
                       else {})
        self._events = source.events
        self._lines: list[bytes] | None = None
        self.seqs = [e.seq for e in source.events]
        last = source.events[-1].seq if source.events else None
        self.head: dict[str, Any] = {
            "session": source.header.id,
            "source": doc["source"],
            "header": doc["header"],
            **{k: doc[k] for k in ("label", "name", "deleted") if k in doc},
            "events": doc["events"],
            "lastSeq": last,
            "turns": doc["turns"],
            "turnCount": len(timeline),
            "surface": doc["surface"],
            "warnings": warnings,
            "closers": [wire_of(c) for c in source.closers],
            "unanswered": doc["unanswered"],
            **{k: doc[k] for k in ("retained", "retainedNote") if k in doc},
        }

    @property
    def lines(self) -> list[bytes]:
        """Each event's log line (wire JSON), encoded on first use."""
        if self._lines is None:
            from dsh_session_core.inspect import event_line

            self._lines = [event_line(e) for e in self._events]
        return self._lines

    def page(self, start: int, end: int) -> dict[str, Any]:
        """Turn blocks ``start..end`` (inclusive, clamped), the messages whose nodes fall
        in them, and the charts on the first and the last page."""
        count = len(self.timeline)
        start = max(0, min(start, count))
        end = max(start - 1, min(end, count - 1))
        blocks = self.timeline[start:end + 1]
        lo = None if start == 0 or not blocks else blocks[0]["startSeq"]
        hi = None if end >= count - 1 or not blocks else blocks[-1]["endSeq"]
        messages = [m for m in self.messages
                    if (lo is None or not isinstance(lo, int) or m["seq"] >= lo)
                    and (hi is None or not isinstance(hi, int) or m["seq"] <= hi)]
        if not blocks and count:
            messages = []
        doc = dict(self.head)
        doc.update(range=[start, end], timeline=blocks, messages=messages,
                   complete=start == 0 and end >= count - 1)
        if start == 0 or end >= count - 1:
            doc["charts"] = self.charts
        return doc

    def whole(self) -> dict[str, Any]:
        """Every turn block and message: the export's document."""
        return self.page(0, len(self.timeline) - 1)

    def events_after(self, after: int | None, limit: int) -> bytes:
        """Up to ``limit`` raw events with a seq above ``after`` (from the first without),
        as ``{"events": [...], "more": bool}`` JSON."""
        start = 0
        if after is not None:
            start = next((i for i, s in enumerate(self.seqs)
                          if isinstance(s, int) and s > after), len(self.seqs))
        chosen = self.lines[start:start + limit]
        more = start + limit < len(self.lines)
        return (b'{"events":[' + b",".join(chosen) + b'],"more":'
                + (b"true" if more else b"false") + b"}")


#: Unanswered calls named in a quick page's warnings (the whole document names as many).
_NAMED: Final = 5


def _unanswered(events: list[Event], timeline: list[dict[str, Any]]) -> list[Any]:
    """The whole log's unanswered tool calls; a prefix's line flagged as one that a
    later result answers loses the flag (its block cannot see that result)."""
    from dsh_session_core.inspect import unanswered_calls

    calls = unanswered_calls(events)
    seqs = {c.seq for c in calls}
    for block in timeline:
        for item in block["items"]:
            if "unanswered" in item and item["seq"] not in seqs:
                del item["unanswered"]
    return calls


def build_document(source: Source, reg: EventRegistry) -> SessionDocument:
    """The document of a session read by core's SOURCE rule."""
    return SessionDocument(source, reg)


def quick_page(source: Source, reg: EventRegistry, count: int = PAGE_TURNS
               ) -> dict[str, Any]:
    """The first ``count`` turn blocks before the whole document is built (a big log
    takes a second or more): show's timeline of the log up to the start of block
    ``count``, with the whole log's counts, warnings and charts. It is marked
    ``partial``: what a later event changes (a call's result in a later block, a
    compaction that shadows messages of these blocks, the surface's size) is not in
    it until the page is fetched again with ``full=1``."""
    import copy

    from dsh_session_core.inspect import timeline_blocks, wire_of

    events = source.events
    blocks = timeline_blocks(events)
    cut = blocks[count].start if len(blocks) > count else len(events)
    # The same session cut short, keeping what the read model said of it (``retained``
    # among them); its warnings start empty: the page takes the whole log's below.
    prefix = copy.copy(source)
    prefix.events, prefix.warnings = events[:cut], []
    prefix.closers = source.closers if cut == len(events) else []
    doc = SessionDocument(prefix, reg, charts=False)
    page = doc.page(0, count - 1)
    unanswered = _unanswered(events, page["timeline"])
    page.update(
        events=len(events), lastSeq=events[-1].seq if events else None,
        turns=sum(e.type == "turn/start" for e in events), turnCount=len(blocks),
        warnings=[*source.warnings, *(c.describe() for c in unanswered[:_NAMED])],
        closers=[wire_of(c) for c in source.closers],
        unanswered=[{"callId": c.call_id, "name": c.name, "seq": c.seq,
                     "messageSeq": c.message_seq, "openTurn": c.open_turn}
                    for c in unanswered],
        surface={"pending": True}, charts=_charts(events, blocks),
        complete=len(blocks) <= count, partial=cut < len(events),
    )
    return page
