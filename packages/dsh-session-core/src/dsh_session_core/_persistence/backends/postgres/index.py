"""The PostgreSQL backend's search index: its statements and a batch's index entries.

Its statements, a batch's index entries for the hot path (written in the statement that
inserts the batch, :data:`APPEND_INDEXED`), and the index as the engine
(:mod:`.sql.index`) runs it (:data:`INDEX_SQL`).

``search_docs`` holds each searched event's words as a ``tsvector`` (GIN-indexed), or
NULL for one whose words a ``tsvector`` cannot hold; ``search_state`` how far each
session is indexed. The tables are :mod:`.postgres.schema`'s, with the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ....events import Event
from ..sql.index import IndexSql
from ..sql.rows import row_line
from ..sql.search_index import (
    MAX_TSVECTOR_BYTES,
    IndexRow,
    index_batch,
    lines_of,
    read_types,
    stored_turn,
    tsquery_text,
)
from .schema import INSERT_ROWS, Columns, text_ok

__all__ = [
    "APPEND_INDEXED",
    "DELETE_DOCS_FROM",
    "DELETE_STATE",
    "INDEX_SQL",
    "INSERT_DOCS",
    "SEARCH_LOCK_KEY",
    "SELECT_CANDIDATES",
    "SELECT_PROGRESS",
    "SELECT_ROWS_FROM",
    "SELECT_STATE",
    "SELECT_TOPS",
    "SELECT_TURN_CHANGES",
    "UPSERT_STATE",
    "index_columns",
    "insert_docs",
    "words_text",
]

# The batch and its index entries in one statement (the hot path stays one round
# trip): the entries go in only if the batch did and the session's index ends right
# before it (or the session is new), so that the turn of the rows that inherit it is
# the stored state's. Otherwise the index is left behind, and the next search catches
# the session up (search_state then lags its events). The CTEs all see one snapshot;
# the index inserts run after the events' (they read its count).
APPEND_INDEXED: Final = f"""
    WITH ins AS ({INSERT_ROWS}
        WHERE (SELECT coalesce(max(seq), -1) FROM events WHERE session_id = %(sid)b)
              = %(before)b
        RETURNING 1),
    ok AS (SELECT count(*) AS n FROM ins),
    go AS (
        SELECT s.turn FROM search_state AS s, ok
        WHERE ok.n > 0 AND s.session_id = %(sid)b AND s.next_seq = %(first)b
        UNION ALL
        SELECT NULL::integer FROM ok
        WHERE ok.n > 0 AND %(first)b = 0
          AND NOT EXISTS (SELECT 1 FROM search_state WHERE session_id = %(sid)b)),
    docs AS (
        INSERT INTO search_docs (session_id, seq, turn, words)
        SELECT %(sid)b, d.seq, CASE WHEN d.own THEN d.turn ELSE go.turn END,
               array_to_tsvector(string_to_array(d.words, ' '))
        FROM go, unnest(%(iseqs)b::bigint[], %(iturns)b::integer[], %(iown)b::boolean[],
                        %(iwords)b::text[]) AS d(seq, turn, own, words)
        ON CONFLICT (session_id, seq) DO UPDATE SET
            turn = excluded.turn, words = excluded.words),
    state AS (
        INSERT INTO search_state (session_id, next_seq, turn)
        SELECT %(sid)b, %(next)b,
               CASE WHEN %(endown)b THEN %(endturn)b::integer ELSE go.turn END FROM go
        ON CONFLICT (session_id) DO UPDATE SET
            next_seq = excluded.next_seq, turn = excluded.turn)
    SELECT pg_notify(%(channel)b, %(last)b) FROM ok WHERE ok.n > 0"""

# --- outside the hot path ---------------------------------------------------------------

#: Serializes the index's catch-up and a repair's rewrite of it between processes (two
#: searches catching the same session up would insert the same rows).
SEARCH_LOCK_KEY: Final = 0x6473_685F_7365_6172  # "dsh_sear"
SELECT_STATE: Final = (
    "SELECT next_seq, turn FROM search_state WHERE session_id = %s FOR UPDATE"
)
UPSERT_STATE: Final = """
    INSERT INTO search_state (session_id, next_seq, turn) VALUES (%s, %s, %s)
    ON CONFLICT (session_id) DO UPDATE SET next_seq = excluded.next_seq, turn = excluded.turn"""
INSERT_DOCS: Final = """
    INSERT INTO search_docs (session_id, seq, turn, words)
    SELECT %(sid)b, d.seq, d.turn, array_to_tsvector(string_to_array(d.words, ' '))
    FROM unnest(%(iseqs)b::bigint[], %(iturns)b::integer[], %(iwords)b::text[])
         AS d(seq, turn, words)
    ON CONFLICT (session_id, seq) DO UPDATE SET turn = excluded.turn, words = excluded.words"""
DELETE_DOCS_FROM: Final = "DELETE FROM search_docs WHERE session_id = %s AND seq >= %s"
DELETE_STATE: Final = "DELETE FROM search_state WHERE session_id = %s"
SELECT_ROWS_FROM: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    f" WHERE session_id = %s AND seq >= %s AND seq < %s AND {read_types()}"
    " ORDER BY seq LIMIT %s"
)
SELECT_TURN_CHANGES: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = %s AND seq < %s AND type IN ('turn/start', 'turn/end')"
    " ORDER BY seq DESC LIMIT %s"
)
# Every stored session with how far it is indexed and its last seq (one lookup in the
# events' primary key each).
SELECT_PROGRESS: Final = (
    "SELECT s.id, st.next_seq, st.turn,"
    " (SELECT max(seq) FROM events WHERE session_id = s.id)"
    " FROM sessions AS s LEFT JOIN search_state AS st ON st.session_id = s.id"
)
SELECT_TOPS: Final = (
    "SELECT s.id, NULL::bigint, NULL::integer,"
    " (SELECT max(seq) FROM events WHERE session_id = s.id) FROM sessions AS s"
)
# The candidates: the index's matches, and the rows stored without words (too many for
# a tsvector), joined to their events (an index row whose event is gone matches
# nothing) and narrowed by type; the caller adds the session and time conditions.
SELECT_CANDIDATES: Final = (
    "SELECT d.session_id, d.turn, e.seq, e.type, e.time, e.data, e.source_event_seqs,"
    " e.surface_op FROM (SELECT session_id, seq, turn FROM search_docs"
    " WHERE words @@ %s::tsquery UNION ALL SELECT session_id, seq, turn FROM search_docs"
    " WHERE words IS NULL) AS d"
    " JOIN events AS e ON e.session_id = d.session_id AND e.seq = d.seq"
    " WHERE e.type = ANY(%s)"
)


def index_columns(columns: Columns, events: Sequence[Event], jsonl: bytes) -> None:
    """Add a batch's index entries to its :func:`batch_columns`, for
    :data:`APPEND_INDEXED`: read from its events or encoded lines (:func:`index_batch`;
    the rows' lines when the encoded ones are not one a row), their turns filled in
    from the stored state where they inherit it."""
    seqs = columns["seqs"]

    def lines() -> Sequence[bytes]:
        found = lines_of(jsonl, len(seqs))
        if found is not None:
            return found
        return [row_line(row) for row in zip(seqs, columns["types"], columns["times"],
                                             columns["datas"],
                                             [s or None for s in columns["srcs"]],
                                             [o or None for o in columns["ops"]],
                                             strict=True)]

    rows, after, still = index_batch(events, jsonl, lines, None)
    columns.update(
        first=seqs[0], next=seqs[-1] + 1,
        iseqs=[row.seq for row in rows], iturns=[stored_turn(row.turn) for row in rows],
        iown=[not row.inherited for row in rows], iwords=[words_text(row) for row in rows],
        endown=not still, endturn=None if still else stored_turn(after),
    )


def words_text(row: IndexRow) -> str | None:
    """An index row's words as ``search_docs`` takes them (split on spaces by the
    server), or ``None`` when a tsvector cannot hold them."""
    text = " ".join(row.words)
    return None if len(text.encode()) > MAX_TSVECTOR_BYTES else text


def insert_docs(conn: Any, session_id: str, rows: Sequence[IndexRow]) -> None:
    """Store index rows: one statement, one array per column."""
    if rows:
        conn.execute(INSERT_DOCS, {
            "sid": session_id, "iseqs": [row.seq for row in rows],
            "iturns": [stored_turn(row.turn) for row in rows],
            "iwords": [words_text(row) for row in rows]})


def _same(items: list[str]) -> list[str]:
    return items  # psycopg binds a list of strings as text[]


def _trusted(query: object) -> bool:
    return True  # the lexemes are our words as they are: no parser splits them again


#: The index as the engine runs it on PostgreSQL: lists bound as arrays (``= ANY``).
INDEX_SQL: Final = IndexSql(
    mark="%s",
    select_state=SELECT_STATE,
    upsert_state=UPSERT_STATE,
    delete_from=(DELETE_DOCS_FROM,),
    delete_state=DELETE_STATE,
    select_rows_from=SELECT_ROWS_FROM,
    select_turn_changes=SELECT_TURN_CHANGES,
    select_progress=SELECT_PROGRESS,
    select_tops=SELECT_TOPS,
    in_list="= ANY(%s)",
    select_candidates=SELECT_CANDIDATES,
    bind_list=_same,
    storable=text_ok,
    insert=insert_docs,
    match=tsquery_text,
    trusted=_trusted,
)
