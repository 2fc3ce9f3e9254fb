"""The SQLite backend's search index as the engine (:mod:`.sql.index`) runs it.

:data:`INDEX_SQL`: its statements, and how index rows go into its two tables, a docs
table and an FTS5 table whose rowid is the docs row's id. The tables themselves are
:mod:`.sqlite.schema`'s, created with the reference's.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from msgspec.json import encode

from ..sql.index import IndexSql
from ..sql.rows import utf8_ok
from ..sql.search_index import IndexRow, fts_match, fts_trusted, read_types, stored_turn
from .schema import ROWS_PER_INSERT, TOKENIZE

if TYPE_CHECKING:
    from ...._search import SearchQuery

__all__ = [
    "DELETE_DOCS_FROM",
    "DELETE_FTS_FROM",
    "DELETE_STATE",
    "INDEX_SQL",
    "SELECT_CANDIDATES",
    "SELECT_PROGRESS",
    "SELECT_ROWS_FROM",
    "SELECT_STATE",
    "SELECT_TOPS",
    "SELECT_TURN_CHANGES",
    "UPSERT_STATE",
    "insert_index",
]

SELECT_STATE: Final = "SELECT next_seq, turn FROM dsh_search_state WHERE session_id = ?"
UPSERT_STATE: Final = """
    INSERT INTO dsh_search_state (session_id, next_seq, turn) VALUES (?, ?, ?)
    ON CONFLICT (session_id) DO UPDATE SET next_seq = excluded.next_seq, turn = excluded.turn"""
# The FTS rows go first, while the docs rows still say which they are.
DELETE_FTS_FROM: Final = (
    "DELETE FROM dsh_search WHERE rowid IN"
    " (SELECT id FROM dsh_search_docs WHERE session_id = ? AND seq >= ?)"
)
DELETE_DOCS_FROM: Final = "DELETE FROM dsh_search_docs WHERE session_id = ? AND seq >= ?"
DELETE_STATE: Final = "DELETE FROM dsh_search_state WHERE session_id = ?"
# The rows an index reads (search_index.READ_TYPES) from a seq to another, by the
# primary key.
SELECT_ROWS_FROM: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    f" WHERE session_id = ? AND seq >= ? AND seq < ? AND {read_types()}"
    " ORDER BY seq LIMIT ?"
)
# The turn changes before a seq, newest first (the primary key's index, backwards), a
# page at a time.
SELECT_TURN_CHANGES: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = ? AND seq < ? AND type IN ('turn/start', 'turn/end')"
    " ORDER BY seq DESC LIMIT ?"
)
# Every stored session with how far it is indexed and its last seq (one lookup in the
# events' primary key each; a sessions row exists iff the session has an event).
SELECT_PROGRESS: Final = (
    "SELECT s.id, st.next_seq, st.turn,"
    " (SELECT max(seq) FROM events WHERE session_id = s.id)"
    " FROM sessions AS s LEFT JOIN dsh_search_state AS st ON st.session_id = s.id"
)
SELECT_TOPS: Final = (
    "SELECT s.id, NULL, NULL, (SELECT max(seq) FROM events WHERE session_id = s.id)"
    " FROM sessions AS s"
)
# The candidates: the index's matches joined to their events (an index row whose
# event is gone matches nothing), narrowed by type, session and time.
SELECT_CANDIDATES: Final = (
    "SELECT d.session_id, d.turn, e.seq, e.type, e.time, e.data, e.source_event_seqs,"
    " e.surface_op FROM dsh_search JOIN dsh_search_docs AS d ON d.id = dsh_search.rowid"
    " JOIN events AS e ON e.session_id = d.session_id AND e.seq = d.seq"
    " WHERE dsh_search MATCH ? AND e.type IN (SELECT value FROM json_each(?))"
)


@functools.cache
def _insert_docs_sql(count: int) -> str:
    return ("INSERT INTO dsh_search_docs (session_id, seq, turn) VALUES "
            + ",".join(["(?1, ?, ?)"] * count))


@functools.cache
def _insert_fts_sql(count: int) -> str:
    return "INSERT INTO dsh_search (rowid, words) VALUES " + ",".join(["(?, ?)"] * count)


def insert_index(conn: sqlite3.Connection, session_id: str, rows: Sequence[IndexRow]
                 ) -> None:
    """Insert index rows: one multi-row statement per table (per 500 rows). SQLite gives
    the docs rows of one statement consecutive ids (each row the highest id plus one, in
    this write transaction), so the last one (``lastrowid``) gives them all: each FTS
    row's rowid is its docs row's id without reading anything back."""
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        docs: list[object] = [session_id]
        for row in chunk:
            docs += (row.seq, stored_turn(row.turn))
        last = conn.execute(_insert_docs_sql(len(chunk)), docs).lastrowid
        assert last is not None  # an INSERT of at least one row sets it
        fts: list[object] = []
        for i, row in enumerate(chunk, last - len(chunk) + 1):
            fts += (i, " ".join(row.words))
        conn.execute(_insert_fts_sql(len(chunk)), fts)


def _json_list(items: list[str]) -> str:
    return encode(items).decode()


def _trusted(query: SearchQuery) -> bool:
    return fts_trusted(query, TOKENIZE)


#: The index as the engine (:mod:`.sql.index`) runs it on SQLite: an FTS5 table beside a
#: docs table, lists bound as JSON text (``json_each``).
INDEX_SQL: Final = IndexSql(
    mark="?",
    select_state=SELECT_STATE,
    upsert_state=UPSERT_STATE,
    delete_from=(DELETE_FTS_FROM, DELETE_DOCS_FROM),
    delete_state=DELETE_STATE,
    select_rows_from=SELECT_ROWS_FROM,
    select_turn_changes=SELECT_TURN_CHANGES,
    select_progress=SELECT_PROGRESS,
    select_tops=SELECT_TOPS,
    in_list="IN (SELECT value FROM json_each(?))",
    select_candidates=SELECT_CANDIDATES,
    bind_list=_json_list,
    storable=utf8_ok,
    insert=insert_index,
    match=fts_match,
    trusted=_trusted,
)
