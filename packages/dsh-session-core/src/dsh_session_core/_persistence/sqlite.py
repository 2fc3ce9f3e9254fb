"""The SQLite persistence backend (spec §10): every session in one database file.

Two ``STRICT`` tables, schema version 4 (``PRAGMA user_version``), exactly the
reference's, so a database written by one implementation is read by the other::

    sessions(id, version, created_at, cwd, parent_session, seed_length)
    events(session_id, seq, type, time, data, source_event_seqs, surface_op)

A ``sessions`` row exists iff the session has an event: the first batch writes it in
the same transaction as its events. Each batch, and each repair, is one transaction,
so a crash never leaves half a batch (SQLite has no torn tail of its own; only a row
edited by hand can be corrupt, and the scan treats it as the reference does).

Loading rebuilds each row's log line in SQL, in key order ``type, seq, time, data[,
sourceEventSeqs][, surfaceOp]``, and decodes the lines in one msgspec call per chunk
of rows (for a large session, SQLite builds the next chunk in a worker thread while
this one decodes); the row-by-row scan of the reference (:func:`scan_rows`) runs only
when a chunk does not decode or its seqs are not the expected ones. The reads of lines
(``read_lines``, ``lines_since``, ``lines_of_types``) are one statement each, whose
lines SQLite builds the same way and joins into one string (:func:`_lines_sql`).

The writer lock (beyond the reference) is an ``flock`` on a file beside the database,
which the kernel releases when the holding process dies.

The full-text search index (beyond the reference, so in tables of its own, which the
reference never reads; the two tables above and the version stay exactly its own)::

    dsh_search_docs(id, session_id, seq, turn)    one row per searched event with words
    dsh_search(words)                              FTS5, rowid = dsh_search_docs.id
    dsh_search_state(session_id, next_seq, turn)   how far each session is indexed

Each batch and repair indexes its events in its own transaction
(:mod:`.search_index`). Rows another writer stored (the reference, or a build without
the index) are indexed when a batch or a search next meets the session; a database
that cannot be written is searched as completely, those rows checked one by one.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import functools
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from .._codec import ENCODER
from .._header import SessionHeader
from .._registry import EventRegistry
from ..errors import PersistenceError, SchemaVersionError, StoreNotFoundError, UnstorableError
from ..events import Event
from .base import (
    POLL_SECONDS,
    Deleted,
    LogNews,
    LogTail,
    SessionLockedError,
    SessionSummary,
    StoredLog,
    WriterLock,
    check_common_id,
    continued,
    not_found,
)
from .files import lock_is_free, same_file
from .rows import (
    PARAMS_PER_ROW,
    Row,
    RowScan,
    event_params,
    header_of,
    header_row,
    load_chunks,
    row_line,
    scan_rows,
    scanned,
    summaries_in_order,
    unencodable,
    utf8_ok,
)
from .search_index import (
    IndexRow,
    answer,
    bindable,
    fts_match,
    fts_trusted,
    index_batch,
    index_lines,
    lines_of,
    stored_turn,
)

if TYPE_CHECKING:
    from .._search import SearchHit, SearchQuery

__all__ = [
    "SCHEMA_VERSION",
    "JournalMode",
    "Row",
    "RowScan",
    "SchemaVersionError",
    "SqliteBackend",
    "UnstorableError",
    "scan_rows",
]

#: ``PRAGMA user_version`` of a database this build reads and writes. The reference
#: skipped 3 on purpose; there is no migration: 1, 2, 3, 5... are all refused.
SCHEMA_VERSION: Final = 4

JournalMode: TypeAlias = Literal["wal", "delete", "truncate", "persist"]
_JOURNAL_MODES: Final = frozenset({"wal", "delete", "truncate", "persist"})


_SCHEMA: Final = (
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

# An upsert, never INSERT OR REPLACE: REPLACE deletes the old row first, and the
# foreign key's ON DELETE CASCADE would take the session's events with it.
_UPSERT_SESSION: Final = """
    INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET
        version = excluded.version, created_at = excluded.created_at, cwd = excluded.cwd,
        parent_session = excluded.parent_session, seed_length = excluded.seed_length"""
#: Rows per multi-row INSERT: 6 parameters each (and the session id once) stays far
#: below SQLite's 32,766 limit.
_ROWS_PER_INSERT: Final = 500


@functools.cache
def _insert_rows_sql(count: int) -> str:
    # The session id is bound once, as ?1, for every row; an absent optional column is
    # bound as '' and stored as NULL (JSON text is never empty). Binding None costs the
    # sqlite3 module an adapter lookup that formats an AttributeError, per parameter.
    row = "(?1, ?, ?, ?, ?, nullif(?, ''), nullif(?, ''))"
    return "INSERT INTO events VALUES " + ",".join([row] * count)


def _insert_rows(conn: sqlite3.Connection, session_id: str, params: list[object]) -> None:
    """Insert the rows of :func:`event_params` with one statement per chunk: a 48-row
    batch costs a third less than ``executemany``, which steps and resets the statement
    once per row."""
    count = len(params) // PARAMS_PER_ROW
    if count <= _ROWS_PER_INSERT:
        if count:
            conn.execute(_insert_rows_sql(count), [session_id, *params])
        return
    step = _ROWS_PER_INSERT * PARAMS_PER_ROW
    for start in range(0, len(params), step):
        chunk = params[start : start + step]
        conn.execute(_insert_rows_sql(len(chunk) // PARAMS_PER_ROW), [session_id, *chunk])


_DELETE_TAIL: Final = "DELETE FROM events WHERE session_id = ? AND seq >= ?"
_SELECT_HEADERS: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length FROM sessions"
)
# The first and last seq come from the primary key's index in O(log n) (count(*) would
# walk it); the chunks then prove that every seq in between is there.
_SELECT_HEADER: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length,"
    " (SELECT min(seq) FROM events WHERE session_id = ?1),"
    " (SELECT max(seq) FROM events WHERE session_id = ?1)"
    " FROM sessions WHERE id = ?1"
)
_SELECT_ROWS: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = ? ORDER BY seq"
)

# The counts of a page of sessions (``ls``): per id, its own rows' range of the events'
# primary key, so a page costs what its sessions hold, whatever the store's size.
_SELECT_SUMMARIES_OF: Final = (
    "SELECT s.id, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length,"
    " (SELECT count(*) FROM events WHERE session_id = s.id),"
    " (SELECT count(*) FROM events WHERE session_id = s.id AND type = 'turn/start'),"
    " (SELECT time FROM events WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)"
    " FROM sessions AS s WHERE s.id IN (SELECT value FROM json_each(?))"
)

# Listing with counts: one aggregate over the events' primary-key index (count, turn
# starts, the highest seq per session), then the time of that highest seq's row.
_SELECT_SUMMARIES: Final = (
    "SELECT s.id, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length,"
    " coalesce(e.n, 0), coalesce(e.turns, 0), t.time FROM sessions AS s"
    " LEFT JOIN (SELECT session_id, count(*) AS n, sum(type = 'turn/start') AS turns,"
    " max(seq) AS last FROM events GROUP BY session_id) AS e ON e.session_id = s.id"
    " LEFT JOIN events AS t ON t.session_id = e.session_id AND t.seq = e.last"
)
_SELECT_FOUND: Final = "SELECT 1 FROM sessions WHERE id = ?"
#: A read that starts a read transaction's snapshot.
_SELECT_ANY: Final = "SELECT 1 FROM sessions LIMIT 1"
# The rows of some types (``lines_of_types``): the session's key range, filtered.
_SELECT_TYPES: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = ? AND type IN (SELECT value FROM json_each(?)) ORDER BY seq"
)
_WHERE_TYPES: Final = "session_id = ?1 AND type IN (SELECT value FROM json_each(?2))"
_SELECT_LAST: Final = "SELECT max(seq) FROM events WHERE session_id = ?"
_SELECT_TAIL: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = ? ORDER BY seq DESC LIMIT ?"
)
_SELECT_RANGE: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
_SELECT_AFTER: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = ? AND seq > ? ORDER BY seq"
)


def _line_format(sources: bool, op: bool) -> str:
    fmt = '{"type":%s,"seq":%d,"time":%d,"data":%s'
    if sources:
        fmt += ',"sourceEventSeqs":%s'
    if op:
        fmt += ',"surfaceOp":%s'
    return "'" + fmt + "}'"


# Each row's log line, built by SQLite. One printf per row, its format picked by which
# optional columns are NULL, is the cheapest form measured (a chain of || allocates a
# string per operator). json_quote escapes exactly like JSON.stringify and our encoder
# (tested over every code point), so an odd type string cannot break the line.
_LINE: Final = f"""printf(
    CASE WHEN surface_op IS NULL
        THEN CASE WHEN source_event_seqs IS NULL
            THEN {_line_format(False, False)} ELSE {_line_format(True, False)} END
        ELSE CASE WHEN source_event_seqs IS NULL
            THEN {_line_format(False, True)} ELSE {_line_format(True, True)} END
    END,
    json_quote(type), seq, time, data, coalesce(source_event_seqs, surface_op), surface_op)"""

# One chunk of a session's lines, ``\\n``-separated, as bytes (a BLOB needs no UTF-8
# decoding on the way out). The aggregate visits the rows in the order of the primary
# key's index; the loader still checks the decoded seqs, as SQLite does not promise it.
_SELECT_CHUNK: Final = (
    f"SELECT count(*), CAST(group_concat({_LINE}, char(10)) AS BLOB) FROM events"
    " WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3"
)

#: Rows per chunk of the fast load: small enough that decoding starts early, large
#: enough that per-query costs vanish.
_CHUNK: Final = 8192


def _lines_sql(where: str, limit: bool = False, also: str = "") -> str:
    """One statement answering a read of lines whole: whether the session is stored,
    how many rows match ``where`` (``?1`` the session id), and their lines, in seq
    order, ``\n``-joined into one BLOB by SQLite (:data:`_LINE`), which Python splits
    once. Against a read transaction of three statements and a line built per row in
    Python, it takes the SDK reload's ``lines_of_types`` from 8.5 to 5.3 ms (medians,
    in fresh processes) for 2,000 of 7,500 rows, and one statement needs no
    transaction for its snapshot.

    SQLite before 3.44 cannot order an aggregate's input; there the rows come from a
    subquery ordered by seq (the primary key's index, which SQLite walks in order and
    the aggregate reads as it yields them).

    :param also: more columns, after the lines (scalar subqueries: same snapshot)."""
    if sqlite3.sqlite_version_info >= (3, 44, 0):
        rows = (f"SELECT count(*) AS n, group_concat({_LINE}, char(10) ORDER BY seq) AS lines"
                f" FROM events WHERE {where}")
        if limit:  # an ordered aggregate cannot be limited: the rows are, first
            rows = (f"SELECT count(*) AS n, group_concat(line, char(10) ORDER BY seq) AS lines"
                    f" FROM (SELECT seq, {_LINE} AS line FROM events WHERE {where}"
                    f" ORDER BY seq LIMIT ?3)")
    else:
        rows = (f"SELECT count(*) AS n, group_concat(line, char(10)) AS lines FROM"
                f" (SELECT {_LINE} AS line FROM events WHERE {where} ORDER BY seq"
                f"{' LIMIT ?3' if limit else ''})")
    return (f"SELECT (SELECT 1 FROM sessions WHERE id = ?1), n, CAST(lines AS BLOB){also}"
            f" FROM ({rows})")


_LINES_OF_TYPES: Final = _lines_sql(_WHERE_TYPES)
_LINES_AFTER: Final = _lines_sql("session_id = ?1 AND seq > ?2", limit=True)
# lines_since under the session's writer lock: the index state too, in the same
# snapshot, which the next batch then need not read (nobody else writes meanwhile).
_LINES_SINCE: Final = _lines_sql(
    "session_id = ?1 AND seq > ?2", limit=True,
    also=", (SELECT next_seq FROM dsh_search_state WHERE session_id = ?1),"
         " (SELECT turn FROM dsh_search_state WHERE session_id = ?1)")

# What a delete removes: the header, the count of events, the size of their log lines
# (as a load builds them, each with its newline) and the time of the last one.
_SELECT_MEASURE: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length,"
    " (SELECT count(*) FROM events WHERE session_id = ?1),"
    f" (SELECT coalesce(sum(length(CAST({_LINE} AS BLOB)) + 1), 0) FROM events"
    " WHERE session_id = ?1),"
    " (SELECT time FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1)"
    " FROM sessions WHERE id = ?1"
)
_DELETE_EVENTS: Final = "DELETE FROM events WHERE session_id = ?"
_DELETE_SESSION: Final = "DELETE FROM sessions WHERE id = ?"

# --- the search index -------------------------------------------------------------------

#: How FTS5 splits the stored words again: on what is not a letter or digit, no
#: diacritics removed (a word is found only as it was written, caselessly).
_TOKENIZE: Final = "'unicode61 remove_diacritics 0'"
_INDEX_TABLES: Final = ("dsh_search_docs", "dsh_search", "dsh_search_state")
# Tables of our own beside the reference's: created when a writable database is opened,
# never stamped in user_version (the reference refuses any version but 4, and must
# keep reading what this build writes).
_INDEX_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS dsh_search_docs (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        turn INTEGER,
        UNIQUE (session_id, seq)
    ) STRICT""",
    # Its rowid is the docs row's id; the body is the event's index words, joined by
    # spaces.
    f"CREATE VIRTUAL TABLE IF NOT EXISTS dsh_search USING fts5(words, tokenize = {_TOKENIZE})",
    """CREATE TABLE IF NOT EXISTS dsh_search_state (
        session_id TEXT PRIMARY KEY,
        next_seq INTEGER NOT NULL,
        turn INTEGER
    ) STRICT""",
)
# How many of the reference's tables and the index's the database has.
_SELECT_TABLES: Final = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN"
    " ('sessions', 'events', 'dsh_search_docs', 'dsh_search', 'dsh_search_state')"
)
_SELECT_INDEX_TABLES: Final = (
    "SELECT count(*) FROM sqlite_master WHERE name IN"
    " ('dsh_search_docs', 'dsh_search', 'dsh_search_state')"
)
_SELECT_STATE: Final = "SELECT next_seq, turn FROM dsh_search_state WHERE session_id = ?"
_UPSERT_STATE: Final = """
    INSERT INTO dsh_search_state (session_id, next_seq, turn) VALUES (?, ?, ?)
    ON CONFLICT (session_id) DO UPDATE SET next_seq = excluded.next_seq, turn = excluded.turn"""
# The FTS rows go first, while the docs rows still say which they are.
_DELETE_FTS_FROM: Final = (
    "DELETE FROM dsh_search WHERE rowid IN"
    " (SELECT id FROM dsh_search_docs WHERE session_id = ? AND seq >= ?)"
)
_DELETE_DOCS_FROM: Final = "DELETE FROM dsh_search_docs WHERE session_id = ? AND seq >= ?"
_DELETE_STATE: Final = "DELETE FROM dsh_search_state WHERE session_id = ?"
#: A session's index state: the seq after the last indexed row, the turn open there
#: (as stored: :func:`stored_turn`).
IndexState: TypeAlias = tuple[int, int | None]
#: Below every seq: "from" it means the whole session.
_ALL_SEQS: Final = -(2**63)
_SELECT_ROWS_FROM: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq LIMIT ?"
)
#: Rows per page when indexing or checking rows no index covers.
_PAGE: Final = 4096
# The turn changes before a seq, newest first (the primary key's index, backwards).
_SELECT_TURN_CHANGES: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = ? AND seq < ? AND type IN ('turn/start', 'turn/end')"
    " ORDER BY seq DESC"
)
# Every stored session with how far it is indexed and its last seq (one lookup in the
# events' primary key each; a sessions row exists iff the session has an event).
_SELECT_PROGRESS: Final = (
    "SELECT s.id, st.next_seq, st.turn,"
    " (SELECT max(seq) FROM events WHERE session_id = s.id)"
    " FROM sessions AS s LEFT JOIN dsh_search_state AS st ON st.session_id = s.id"
)
_SELECT_TOPS: Final = (
    "SELECT s.id, NULL, NULL, (SELECT max(seq) FROM events WHERE session_id = s.id)"
    " FROM sessions AS s"
)
# The candidates: the index's matches joined to their events (an index row whose
# event is gone matches nothing), narrowed by type, session and time.
_SELECT_CANDIDATES: Final = (
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


def _insert_index(conn: sqlite3.Connection, session_id: str, rows: Sequence[IndexRow]
                  ) -> None:
    """Insert index rows: one multi-row statement per table (per 500 rows). SQLite gives
    the docs rows of one statement consecutive ids (each row the highest id plus one, in
    this write transaction), so the last one (``lastrowid``) gives them all: each FTS
    row's rowid is its docs row's id without reading anything back."""
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start : start + _ROWS_PER_INSERT]
        docs: list[object] = [session_id]
        for row in chunk:
            docs += (row.seq, stored_turn(row.turn))
        last = conn.execute(_insert_docs_sql(len(chunk)), docs).lastrowid
        assert last is not None  # an INSERT of at least one row sets it
        fts: list[object] = []
        for i, row in enumerate(chunk, last - len(chunk) + 1):
            fts += (i, " ".join(row.words))
        conn.execute(_insert_fts_sql(len(chunk)), fts)


def _delete_index(conn: sqlite3.Connection, session_id: str, start: int) -> None:
    conn.execute(_DELETE_FTS_FROM, (session_id, start))
    conn.execute(_DELETE_DOCS_FROM, (session_id, start))


def _lines_from(conn: sqlite3.Connection, session_id: str, start: int, end: int
                ) -> Iterator[bytes]:
    """The log lines of the rows ``start <= seq < end``, a page at a time."""
    while start < end:
        rows = conn.execute(_SELECT_ROWS_FROM, (session_id, start, end, _PAGE)).fetchall()
        for row in rows:
            yield row_line(row)
        if len(rows) < _PAGE:
            return
        start = rows[-1][0] + 1


def _turn_before(conn: sqlite3.Connection, session_id: str, seq: int) -> int | None:
    """The turn open right before ``seq``: that of the last turn change before it."""
    from .._search import turn_change

    for row in conn.execute(_SELECT_TURN_CHANGES, (session_id, seq)):
        change = turn_change(row_line(row))
        if change is not None:
            return change[1]
    return None


def _sync(conn: sqlite3.Connection, session_id: str, end: int, cut: bool = False
          ) -> int | None:
    """Bring a session's index to cover exactly its rows before seq ``end`` (in the
    caller's write transaction, which then stores the state), and return the turn open
    there (:data:`TURN_UNKNOWN` when no column holds it).

    The usual case, a state at ``end``, reads one row. No state (rows a writer without
    the index stored): the session is indexed from its first row. A state behind:
    from there. A state past ``end``: the rows were cut back at ``end`` by our repair
    (``cut``), so what follows is indexed again; else by a writer that keeps no index
    (the reference's repair), which may have cut them anywhere before and written
    others: the whole session is indexed again.
    """
    state = conn.execute(_SELECT_STATE, (session_id,)).fetchone()
    if state is not None and state[0] == end:
        return state[1]  # type: ignore[no-any-return]
    if state is None or (state[0] > end and not cut):
        start, turn = _ALL_SEQS, None
        _delete_index(conn, session_id, _ALL_SEQS)  # and rows left by a writer's delete
    elif state[0] > end:
        start, turn = end, stored_turn(_turn_before(conn, session_id, end))
        _delete_index(conn, session_id, end)
    else:
        start, turn = state
    # A page at a time, so a long session never sits in memory whole; each page is
    # fetched before its rows are written, so no read cursor is open across an insert.
    while start < end:
        page = conn.execute(_SELECT_ROWS_FROM, (session_id, start, end, _PAGE)).fetchall()
        rows, turn, _ = index_lines([row_line(row) for row in page], turn)
        _insert_index(conn, session_id, rows)
        if len(page) < _PAGE:
            break
        start = page[-1][0] + 1
    return stored_turn(turn)


#: A batch's index rows given the turn open before it (:func:`index_batch`'s answer).
RowsFrom: TypeAlias = Callable[[int | None], tuple[builtins.list[IndexRow], int | None, bool]]


def _index(conn: sqlite3.Connection, session_id: str, first: int, rows_from: RowsFrom,
           end: int, cut: bool = False, known: IndexState | None = None) -> IndexState:
    """Index the events ``first .. end-1`` (``rows_from`` reads them), after catching up
    the rows before them, and store the session's state; in the caller's write
    transaction.

    :param known: the state this backend stored with the session's last batch, while it
        has held the session's writer lock since: no other writer has changed it, so it
        is not read again.
    :returns: the state stored.
    """
    if known is not None and known[0] == first:
        turn: int | None = known[1]
    else:
        turn = _sync(conn, session_id, first, cut)
    rows, turn, _ = rows_from(turn)
    _insert_index(conn, session_id, rows)
    state = (end, stored_turn(turn))
    conn.execute(_UPSERT_STATE, (session_id, *state))
    return state


def _batch_lines(params: Sequence[object], jsonl: bytes) -> builtins.list[bytes]:
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


def _read_only(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused a write because the database cannot be written."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == sqlite3.SQLITE_READONLY
    return "readonly" in str(exc)

#: How many times a lock file that a delete removed while it was being locked is
#: taken again (once is all a delete makes it need).
_LOCK_ATTEMPTS: Final = 8


# --- the writer lock ------------------------------------------------------------------


def _clash(session_id: str, first: int, materialized: bool) -> PersistenceError:
    """The error of a batch whose seqs another writer stored first."""
    if not materialized:
        msg = (f'session "{session_id}" was created by another writer at the same time '
               f"(its log already holds seq {first}): nothing of this batch was written; "
               f"open the session to continue it, or create another id")
    else:
        msg = (f'session "{session_id}" was written by another writer: seq {first} is '
               f"already stored; nothing of this batch was written; reopen the session to "
               f"continue from what is stored")
    return PersistenceError(msg, session_id=session_id)


@functools.lru_cache(maxsize=256)
def _lock_path(lock_dir: str, session_id: str) -> str:
    """``<lock_dir>/<sha256 of the id>.lock``, kept for the sessions used most recently:
    the default mode takes the same session's lock on every call."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return os.path.join(lock_dir, f"{digest}.lock")


class _FileLock:
    """An ``flock`` held on an open descriptor: closing it (or dying) releases it.

    :param stored: whether the session has a row; when it has none at release (created
        and never flushed), the lock file is removed first, while held, as
        :meth:`SqliteBackend.delete` removes it (a writer that opened it meanwhile locks
        a dead file, sees it and makes a new one): nothing is left for a session that
        was never stored.
    """

    __slots__ = ("_fd", "_guard", "_owner", "_path", "_stored")

    def __init__(self, fd: int, owner: set[_FileLock], path: str,
                 stored: Callable[[], bool]) -> None:
        self._fd = fd
        self._owner = owner
        self._path = path
        self._stored = stored
        self._guard = threading.Lock()

    def release(self) -> None:
        with self._guard:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            self._owner.discard(self)
            try:
                if not self._stored() and same_file(fd, self._path):
                    with contextlib.suppress(OSError):  # a lock file left is harmless
                        os.unlink(self._path)
            finally:
                os.close(fd)  # the lock goes with the open file description


class _MemoryLock:
    """A lock on a ``:memory:`` database, which no other connection can open."""

    __slots__ = ("_held", "_id")

    def __init__(self, held: set[str], session_id: str) -> None:
        self._held = held
        self._id = session_id

    def release(self) -> None:
        self._held.discard(self._id)


# --- the backend ----------------------------------------------------------------------


class SqliteBackend:
    """Sessions in one SQLite database (the reference's ``dsh-session-persistence-sqlite``).

    :param path: the database file (made absolute; its parent is created with mode
        0700), or ``":memory:"`` for a private database that lives as long as this
        object.
    :param journal_mode: ``"wal"`` (the default), ``"delete"``, ``"truncate"`` or
        ``"persist"``.
    :param create: create the file when it does not exist (else
        :class:`StoreNotFoundError`, as for ``":memory:"``: a reader must not leave a
        database behind, and a fresh in-memory one holds nothing to read).
    :raises SchemaVersionError: the database has another schema version.
    :raises StoreFolderError: ``create``, and the database's folder does not exist (it
        is never made).
    :raises sqlite3.Error: the database cannot be opened.

    The database is opened here, not on first use as in the reference (whose
    constructor cannot wait): a bad path or version is reported where it was given.
    Every method may be called from any thread; one lock serializes the connection.
    """

    name = "session-persistence-sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        journal_mode: JournalMode = "wal",
        create: bool = True,
    ) -> None:
        if journal_mode not in _JOURNAL_MODES:
            msg = f"journal_mode must be one of {sorted(_JOURNAL_MODES)}, got {journal_mode!r}"
            raise ValueError(msg)
        raw = os.fspath(path)
        if not create and (raw in ("", ":memory:") or not os.path.isfile(raw)):
            # The absolute path: a relative URL (sqlite:///x.db) says where it looked.
            where = os.path.abspath(raw) if raw not in ("", ":memory:") else ":memory:"
            raise StoreNotFoundError(where, "no SQLite store at this path")
        if raw == ":memory:":
            self.path = raw
            self._lock_dir: str | None = None
        else:
            self.path = os.path.abspath(raw)
            self._lock_dir = self.path + ".locks"
            if create:
                from .urls import check_folder

                check_folder(self.path)  # never the folders above it
                # A new database file is private, as a JSONL log is (0600, whatever the
                # umask); SQLite gives its -wal and -shm files the database's mode.
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                     | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
        self._lock = threading.Lock()
        self._file_locks: set[_FileLock] = set()
        self._memory_locks: set[str] = set()
        # The index state each session's last batch stored, kept while this backend
        # holds the session's writer lock (dropped when it takes the lock, deletes or
        # repairs): no other writer can have changed it, so a flush does not read it.
        self._states: dict[str, IndexState] = {}
        # The sessions a batch was stored for since this backend took their writer lock:
        # stored still at its release (no one else can delete a session while its lock
        # is held), so the release asks the database nothing (_has_row).
        self._written: set[str] = set()
        # The sessions whose writer lock (a file's) this backend holds.
        self._held: set[str] = set()
        # The data_version at which a search last found the index in step with every
        # row (None: not yet): until another connection commits, it still is.
        self._in_step_at: int | None = None
        # Autocommit (isolation_level=None): the module then opens no transaction
        # behind our back, and BEGIN/COMMIT make one batch exactly one transaction.
        # check_same_thread=False because the coordinator calls from several threads;
        # self._lock keeps the connection to one thread at a time.
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            self._open(journal_mode)
        except BaseException:
            self._conn.close()
            raise

    def _open(self, journal_mode: str) -> None:
        conn = self._conn
        # In the reference's order. PRAGMA takes no bound parameters: only the checked
        # mode name is interpolated. `synchronous` is left at its default (FULL): a
        # commit is on disk when COMMIT returns, which append_batch promises.
        conn.execute("PRAGMA foreign_keys = ON")  # per connection, off by default
        conn.execute(f"PRAGMA journal_mode = {journal_mode.upper()}")
        version = self._user_version()
        # A database of this version with every table (each open but a file's first)
        # needs no CREATE: one read of the schema says so. (Measured: the statements of
        # an open cost 0.17 ms, most of it SQLite reading the schema, which any first
        # query pays; what an open of a store costs beyond is not spent here.)
        if version == SCHEMA_VERSION and conn.execute(_SELECT_TABLES).fetchone()[0] == (
                len(_SCHEMA) + len(_INDEX_TABLES)):
            self._indexed = True
            return
        stamped = False
        if version == 0:
            # Stamp and create in one transaction, re-reading the version under the
            # write lock: two processes opening a fresh file cannot both stamp it.
            with self._transaction():
                version = self._user_version()
                if version == 0:
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    version, stamped = SCHEMA_VERSION, True
        if version != SCHEMA_VERSION:
            raise SchemaVersionError(self.path, version)
        if not stamped:  # a database stamped by a build that stopped before its tables
            for statement in _SCHEMA:
                conn.execute(statement)
        self._indexed = self._open_index()

    def _open_index(self) -> bool:
        """Create the search index's tables when they are missing (a database written
        by the reference, or by a build without the index); whether they are there. A
        database that cannot be written, or an SQLite built without FTS5, is searched
        without them (every line checked)."""
        conn = self._conn
        if conn.execute(_SELECT_INDEX_TABLES).fetchone()[0] == len(_INDEX_TABLES):
            return True
        try:
            with self._transaction():
                for statement in _INDEX_SCHEMA:
                    conn.execute(statement)
        except sqlite3.OperationalError as exc:
            if not (_read_only(exc) or "no such module" in str(exc)):
                raise
            return False
        return True

    def _user_version(self) -> int:
        (version,) = self._conn.execute("PRAGMA user_version").fetchone()
        return int(version)

    @contextlib.contextmanager
    def _transaction(self, begin: str = "BEGIN IMMEDIATE") -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so a busy database is waited for
        # (the default 5 s busy timeout) instead of failing when a read upgrades.
        # A failed COMMIT (busy, I/O) is rolled back too: no transaction outlives us.
        conn = self._conn
        conn.execute(begin)
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:  # some errors already rolled SQLite back
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error as rollback:
                    exc.add_note(f"and the rollback failed: {rollback}")
            raise

    @property
    def journal_mode(self) -> str:
        """The journal mode in effect (``"memory"`` for a ``:memory:`` database)."""
        with self._lock:
            (mode,) = self._conn.execute("PRAGMA journal_mode").fetchone()
        return str(mode)

    # --- hooks ------------------------------------------------------------------------

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session, or ``None``. Ids are global in one database: any cwd matches.

        :raises LogFormatError: committed corruption (:func:`scan_rows`).
        """
        if not utf8_ok(session_id):
            return None  # no row can hold this id
        with self._lock, self._transaction("BEGIN"):  # one snapshot for every query
            row = self._conn.execute(_SELECT_HEADER, (session_id,)).fetchone()
            if row is None:
                return None
            header = header_of(row)
            first, last = row[6:8]
            fast: tuple[list[Event], bytes] | None = None
            if first is None:  # materialized, and every row cut since (a torn marker 0)
                fast = [], b""
            elif first == 0:  # else the scan decides what the rows before seq 0 mean
                fast = self._load_fast(session_id, last + 1, registry)
            if fast is not None:
                events, jsonl = fast
                return StoredLog(header, events, None, jsonl)
            rows = self._conn.execute(_SELECT_ROWS, (session_id,)).fetchall()
        return scanned(header, rows, registry, self.path)

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        """Same as :meth:`load_stored`: the SQLite backend has no cwd scopes."""
        return self.load_stored(session_id, registry)

    def _load_fast(
        self, session_id: str, count: int, registry: EventRegistry
    ) -> tuple[list[Event], bytes] | None:
        """Every row as a log line built by SQLite (:func:`load_chunks`); ``None`` when
        the careful scan must decide what is kept."""
        # One fetcher: a second connection building every other chunk (as PostgreSQL
        # does) made the standard load slower here, 123 -> 165 ms, the two threads'
        # SQLite allocations contending.
        try:
            return load_chunks([functools.partial(self._chunk, session_id)], count, _CHUNK,
                               registry)
        except sqlite3.DataError:
            # A chunk longer than SQLite's string limit (1 GB by default): the
            # row-by-row scan has no such limit.
            return None

    def _chunk(self, session_id: str, start: int) -> tuple[int, bytes | None]:
        n, blob = self._conn.execute(
            _SELECT_CHUNK, (session_id, start, start + _CHUNK)
        ).fetchone()
        return int(n), blob

    def append_batch(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        jsonl: bytes,
        materialized: bool,
    ) -> None:
        """Append a contiguous batch in one transaction; when not ``materialized``, the
        ``sessions`` row is written (upserted) in the same transaction.

        :raises UnstorableError: an event or the header does not fit the schema
            (checked before the transaction: nothing is written).
        :raises PersistenceError: a seq is already stored: another writer wrote the
            session (a second instance with a stale cursor), or created it at once when
            not ``materialized``; the transaction is rolled back, nothing is written
            (the driver's ``IntegrityError`` is its cause).
        """
        if not events:
            return  # a session row only ever comes with an event
        params = event_params(header.id, events)
        head = None if materialized else header_row(header)
        try:
            self._append_rows(header, events, jsonl, params, head)
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" not in str(exc) and "PRIMARY KEY" not in str(exc):
                raise  # not a clash of seqs (a session row missing: a caller's bug)
            raise _clash(header.id, events[0].seq, materialized) from exc

    def _append_rows(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                     params: list[object], head: Any) -> None:
        with self._lock:
            # Taken out first: a batch that fails leaves no state believed.
            known = self._states.pop(header.id, None)
            with self._transaction() as conn:
                if head is not None:
                    conn.execute(_UPSERT_SESSION, head)
                _insert_rows(conn, header.id, params)
                if self._indexed:  # the seqs as the rows hold them (checked ints)
                    rows_from = functools.partial(
                        index_batch, events, jsonl, functools.partial(_batch_lines, params, jsonl))
                    state = _index(conn, header.id, params[0], rows_from,  # type: ignore[arg-type]
                                   params[-PARAMS_PER_ROW] + 1,  # type: ignore[operator]
                                   known=known)
            if self._indexed:
                self._states[header.id] = state
            self._written.add(header.id)

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        """Delete the rows from seq ``torn`` on (iff it is not ``None``: 0 is a marker),
        then insert the ``closers``; one transaction."""
        if torn is not None and type(torn) is not int:
            msg = f"a SQLite torn marker is a seq (int), got {torn!r}"
            raise TypeError(msg)
        params = event_params(header.id, closers)
        if torn is None and not params:
            return
        lines = _batch_lines(params, jsonl) if self._indexed else None
        with self._lock, self._transaction() as conn:
            self._states.pop(header.id, None)
            if torn is not None:
                conn.execute(_DELETE_TAIL, (header.id, torn))
            _insert_rows(conn, header.id, params)
            if lines is not None:
                # The index is cut back with the rows (_sync: a state past the first
                # closer), and the closers indexed after what is left.
                first = params[0] if params else torn
                end = params[-PARAMS_PER_ROW] + 1 if params else torn  # type: ignore[operator]
                _index(conn, header.id, first, functools.partial(index_lines, lines),  # type: ignore[arg-type]
                       end, cut=torn is not None)  # type: ignore[arg-type]

    def location(self, header: SessionHeader) -> str:
        """The database file (``:memory:`` for an in-memory one); ids are global in it."""
        return self.path

    def check_id(self, session_id: str) -> None:
        """The common rule (:func:`~.base.check_common_id`): a ``TEXT`` column holds any
        other string, of any length."""
        check_common_id(session_id, self.name, cannot="the SQLite backend cannot store")

    def acquire(self, header: SessionHeader) -> WriterLock:
        """Take the session's writer lock: an ``flock`` on
        ``<database>.locks/<sha256 of the id>.lock``, which another process, or another
        backend over the same file in this process, cannot take until it is released
        or its holder dies.

        :raises SessionLockedError: another writer holds it.
        :raises UnstorableError: the id has a lone surrogate (refused here, at create or
            open, rather than at the first flush).
        """
        return self._acquire(header.id)

    def _lock_file(self, session_id: str) -> str | None:
        """The session's lock file (``None`` for a ``:memory:`` database)."""
        if self._lock_dir is None:
            return None
        return _lock_path(self._lock_dir, session_id)

    def _acquire(self, session_id: str) -> WriterLock:
        if not utf8_ok(session_id):
            raise unencodable(session_id, "the id", "SQLite")
        with self._lock:  # another writer may have held it since this one did
            self._states.pop(session_id, None)
            self._written.discard(session_id)
        path = self._lock_file(session_id)
        if path is None:
            with self._lock:
                if session_id in self._memory_locks:
                    raise SessionLockedError(session_id, "another writer in this process")
                self._memory_locks.add(session_id)
            return _MemoryLock(self._memory_locks, session_id)
        fd = -1
        for _ in range(_LOCK_ATTEMPTS):
            # The file is deleted only by delete(), while it holds the lock; a process
            # that opened it before and locks it after holds a dead file, so the lock
            # is checked to be on the file at the path (files.same_file).
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except FileNotFoundError:
                # The folder is made on first use, beside the database, never above
                # it: a database folder gone since the open is not made again (mkdir's
                # FileNotFoundError). Tried once the open fails: a call in the
                # default mode is one open(2), not a mkdir(2) that fails too.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(os.path.dirname(path), 0o700)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                # flock, not fcntl/lockf: its locks belong to the open file description,
                # so a second open of the file in this very process conflicts too.
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise SessionLockedError(session_id, f"lock {path}") from None
            except BaseException:
                os.close(fd)
                raise
            if same_file(fd, path):
                break
            os.close(fd)  # removed by a delete between our open and our flock
            fd = -1
        if fd < 0:
            raise SessionLockedError(session_id, f"lock {path} (removed under us, again "
                                                 f"and again: a delete loop?)")
        lock = _FileLock(fd, self._file_locks, path,
                         functools.partial(self._has_row, session_id))
        with self._lock:
            self._file_locks.add(lock)
            self._held.add(session_id)
        return lock

    def _has_row(self, session_id: str) -> bool:
        """Whether the session is stored (a row); ``True`` when that cannot be told (the
        database is closed or fails): its lock file is then kept. Asked when its lock is
        released: a session this backend stored a batch of since it took the lock is
        stored, asking nothing."""
        with self._lock:
            self._held.discard(session_id)
        if session_id in self._written:
            self._written.discard(session_id)
            return True
        try:
            with self._lock:
                return self._conn.execute(_SELECT_FOUND, (session_id,)).fetchone() is not None
        except sqlite3.Error:
            return True

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove the session's ``sessions`` row and every ``events`` row of it in one
        transaction, under its writer lock (:meth:`acquire`), then its lock file (while
        holding it). Rows are matched by the exact id (``=``), never a pattern. The
        database file keeps its size: SQLite reuses the freed pages.

        :raises SessionLockedError: a writer holds the session.
        :raises PersistenceError: no session of this id (``not found``).
        """
        if not utf8_ok(session_id):
            raise not_found(session_id)  # no row can hold this id
        with self._lock:
            found = self._conn.execute(_SELECT_FOUND, (session_id,)).fetchone()
        if found is None:
            raise not_found(session_id)
        lock_file = self._lock_file(session_id)
        if dry_run:
            free = (session_id not in self._memory_locks if lock_file is None
                    else lock_is_free(lock_file))
            if not free:
                raise SessionLockedError(
                    session_id, "another writer in this process" if lock_file is None
                    else f"lock {lock_file}")
            with self._lock, self._transaction("BEGIN") as conn:
                measured = conn.execute(_SELECT_MEASURE, (session_id,)).fetchone()
            if measured is None:
                raise not_found(session_id)
            return self._report(measured, lock_file, "would-delete")
        lock = self._acquire(session_id)
        try:
            with self._lock, self._transaction() as conn:
                measured = conn.execute(_SELECT_MEASURE, (session_id,)).fetchone()
                if measured is None:  # deleted meanwhile, by another store
                    raise not_found(session_id)
                conn.execute(_DELETE_EVENTS, (session_id,))
                conn.execute(_DELETE_SESSION, (session_id,))
                if self._indexed:
                    _delete_index(conn, session_id, _ALL_SEQS)
                    conn.execute(_DELETE_STATE, (session_id,))
            if lock_file is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock_file)
        finally:
            lock.release()
        return self._report(measured, lock_file, "deleted")

    def _report(self, row: tuple[Any, ...], lock_file: str | None, status: Literal[
            "deleted", "would-delete"]) -> Deleted:
        header = header_of(row[:6])
        events, size, last = int(row[6]), int(row[7]), row[8]
        removed = (f"{self.path}: the sessions row and {events} events row(s)",
                   *([lock_file] if lock_file is not None else []))
        return Deleted(header.id, status, self.path, removed,
                       len(ENCODER.encode(header)) + 1 + size, events, header,
                       last if isinstance(last, int) else None)

    def close(self) -> None:
        """Release every writer lock still held and close the database."""
        for lock in builtins.list(self._file_locks):
            lock.release()
        self._memory_locks.clear()
        with self._lock:
            self._conn.close()

    def list(self) -> builtins.list[SessionHeader]:
        """Every ``sessions`` row as a header (a row exists iff the session has an
        event); no event is read. No particular order."""
        with self._lock:
            rows = self._conn.execute(_SELECT_HEADERS).fetchall()
        return [header_of(row) for row in rows]

    # --- reading without writing ------------------------------------------------------

    def summaries(self) -> builtins.list[SessionSummary]:
        """Every session with its counts, in one query (an aggregate over the events'
        primary-key index); no JSON is decoded. Never torn (a batch is a transaction)."""
        with self._lock:
            rows = self._conn.execute(_SELECT_SUMMARIES).fetchall()
        return [SessionSummary(header_of(row[:6]), row[6], row[7], row[8]) for row in rows]

    def summaries_of(self, headers: Sequence[SessionHeader]) -> builtins.list[SessionSummary]:
        """:meth:`summaries` of just these sessions, in their order: one query, which
        reads only their rows (a page of ``ls`` costs the same in any store)."""
        ids = ENCODER.encode([h.id for h in headers if utf8_ok(h.id)]).decode()
        with self._lock:
            rows = self._conn.execute(_SELECT_SUMMARIES_OF, (ids,)).fetchall()
        return summaries_in_order(headers, rows)

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        """The rows after seq ``after`` (at most ``limit``) by the primary key, as log
        lines: a key range, whatever the session's length, read in one statement
        (:func:`_lines_sql`)."""
        if not utf8_ok(session_id):
            return None  # no row can hold this id
        return self._lines(_LINES_AFTER, (session_id, after,
                                          -1 if limit is None else max(limit, 0)),
                           _SELECT_RANGE)

    def lines_since(self, header: SessionHeader, last: Event) -> builtins.list[bytes] | None:
        """:meth:`~.base.Backend.lines_since`: the rows from ``last``'s seq on, a key
        range (a database holds no torn tail), in one statement: when no one wrote
        since, one index lookup and ``last``'s own line."""
        sid = header.id
        if not (self._indexed and utf8_ok(sid) and (
                sid in self._held or sid in self._memory_locks)):
            lines = self.read_lines(sid, last.seq - 1, None)
        else:
            # Held: the index state read with the rows is the one the next batch
            # starts from (another writer needs the lock to change it), so that batch
            # reads it no more (:func:`_index`'s ``known``).
            state: builtins.list[Any] = []
            lines = self._lines(_LINES_SINCE, (sid, last.seq - 1, -1), _SELECT_RANGE, state)
            with self._lock:
                if state and state[0] is not None and lines is not None:
                    self._states[sid] = (state[0], state[1])
                else:
                    self._states.pop(sid, None)
        return None if lines is None else continued(lines, last)

    def lines_of_types(self, session_id: str, types: Collection[str]
                       ) -> builtins.list[bytes] | None:
        """:func:`~.base.lines_of_types_of`: the rows of those types (by the ``type``
        column), as log lines, in one statement (:func:`_lines_sql`)."""
        if not utf8_ok(session_id):
            return None  # no row can hold this id
        wanted = ENCODER.encode([t for t in types if utf8_ok(t)]).decode()
        return self._lines(_LINES_OF_TYPES, (session_id, wanted), _SELECT_TYPES)

    def _lines(self, sql: str, params: tuple[object, ...], rows_sql: str,
               also: builtins.list[Any] | None = None) -> builtins.list[bytes] | None:
        """The lines ``sql`` (:func:`_lines_sql`) builds, or ``None`` when the session
        is not stored. Where SQLite's lines are not one per row (a column edited by hand
        to hold a raw newline, which :func:`~.rows.row_line` turns into a space) or do
        not fit in one string, the rows (``rows_sql``, same parameters) are read in one
        read transaction and each line built in Python, as the careful path.

        :param also: given the columns ``sql`` has after the lines (none on the
            careful path)."""
        with self._lock:
            try:
                found, count, blob, *more = self._conn.execute(sql, params).fetchone()
            except sqlite3.DataError:  # longer than SQLite's string limit (1 GB)
                found, count, blob, more = 1, -1, None, []
            if also is not None and count >= 0:
                also += more
            if found is None:
                return None
            if not count:
                return []
            if blob is not None:
                lines: builtins.list[bytes] = blob.split(b"\n")
                if len(lines) == count:
                    return lines
            with self._transaction("BEGIN") as conn:  # one snapshot
                if conn.execute(_SELECT_FOUND, (params[0],)).fetchone() is None:
                    return None
                rows = conn.execute(rows_sql, params).fetchall()
        return [row_line(row) for row in rows]

    def tail_lines(self, session_id: str, count: int) -> LogTail | None:
        """The last ``count`` rows by the primary key, as log lines; the position is the
        last stored seq (``-1`` when none is)."""
        if not utf8_ok(session_id):
            return None  # no row can hold this id
        with self._lock, self._transaction("BEGIN") as conn:  # one snapshot
            if conn.execute(_SELECT_FOUND, (session_id,)).fetchone() is None:
                return None
            rows = conn.execute(_SELECT_TAIL, (session_id, max(count, 0))).fetchall()
            (last,) = conn.execute(_SELECT_LAST, (session_id,)).fetchone()
        return LogTail([row_line(row) for row in reversed(rows)], -1 if last is None else last)

    def follow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> Iterator[LogNews]:
        """Poll every :data:`POLL_SECONDS` for rows past the last seq seen (one indexed
        query; autocommit, so each sees the latest commit). A log cut back below it (a
        repair) is said once, then followed from there."""
        if type(position) is not int:
            msg = f"a SQLite position is a seq (int), got {position!r}"
            raise TypeError(msg)
        last = position
        quiet_since = time.monotonic()
        while True:
            with self._lock:
                rows = self._conn.execute(_SELECT_AFTER, (session_id, last)).fetchall()
                top = None if rows else self._conn.execute(
                    _SELECT_LAST, (session_id,)).fetchone()[0]
            if rows:
                last = rows[-1][0]
                quiet_since = time.monotonic()
                yield LogNews([row_line(row) for row in rows], last)
                continue
            if top is not None and top < last:
                last = top
                quiet_since = time.monotonic()
                yield LogNews([], last, f"the session was cut back to seq {top} (a repair?); "
                                        f"following from there")
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
            time.sleep(POLL_SECONDS)

    # --- search ---------------------------------------------------------------------

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """Every hit of ``query``, in no order, from the FTS5 index.

        Sessions the index lags behind (rows stored by a writer without it) are indexed
        first, in one write transaction; when the database cannot be written, their
        rows past the index are checked one by one instead, so the answer is complete
        either way. Every candidate is checked by :func:`~.._search.hit_of`.
        """
        from msgspec.json import encode

        types = query.event_types()
        if not types:
            return []  # the type and role filters exclude each other
        trusted = self._indexed and fts_trusted(query, _TOKENIZE)
        with self._lock:
            if self._indexed and self._data_version() != self._in_step_at:
                self._catch_up(query)
            with self._transaction("BEGIN") as conn:  # one snapshot for every query
                # Whatever is still behind (a read-only database, or a writer without
                # the index that committed since): from where, and in which turn. When
                # no other connection has committed since the index was last found in
                # step with every row (this connection's own writes index as they go),
                # nothing is: checking it costs a lookup per stored session.
                conn.execute(_SELECT_ANY).fetchall()  # the snapshot begins here
                version = self._data_version()
                if trusted and version == self._in_step_at:
                    behind: dict[str, tuple[int, int | None, int]] = {}
                else:
                    behind = self._behind(conn, query, trusted)
                    if trusted and not behind and not query.sessions:
                        self._in_step_at = version
                candidates: builtins.list[Any] = []
                if self._indexed and trusted:
                    sql = _SELECT_CANDIDATES
                    params: builtins.list[object] = [fts_match(query), encode(types).decode()]
                    if query.sessions:
                        sql += " AND d.session_id IN (SELECT value FROM json_each(?))"
                        # An id UTF-8 cannot hold has no row (check_id refuses it).
                        params.append(encode(sorted(
                            i for i in query.sessions if utf8_ok(i))).decode())
                    for bound, op in ((query.since, ">="), (query.until, "<")):
                        if bindable(bound):
                            sql += f" AND e.time {op} ?"
                            params.append(bound)
                    candidates = conn.execute(sql, params).fetchall()
                hits = answer(candidates, behind, query, line_of=row_line,
                              turn_before=functools.partial(_turn_before, conn),
                              lines_from=functools.partial(_lines_from, conn))
        return hits

    def _data_version(self) -> int:
        """SQLite's ``data_version``: it changes when another connection commits (within
        a read transaction, as of its snapshot); this connection's own commits leave it."""
        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
        return int(version)

    def _progress(self, conn: sqlite3.Connection, query: SearchQuery
                  ) -> builtins.list[tuple[str, int | None, int | None, int]]:
        """``(session id, next seq indexed, turn, last seq)`` of each stored session the
        query reads that has an event (the state ``None`` when it has none)."""
        rows = conn.execute(_SELECT_PROGRESS if self._indexed else _SELECT_TOPS).fetchall()
        return [row for row in rows if row[3] is not None
                and (not query.sessions or row[0] in query.sessions)]

    def _catch_up(self, query: SearchQuery) -> None:
        """Index the rows of the sessions the index lags behind, in one write
        transaction; nothing when it is in step, or the database is read-only."""
        def lagging(rows: builtins.list[tuple[str, int | None, int | None, int]]) -> bool:
            return any(row[1] != row[3] + 1 for row in rows)

        with self._transaction("BEGIN") as conn:
            if not lagging(self._progress(conn, query)):
                return
        try:
            with self._transaction() as conn:
                for sid, next_seq, _, top in self._progress(conn, query):
                    if next_seq != top + 1:
                        turn = _sync(conn, sid, top + 1)
                        conn.execute(_UPSERT_STATE, (sid, top + 1, turn))
        except sqlite3.OperationalError as exc:
            if not _read_only(exc):
                raise

    def _behind(self, conn: sqlite3.Connection, query: SearchQuery, trusted: bool
                ) -> dict[str, tuple[int, int | None, int]]:
        """The sessions whose rows from some seq on no index entry covers: ``{id:
        (that seq, the turn open there, the seq after the last)}``. Every session when
        there is no index, or it cannot answer this query (:func:`fts_trusted`)."""
        behind: dict[str, tuple[int, int | None, int]] = {}
        for sid, next_seq, turn, top in self._progress(conn, query):
            # A state past the last row: rows cut by a writer without the index, which
            # may have written others in their place: no entry of it is trusted.
            if not (self._indexed and trusted) or next_seq is None or next_seq > top + 1:
                behind[sid] = (_ALL_SEQS, None, top + 1)
            elif next_seq <= top:
                behind[sid] = (next_seq, turn, top + 1)
        return behind

    def exists(self) -> bool:
        """Always: the database was opened (or created) with the backend."""
        return True

    def store_identity(self) -> Hashable | None:
        """The database file, resolved; ``None`` for ``:memory:``."""
        return None if self.path == ":memory:" else ("sqlite", os.path.realpath(self.path))
