"""The SQLite backend's side of the database: its tables, their statements, its log lines.

Its tables (the reference's, dsh-session's own beside them, and the search index's), the
statements on them, and how SQLite builds a row's log line. The backend class is
:mod:`.sqlite.backend`'s; opening a database and its migrations :mod:`.sqlite.open`'s;
the search index's statements :mod:`.sqlite.index`'s.

Two ``STRICT`` tables, schema version 4 (``PRAGMA user_version``), exactly the
reference's, so a database written by one implementation is read by the other::

    sessions(id, version, created_at, cwd, parent_session, seed_length)
    events(session_id, seq, type, time, data, source_event_seqs, surface_op)

dsh-session's own tables, versioned apart (the reference refuses any ``user_version``
but 4, and must keep reading what this build writes)::

    dsh_session_schema(version, only_row)   the version of these tables (:data:`OWN_VERSION`)
    dsh_event_lines(session_id, seq, line)  a log line its row would not give back
    dsh_projection_rows(session_id, projection, key, row)        a projection's rows
    dsh_projection_marks(session_id, projection, mark, summary)  how far they go

An event's line is rebuilt from its row in the reference's key order and spelling (a
crash-repair closer's with its ``surfaceOp`` first, as the reference writes it: the
:data:`CLOSER` test); a line appended otherwise (another writer's spelling, an opaque
event's own key order) is kept in ``dsh_event_lines`` as it was appended, and read back
instead (:func:`~.rows.kept_lines`). Triggers drop a kept line when its row is deleted or
changed, by any writer (the reference, an older build, a hand edit): the row then
speaks for itself again. The projections' rows (:mod:`.sql.projection_rows`, written by
:mod:`.sqlite.projections`) go with their session's ``sessions`` row, by a trigger too.

The full-text search index (beyond the reference, so in tables of its own, which the
reference never reads)::

    dsh_search_docs(id, session_id, seq, turn)    one row per searched event with words
    dsh_search(words)                              FTS5, rowid = dsh_search_docs.id
    dsh_search_state(session_id, next_seq, turn)   how far each session is indexed
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from typing import Final, Literal, TypeAlias

from ..sql.row_lines import CLOSER_DATA_END, row_line
from ..sql.rows import PARAMS_PER_ROW
from ..sql.search_index import lines_of

__all__ = [
    "ALL_TABLES",
    "CLOSER",
    "DELETE_EVENTS",
    "DELETE_SESSION",
    "DELETE_TAIL",
    "INDEX_SCHEMA",
    "INDEX_TABLES",
    "JOURNAL_MODES",
    "LINE",
    "LINES_AFTER",
    "LINES_OF_TYPES",
    "LINES_SCHEMA",
    "LINES_SINCE",
    "OWN_SCHEMA",
    "OWN_VERSION",
    "PROJECTION_SCHEMA",
    "REBUILT",
    "ROWS_PER_INSERT",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SELECT_AFTER",
    "SELECT_ANY",
    "SELECT_CHUNK",
    "SELECT_FOUND",
    "SELECT_HEADER",
    "SELECT_HEADERS",
    "SELECT_INDEX_TABLES",
    "SELECT_KEPT",
    "SELECT_LAST",
    "SELECT_MEASURE",
    "SELECT_OWN_VERSION",
    "SELECT_RANGE",
    "SELECT_ROWS",
    "SELECT_SUMMARIES",
    "SELECT_SUMMARIES_OF",
    "SELECT_TABLES",
    "SELECT_TAIL",
    "SELECT_TYPES",
    "STAMP_OWN",
    "TEMP_KEPT",
    "TEMP_PROJECTIONS",
    "TOKENIZE",
    "UPSERT_SESSION",
    "JournalMode",
    "batch_lines",
    "busy",
    "insert_kept",
    "insert_rows",
    "lines_sql",
    "read_only",
    "set_journal_mode",
]

#: ``PRAGMA user_version`` of a database this build reads and writes. The reference
#: skipped 3 on purpose; there is no migration: 1, 2, 3, 5... are all refused.
SCHEMA_VERSION: Final = 4

JournalMode: TypeAlias = Literal["wal", "delete", "truncate", "persist"]
JOURNAL_MODES: Final = frozenset({"wal", "delete", "truncate", "persist"})


SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        cwd TEXT,
        parent_session TEXT,
        seed_length INTEGER
    ) STRICT""",
    # No other index: the primary key's index, (session_id, seq), already yields one
    # session's rows in seq order (the load reads a range of it), serves the foreign
    # key's cascade, and makes a duplicate seq fail the whole batch.
    """CREATE TABLE IF NOT EXISTS events (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time INTEGER NOT NULL,
        data TEXT NOT NULL,
        source_event_seqs TEXT,
        surface_op TEXT,
        PRIMARY KEY (session_id, seq)
    ) STRICT""",
)

#: The version of dsh-session's own tables (``dsh_session_schema``), beside the
#: reference's ``user_version`` 4, which stays as it is. 0 (no such table): a database
#: the reference, or a build before them, wrote; 1: ``dsh_event_lines`` and its
#: triggers; 2: the projections' tables (:data:`PROJECTION_SCHEMA`). A database of a
#: higher version is refused; a lower one is migrated when opened (:mod:`.sqlite.open`).
OWN_VERSION: Final = 2

_KEPT_TABLE: Final = """dsh_event_lines (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        line TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) STRICT, WITHOUT ROWID"""

#: Own version 1: the version's table, the kept lines and their triggers.
LINES_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS dsh_session_schema (
        version INTEGER NOT NULL,
        only_row INTEGER PRIMARY KEY CHECK (only_row = 1)
    ) STRICT""",
    # Few rows (only the lines their rows would not give back), found by the key.
    f"CREATE TABLE IF NOT EXISTS {_KEPT_TABLE}",
    # A kept line belongs to its row as it was appended: gone with it, and forgotten
    # when the row is changed (the row then speaks for itself). Triggers, not a foreign
    # key: they hold for every connection (a foreign key only where foreign_keys is on,
    # and the reference's rows have no line to point at), and a cascade from sessions
    # fires them too. Every delete pays a lookup per row in this small table.
    """CREATE TRIGGER IF NOT EXISTS dsh_event_lines_deleted AFTER DELETE ON events BEGIN
        DELETE FROM dsh_event_lines WHERE session_id = old.session_id AND seq = old.seq;
    END""",
    """CREATE TRIGGER IF NOT EXISTS dsh_event_lines_updated AFTER UPDATE ON events BEGIN
        DELETE FROM dsh_event_lines WHERE session_id = old.session_id AND seq = old.seq;
    END""",
)

_ROWS_TABLE: Final = """dsh_projection_rows (
        session_id TEXT NOT NULL,
        projection TEXT NOT NULL,
        key TEXT NOT NULL,
        row BLOB NOT NULL,
        PRIMARY KEY (session_id, projection, key)
    ) STRICT, WITHOUT ROWID"""
_MARKS_TABLE: Final = """dsh_projection_marks (
        session_id TEXT NOT NULL,
        projection TEXT NOT NULL,
        mark BLOB NOT NULL,
        summary BLOB,
        PRIMARY KEY (session_id, projection)
    ) STRICT, WITHOUT ROWID"""

#: The projections' tables (own version 2; :mod:`.sql.projection_rows`). Keys compare
#: as ``BINARY`` (UTF-8 bytes: code point order), so a key range is a range of the
#: primary key. Without a rowid: a row is found, and a range read, in the one B-tree
#: (a rowid table would add its primary key's index, a second B-tree to write and to
#: look each row up from).
PROJECTION_SCHEMA: Final = (
    f"CREATE TABLE IF NOT EXISTS {_ROWS_TABLE}",
    f"CREATE TABLE IF NOT EXISTS {_MARKS_TABLE}",
    # A projection's summaries are listed from this index alone: only the marks with
    # a summary are in it.
    "CREATE INDEX IF NOT EXISTS dsh_projection_summaries ON dsh_projection_marks"
    " (projection, session_id) WHERE summary IS NOT NULL",
    # A session's rows go with its sessions row, whoever deletes it (the reference, a
    # hand edit; this backend's delete and prune too), in the same transaction: a
    # session made again under the id never finds another log's rows.
    """CREATE TRIGGER IF NOT EXISTS dsh_projections_deleted AFTER DELETE ON sessions BEGIN
        DELETE FROM dsh_projection_rows WHERE session_id = old.id;
        DELETE FROM dsh_projection_marks WHERE session_id = old.id;
    END""",
)
#: Every table of dsh-session's own, as a fresh database gets them.
OWN_SCHEMA: Final = (*LINES_SCHEMA, *PROJECTION_SCHEMA)
#: Empty stand-ins for the projections' tables where a database of an older own version
#: cannot be written (migrated): no mark is found, and every read folds the log.
TEMP_PROJECTIONS: Final = (f"CREATE TEMP TABLE IF NOT EXISTS {_ROWS_TABLE}",
                           f"CREATE TEMP TABLE IF NOT EXISTS {_MARKS_TABLE}")
STAMP_OWN: Final = "INSERT OR REPLACE INTO dsh_session_schema (version, only_row) VALUES (?, 1)"
SELECT_OWN_VERSION: Final = "SELECT version FROM dsh_session_schema"
#: An empty stand-in for ``dsh_event_lines`` where a database of version 0 cannot be
#: written (migrated): the statements that read kept lines find none.
TEMP_KEPT: Final = f"CREATE TEMP TABLE IF NOT EXISTS {_KEPT_TABLE}"
#: Every table the backend uses, the index's included: a database with all of them at
#: :data:`OWN_VERSION` needs nothing done when opened.
ALL_TABLES: Final = ("sessions", "events", "dsh_session_schema", "dsh_event_lines",
                     "dsh_projection_rows", "dsh_projection_marks",
                     "dsh_search_docs", "dsh_search", "dsh_search_state")

# An upsert, never INSERT OR REPLACE: REPLACE deletes the old row first, and the
# foreign key's ON DELETE CASCADE would take the session's events with it.
UPSERT_SESSION: Final = """
    INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET
        version = excluded.version, created_at = excluded.created_at, cwd = excluded.cwd,
        parent_session = excluded.parent_session, seed_length = excluded.seed_length"""
#: Rows per multi-row INSERT: 6 parameters each (and the session id once) stays far
#: below SQLite's 32,766 limit.
ROWS_PER_INSERT: Final = 500


@functools.cache
def _insert_rows_sql(count: int) -> str:
    # The session id is bound once, as ?1, for every row; an absent optional column is
    # bound as '' and stored as NULL (JSON text is never empty). Binding None costs the
    # sqlite3 module an adapter lookup that formats an AttributeError, per parameter.
    row = "(?1, ?, ?, ?, ?, nullif(?, ''), nullif(?, ''))"
    return "INSERT INTO events VALUES " + ",".join([row] * count)


def insert_rows(conn: sqlite3.Connection, session_id: str, params: list[object]) -> None:
    """Insert the rows of :func:`event_params` with one statement per chunk: a 48-row
    batch costs a third less than ``executemany``, which steps and resets the statement
    once per row."""
    count = len(params) // PARAMS_PER_ROW
    if count <= ROWS_PER_INSERT:
        if count:
            conn.execute(_insert_rows_sql(count), [session_id, *params])
        return
    step = ROWS_PER_INSERT * PARAMS_PER_ROW
    for start in range(0, len(params), step):
        chunk = params[start : start + step]
        conn.execute(_insert_rows_sql(len(chunk) // PARAMS_PER_ROW), [session_id, *chunk])


@functools.cache
def _insert_kept_sql(count: int) -> str:
    # OR REPLACE: a line left by a row some writer replaced without its delete trigger
    # (INSERT OR REPLACE fires none) gives way to the new row's.
    return "INSERT OR REPLACE INTO dsh_event_lines VALUES " + ",".join(["(?1, ?, ?)"] * count)


def insert_kept(conn: sqlite3.Connection, session_id: str, params: Sequence[object],
                kept: Sequence[tuple[int, str]]) -> None:
    """Keep the lines of :func:`~.rows.kept_lines` (indexes into the batch's ``params``)
    beside their rows; nothing to do for a batch without any (the usual one)."""
    for start in range(0, len(kept), ROWS_PER_INSERT):
        chunk = kept[start : start + ROWS_PER_INSERT]
        values: list[object] = [session_id]
        for i, line in chunk:
            values += (params[i * PARAMS_PER_ROW], line)
        conn.execute(_insert_kept_sql(len(chunk)), values)


DELETE_TAIL: Final = "DELETE FROM events WHERE session_id = ? AND seq >= ?"
SELECT_HEADERS: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length FROM sessions"
)
# The first and last seq come from the primary key's index in O(log n) (count(*) would
# walk it); the chunks then prove that every seq in between is there.
SELECT_HEADER: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length,"
    " (SELECT min(seq) FROM events WHERE session_id = ?1),"
    " (SELECT max(seq) FROM events WHERE session_id = ?1)"
    " FROM sessions WHERE id = ?1"
)
# A row's kept line (dsh_event_lines), or NULL: the last column of every read of rows.
_KEPT: Final = ("(SELECT k.line FROM dsh_event_lines AS k"
                " WHERE k.session_id = events.session_id AND k.seq = events.seq)")
_ROW: Final = f"SELECT seq, type, time, data, source_event_seqs, surface_op, {_KEPT} FROM events"
SELECT_ROWS: Final = f"{_ROW} WHERE session_id = ? ORDER BY seq"
#: A session's kept lines, ``(seq, line)`` (the fast load puts them in its chunks).
SELECT_KEPT: Final = "SELECT seq, line FROM dsh_event_lines WHERE session_id = ? ORDER BY seq"

# The counts of a page of sessions (``ls``): per id, its own rows' range of the events'
# primary key, so a page costs what its sessions hold, whatever the store's size.
SELECT_SUMMARIES_OF: Final = (
    "SELECT s.id, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length,"
    " (SELECT count(*) FROM events WHERE session_id = s.id),"
    " (SELECT count(*) FROM events WHERE session_id = s.id AND type = 'turn/start'),"
    " (SELECT time FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)"
    " FROM sessions AS s WHERE s.id IN (SELECT value FROM json_each(?))"
)

# Listing with counts: one aggregate over the events' primary-key index (count, turn
# starts, the highest seq per session), then the time of that highest seq's row.
SELECT_SUMMARIES: Final = (
    "SELECT s.id, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length,"
    " coalesce(e.n, 0), coalesce(e.turns, 0), t.time FROM sessions AS s"
    " LEFT JOIN (SELECT session_id, count(*) AS n, sum(type = 'turn/start') AS turns,"
    " max(seq) AS last FROM events GROUP BY session_id) AS e ON e.session_id = s.id"
    " LEFT JOIN events AS t ON t.session_id = e.session_id AND t.seq = e.last"
)
SELECT_FOUND: Final = "SELECT 1 FROM sessions WHERE id = ?"
#: A read that starts a read transaction's snapshot.
SELECT_ANY: Final = "SELECT 1 FROM sessions LIMIT 1"
# The rows of some types (``lines_of_types``): the session's key range, filtered.
SELECT_TYPES: Final = (
    f"{_ROW} WHERE session_id = ? AND type IN (SELECT value FROM json_each(?)) ORDER BY seq"
)
_WHERE_TYPES: Final = "session_id = ?1 AND type IN (SELECT value FROM json_each(?2))"
SELECT_LAST: Final = "SELECT max(seq) FROM events WHERE session_id = ?"
SELECT_TAIL: Final = f"{_ROW} WHERE session_id = ? ORDER BY seq DESC LIMIT ?"
SELECT_RANGE: Final = f"{_ROW} WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
SELECT_AFTER: Final = f"{_ROW} WHERE session_id = ? AND seq > ? ORDER BY seq"


def _line_format(sources: bool, op: bool) -> str:
    fmt = '{"type":%s,"seq":%d,"time":%d,"data":%s'
    if sources:
        fmt += ',"sourceEventSeqs":%s'
    if op:
        fmt += ',"surfaceOp":%s'
    return "'" + fmt + "}'"


# A crash-repair closer's row (rows.closer_row): the reference writes its surfaceOp
# first. Tested in this order, most rows leave at the first test.
CLOSER: Final = (
    "source_event_seqs IS NOT NULL AND surface_op = '\"append\"' AND type = 'tool/result'"
    f" AND substr(data, 1, 8) = '{{\"turn\":' AND substr(data, -{len(CLOSER_DATA_END)})"
    f" = '{CLOSER_DATA_END.replace(chr(39), chr(39) * 2)}'"
)

# Each row's log line as its columns rebuild it, built by SQLite. One printf per row,
# its format picked by which optional columns are NULL, is the cheapest form measured (a
# chain of || allocates a string per operator). json_quote escapes exactly like
# JSON.stringify and our encoder (tested over every code point), so an odd type string
# cannot break the line.
REBUILT: Final = f"""CASE WHEN {CLOSER} THEN printf(
    '{{"type":%s,"seq":%d,"time":%d,"data":%s,"surfaceOp":%s,"sourceEventSeqs":%s}}',
    json_quote(type), seq, time, data, surface_op, source_event_seqs)
ELSE printf(
    CASE WHEN surface_op IS NULL
        THEN CASE WHEN source_event_seqs IS NULL
            THEN {_line_format(False, False)} ELSE {_line_format(True, False)} END
        ELSE CASE WHEN source_event_seqs IS NULL
            THEN {_line_format(False, True)} ELSE {_line_format(True, True)} END
    END,
    json_quote(type), seq, time, data, coalesce(source_event_seqs, surface_op), surface_op)
END"""

# Each row's log line: the one kept for it, else the rebuilt one, in a statement whose
# ?1 is the session id. Whether the session has any kept line is looked up once per
# statement (SQLite evaluates a subquery that does not depend on the row once): a
# session without any, the usual one, pays nothing per row; one with some, a lookup per
# row in the small table of kept lines.
LINE: Final = (f"coalesce(CASE WHEN EXISTS (SELECT 1 FROM dsh_event_lines WHERE session_id = ?1)"
               f" THEN {_KEPT} END, {REBUILT})")

# One chunk of a session's rebuilt lines, ``\\n``-separated, as bytes (a BLOB needs no
# UTF-8 decoding on the way out); the loader puts the session's kept lines in, read
# once (SELECT_KEPT), which costs nothing per row. The aggregate visits the rows in the
# order of the primary key's index; the loader still checks the decoded seqs, as SQLite
# does not promise it.
SELECT_CHUNK: Final = (
    f"SELECT count(*), CAST(group_concat({REBUILT}, char(10)) AS BLOB) FROM events"
    " WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3"
)


def lines_sql(where: str, limit: bool = False, also: str = "") -> str:
    """One statement answering a read of lines whole: whether the session is stored,
    how many rows match ``where`` (``?1`` the session id), and their lines, in seq
    order, ``\n``-joined into one BLOB by SQLite (:data:`LINE`), which Python splits
    once. Against a read transaction of three statements and a line built per row in
    Python, it takes the SDK reload's ``lines_of_types`` from 8.5 to 5.3 ms (medians,
    in fresh processes) for 2,000 of 7,500 rows, and one statement needs no
    transaction for its snapshot.

    SQLite before 3.44 cannot order an aggregate's input; there the rows come from a
    subquery ordered by seq (the primary key's index, which SQLite walks in order and
    the aggregate reads as it yields them).

    :param also: more columns, after the lines (scalar subqueries: same snapshot)."""
    if sqlite3.sqlite_version_info >= (3, 44, 0):
        rows = (f"SELECT count(*) AS n, group_concat({LINE}, char(10) ORDER BY seq) AS lines"
                f" FROM events WHERE {where}")
        if limit:  # an ordered aggregate cannot be limited: the rows are, first
            rows = (f"SELECT count(*) AS n, group_concat(line, char(10) ORDER BY seq) AS lines"
                    f" FROM (SELECT seq, {LINE} AS line FROM events WHERE {where}"
                    f" ORDER BY seq LIMIT ?3)")
    else:
        rows = (f"SELECT count(*) AS n, group_concat(line, char(10)) AS lines FROM"
                f" (SELECT {LINE} AS line FROM events WHERE {where} ORDER BY seq"
                f"{' LIMIT ?3' if limit else ''})")
    return (f"SELECT (SELECT 1 FROM sessions WHERE id = ?1), n, CAST(lines AS BLOB){also}"
            f" FROM ({rows})")


LINES_OF_TYPES: Final = lines_sql(_WHERE_TYPES)
LINES_AFTER: Final = lines_sql("session_id = ?1 AND seq > ?2", limit=True)
# lines_since under the session's writer lock: the index state too, in the same
# snapshot, which the next batch then need not read (nobody else writes meanwhile).
LINES_SINCE: Final = lines_sql(
    "session_id = ?1 AND seq > ?2", limit=True,
    also=", (SELECT next_seq FROM dsh_search_state WHERE session_id = ?1),"
         " (SELECT turn FROM dsh_search_state WHERE session_id = ?1)")

# What a delete removes: the header, the count of events, the size of their log lines
# (as a load builds them, each with its newline) and the time of the last one.
SELECT_MEASURE: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length,"
    " (SELECT count(*) FROM events WHERE session_id = ?1),"
    f" (SELECT coalesce(sum(length(CAST({LINE} AS BLOB)) + 1), 0) FROM events"
    " WHERE session_id = ?1),"
    " (SELECT time FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1)"
    " FROM sessions WHERE id = ?1"
)
DELETE_EVENTS: Final = "DELETE FROM events WHERE session_id = ?"
DELETE_SESSION: Final = "DELETE FROM sessions WHERE id = ?"

# --- the search index -------------------------------------------------------------------

#: How FTS5 splits the stored words again: on what is not a letter or digit, no
#: diacritics removed (a word is found only as it was written, caselessly).
TOKENIZE: Final = "'unicode61 remove_diacritics 0'"
INDEX_TABLES: Final = ("dsh_search_docs", "dsh_search", "dsh_search_state")
# Tables of our own beside the reference's: created when a writable database is opened,
# never stamped in user_version (the reference refuses any version but 4, and must
# keep reading what this build writes).
INDEX_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS dsh_search_docs (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        turn INTEGER,
        UNIQUE (session_id, seq)
    ) STRICT""",
    # Its rowid is the docs row's id; the body is the event's index words, joined by
    # spaces.
    f"CREATE VIRTUAL TABLE IF NOT EXISTS dsh_search USING fts5(words, tokenize = {TOKENIZE})",
    """CREATE TABLE IF NOT EXISTS dsh_search_state (
        session_id TEXT PRIMARY KEY,
        next_seq INTEGER NOT NULL,
        turn INTEGER
    ) STRICT""",
)
# How many of the reference's tables and the index's the database has.
SELECT_TABLES: Final = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN"
    " ('sessions', 'events', 'dsh_search_docs', 'dsh_search', 'dsh_search_state')"
)
SELECT_INDEX_TABLES: Final = (
    "SELECT count(*) FROM sqlite_master WHERE name IN"
    " ('dsh_search_docs', 'dsh_search', 'dsh_search_state')"
)


def batch_lines(params: Sequence[object], jsonl: bytes) -> list[bytes]:
    """The batch's lines: the ones the coordinator encoded, or (when they are not one a
    row) built from the rows as the loader builds them."""
    count = len(params) // PARAMS_PER_ROW
    lines = lines_of(jsonl, count)
    if lines is not None:
        return lines
    n = PARAMS_PER_ROW
    return [row_line((params[i], params[i + 1], params[i + 2], params[i + 3],  # type: ignore[arg-type]
                      params[i + 4] or None, params[i + 5] or None))
            for i in range(0, len(params), n)]


def busy(exc: BaseException) -> bool:
    """Whether SQLite refused a write because another connection holds the lock."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY,
                                                      sqlite3.SQLITE_LOCKED)


def set_journal_mode(conn: sqlite3.Connection, mode: str, patience: float = 5.0) -> None:
    """``PRAGMA journal_mode = mode``, waited for while another connection holds the
    database (a store made a moment ago, which a follower in another process opened to
    read): SQLite's busy handler does not wait for this change of mode, so it is retried
    until it is taken, for up to ``patience`` seconds (the busy timeout's), as the
    handler would.

    :raises sqlite3.OperationalError: still busy after ``patience``; any other refusal.
    """
    import time

    deadline = time.monotonic() + patience
    while True:
        try:
            conn.execute(f"PRAGMA journal_mode = {mode}")
            return
        except sqlite3.OperationalError as exc:
            if not busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)  # a lock wait, as SQLite's own busy handler sleeps


def read_only(exc: BaseException) -> bool:
    """Whether SQLite refused a write because the database cannot be written."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    # Told by SQLite's result code (any SQLITE_READONLY_*): an error SQLite raised has
    # one; an error without one was not SQLite's refusal of a write.
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_READONLY
