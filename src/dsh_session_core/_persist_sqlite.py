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
when a chunk does not decode or its seqs are not the expected ones.

The writer lock (beyond the reference) is an ``flock`` on a file beside the database,
which the kernel releases when the holding process dies.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import functools
import hashlib
import json
import operator
import os
import queue
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Literal, NamedTuple, TypeAlias

import msgspec
from msgspec import UNSET

from ._codec import ENCODER
from ._decode import decode_body
from ._header import SessionHeader
from ._persist_base import SessionLockedError, StoredLog, WriterLock
from ._registry import EventRegistry
from .errors import LogFormatError, SchemaVersionError, UnstorableError
from .events import Event, OpaqueEvent

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

#: One ``events`` row as the scan reads it: ``(seq, type, time, data,
#: source_event_seqs, surface_op)``, the JSON columns as their text.
Row: TypeAlias = tuple[int, str, int, str, "str | None", "str | None"]

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
    """Insert the rows of :func:`_event_params` with one statement per chunk: a 48-row
    batch costs a third less than ``executemany``, which steps and resets the statement
    once per row."""
    count = len(params) // _PARAMS_PER_ROW
    if count <= _ROWS_PER_INSERT:
        if count:
            conn.execute(_insert_rows_sql(count), [session_id, *params])
        return
    step = _ROWS_PER_INSERT * _PARAMS_PER_ROW
    for start in range(0, len(params), step):
        chunk = params[start : start + step]
        conn.execute(_insert_rows_sql(len(chunk) // _PARAMS_PER_ROW), [session_id, *chunk])


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

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_WIRE_KEYS: Final = frozenset({"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"})






class RowScan(NamedTuple):
    """What :func:`scan_rows` keeps of a session's rows.

    :ivar lines: the log line of each preserved event (rows ``0..k-1``), no newline.
    :ivar torn: ``k``, the seq from which the rows are a torn tail to delete, when
        some rows are not preserved; else ``None``.
    """

    lines: list[bytes]
    torn: int | None


# --- reading --------------------------------------------------------------------------

_generic = msgspec.json.Decoder()


def _refuse_constant(name: str) -> Any:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


def _parses(text: str) -> bool:
    """Whether ``text`` is one JSON value, as JavaScript's ``JSON.parse`` decides."""
    try:
        _generic.decode(text)
    except msgspec.DecodeError:
        # msgspec also refuses what JS accepts: lone surrogate escapes and numbers out
        # of float range (``1e999`` is Infinity in JS). The stdlib parser accepts both,
        # and with NaN/Infinity refused it refuses what JS refuses.
        try:
            json.loads(text, parse_constant=_refuse_constant)
        except ValueError:  # JSONDecodeError, and the refused constants
            return False
    return True


def _column(text: str) -> bytes:
    # A column that parsed can hold a raw newline only as whitespace between tokens;
    # a space keeps its meaning and keeps the log line on one line.
    return text.replace("\n", " ").encode()


def _row_line(row: Row) -> bytes:
    seq, type_, time, data, sources, op = row
    parts = [
        b'{"type":', ENCODER.encode(type_), b',"seq":%d,"time":%d,"data":' % (seq, time),
        _column(data),
    ]
    if sources is not None:
        parts += (b',"sourceEventSeqs":', _column(sources))
    if op is not None:
        parts += (b',"surfaceOp":', _column(op))
    parts.append(b"}")
    return b"".join(parts)


def scan_rows(rows: Iterable[Row]) -> RowScan:
    """The reference's ``scanRows``: the longest valid prefix of a session's rows.

    A row whose ``data`` (or a non-NULL ``source_event_seqs``/``surface_op``) is not
    JSON is a hole. Rows are kept from seq 0 while they parse and ``seq`` equals their
    index; where that stops, everything after is a torn tail, unless the stop comes at
    or before the last parsed ``turn/end`` row: committed corruption.

    :param rows: ``(seq, type, time, data, source_event_seqs, surface_op)`` in seq order.
    :raises LogFormatError: ``corrupt session log: unparsable committed event at seq
        <seq>`` or ``corrupt session log: seq gap in committed region (expected <i>,
        got <seq>)``.
    """
    rows = list(rows)
    ok = [
        _parses(data)
        and (sources is None or _parses(sources))
        and (op is None or _parses(op))
        for _, _, _, data, sources, op in rows
    ]
    last_turn_end = -1
    for i, row in enumerate(rows):
        if ok[i] and row[1] == "turn/end":
            last_turn_end = i
    lines: list[bytes] = []
    for i, row in enumerate(rows):
        seq = row[0]
        if ok[i] and seq == i:
            lines.append(_row_line(row))
            continue
        if i <= last_turn_end:
            if not ok[i]:
                msg = f"corrupt session log: unparsable committed event at seq {seq}"
            else:
                msg = f"corrupt session log: seq gap in committed region (expected {i}, got {seq})"
            raise LogFormatError(msg)
        break
    return RowScan(lines, len(lines) if len(lines) < len(rows) else None)


_seq_of = operator.attrgetter("seq")


def _in_order(events: list[Event], start: int, count: int) -> bool:
    """Whether ``events`` have exactly the seqs ``start .. start+count-1``, in order."""
    return len(events) == count and all(
        map(operator.eq, map(_seq_of, events), range(start, start + count))
    )


# --- writing --------------------------------------------------------------------------


def _int64(value: object) -> int | None:
    """``value`` as a 64-bit integer (an integral float counts: JS has one number
    type), or ``None`` when the column cannot hold it."""
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
        return value
    return None


def _json_text(value: object) -> str:
    return ENCODER.encode(value).decode()


def _unstorable(session_id: str, event_type: str, seq: object, what: str) -> UnstorableError:
    return UnstorableError(
        f'event "{event_type}" (seq {seq}) of session "{session_id}" {what}; the SQLite '
        f"backend cannot store it",
        session_id=session_id,
        seq=seq if type(seq) is int else None,
    )


_EventRow: TypeAlias = tuple[str, int, str, int, str, "str | None", "str | None"]


def _event_row(session_id: str, event: Event, data: str) -> _EventRow:
    """The ``events`` row of one event whose payload encodes to ``data``, checked
    before any transaction begins (the careful path of :func:`_event_rows`)."""
    if type(event) is OpaqueEvent:
        # Kept verbatim from a log: only what the columns hold survives a round trip.
        wire = event.wire
        event_type = wire.get("type")
        if not isinstance(event_type, str):
            raise _unstorable(session_id, repr(event_type), event.seq, "has no string type")
        extra = sorted(set(wire) - _WIRE_KEYS)
        if extra:
            raise _unstorable(
                session_id, event_type, event.seq, f"has log keys no column holds: {extra}"
            )
        if "data" not in wire:
            raise _unstorable(session_id, event_type, event.seq, "has no data")
    else:
        event_type = event.type
    seq = _int64(event.seq)
    if seq is None:
        raise _unstorable(session_id, event_type, event.seq, "has a seq that is no integer")
    time = _int64(event.time)
    if time is None:
        raise _unstorable(
            session_id,
            event_type,
            event.seq,
            f"has time {event.time!r}, not integer epoch milliseconds (a STRICT INTEGER "
            f"column)",
        )
    sources = getattr(event, "source_event_seqs", UNSET)
    op = getattr(event, "surface_op", UNSET)
    return (
        session_id,
        seq,
        event_type,
        time,
        data,
        None if sources is UNSET else _json_text(sources),
        None if op is UNSET else _json_text(op),
    )


def _event_rows(session_id: str, events: Sequence[Event]) -> list[_EventRow]:
    """The rows of a batch. Typed events with integer seq and time (all but a few from
    old logs) take the short way; the others are checked one by one."""
    # Every payload in one encoder call: JSON text never holds a raw newline.
    datas = ENCODER.encode_lines([event.data for event in events]).decode().split("\n")
    rows: list[_EventRow] = []
    append = rows.append
    for event, data in zip(events, datas, strict=False):  # datas ends with ""
        seq, time = event.seq, event.time
        if (
            type(event) is OpaqueEvent
            or type(seq) is not int
            or type(time) is not int
            or not (_INT64_MIN <= time <= _INT64_MAX and 0 <= seq <= _INT64_MAX)
        ):
            append(_event_row(session_id, event, data))
        elif event.surface:
            sources = getattr(event, "source_event_seqs", UNSET)
            op = getattr(event, "surface_op", UNSET)
            append((
                session_id, seq, event.type, time, data,
                None if sources is UNSET else _json_text(sources),
                None if op is UNSET else _json_text(op),
            ))
        else:
            append((session_id, seq, event.type, time, data, None, None))
    return rows


#: Parameters per row of :func:`_insert_rows_sql`: the row without its session id.
_PARAMS_PER_ROW: Final = 6


def _event_params(session_id: str, events: Sequence[Event]) -> list[object]:
    """The rows of a batch as :func:`_insert_rows` binds them: for each event ``seq,
    type, time, data, source_event_seqs, surface_op``, an absent optional column as
    ``''``. The same checks and values as :func:`_event_rows` (which the PostgreSQL
    backend uses), flat: binding ``''`` and the session id once, instead of ``None``
    and the id per row, takes a fifth off a 48-row insert."""
    datas = ENCODER.encode_lines([event.data for event in events]).decode().split("\n")
    params: list[object] = []
    extend = params.extend
    for event, data in zip(events, datas, strict=False):  # datas ends with ""
        seq, time = event.seq, event.time
        if (
            type(event) is OpaqueEvent
            or type(seq) is not int
            or type(time) is not int
            or not (_INT64_MIN <= time <= _INT64_MAX and 0 <= seq <= _INT64_MAX)
        ):
            _, *row = _event_row(session_id, event, data)
            row[4] = row[4] or ""
            row[5] = row[5] or ""
            extend(row)
        elif event.surface:
            sources = getattr(event, "source_event_seqs", UNSET)
            op = getattr(event, "surface_op", UNSET)
            extend((
                seq, event.type, time, data,
                "" if sources is UNSET else _json_text(sources),
                "" if op is UNSET else _json_text(op),
            ))
        else:
            extend((seq, event.type, time, data, "", ""))
    return params


_HeaderRow: TypeAlias = tuple[str, int, int, "str | None", "str | None", "int | None"]


def _header_row(header: SessionHeader) -> _HeaderRow:
    """The ``sessions`` row of a header, checked before any transaction begins."""
    version = header.version
    created_at = _int64(header.created_at)
    if type(version) is not int or created_at is None:
        problem = (
            "has no format version (a NOT NULL column)"
            if type(version) is not int
            else f"has createdAt {header.created_at!r}, not integer epoch milliseconds"
        )
        msg = f'the header of session "{header.id}" {problem}; the SQLite backend cannot store it'
        raise UnstorableError(msg, session_id=header.id, seq=None)
    seed_length = None if header.seed_length is UNSET else header.seed_length
    return (
        header.id,
        version,
        created_at,
        None if header.cwd is UNSET else header.cwd,
        None if header.parent_session is UNSET else header.parent_session,
        seed_length,
    )


def _header_of(row: tuple[Any, ...]) -> SessionHeader:
    session_id, version, created_at, cwd, parent, seed_length = row[:6]
    return SessionHeader(
        version=version,
        id=session_id,
        created_at=created_at,
        cwd=UNSET if cwd is None else cwd,
        parent_session=UNSET if parent is None else parent,
        seed_length=UNSET if seed_length is None else seed_length,
    )


# --- the writer lock ------------------------------------------------------------------


class _FileLock:
    """An ``flock`` held on an open descriptor: closing it (or dying) releases it."""

    __slots__ = ("_fd", "_guard", "_owner")

    def __init__(self, fd: int, owner: set[_FileLock]) -> None:
        self._fd = fd
        self._owner = owner
        self._guard = threading.Lock()

    def release(self) -> None:
        with self._guard:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            self._owner.discard(self)
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
    :raises SchemaVersionError: the database has another schema version.
    :raises sqlite3.Error: the database cannot be opened.

    The database is opened here, not on first use as in the reference (whose
    constructor cannot wait): a bad path or version is reported where it was given.
    Every method may be called from any thread; one lock serializes the connection.
    """

    name = "session-persistence-sqlite"

    def __init__(
        self, path: str | os.PathLike[str], *, journal_mode: JournalMode = "wal"
    ) -> None:
        if journal_mode not in _JOURNAL_MODES:
            msg = f"journal_mode must be one of {sorted(_JOURNAL_MODES)}, got {journal_mode!r}"
            raise ValueError(msg)
        raw = os.fspath(path)
        if raw == ":memory:":
            self.path = raw
            self._lock_dir: str | None = None
        else:
            self.path = os.path.abspath(raw)
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            self._lock_dir = self.path + ".locks"
        self._lock = threading.Lock()
        self._file_locks: set[_FileLock] = set()
        self._memory_locks: set[str] = set()
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
        if version == 0:
            # Stamp and create in one transaction, re-reading the version under the
            # write lock: two processes opening a fresh file cannot both stamp it.
            with self._transaction():
                version = self._user_version()
                if version == 0:
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            raise SchemaVersionError(self.path, version)
        # A database stamped by a build that stopped before creating its tables.
        for statement in _SCHEMA:
            conn.execute(statement)

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
        with self._lock, self._transaction("BEGIN"):  # one snapshot for every query
            row = self._conn.execute(_SELECT_HEADER, (session_id,)).fetchone()
            if row is None:
                return None
            header = _header_of(row)
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
        try:
            scan = scan_rows(rows)
        except LogFormatError as exc:
            raise LogFormatError(str(exc), path=self.path) from None
        jsonl = b"\n".join([*scan.lines, b""]) if scan.lines else b""
        return StoredLog(header, decode_body(registry, jsonl), scan.torn, jsonl)

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        """Same as :meth:`load_stored`: the SQLite backend has no cwd scopes."""
        return self.load_stored(session_id, registry)

    def _load_fast(
        self, session_id: str, count: int, registry: EventRegistry
    ) -> tuple[list[Event], bytes] | None:
        """Every row as a log line built by SQLite, decoded in one call per chunk; or
        ``None`` when a row is corrupt or the seqs are not exactly ``0..count-1`` (the
        careful scan then decides what is kept). The rows' seqs run from 0 to
        ``count - 1``; whether all of them are there, each chunk's count tells."""
        chunks = range(0, count, _CHUNK)
        try:
            if len(chunks) <= 2:
                here = (self._chunk(session_id, start) for start in chunks)
                return self._decode_chunks(count, registry, here)
            return self._load_threaded(session_id, count, registry, chunks)
        except sqlite3.DataError:
            # A chunk longer than SQLite's string limit (1 GB by default): the
            # row-by-row scan has no such limit.
            return None

    def _load_threaded(
        self, session_id: str, count: int, registry: EventRegistry, chunks: range
    ) -> tuple[list[Event], bytes] | None:
        # A large session: SQLite builds the next chunk in a worker thread while this
        # one decodes (sqlite3 releases the GIL while a statement runs), which hides
        # most of the SQL time behind the decoding.
        results: queue.SimpleQueue[tuple[int, bytes | None] | BaseException] = (
            queue.SimpleQueue()
        )
        stop = threading.Event()

        def work() -> None:
            try:
                for start in chunks:
                    if stop.is_set():
                        return
                    results.put(self._chunk(session_id, start))
            except BaseException as exc:  # handed over to the loading thread
                results.put(exc)

        # A daemon: a load cut short at interpreter exit must not keep it alive (the
        # finally clause below joins it in every other case).
        worker = threading.Thread(target=work, name="dsh-sqlite-load", daemon=True)
        worker.start()
        try:

            def fetched() -> Iterable[tuple[int, bytes | None]]:
                for _ in chunks:
                    item = results.get()
                    if isinstance(item, BaseException):
                        raise item
                    yield item

            return self._decode_chunks(count, registry, fetched())
        finally:
            stop.set()
            worker.join()  # the connection is ours again only once the worker is done

    def _chunk(self, session_id: str, start: int) -> tuple[int, bytes | None]:
        n, blob = self._conn.execute(
            _SELECT_CHUNK, (session_id, start, start + _CHUNK)
        ).fetchone()
        return int(n), blob

    @staticmethod
    def _decode_chunks(
        count: int, registry: EventRegistry, chunks: Iterable[tuple[int, bytes | None]]
    ) -> tuple[list[Event], bytes] | None:
        events: list[Event] = []
        blobs: list[bytes] = []
        start = 0
        for n, blob in chunks:
            # Seqs are unique (primary key) and the chunk is the range [start,
            # start+_CHUNK): a full count means every seq of the range is there, so all
            # full chunks mean the rows are exactly seqs 0..count-1.
            if n != min(_CHUNK, count - start) or blob is None:
                return None
            try:
                decoded = decode_body(registry, blob)
            except LogFormatError:
                return None
            if not _in_order(decoded, start, n):
                return None
            events += decoded
            blobs.append(blob)
            start += n
        blobs.append(b"")  # the last line's newline
        return events, b"\n".join(blobs)

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
        :raises sqlite3.IntegrityError: a seq is already stored (e.g. a second instance
            with a stale cursor); the transaction is rolled back.
        """
        if not events:
            return  # a session row only ever comes with an event
        params = _event_params(header.id, events)
        head = None if materialized else _header_row(header)
        with self._lock, self._transaction() as conn:
            if head is not None:
                conn.execute(_UPSERT_SESSION, head)
            _insert_rows(conn, header.id, params)

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        """Delete the rows from seq ``torn`` on (iff it is not ``None``: 0 is a marker),
        then insert the ``closers``; one transaction."""
        if torn is not None and type(torn) is not int:
            msg = f"a SQLite torn marker is a seq (int), got {torn!r}"
            raise TypeError(msg)
        params = _event_params(header.id, closers)
        if torn is None and not params:
            return
        with self._lock, self._transaction() as conn:
            if torn is not None:
                conn.execute(_DELETE_TAIL, (header.id, torn))
            _insert_rows(conn, header.id, params)

    def location(self, header: SessionHeader) -> str:
        """The database file (``:memory:`` for an in-memory one); ids are global in it."""
        return self.path

    def acquire(self, header: SessionHeader) -> WriterLock:
        """Take the session's writer lock: an ``flock`` on
        ``<database>.locks/<sha256 of the id>.lock``, which another process, or another
        backend over the same file in this process, cannot take until it is released
        or its holder dies.

        :raises SessionLockedError: another writer holds it.
        """
        session_id = header.id
        if self._lock_dir is None:
            with self._lock:
                if session_id in self._memory_locks:
                    raise SessionLockedError(session_id, "another writer in this process")
                self._memory_locks.add(session_id)
            return _MemoryLock(self._memory_locks, session_id)
        os.makedirs(self._lock_dir, mode=0o700, exist_ok=True)
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
        path = os.path.join(self._lock_dir, f"{digest}.lock")
        # The file is never deleted: unlinking a lock file races with a process that
        # has it open and is about to lock the old inode.
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
        lock = _FileLock(fd, self._file_locks)
        with self._lock:
            self._file_locks.add(lock)
        return lock

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
        return [_header_of(row) for row in rows]
