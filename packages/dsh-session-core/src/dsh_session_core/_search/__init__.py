"""Full-text search over session logs: queries, searched events, and whether a line is a hit.

What a query means, which events it reads, and whether one log line is a hit. Every
backend answers a search with :func:`~.hits.hit_of_line` (or :func:`~.hits.hit_of`),
whatever index found its candidates, so the same store gives the same hits on JSONL,
SQLite and PostgreSQL.

This package is the one door to the search's model: every name is imported from here.
Its modules hold one concern each: :mod:`.query` (words, queries and their filters,
hits and their order: the syntax is its docstring's), :mod:`.lines` (how a log line is
read: what is searched, the turn it was written in, the bytes that rule a line out, a
damaged line), :mod:`.hits` (whether an event is a hit, and its snippet) and
:mod:`.results` (a store's answer: its hits and the sessions it could not read).

It may import the rooms below it: ``_logformat``, ``_model``, ``_plugins``, ``_schema``,
``_errors`` and ``_base`` (and the public modules beside them).
"""

from __future__ import annotations

from .hits import SNIPPET_AFTER, SNIPPET_BEFORE, hit_of, hit_of_line
from .lines import (
    FOLDS_TO_ASCII,
    damaged,
    extract,
    may_hold,
    record_seq,
    turn_change,
    walk,
    walk_events,
)
from .query import (
    MAX_INDEXED_WORD,
    ROLES,
    SEARCHED_TYPES,
    Clause,
    Extracted,
    SearchHit,
    SearchQuery,
    Sort,
    index_words,
    order_hits,
    words_of,
)
from .results import SearchResults, UnreadableSession, damaged_records

__all__ = [
    "FOLDS_TO_ASCII",
    "MAX_INDEXED_WORD",
    "ROLES",
    "SEARCHED_TYPES",
    "SNIPPET_AFTER",
    "SNIPPET_BEFORE",
    "Clause",
    "Extracted",
    "SearchHit",
    "SearchQuery",
    "SearchResults",
    "Sort",
    "UnreadableSession",
    "damaged",
    "damaged_records",
    "extract",
    "hit_of",
    "hit_of_line",
    "index_words",
    "may_hold",
    "order_hits",
    "record_seq",
    "turn_change",
    "walk",
    "walk_events",
    "words_of",
]
