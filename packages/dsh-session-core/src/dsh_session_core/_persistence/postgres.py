"""The PostgreSQL persistence backend: one store shared by agents on many hosts.

This module is the backend class, its writer and its loads; the schema and statements
are :mod:`.postgres_schema`'s, the tail and the NOTIFY follower :mod:`.postgres_follow`'s.
The tables and columns are the reference's, plus a schema version table. Each batch,
and each repair, is one transaction; the scan and repair rules are the SQLite backend's
(:func:`scan_rows`).

Many hosts, one session, one writer:

- **The lease.** A writer takes a session-level advisory lock keyed by the session id,
  on a connection of its own that it then writes the session's batches through. A
  second writer, on any host, is refused (:class:`SessionLockedError`, naming the
  holder's application name and address). When the holder dies its connection ends and
  the server releases the lock; TCP keepalives bound how long a vanished host holds it.
- **Optimistic seq checks.** A batch is inserted only if the stored log ends right
  before it (checked in the same statement, atomically with the insert); the primary
  key refuses a duplicate. So even a writer that lost its lease, or never took one,
  cannot create a gap or a duplicate. A retry of a batch that did commit (the reply to
  COMMIT was lost) is recognised and succeeds without writing twice.

Followers: every batch and repair notifies the session's channel (delivered at
commit); :meth:`PostgresBackend.follow` LISTENs to it and reads the events table only
when told something changed.

Loading builds each row's log line in SQL and decodes a chunk of lines in one msgspec
call, like the SQLite backend.

Search: each batch writes its events' index entries (``search_docs``, a ``tsvector`` of
their words, GIN-indexed) in the statement that inserts it, and a repair or a delete
rewrites them in its transaction; sessions whose rows another writer stored are
indexed by the next search (:meth:`PostgresBackend.search`).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import socket
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Collection, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._header import SessionHeader
from .._registry import EventRegistry
from ..errors import SessionIdError
from ..events import Event
from . import postgres_follow
from .base import (
    COMMON_ID_RULE,
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
from .postgres_schema import (
    APPEND,
    APPEND_INDEXED,
    DELETE_DOCS,
    DELETE_DOCS_FROM,
    DELETE_EVENTS,
    DELETE_SESSION,
    DELETE_STATE,
    DELETE_TAIL,
    INSERT_DOCS,
    INSERT_ROWS,
    NOTIFY,
    SCHEMA_VERSION,
    SEARCH_LOCK_KEY,
    SELECT_CANDIDATES,
    SELECT_CHUNK,
    SELECT_FOUND,
    SELECT_HEADER,
    SELECT_HEADERS,
    SELECT_LAST,
    SELECT_MEASURE,
    SELECT_PROGRESS,
    SELECT_RANGE,
    SELECT_ROWS,
    SELECT_ROWS_FROM,
    SELECT_STATE,
    SELECT_STORED_ROWS,
    SELECT_SUMMARIES,
    SELECT_SUMMARIES_OF,
    SELECT_TOPS,
    SELECT_TURN_CHANGES,
    SELECT_TYPES,
    UPSERT_SESSION,
    UPSERT_STATE,
    Columns,
    batch_columns,
    channel_of,
    checked_header,
    conflict,
    database_of,
    index_columns,
    lock_key,
    open_schema,
    redacted,
    same_rows,
    storable_text,
    text_ok,
    words_text,
)
from .rows import (
    header_of,
    load_chunks,
    row_line,
    scanned,
    summaries_in_order,
)
from .search_index import (
    IndexRow,
    answer,
    bindable,
    index_lines,
    lines_of,
    stored_turn,
    tsquery_text,
)

if TYPE_CHECKING:
    import psycopg

    from .._search import SearchHit, SearchQuery

__all__ = ["ID_RULE", "MAX_ID_BYTES", "SCHEMA_VERSION", "PostgresBackend", "channel_of"]

#: Rows per chunk of the fast load.
_CHUNK: Final = 16384
#: Rows per page when indexing, or checking, rows no index entry covers.
_PAGE: Final = 4096
#: Below every seq: "from" it means the whole session.
_ALL_SEQS: Final = -(2**63)

#: The longest session id, in UTF-8 bytes: well under what a B-tree index entry holds
#: (2704 bytes, less the entry's header and the ``seq`` beside the id in ``events``).
MAX_ID_BYTES: Final = 2048
#: The PostgreSQL backend's session-id rule (:meth:`PostgresBackend.check_id`).
ID_RULE: Final = f"{COMMON_ID_RULE}, without NUL, of at most {MAX_ID_BYTES} UTF-8 bytes"


class _Refused(Exception):
    """The checked insert wrote nothing: the stored log does not end before the batch."""


class _Lease:
    """A session's writer lease: an advisory lock held by a connection of its own, which
    also carries the session's batches. Closing the connection releases the lock."""

    __slots__ = ("_backend", "conn", "session_id")

    def __init__(
        self, backend: PostgresBackend, session_id: str, conn: psycopg.Connection[Any]
    ) -> None:
        self._backend = backend
        self.session_id = session_id
        self.conn = conn

    def release(self) -> None:
        self._backend._drop_lease(self)


def _chunk_fetcher(
    conn: psycopg.Connection[Any], session_id: str
) -> Callable[[int], tuple[int, bytes | None]]:
    """Fetches the chunk of a session's lines that starts at a seq, on ``conn``."""
    cur = conn.cursor(binary=True)  # bytea comes back as bytes, undecoded

    def fetch(start: int) -> tuple[int, bytes | None]:
        n, blob = cur.execute(SELECT_CHUNK, (session_id, start, start + _CHUNK)
                              ).fetchone()  # type: ignore[misc]
        return int(n), None if blob is None else bytes(blob)

    return fetch


# --- the search index, outside the hot path --------------------------------------------


def _progress(conn: psycopg.Connection[Any], query: SearchQuery, indexed: bool
              ) -> builtins.list[tuple[str, int | None, int | None, int]]:
    """``(session id, next seq indexed, turn, last seq)`` of each stored session the
    query reads that has an event (the state ``None`` when it has none)."""
    sql = SELECT_PROGRESS if indexed else SELECT_TOPS
    params: tuple[Any, ...] = ()
    if query.sessions:
        sql += " WHERE s.id = ANY(%s)"
        params = (sorted(i for i in query.sessions if text_ok(i)),)  # else: no row
    return [(sid, None if n is None else int(n), turn, int(top))
            for sid, n, turn, top in conn.execute(sql, params).fetchall()
            if top is not None]


def _lines_from(conn: psycopg.Connection[Any], session_id: str, start: int, end: int
                ) -> Iterator[bytes]:
    """The log lines of the rows ``start <= seq < end``, a page at a time."""
    while start < end:
        rows = conn.execute(SELECT_ROWS_FROM, (session_id, start, end, _PAGE)).fetchall()
        for row in rows:
            yield row_line(row)
        if len(rows) < _PAGE:
            return
        start = int(rows[-1][0]) + 1


def _turn_before(conn: psycopg.Connection[Any], session_id: str, seq: int) -> int | None:
    """The turn open right before ``seq``: that of the last turn change before it."""
    from .._search import turn_change

    while True:
        rows = conn.execute(SELECT_TURN_CHANGES, (session_id, seq, 64)).fetchall()
        for row in rows:
            change = turn_change(row_line(row))
            if change is not None:
                return change[1]
        if len(rows) < 64:
            return None
        seq = int(rows[-1][0])


def _insert_docs(conn: psycopg.Connection[Any], session_id: str,
                 rows: Sequence[IndexRow]) -> None:
    if rows:
        conn.execute(INSERT_DOCS, {
            "sid": session_id, "iseqs": [row.seq for row in rows],
            "iturns": [stored_turn(row.turn) for row in rows],
            "iwords": [words_text(row) for row in rows]})


def _sync(conn: psycopg.Connection[Any], session_id: str, end: int, cut: bool = False
          ) -> int | None:
    """Bring a session's index to cover exactly its rows before seq ``end`` (in the
    caller's transaction, under the catch-up lock; the caller then stores the state),
    and return the turn open there (:data:`TURN_UNKNOWN` when no column holds it).
    The same cases as the SQLite backend's: no state (index from the first row), a
    state behind (from there), a state past ``end``: cut there by our repair (``cut``:
    what follows is indexed again), else by a writer without the index, which may have
    cut anywhere before (the whole session is indexed again)."""
    state = conn.execute(SELECT_STATE, (session_id,)).fetchone()
    if state is not None and state[0] == end:
        return state[1]  # type: ignore[no-any-return]
    turn: int | None
    if state is None or (state[0] > end and not cut):
        start, turn = _ALL_SEQS, None
        conn.execute(DELETE_DOCS, (session_id,))  # and rows left by a writer's delete
    elif state[0] > end:
        start, turn = end, stored_turn(_turn_before(conn, session_id, end))
        conn.execute(DELETE_DOCS_FROM, (session_id, end))
    else:
        start, turn = int(state[0]), state[1]
    while start < end:
        page = conn.execute(SELECT_ROWS_FROM, (session_id, start, end, _PAGE)).fetchall()
        rows, turn, _ = index_lines([row_line(row) for row in page], turn)
        _insert_docs(conn, session_id, rows)
        if len(page) < _PAGE:
            break
        start = int(page[-1][0]) + 1
    return stored_turn(turn)


def _index(conn: psycopg.Connection[Any], session_id: str, first: int,
           lines: Sequence[bytes], end: int, cut: bool = False) -> None:
    """Index the events ``first .. end-1`` (their ``lines``) after catching up the rows
    before them, and store the session's state; in the caller's transaction."""
    turn = _sync(conn, session_id, first, cut)
    rows, turn, _ = index_lines(lines, turn)
    _insert_docs(conn, session_id, rows)
    conn.execute(UPSERT_STATE, (session_id, end, stored_turn(turn)))


class PostgresBackend:
    """Sessions in one PostgreSQL database, shared by every host that connects to it.

    :param url: a libpq connection string or ``postgresql://`` URL.
    :param connect_timeout: seconds to wait for the server on each connect.
    :param create: create the tables in a database that has none (else
        :class:`StoreNotFoundError`: readers must not leave tables behind).
    :raises SchemaVersionError: the database holds another schema version.
    :raises PersistenceError: the database holds ``sessions``/``events`` tables that
        dsh-session did not make.
    :raises psycopg.OperationalError: the server cannot be reached.

    The schema is created on first open. One shared connection serves reads, listing
    and writes to sessions this backend holds no lease on; every lease has its own.
    """

    name = "session-persistence-postgresql"

    def __init__(self, url: str, *, connect_timeout: float = 10, create: bool = True) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            msg = (
                "the PostgreSQL backend needs psycopg 3: pip install 'dsh-session[postgresql]'"
            )
            raise ImportError(msg, name="psycopg") from exc
        self.url = url
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._leases: dict[str, _Lease] = {}
        self._aidle: weakref.WeakKeyDictionary[Any, builtins.list[psycopg.AsyncConnection[Any]]]
        self._aidle = weakref.WeakKeyDictionary()  # event loop -> its idle connections
        self._conn = self._connect()
        try:
            self._indexed = open_schema(self._conn, create, self.location_url)
        except BaseException:
            self._conn.close()
            raise

    def _connect_args(self, application: str) -> dict[str, Any]:
        return {
            "autocommit": True,
            "connect_timeout": max(1, round(self._connect_timeout)),
            "application_name": f"{application} {socket.gethostname()}:{os.getpid()}",
            # A host that vanishes without closing its connections: the client notices
            # a dead server, and (see _take) the server a dead client.
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 3,
            "keepalives_count": 3,
        }

    def _connect(self, application: str = "dsh-session") -> psycopg.Connection[Any]:
        import psycopg

        return psycopg.connect(self.url, **self._connect_args(application))

    @property
    def location_url(self) -> str:
        """The connection URL without its password."""
        return redacted(self.url)

    # --- reading ------------------------------------------------------------------------

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session, or ``None``. Ids are global in one database: any cwd matches.

        :raises LogFormatError: committed corruption (:func:`scan_rows`).
        """
        if not text_ok(session_id):
            return None  # no row can hold this id
        with self._lock:
            conn = self._conn
            # One snapshot for every query of the load.
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                row = conn.execute(SELECT_HEADER, {"sid": session_id}).fetchone()
                if row is None:
                    return None
                header = header_of(row)
                first, last = row[6], row[7]
                if first is None:
                    return StoredLog(header, [], None, b"")
                if first == 0:
                    fast = self._load_fast(conn, session_id, int(last) + 1, registry)
                    if fast is not None:
                        return StoredLog(header, fast[0], None, fast[1])
                rows = conn.execute(SELECT_ROWS, (session_id,)).fetchall()
        return scanned(header, rows, registry, self.location_url)

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        """Same as :meth:`load_stored`: ids are global in one database."""
        return self.load_stored(session_id, registry)

    def _load_fast(
        self, conn: psycopg.Connection[Any], session_id: str, count: int,
        registry: EventRegistry,
    ) -> tuple[list[Event], bytes] | None:
        """Every row as a log line built by the server (:func:`load_chunks`: the server
        builds the next chunks while one decodes); ``None`` when the careful scan must
        decide what is kept. A large session is built by two server processes: a second
        connection joins this load's snapshot and builds every other chunk."""
        fetchers = [_chunk_fetcher(conn, session_id)]
        helper = None
        if count > 2 * _CHUNK:
            from psycopg import sql

            (snapshot,) = conn.execute("SELECT pg_export_snapshot()").fetchone()  # type: ignore[misc]
            helper = self._connect("dsh-session loader")
            helper.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            helper.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
            fetchers.append(_chunk_fetcher(helper, session_id))
        try:
            return load_chunks(fetchers, count, _CHUNK, registry)
        finally:
            if helper is not None:
                helper.close()

    def list(self) -> builtins.list[SessionHeader]:
        """Every ``sessions`` row as a header, oldest first; no event is read."""
        with self._lock:
            rows = self._conn.execute(SELECT_HEADERS).fetchall()
        return [header_of(row) for row in rows]

    def location(self, header: SessionHeader) -> str:
        """The database's URL (without password); ids are global in it."""
        return self.location_url

    def check_id(self, session_id: str) -> None:
        """The common rule (:func:`~.base.check_common_id`), no NUL (no ``text`` value
        holds one), and at most :data:`MAX_ID_BYTES` UTF-8 bytes: an id is a key of
        two B-tree indexes, whose entries hold at most 2704 bytes (a longer id fails at
        the first flush with "index row size exceeds btree maximum").

        :raises SessionIdError: the id breaks the rule.
        """
        text = "a PostgreSQL text column cannot store"
        check_common_id(session_id, self.name, ID_RULE, cannot=text)
        problem = None
        if "\x00" in session_id:
            at = session_id.index("\x00")
            problem = f"it holds a NUL character, which {text} (at index {at})"
        elif len(session_id.encode()) > MAX_ID_BYTES:
            problem = f"it is {len(session_id.encode()):,} UTF-8 bytes long"
        if problem is not None:
            raise SessionIdError(session_id, backend=self.name, problem=problem, rule=ID_RULE)

    # --- writing ------------------------------------------------------------------------

    def append_batch(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        jsonl: bytes,
        materialized: bool,
    ) -> None:
        """Append a contiguous batch in one transaction, through the session's lease
        connection when this backend holds it. The batch goes in only if the stored log
        ends right before it.

        :raises UnstorableError: a value does not fit the schema (nothing is written).
        :raises PersistenceError: the stored log does not end right before the batch
            (another writer wrote the session); nothing is written.
        """
        if not events:
            return
        columns, before = batch_columns(header.id, events)
        columns["before"] = before
        if self._indexed:
            index_columns(columns, events, jsonl)
        head = None if materialized else checked_header(header)
        lease = self._leases.get(header.id)
        if lease is None:
            with self._lock:
                self._write(self._conn, header.id, columns, head)
            return
        if lease.conn.closed:  # lost at an earlier flush, and not taken back then
            self._retake(lease)
        try:
            self._write(lease.conn, header.id, columns, head)
        except self._errors().OperationalError:
            if not lease.conn.broken:
                raise
            # The lease's connection is gone, and the server released the lock with it.
            # Take the lease again and retry: the checked insert makes the retry safe
            # (a batch that did commit is recognised; a newer writer's log refuses it).
            self._retake(lease)
            self._write(lease.conn, header.id, columns, head)

    @property
    def _append(self) -> str:
        """The batch's statement: with its index entries, when the database has the
        index."""
        return APPEND_INDEXED if self._indexed else APPEND

    @staticmethod
    def _errors() -> Any:
        import psycopg

        return psycopg

    def _write(
        self,
        conn: psycopg.Connection[Any],
        session_id: str,
        columns: Columns,
        head: tuple[Any, ...] | None,
    ) -> None:
        seqs = columns["seqs"]
        try:
            if head is None:  # the usual case: one statement, committed on its own
                if conn.execute(self._append, columns).fetchone() is not None:
                    return
                raise _Refused
            with conn.transaction():  # the first batch brings the session's row
                conn.execute(UPSERT_SESSION, head)
                if conn.execute(self._append, columns).fetchone() is None:
                    raise _Refused  # rolls the session's row back too
                return
        except _Refused:
            pass
        except self._errors().errors.UniqueViolation:
            pass  # another writer committed these seqs while we checked
        # Refused, nothing written: this very batch is already stored (a retry after a
        # lost COMMIT reply), or another writer got there first.
        stored = conn.execute(
            SELECT_STORED_ROWS, (session_id, seqs[0], seqs[-1] + 1)
        ).fetchall()
        if same_rows(stored, columns):
            return
        (last,) = conn.execute(SELECT_LAST, (session_id,)).fetchone()  # type: ignore[misc]
        raise conflict(session_id, last, seqs[0])

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        """Delete the rows from seq ``torn`` on (iff it is not ``None``), then insert the
        ``closers``; one transaction, which notifies followers."""
        if torn is not None and type(torn) is not int:
            msg = f"a PostgreSQL torn marker is a seq (int), got {torn!r}"
            raise TypeError(msg)
        columns = batch_columns(header.id, closers)[0] if closers else None
        if torn is None and columns is None:
            return
        lease = self._leases.get(header.id)
        with self._lock if lease is None else contextlib.nullcontext():
            conn = self._conn if lease is None else lease.conn
            with conn.transaction():
                if self._indexed:  # taken first, as every catch-up takes it
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (SEARCH_LOCK_KEY,))
                if torn is not None:
                    conn.execute(DELETE_TAIL, (header.id, torn))
                if columns is not None:
                    conn.execute(INSERT_ROWS, columns)
                if self._indexed:
                    # The index is cut back with the rows (_sync: a state past the first
                    # closer), and the closers indexed after what is left.
                    seqs = columns["seqs"] if columns is not None else []
                    lines = lines_of(jsonl, len(seqs))
                    if lines is None:
                        lines = builtins.list(_lines_from(
                            conn, header.id, seqs[0], seqs[-1] + 1)) if seqs else []
                    first = seqs[0] if seqs else torn
                    end = seqs[-1] + 1 if seqs else torn
                    _index(conn, header.id, first, lines, end,  # type: ignore[arg-type]
                           cut=torn is not None)
                conn.execute(NOTIFY, (channel_of(header.id), "repair"))

    # --- the lease ----------------------------------------------------------------------

    def _take(self, session_id: str) -> psycopg.Connection[Any]:
        """A new connection holding the session's advisory lock.

        :raises SessionLockedError: another connection holds it.
        """
        key = lock_key(session_id)
        conn = self._connect("dsh-session writer")
        try:
            # The server drops a silent client's connection, and so its lock, within
            # about 20 s (idle 10 s, then 3 probes 3 s apart).
            conn.execute("SET tcp_keepalives_idle = 10")
            conn.execute("SET tcp_keepalives_interval = 3")
            conn.execute("SET tcp_keepalives_count = 3")
            (taken,) = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()  # type: ignore[misc]
            if not taken:
                raise SessionLockedError(session_id, self._holder(conn, key))
        except BaseException:
            conn.close()
            raise
        return conn

    def _retake(self, lease: _Lease) -> None:
        lease.conn.close()
        lease.conn = self._take(lease.session_id)

    def acquire(self, header: SessionHeader) -> WriterLock:
        """Take the session's writer lease: an advisory lock on a connection of its own,
        which no other connection (on any host) can take until it is released or its
        holder's connection ends.

        :raises SessionLockedError: another writer holds it.
        """
        session_id = header.id
        # The lock key is a hash, so any id could be locked; refuse here, at create or
        # open, an id that no row can hold, rather than at the first flush.
        storable_text(session_id, "the id", session_id, None)
        conn = self._take(session_id)
        lease = _Lease(self, session_id, conn)
        with self._lock:
            self._leases[session_id] = lease
        return lease

    @staticmethod
    def _holder(conn: psycopg.Connection[Any], key: int) -> str:
        """Who holds an advisory lock, for the error message."""
        row = conn.execute(
            "SELECT a.application_name, a.client_addr::text, a.pid FROM pg_locks l"
            " JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted"
            " AND l.classid = ((%(k)s >> 32) & 4294967295)::oid"
            " AND l.objid = (%(k)s & 4294967295)::oid"
            " AND l.objsubid = 1 LIMIT 1",
            {"k": key},
        ).fetchone()
        if row is None:
            return "a lease on the PostgreSQL server"
        app, addr, pid = row
        where = f" from {addr}" if addr else ""
        return f"lease held by {app or 'a client'}{where}, server pid {pid}"

    def _drop_lease(self, lease: _Lease) -> None:
        with self._lock:
            if self._leases.get(lease.session_id) is lease:
                del self._leases[lease.session_id]
        conn = lease.conn
        if not conn.closed and not conn.broken:
            # Unlock first: once close returns, the server process may still hold the
            # lock for a few milliseconds, and a writer told "released" must get in.
            with contextlib.suppress(self._errors().Error):
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(lease.session_id),))
        conn.close()  # and a dead connection's locks go with it

    # --- deleting -----------------------------------------------------------------------

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove the session's ``sessions`` row and every ``events`` row of it in one
        transaction, holding its writer lease (:meth:`acquire`'s advisory lock, taken on
        a connection of its own and released right after), and notify its channel so
        that followers see it go. Rows are matched by the exact id. Nothing else is
        stored for a session: an advisory lock is no row, it ends with its connection.
        The database does not shrink at once: VACUUM reclaims the rows' space.

        :raises SessionLockedError: a writer, on any host, holds the session.
        :raises PersistenceError: no session of this id (``not found``).
        """
        if not text_ok(session_id):
            raise not_found(session_id)  # no row can hold this id
        with self._lock:
            found = self._conn.execute(SELECT_FOUND, (session_id,)).fetchone()
        if found is None:
            raise not_found(session_id)
        conn = self._take(session_id)
        try:
            with conn.transaction():
                row = conn.execute(SELECT_MEASURE, {"sid": session_id}).fetchone()
                if row is None:  # deleted meanwhile, by another store
                    raise not_found(session_id)
                if not dry_run:
                    conn.execute(DELETE_EVENTS, (session_id,))
                    conn.execute(DELETE_SESSION, (session_id,))
                    if self._indexed:
                        conn.execute(DELETE_DOCS, (session_id,))
                        conn.execute(DELETE_STATE, (session_id,))
                    conn.execute(NOTIFY, (channel_of(session_id), "delete"))
        finally:
            with contextlib.suppress(self._errors().Error):
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(session_id),))
            conn.close()
        from .._codec import ENCODER

        header = header_of(row[:6])
        events, size, last = int(row[6]), int(row[7]), row[8]
        where = self.location_url
        return Deleted(
            header.id, "would-delete" if dry_run else "deleted", where,
            (f"{where}: the sessions row and {events} events row(s)",),
            len(ENCODER.encode(header)) + 1 + size, events, header,
            None if last is None else int(last))

    # --- reading without writing -------------------------------------------------------

    def summaries(self) -> builtins.list[SessionSummary]:
        """Every session with its counts, in one query (an aggregate over the events'
        primary key); no JSON is decoded. Never torn (a batch is a transaction)."""
        with self._lock:
            rows = self._conn.execute(SELECT_SUMMARIES).fetchall()
        return [SessionSummary(header_of(row[:6]), int(row[6]), int(row[7]), row[8])
                for row in rows]

    def summaries_of(self, headers: Sequence[SessionHeader]) -> builtins.list[SessionSummary]:
        """:meth:`summaries` of just these sessions, in their order: one query, which
        reads only their rows (a page of ``ls`` costs the same in any store)."""
        ids = [h.id for h in headers if text_ok(h.id)]
        with self._lock:
            rows = self._conn.execute(SELECT_SUMMARIES_OF, (ids,)).fetchall()
        return summaries_in_order(headers, rows)

    def tail(self, session_id: str, count: int) -> builtins.list[bytes] | None:
        """The last ``count`` events' log lines, oldest first; ``None`` when the session
        is not stored."""
        tail = self.tail_lines(session_id, count)
        return None if tail is None else tail.lines

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        """The rows after seq ``after`` (at most ``limit``) by the primary key, as log
        lines: a key range, whatever the session's length."""
        if not text_ok(session_id):
            return None  # no row can hold this id
        with self._lock, self._conn.transaction():
            conn = self._conn
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            if conn.execute(SELECT_FOUND, (session_id,)).fetchone() is None:
                return None
            rows = conn.execute(SELECT_RANGE, (session_id, after, None if limit is None
                                               else max(limit, 0))).fetchall()
        return [row_line(row) for row in rows]

    def lines_since(self, header: SessionHeader, last: Event) -> builtins.list[bytes] | None:
        """:meth:`~.base.Backend.lines_since`: the rows from ``last``'s seq on, a key
        range (a database holds no torn tail)."""
        lines = self.read_lines(header.id, last.seq - 1, None)
        return None if lines is None else continued(lines, last)

    def lines_of_types(self, session_id: str, types: Collection[str]
                       ) -> builtins.list[bytes] | None:
        """:func:`~.base.lines_of_types_of`: the rows of those types (by the ``type``
        column), as log lines, in one query."""
        if not text_ok(session_id):
            return None  # no row can hold this id
        wanted = [t for t in types if text_ok(t)]
        with self._lock, self._conn.transaction():
            conn = self._conn
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            if conn.execute(SELECT_FOUND, (session_id,)).fetchone() is None:
                return None
            rows = conn.execute(SELECT_TYPES, (session_id, wanted)).fetchall()
        return [row_line(row) for row in rows]

    def tail_lines(self, session_id: str, count: int) -> LogTail | None:
        """The last ``count`` rows by the primary key, as log lines; the position is the
        last stored seq (``-1`` when none is)."""
        with self._lock:
            found = postgres_follow.tail(self._conn, session_id, count)
        return None if found is None else LogTail(*found)

    def last_seq(self, session_id: str) -> int:
        """The seq of the session's last stored event (``-1`` when it has none)."""
        with self._lock:
            row = self._conn.execute(SELECT_LAST, (session_id,)).fetchone()
        return -1 if row is None else int(row[0])

    def follow(
        self, session_id: str, after: int, *, timeout: float | None = None
    ) -> Iterator[tuple[int, builtins.list[bytes]]]:
        """Follow a session live: yield ``(last seq, lines)`` for the events stored after
        seq ``after``, as they are committed. Waits on the session's NOTIFY channel, so
        the events table is read only when a commit said something changed.

        A repair that cut the log back yields ``(new last seq, [])`` first. With
        ``timeout``, stops after that many seconds without a notification.
        """
        return postgres_follow.follow(self._connect, session_id, after, timeout)

    def follow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> Iterator[LogNews]:
        """:meth:`follow`, as the protocol reports it (a cut back comes with a note)."""
        if type(position) is not int:
            msg = f"a PostgreSQL position is a seq (int), got {position!r}"
            raise TypeError(msg)
        for top, lines in self.follow(session_id, position, timeout=timeout):
            yield LogNews(lines, top, None if lines else postgres_follow.cut_note(top))

    def afollow(
        self, session_id: str, after: int, *, timeout: float | None = None
    ) -> AsyncIterator[tuple[int, builtins.list[bytes]]]:
        """:meth:`follow` for asyncio hosts (a server streaming a session to a browser,
        say): the same reports, waiting on NOTIFY without blocking the loop."""
        return postgres_follow.afollow(self._aconnect, session_id, after, timeout)

    # --- search -------------------------------------------------------------------------

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """Every hit of ``query``, in no order, from the ``tsvector`` index.

        Sessions the index lags behind (rows stored by a writer without it, or a batch
        that found the index behind) are indexed first, in one transaction; when this
        connection may not write, their rows past the index are checked one by one
        instead, so the answer is complete either way. Every candidate is checked by
        :func:`~.._search.hit_of`.
        """
        types = query.event_types()
        if not types:
            return []  # the type and role filters exclude each other
        with self._lock:
            conn = self._conn
            if self._indexed:
                self._catch_up(conn, query)
            with conn.transaction():  # one snapshot for every query
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                behind = self._behind(conn, query)
                candidates: builtins.list[Any] = []
                if self._indexed:
                    sql = SELECT_CANDIDATES
                    params: dict[str, Any] = {"q": tsquery_text(query), "types": types}
                    if query.sessions:
                        sql += " AND d.session_id = ANY(%(sessions)s)"
                        params["sessions"] = sorted(i for i in query.sessions if text_ok(i))
                    for name, bound, op in (("since", query.since, ">="),
                                            ("until", query.until, "<")):
                        if bindable(bound):
                            sql += f" AND e.time {op} %({name})s"
                            params[name] = bound
                    candidates = conn.execute(sql, params).fetchall()
                hits = answer(candidates, behind, query, line_of=row_line,
                              turn_before=functools.partial(_turn_before, conn),
                              lines_from=functools.partial(_lines_from, conn))
        return hits

    def _catch_up(self, conn: psycopg.Connection[Any], query: SearchQuery) -> None:
        """Index the rows of the sessions (that the query reads) the index lags behind,
        in one transaction under the catch-up lock; nothing when the index is in step or
        this connection may not write."""
        if not any(row[1] != row[3] + 1 for row in _progress(conn, query, True)):
            return
        psycopg = self._errors()
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (SEARCH_LOCK_KEY,))
                for sid, next_seq, _, top in _progress(conn, query, True):
                    if next_seq != top + 1:
                        turn = _sync(conn, sid, top + 1)
                        conn.execute(UPSERT_STATE, (sid, top + 1, turn))
        except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege):
            pass

    def _behind(self, conn: psycopg.Connection[Any], query: SearchQuery
                ) -> dict[str, tuple[int, int | None, int]]:
        """The sessions whose rows from some seq on no index entry covers: ``{id: (that
        seq, the turn open there, the seq after the last)}``; every session when the
        database has no index."""
        behind: dict[str, tuple[int, int | None, int]] = {}
        for sid, next_seq, turn, top in _progress(conn, query, self._indexed):
            # A state past the last row: rows cut by a writer without the index, which
            # may have written others in their place: no entry of it is trusted.
            if not self._indexed or next_seq is None or next_seq > top + 1:
                behind[sid] = (_ALL_SEQS, None, top + 1)
            elif next_seq <= top:
                behind[sid] = (next_seq, turn, top + 1)
        return behind

    def exists(self) -> bool:
        """Always: opening the backend found (or created) the tables."""
        return True

    def store_identity(self) -> Hashable | None:
        """Which database the connection string names, whatever its spelling:
        ``postgres://`` or ``postgresql://``, a URL or libpq keywords, with a password or
        without, other connection settings, libpq's defaults written out or left out,
        ``localhost``, ``127.0.0.1`` or ``::1``; the string without its password when
        libpq cannot parse it."""
        return ("postgresql", database_of(self.url) or self.location_url)

    # --- asyncio ------------------------------------------------------------------------

    async def aappend_batch(
        self,
        header: SessionHeader,
        events: Sequence[Event],
        jsonl: bytes,
        materialized: bool,
    ) -> None:
        """:meth:`append_batch` for asyncio hosts, on psycopg's ``AsyncConnection``: the
        event loop runs while the server commits. Same checks, same guarantees (the
        checked insert, not the connection, is what keeps the log gap- and
        duplicate-free, so any connection may carry a leased session's batch)."""
        if not events:
            return
        columns, before = batch_columns(header.id, events)
        columns["before"] = before
        if self._indexed:
            index_columns(columns, events, jsonl)
        head = None if materialized else checked_header(header)
        conn = await self._atake()
        try:
            await self._awrite(conn, header.id, columns, head)
        finally:
            self._agive(conn)

    # The twin of _write, on psycopg's async API: keep the two in step.
    async def _awrite(
        self,
        conn: psycopg.AsyncConnection[Any],
        session_id: str,
        columns: Columns,
        head: tuple[Any, ...] | None,
    ) -> None:
        seqs = columns["seqs"]
        try:
            if head is None:
                if await (await conn.execute(self._append, columns)).fetchone() is not None:
                    return
                raise _Refused
            async with conn.transaction():
                await conn.execute(UPSERT_SESSION, head)
                if await (await conn.execute(self._append, columns)).fetchone() is None:
                    raise _Refused
                return
        except _Refused:
            pass
        except self._errors().errors.UniqueViolation:
            pass
        cur = await conn.execute(SELECT_STORED_ROWS, (session_id, seqs[0], seqs[-1] + 1))
        if same_rows(await cur.fetchall(), columns):
            return
        cur = await conn.execute(SELECT_LAST, (session_id,))
        (last,) = await cur.fetchone()  # type: ignore[misc]
        raise conflict(session_id, last, seqs[0])

    async def alist(self) -> builtins.list[SessionHeader]:
        """:meth:`list` for asyncio hosts, on psycopg's ``AsyncConnection``."""
        conn = await self._atake()
        try:
            rows = await (await conn.execute(SELECT_HEADERS)).fetchall()
        finally:
            self._agive(conn)
        return [header_of(row) for row in rows]

    async def atail_lines(self, session_id: str, count: int) -> LogTail | None:
        """:meth:`tail_lines` for asyncio hosts, on psycopg's ``AsyncConnection``."""
        conn = await self._atake()
        try:
            found = await postgres_follow.atail(conn, session_id, count)
        finally:
            self._agive(conn)
        return None if found is None else LogTail(*found)

    async def afollow_lines(
        self, session_id: str, position: object, *, timeout: float | None = None
    ) -> AsyncIterator[LogNews]:
        """:meth:`follow_lines` for asyncio hosts: :meth:`afollow`'s reports, as the
        protocol gives them (a cut back comes with a note). Closing it (or cancelling
        its consumer) closes its listening connection."""
        if type(position) is not int:
            msg = f"a PostgreSQL position is a seq (int), got {position!r}"
            raise TypeError(msg)
        async with contextlib.aclosing(
            postgres_follow.afollow(self._aconnect, session_id, position, timeout)
        ) as reports:
            async for top, lines in reports:
                yield LogNews(lines, top, None if lines else postgres_follow.cut_note(top))

    async def _aconnect(self, application: str = "dsh-session") -> psycopg.AsyncConnection[Any]:
        import psycopg

        return await psycopg.AsyncConnection.connect(
            self.url, **self._connect_args(application)
        )

    async def _atake(self) -> psycopg.AsyncConnection[Any]:
        """An idle connection of this event loop's, or a new one: each batch has a
        connection to itself, as transactions cannot share one."""
        import asyncio

        idle = self._aidle.setdefault(asyncio.get_running_loop(), [])
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        return await self._aconnect()

    def _agive(self, conn: psycopg.AsyncConnection[Any]) -> None:
        import asyncio

        if conn.broken or conn.closed:
            return
        self._aidle.setdefault(asyncio.get_running_loop(), []).append(conn)

    async def aclose(self) -> None:
        """Close this event loop's connections, then everything :meth:`close` closes."""
        import asyncio

        for conn in self._aidle.pop(asyncio.get_running_loop(), []):
            await conn.close()
        self.close()

    # --- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        """Release every lease still held and close the connections (asyncio ones too,
        without waiting for their event loops: :meth:`aclose` closes them politely)."""
        for lease in builtins.list(self._leases.values()):
            lease.release()
        for idle in builtins.list(self._aidle.values()):
            for conn in idle:
                conn.pgconn.finish()
        self._aidle.clear()
        with self._lock:
            self._conn.close()
