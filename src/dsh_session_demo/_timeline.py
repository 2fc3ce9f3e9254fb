"""The timeline: a session's log told turn by turn, as ``dsh-session show`` tells it.

It is the read model's (:func:`dsh_session_core.inspect.build_timeline`, printed by
:func:`~dsh_session_core.inspect.render_timeline`): the demo groups and describes nothing
itself, so what it shows is what a reader of the stored log finds with ``show``. What the
log cannot say by itself (that a process was killed at some event, where the fork was
cut) follows the timeline as notes, each naming its event. Also here: one line of text
from content blocks, for the derived messages.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsh_session_core import Session

from ._style import Style

__all__ = ["WIDTH", "Line", "one_line", "text_of", "timeline"]

#: The width lines are shortened to.
WIDTH = 100
_TEXT = WIDTH - 18  # after the seq and label columns

Line = str

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TOKEN = re.compile(r"(\x1b\[[0-9;]*m)|(.)", re.DOTALL)


def one_line(text: str, width: int = _TEXT) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``width`` with ``…``.

    Colour codes take no room and are never cut in half: the width counts what shows.
    """
    flat = " ".join(text.split())
    if len(_ANSI.sub("", flat)) <= width:
        return flat
    out: list[str] = []
    shown = 0
    for escape, char in _TOKEN.findall(flat):
        if escape:
            out.append(escape)
        elif shown < width - 1:
            out.append(char)
            shown += 1
    return "".join(out) + "…" + ("\x1b[0m" if "\x1b[" in flat else "")


def text_of(content: Iterable[Mapping[str, Any]]) -> str:
    """Content blocks (wire shape) as one text: tool calls and results named inline."""
    parts: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block["text"]))
        elif kind == "reasoning":
            parts.append(f"(thinking) {block['text']}")
        elif kind == "tool-call":
            parts.append(f"[calls {block['name']}]")
        elif kind == "tool-result":
            parts.append(f"[result of {block['toolCallId']}: {text_of(block['content'])}]")
    return " ".join(parts)


def _notes(notes: Mapping[int, Sequence[str]], style: Style) -> list[Line]:
    """The remarks the log cannot make by itself, by event, wrapped rather than cut."""
    lines = ["", style("What the log cannot say by itself", "bold")]
    pad = len(str(max(notes, default=0)))
    for seq in sorted(notes):
        for note in notes[seq]:
            for i, part in enumerate(textwrap.wrap(note, WIDTH - pad - 8)):
                left = f"seq {seq:>{pad}}" if i == 0 else " " * (pad + 4)
                lines.append(f"  {style(left, 'dim')}  {part}")
    return lines


def timeline(
    session: Session, style: Style, *, notes: Mapping[int, Sequence[str]] | None = None,
    since: int = 0,
) -> list[Line]:
    """The timeline of ``session``, as ``dsh-session show`` prints it, then ``notes``.

    :param notes: remarks on the events of those seqs that the log cannot make by itself
        (e.g. that a process was killed there).
    :param since: the blocks ending before this seq are left out (a fork's seed: its
        parent's turns), the head still counting the whole log.
    """
    from dsh_session_core.inspect import Source, build_timeline, render_timeline

    source = Source(session.header, list(session.events), f'session "{session.id}"')
    doc = build_timeline(source, session.registry)
    doc["timeline"] = [b for b in doc["timeline"]
                       if not isinstance(b["endSeq"], int) or b["endSeq"] >= since]
    lines = ["", *render_timeline(doc, style, WIDTH).splitlines()]
    lines += [f"  {style('warning:', 'yellow')} {one_line(w, WIDTH - 12)}"
              for w in doc["warnings"]]
    return lines + (_notes(notes, style) if notes else [])
