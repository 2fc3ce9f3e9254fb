"""``dsh-session show``: a session's timeline (:func:`~.._inspect.timeline.build_timeline`,
the read model's), printed turn by turn, one line per item, or with ``--json`` as one
JSON document (texts cut to :data:`JSON_TEXT` characters).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._inspect.describe import field, obj, usage_text, when
from .._inspect.timeline import Item, build_timeline
from .support import EXIT_OK, plugin_manager, registry
from .term import Style, printable, shorten, terminal_width

__all__ = ["build_timeline", "render_timeline", "run_show"]

#: Texts in ``--json`` are one line, cut to this many characters (``export`` has it all).
JSON_TEXT = 300

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


def _render_head(doc: dict[str, Any], style: Style) -> list[str]:
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
    if doc.get("retained"):
        label.append("  retained: never pruned (dsh-session retain --release to unmark)")
        if "retainedNote" in doc:
            label.append(f"  note: {printable(doc['retainedNote'])}")
    return [
        f"{style('session', 'bold')} {style(printable(field(h.get('id'))), 'bold')}",
        *label,
        "  " + " · ".join(facts),
        f"  {doc['events']} event(s) · {doc['turns']} turn(s) · {folded}",
    ]


def render_timeline(doc: dict[str, Any], style: Style, width: int) -> str:
    """The timeline for people."""
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


def _render_item(item: Item, pad: int, style: Style, width: int) -> str:
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


def _json_ready(doc: dict[str, Any]) -> dict[str, Any]:
    for block in doc["timeline"]:
        for item in block["items"]:
            item["text"] = shorten(item["text"], JSON_TEXT)
    return doc


def _retained(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """Say in ``doc`` whether the session shown is a stored one marked never to be
    pruned (``retained``), and the mark's note (``retainedNote``: opened with the
    keys on an encrypted store)."""
    from .._inspect.sources import open_store, resolve_source
    from .._persistence.retention.ledger import backend_state, note_of
    from .source import spec_of, store_url

    session_id = obj(doc["header"]).get("id")
    if not isinstance(session_id, str) or resolve_source(spec_of(args)) != "id":
        return
    backend = open_store(store_url(args))
    try:
        mark = backend_state(backend, registry()).marks.get(session_id)
        if mark is None or not mark.retain:
            return
        doc["retained"] = True
        note = note_of(backend, mark)
        if note is not None:
            doc["retainedNote"] = note
    finally:
        backend.close()


def run_show(args: argparse.Namespace) -> int:
    from .source import load_source, out_json, out_text, warn

    reg = registry()
    doc = build_timeline(load_source(args, reg), reg, plugins=plugin_manager())
    _retained(args, doc)
    if args.json:
        out_json(_json_ready(doc))
        return EXIT_OK
    for warning in doc["warnings"]:
        warn(warning)
    out_text(render_timeline(doc, Style.for_stream(sys.stdout), terminal_width()))
    return EXIT_OK
