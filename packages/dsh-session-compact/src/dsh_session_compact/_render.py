"""Transcript rendering (spec §2.7): content blocks and surface events as plain text.

Pure functions, shared by the summarizer (its prompt is the transcript of the shadowed
range) and by anything that wants to show a range to a person. They never raise on
odd data: an unknown block kind renders as ``[<kind>]``, and an event type with no
label renders as nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dsh_session_core import Event

from ._blocks import content_of, field, kind_of, seq_of_blocks, text_field

__all__ = ["render_content_blocks", "render_transcript"]


def render_content_blocks(blocks: Iterable[object]) -> str:
    """Render content blocks as text, one part per line.

    ``text`` is its text; ``reasoning`` is ``[reasoning: <text>]``; ``tool-call`` is
    ``[tool-call: <name>(<arguments>)]``; ``tool-result`` is ``[tool-result: <inner>]``
    (its content rendered recursively) or ``[tool-result]`` when that is empty; any
    other kind is ``[<kind>]``. Empty text and empty reasoning contribute nothing.

    :param blocks: typed blocks or their JSON form (a mix is fine).
    :returns: the parts joined with ``\\n``.
    """
    parts: list[str] = []
    for block in blocks:
        kind = kind_of(block)
        if kind == "text":
            text = text_field(block, "text")
            if text:
                parts.append(text)
        elif kind == "reasoning":
            text = text_field(block, "text")
            if text:
                parts.append(f"[reasoning: {text}]")
        elif kind == "tool-call":
            name = text_field(block, "name")
            arguments = text_field(block, "arguments")
            parts.append(f"[tool-call: {name}({arguments})]")
        elif kind == "tool-result":
            inner = render_content_blocks(seq_of_blocks(field(block, "content")))
            parts.append(f"[tool-result: {inner}]" if inner else "[tool-result]")
        else:
            parts.append(f"[{kind}]")
    return "\n".join(parts)


def _entry(event: Event) -> str:
    """One event's transcript entry, or ``""`` when it contributes none."""
    kind = event.type
    if kind not in _LABELS:
        return ""
    data = event.data
    text = render_content_blocks(content_of(data))
    if not text:
        return ""
    if kind == "tool/result":
        call_id = field(data, "callId")
        label = "Tool error" if field(data, "isError") is True else "Tool result"
        return f"{label} (call {call_id if isinstance(call_id, str) else ''}): {text}"
    return _LABELS[kind].format(text)


_LABELS = {
    "user/message": "User: {}",
    "assistant/message": "Assistant: {}",
    "tool/result": "",  # built in _entry: it names the call
    "context/message": "[Context: {}]",
    "steering/message": "[Steering: {}]",
}


def render_transcript(events: Sequence[Event], seqs: Iterable[int]) -> str:
    """Render the events at ``seqs`` as a transcript, in the order given.

    Surface order is not log order after a replace, so the order of ``seqs`` is kept.
    Entries are ``User: <text>``, ``Assistant: <text>``, ``Tool result (call <id>):
    <text>`` (``Tool error`` when the result is an error), ``[Context: <text>]`` and
    ``[Steering: <text>]``. Other event types, seqs with no event, and events whose
    content renders to nothing are skipped.

    :param events: the log, indexed by seq (``session.events``).
    :param seqs: the seqs to render, usually surface nodes.
    :returns: the entries joined with a blank line.
    """
    entries: list[str] = []
    count = len(events)
    for seq in seqs:
        # A negative seq would index from the end in Python: it names no event.
        if not (isinstance(seq, int) and 0 <= seq < count):
            continue
        entry = _entry(events[seq])
        if entry:
            entries.append(entry)
    return "\n\n".join(entries)
