"""Whether an event is a hit of a query, and what the hit shows.

The check every backend's answer goes through, whatever index found its candidates
(:func:`hit_of`, :func:`hit_of_line`), so that an index is never trusted for the answer.
"""

from __future__ import annotations

import math
from typing import Final

from .lines import extract
from .query import WORD, Extracted, SearchHit, SearchQuery

__all__ = ["SNIPPET_AFTER", "SNIPPET_BEFORE", "hit_of", "hit_of_line"]

#: Characters of text around the first match that a hit's snippet shows.
SNIPPET_BEFORE: Final = 60
SNIPPET_AFTER: Final = 140


def hit_of(session_id: str, extracted: Extracted, turn: int | None, query: SearchQuery
           ) -> SearchHit | None:
    """The hit ``extracted`` is for ``query``, or ``None``.

    :param turn: the turn open where the event was written (used when the event has no
        ``turn`` field of its own).
    """
    if not query.accepts(extracted):
        return None
    text = extracted.text
    spans = [(m.start(), m.end()) for m in WORD.finditer(text)]
    words = [text[a:b].casefold() for a, b in spans]
    matched: set[int] = set()
    for clause in query.clauses:
        starts = clause.matches(words)
        if not starts:
            return None
        for s in starts:
            matched.update(range(s, s + len(clause.words)))
    first = min(matched)
    snippet, highlights = _snippet(text, spans, sorted(matched), first)
    score = len(matched) / math.sqrt(len(words))
    return SearchHit(session_id, extracted.seq,
                     extracted.turn if extracted.turn is not None else turn,
                     extracted.type, extracted.role, extracted.time, snippet,
                     highlights, score)


def hit_of_line(session_id: str, line: bytes, turn: int | None, query: SearchQuery
                ) -> SearchHit | None:
    """The hit one log line is for ``query``, or ``None`` (see :func:`hit_of`)."""
    extracted = extract(line)
    if extracted is None:
        return None
    return hit_of(session_id, extracted, turn, query)


def _snippet(text: str, spans: list[tuple[int, int]], matched: list[int], first: int
             ) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A one-line window of ``text`` around word ``first``, and where the matched words
    are in it."""
    begin = max(spans[first][0] - SNIPPET_BEFORE, 0)
    end = min(spans[first][1] + SNIPPET_AFTER, len(text))
    if begin > 0:  # start and end on a word's edge, not inside one
        space = text.find(" ", begin, spans[first][0])
        begin = space + 1 if space >= 0 else spans[first][0]
    if end < len(text):
        space = text.rfind(" ", spans[first][1], end)
        end = space if space >= 0 else end
    piece = text[begin:end]
    # One line: every run of whitespace is one space, so the offsets are remapped.
    out: list[str] = []
    where: list[int] = []  # where[i]: the offset in the snippet of piece[i]
    pending = False
    for ch in piece:
        if ch.isspace():
            pending = bool(out)
            where.append(len(out) + (1 if pending else 0))
            continue
        if pending:
            out.append(" ")
            pending = False
        where.append(len(out))
        out.append(ch)
    where.append(len(out))
    snippet = "".join(out)
    lead = "… " if begin > 0 else ""
    tail = " …" if end < len(text) else ""
    shift = len(lead)
    highlights = []
    for i in matched:
        a, b = spans[i]
        if a >= begin and b <= end:
            highlights.append((where[a - begin] + shift, where[b - 1 - begin] + 1 + shift))
    return lead + snippet + tail, tuple(highlights)
