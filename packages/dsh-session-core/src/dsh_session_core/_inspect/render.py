"""A timeline as text for people, turn by turn.

A timeline (:func:`~.timeline.build_timeline`'s document) as text for people, turn by
turn, one line per item: what ``dsh-session show`` prints, and the demo. Texts from the
log are made printable and cut to the width; colours are the caller's (a ``style``
function), so the text is plain unless the caller paints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .describe import field, obj, usage_text, when
from .text import printable, shorten

if TYPE_CHECKING:
    from .timeline import Item

__all__ = ["Paint", "render_timeline"]


class Paint(Protocol):
    """Paints ``text`` in the named styles (``bold``, ``dim``, ``red``...), or leaves it
    as it is."""

    def __call__(self, text: str, *styles: str) -> str: ...


def _plain(text: str, *styles: str) -> str:
    return text


_KIND_STYLE = {
    "user": ("green", "bold"), "assistant": ("cyan", "bold"), "tool call": ("yellow",),
    "result": ("yellow",), "hook": ("magenta",), "mode": ("blue",), "todo": ("blue",),
    "compact": ("magenta", "bold"), "blocked": ("red",), "step": ("dim",),
}


def _end_style(text: str) -> tuple[str, ...]:
    if text == "completed":
        return ("green",)
    return ("red",) if text.startswith("error") else ("yellow",)


def _range(block_or_item: dict[str, Any], start: str, end: str) -> str:
    a, b = block_or_item.get(start), block_or_item.get(end)
    return f"seq {field(a)}" if b is None or b == a else f"seq {field(a)}-{field(b)}"


def _render_head(doc: dict[str, Any], style: Paint) -> list[str]:
    h = obj(doc["header"])
    facts = [f"created {when(h.get('createdAt'))}"]
    if "cwd" in h:
        facts.append(f"cwd {printable(field(h['cwd']))}")
    facts.append(f"format v{field(h['version'])}" if "version" in h else "no format version")
    if "parentSession" in h:
        facts.append(f"forked from {printable(field(h['parentSession']))}")
    if "seedLength" in h:
        facts.append(f"seed {field(h['seedLength'])} events")
    surface = doc["surface"]
    folded = ("messages cannot be derived" if "error" in surface else
              f"surface {surface['nodes']} node(s) → {surface['messages']} message(s)")
    label = [f"  {printable(doc['label'])}"] if "label" in doc else []
    if "name" in doc:
        label.append(f"  name {printable(field(doc['name']))}"
                     + (" (deleted)" if doc.get("deleted") else ""))
    if doc.get("retained"):
        label.append("  retained: never pruned (dsh-session retain --release to unmark)")
        if "retainedNote" in doc:
            label.append(f"  note: {printable(doc['retainedNote'])}")
    counts = f"  {doc['events']} event(s) · {doc['turns']} turn(s) · {folded}"
    if doc.get("rawFolded"):
        counts += f" · {doc['rawFolded']} raw record(s) folded away (--raw shows them)"
    return [
        f"{style('session', 'bold')} {style(printable(field(h.get('id'))), 'bold')}",
        *label,
        "  " + " · ".join(facts),
        counts,
    ]


def render_timeline(doc: dict[str, Any], style: Paint | None = None, width: int = 100) -> str:
    """The timeline (:func:`~.timeline.build_timeline`'s document) for people: its head,
    then each block and one line per item, each line cut to ``width`` characters.

    :param style: how to paint a text in named styles (``style("failed", "bold",
        "red")``: ``bold``, ``dim`` and the colours red, green, yellow, blue, magenta and
        cyan), such as the CLI's ANSI ``Style``; default: plain text.
    """
    style = style if style is not None else _plain
    lines = _render_head(doc, style)
    last = max((b["endSeq"] for b in doc["timeline"] if isinstance(b["endSeq"], int)),
               default=0)
    pad = len(str(last))
    for block in doc["timeline"]:
        lines.append("")
        if block["turn"] is None:
            lines.append(style(f"outside a turn · {_range(block, 'startSeq', 'endSeq')}", "bold"))
        else:
            head = [style(f"turn {field(block['turn'])}", "bold"), block["trigger"],
                    _range(block, "startSeq", "endSeq"), f"{block['steps']} step(s)"]
            if block["chunks"]:
                head.append(f"{block['chunks']} chunk(s)")
            end = block["end"]["text"]
            head.append(style(shorten(end, 60), *_end_style(end)))
            lines.append(" · ".join(head))
            usage = usage_text(block["usage"])
            if usage:
                lines.append(f"  {style('tokens', 'dim')} {usage}")
        for item in block["items"]:
            lines.append(_render_item(item, pad, style, width))
        if block["turn"] is not None and block["end"]["seq"] is not None:
            end = block["end"]["text"]
            lines.append(f"  {style(str(block['end']['seq']).rjust(pad), 'dim')} "
                         f"{'end':<10} {style(shorten(end, width - pad - 16), *_end_style(end))}")
    return "\n".join(lines) + "\n"


def _render_item(item: Item, pad: int, style: Paint, width: int) -> str:
    seq = style(field(item["seq"]).rjust(pad), "dim")
    indent = "  " if item["inStep"] else ""
    kind = item["kind"]
    if kind == "step":
        text = _range(item, "seq", "endSeq") if item["endSeq"] is not None else "not ended"
        chunks = f" · {item['chunks']} chunk(s)" if item["chunks"] else ""
        return f"  {seq} {style(item['text'], 'bold')} · {text}{chunks}"
    suffix = ""
    unanswered = item.get("unanswered")
    if kind == "tool call":
        result = item["result"]
        suffix = (" → no result" if result is None else
                  f" → #{field(result['seq'])} {'error' if result['isError'] else 'ok'}")
        if unanswered:
            suffix = " → no result (unanswered)"
    elif unanswered:  # calls of a message that no tool/call logged
        suffix = f" → unanswered call(s) {', '.join(map(printable, unanswered))}"
    room = width - pad - len(indent) - 16 - len(suffix)
    text = shorten(item["text"], room)
    colours = _KIND_STYLE.get(kind, ())
    if item.get("error") or suffix.endswith("error") or unanswered:
        colours = ("red",)
    label = style(f"{kind:<10}", *colours)
    return f"  {seq} {indent}{label} {text}{style(suffix, *colours)}"
