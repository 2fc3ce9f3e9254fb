"""What the database backends' search indexes share: log lines into index rows.

Turning a session's log lines into index rows, the query strings each index takes, and
checking lines no index covers.

An index row is ``(seq, turn, words)`` for each searched event with words (the
:func:`~.._search.extract` of its line, its :func:`~.._search.index_words`); its turn is
the event's own ``data.turn``, else the turn open where it was written, tracked across
the session's lines by :func:`~.._search.walk`, as every scan tracks it. Each backend keeps,
per session, the seq after the last event indexed and the turn open after it, so a
batch is indexed from its own lines and that state alone.

An index only narrows the lines to check (every candidate goes through
:func:`~.._search.hit_of`), so what is stored here may be a superset: a turn that an
``INTEGER`` column cannot hold is stored as :data:`TURN_UNKNOWN`, which means "look it
up in the log", never a wrong answer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, NamedTuple

from ...._search import (
    SEARCHED_TYPES,
    Extracted,
    SearchHit,
    SearchQuery,
    SearchResults,
    UnreadableSession,
    damaged,
    damaged_records,
    extract,
    hit_of,
    index_words,
    walk,
    walk_events,
)
from ....events import Event
from ...search import scan_hits, where_damaged

__all__ = [
    "MAX_TSVECTOR_BYTES",
    "READ_TYPES",
    "TURN_UNKNOWN",
    "Behind",
    "IndexRow",
    "answer",
    "bindable",
    "fts_match",
    "fts_trusted",
    "index_batch",
    "index_lines",
    "index_rows",
    "lines_of",
    "read_types",
    "stored_turn",
    "tsquery_text",
]

#: A stored turn meaning "not stored: find it in the log". A turn is any JSON integer,
#: and an ``INTEGER`` column (32 bits on PostgreSQL, 64 on SQLite) does not hold them all;
#: a genuine turn of this value is looked up too, which costs a query, not an error.
TURN_UNKNOWN: Final = -(2**31)
#: The types of the rows an index, or a scan of rows it lags behind, reads: the searched
#: ones and the turn changes. A row's log line starts with its ``type`` column
#: (:func:`~.row_lines.rebuilt_line`), and :func:`~.._search.walk` skips a line of any
#: other type undecoded: leaving those rows in the database changes nothing but the
#: time (a model's streamed chunks are most of an agent's log).
READ_TYPES: Final = ("turn/start", "turn/end", *SEARCHED_TYPES)


def read_types(column: str = "type") -> str:
    """The SQL condition that ``column`` is one of :data:`READ_TYPES` (constants, plain
    ASCII without quotes: written into the statement)."""
    assert all(t.isascii() and "'" not in t for t in READ_TYPES)
    return f"{column} IN ({', '.join(repr(t) for t in READ_TYPES)})"


#: PostgreSQL caps a ``tsvector`` at 1 MiB: an event whose words take more than this is
#: stored without them (NULL) and is a candidate of every search.
MAX_TSVECTOR_BYTES: Final = 512 * 1024



class IndexRow(NamedTuple):
    """One event's index entry.

    :ivar seq: the event's seq.
    :ivar turn: its turn (its own, or the one open where it was written).
    :ivar words: its distinct index words.
    :ivar inherited: whether ``turn`` is the turn the lines started in (no turn change
        and no ``data.turn`` before it): a backend that does not know that turn yet
        fills it in from its stored state.
    """

    seq: int
    turn: int | None
    words: list[str]
    inherited: bool


def stored_turn(turn: int | None) -> int | None:
    """``turn`` as a 32-bit ``INTEGER`` column holds it (:data:`TURN_UNKNOWN` when it
    cannot)."""
    if turn is None or TURN_UNKNOWN < turn < 2**31:
        return turn
    return TURN_UNKNOWN


def index_lines(lines: Iterable[bytes], turn: int | None
                ) -> tuple[list[IndexRow], int | None, bool]:
    """The index rows of a session's consecutive event lines (no newline), starting
    with ``turn`` open; and the turn open after them, with whether it is still the
    starting one."""
    return _rows_of(walk(lines, turn), turn)


def index_rows(lines: Sequence[bytes], seqs: Sequence[int], turn: int | None
               ) -> tuple[list[IndexRow], int | None, bool]:
    """:func:`index_lines` of stored rows (``seqs``, their lines ``lines``), a damaged
    one among them (not JSON: edited in place) indexed by the words its bytes still
    hold: a search whose words it may hold then meets it among its candidates and
    names its session, as a scan of the rows does (:func:`answer`). Indexed as it was
    written, the row had its event's words; a catch-up only has what is left."""
    damaged: list[bytes] = []
    rows, after, still = _rows_of(walk(lines, turn, damaged_lines=damaged), turn)
    if damaged:
        where = {id(line): seq for line, seq in zip(lines, seqs, strict=True)}
        for line in damaged:
            words = index_words(line.decode(errors="replace"))
            if words:
                rows.append(IndexRow(where[id(line)], None, words, False))
    return rows, after, still


def index_batch(events: Sequence[Event], jsonl: bytes, lines: Callable[[], Sequence[bytes]],
                turn: int | None) -> tuple[list[IndexRow], int | None, bool]:
    """:func:`index_lines` of a batch being written (``jsonl``, its lines as the
    coordinator encoded them): read from its typed events where they give the same rows
    (:func:`~.._search.walk_events`: no line decoded), else from its ``lines()``. A
    lone surrogate's escape in the bytes (``\\ud800``: msgspec writes no other ``\\u``
    escape above the control characters) sends the batch to its lines, where such a
    line reads as it does in a scan."""
    walked = None
    if jsonl.count(b"\n") == len(events) and b"\\ud" not in jsonl and b"\\uD" not in jsonl:
        walked = walk_events(events, turn)
    if walked is None:
        return index_lines(lines(), turn)
    return _rows_of(walked, turn)


def _rows_of(walked: Iterable[tuple[Extracted | None, int | None, bool]], turn: int | None
             ) -> tuple[list[IndexRow], int | None, bool]:
    rows: list[IndexRow] = []
    after, still = turn, True
    for extracted, open_turn, inherited in walked:
        if extracted is None:
            after, still = open_turn, False
            continue
        if not extracted.text:
            continue
        words = index_words(extracted.text)
        if not words:
            continue
        if extracted.turn is not None:
            rows.append(IndexRow(extracted.seq, extracted.turn, words, False))
        else:
            rows.append(IndexRow(extracted.seq, open_turn, words, inherited))
    return rows, after, still


#: Sessions the index lags behind: ``{id: (the first seq no index entry covers, the
#: turn open there, the seq after the last)}``.
Behind = dict[str, tuple[int, int | None, int]]


def answer(candidates: Iterable[Sequence[Any]], behind: Behind, query: SearchQuery, *,
           line_of: Callable[[Any], bytes],
           turn_before: Callable[[str, int], int | None],
           lines_from: Callable[[str, int, int], Iterable[bytes]]) -> SearchResults:
    """A database backend's hits: its index's candidates checked, then the rows no
    index covers scanned; a session with a damaged row among those read (its data not
    JSON) is in the answer's ``unreadable``, its other rows searched.

    :param candidates: ``(session id, stored turn, seq, *the rest of the row)`` each;
        ``line_of`` gets ``(seq, *the rest)`` and rebuilds the event's log line.
    :param turn_before: the turn open right before a seq of a session (for a turn stored
        as :data:`TURN_UNKNOWN`).
    :param lines_from: the log lines of a session's rows ``start <= seq < end``.
    """
    hits: list[SearchHit] = []
    bad: dict[str, list[str]] = {}
    for sid, turn, *row in candidates:
        late = behind.get(sid)
        if late is not None and row[0] >= late[0]:
            continue  # checked below, with the rows no index covers
        line = line_of(row)
        extracted = extract(line)
        if extracted is None:
            if damaged(line):
                bad.setdefault(sid, []).append(f"seq {row[0]}")
            continue
        if turn == TURN_UNKNOWN:
            turn = turn_before(sid, row[0])
        hit = hit_of(sid, extracted, turn, query)
        if hit is not None:
            hits.append(hit)
    for sid, (start, turn, end) in behind.items():
        if turn == TURN_UNKNOWN:
            turn = turn_before(sid, start)
        lines: list[bytes] = []
        hits += scan_hits(sid, lines_from(sid, start, end), turn, query, lines)
        bad.setdefault(sid, []).extend(where_damaged(line) for line in lines)
    return SearchResults(hits, [UnreadableSession(sid, damaged_records(sid, where))
                                for sid, where in bad.items() if where])


def lines_of(jsonl: bytes, count: int) -> list[bytes] | None:
    """A batch's ``count`` lines, each ``\\n``-ended in ``jsonl``; ``None`` when they are
    not exactly that many (the caller then builds them from the rows)."""
    if jsonl.count(b"\n") != count or not jsonl.endswith(b"\n"):
        return None
    return jsonl.split(b"\n")[:-1]


# --- the queries ------------------------------------------------------------------------


def bindable(bound: object) -> bool:
    """Whether a since/until bound narrows the SQL too: a 64-bit integer, or a float
    that is a number (NaN compares unlike :func:`~.._search.hit_of`'s ``<``). Any other
    is left to :func:`~.._search.hit_of` alone, which checks every candidate anyway."""
    if type(bound) is int:
        return -(2**63) <= bound < 2**63
    return type(bound) is float and bound == bound


def fts_match(query: SearchQuery) -> str:
    """The FTS5 ``MATCH`` string of a query: each index term a quoted string (its
    quotes doubled), ``*`` after a prefix, all of them required (FTS5's implicit AND)."""
    return " ".join('"' + word.replace('"', '""') + '"' + ("*" if prefix else "")
                    for word, prefix in query.index_terms())


def fts_trusted(query: SearchQuery, tokenize: str) -> bool:
    """Whether the FTS5 index can answer ``query`` with a superset of its hits.

    FTS5 splits our words again with its own (older) Unicode tables: a word made only of
    characters it takes for separators is an empty phrase, which FTS5 ignores beside
    other phrases but which, alone, matches nothing. So the query is tried on a
    document made of its own words, in a private in-memory database: when that does not
    match, the index cannot be trusted and the caller checks every line instead.
    """
    words = " ".join(word for word, _ in query.index_terms())
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(words, tokenize = {tokenize})")
        conn.execute("INSERT INTO t (words) VALUES (?)", (words,))
        found = conn.execute("SELECT 1 FROM t WHERE t MATCH ?", (fts_match(query),)
                             ).fetchone()
    finally:
        conn.close()
    return found is not None


def tsquery_text(query: SearchQuery) -> str:
    """The ``tsquery`` text of a query: each index term a quoted lexeme (single quotes
    and backslashes doubled), ``:*`` after a prefix, joined by ``&``. Passed as
    ``%s::tsquery``: the lexemes are taken as they are, as ``array_to_tsvector`` stored
    them (no parser, no stemming)."""
    return " & ".join(
        "'" + word.replace("\\", "\\\\").replace("'", "''") + "'" + (":*" if prefix else "")
        for word, prefix in query.index_terms())
