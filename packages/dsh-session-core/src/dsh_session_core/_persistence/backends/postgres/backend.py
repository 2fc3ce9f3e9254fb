"""The PostgreSQL persistence backend: one store shared by agents on many hosts.

This module is the backend class, its writer, its loads and its lease; the schema and
statements are :mod:`.postgres.schema`'s, the search index's :mod:`.postgres.index`'s
(run by :mod:`.sql.index`, the engine shared with SQLite), the reads that never write
:mod:`.postgres.reads`' (the tail and the NOTIFY follower :mod:`.follow`'s),
the deleting :mod:`.delete`'s, the projections' rows :mod:`.postgres.projections`', and
the asyncio methods :mod:`.postgres.aio`'s.
The tables and columns are the reference's, plus ``events.line`` and a schema version
table (:mod:`.postgres.open`). Each batch, and each repair, is one transaction; the scan
and repair rules are the SQLite backend's (:func:`scan_rows`).

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

Loading builds each row's log line in SQL (or takes the one kept) and decodes a chunk
of lines in one msgspec call, like the SQLite backend.

Search: the index (``search_docs``, a ``tsvector`` of each searched event's words,
GIN-indexed) trails the batches: a small batch leaves its entries for the next search
to write, a larger one writes them in the statement that inserts it
(:mod:`.postgres.trail`), and a repair or a delete rewrites them in its transaction;
sessions whose rows another writer stored are indexed by the next search
(:meth:`PostgresBackend.search`).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import socket
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from ...._schema.header import SessionHeader
from ...._schema.registry import EventRegistry
from ....errors import SessionIdError
from ....events import Event
from ...base import COMMON_ID_RULE, SessionLockedError, StoredLog, WriterLock, check_common_id
from ...rows import RowChanges
from ..sql import index as sql_index
from ..sql.projection_rows import check_changes, drop
from ..sql.rows import header_of, load_chunks, scanned
from ..sql.search_index import index_lines, lines_of
from ..sql.trail import Trail
from .aio import PostgresAsync
from .delete import PostgresDelete
from .index import INDEX_SQL, SEARCH_LOCK_KEY
from .open import open_schema
from .projections import PROJECTION_SQL, PostgresProjections, projected, row_columns
from .reads import PostgresReads
from .schema import (
    DELETE_TAIL,
    INSERT_ROWS,
    NOTIFY,
    SCHEMA_VERSION,
    SELECT_CHUNK,
    SELECT_HEADER,
    SELECT_LAST,
    SELECT_ROWS,
    SELECT_STORED_ROWS,
    UPSERT_SESSION,
    Columns,
    Refused,
    batch_columns,
    channel_of,
    checked_header,
    conflict,
    lock_key,
    redacted,
    same_rows,
    storable_text,
    text_ok,
)
from .trail import SEARCH_LOCK, PostgresTrail

if TYPE_CHECKING:
    import psycopg

    from ...._search import SearchHit, SearchQuery

__all__ = ["ID_RULE", "MAX_ID_BYTES", "SCHEMA_VERSION", "PostgresBackend", "channel_of"]

#: Rows per chunk of the fast load.
_CHUNK: Final = 16384

#: The longest session id, in UTF-8 bytes: well under what a B-tree index entry holds
#: (2704 bytes, less the entry's header and the ``seq`` beside the id in ``events``).
MAX_ID_BYTES: Final = 2048
#: The PostgreSQL backend's session-id rule (:meth:`PostgresBackend.check_id`).
ID_RULE: Final = f"{COMMON_ID_RULE}, without NUL, of at most {MAX_ID_BYTES} UTF-8 bytes"


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


class PostgresBackend(PostgresReads, PostgresDelete, PostgresAsync, PostgresProjections,
                      PostgresTrail):
    """Sessions in one PostgreSQL database, shared by every host that connects to it.

    :param url: a libpq connection string or ``postgresql://`` URL.
    :param connect_timeout: seconds to wait for the server on each connect.
    :param create: create the tables in a database that has none (else
        :class:`StoreNotFoundError`: readers must not leave tables behind).
    :raises SchemaVersionError: another schema version, or one this cannot migrate.
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
        self._trail = Trail()  # the batches left for the search to index (sql/trail.py)
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
            # One snapshot for every query of the load (and for _load_fast's helper
            # connection, which joins it): a batch another writer commits meanwhile
            # cannot make the rows read disagree with the seqs the header's query gave.
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                row = conn.execute(SELECT_HEADER, {"sid": session_id}).fetchone()
                if row is None:
                    return None
                header = header_of(row)
                # The rows' first and last seq: rows from seq 0 are loaded the fast way
                # (load_chunks checks the counts and seqs it decodes, and anything
                # unexpected falls back to the row-by-row scan below).
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
        # load_chunks fetches ahead in worker threads only beyond two chunks: below
        # that, a helper connection would never be asked for a chunk.
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
        self._append_to(header, events, jsonl, materialized, ())

    def _append_to(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                   materialized: bool, changes: Sequence[RowChanges]) -> None:
        """The one write of a batch: its events, and projection rows' ``changes``
        (:meth:`append_projected`) in the same statement."""
        if not events:
            return self.write_rows(header, changes) if changes else None
        columns, before = batch_columns(header.id, events, jsonl)
        columns["before"] = before
        statement, due = self._plan(header.id, columns, events, jsonl)
        if changes:
            check_changes(PROJECTION_SQL, header.id, changes)
            shape, rows = row_columns(changes)
            columns.update(rows)
            statement = projected(statement, shape)
        head = None if materialized else checked_header(header)
        lease = self._leases.get(header.id)
        if lease is None:
            with self._lock:
                self._write(self._conn, header.id, columns, head, statement)
        else:
            if lease.conn.closed:  # lost at an earlier flush, and not taken back then
                self._retake(lease)
            try:
                self._write(lease.conn, header.id, columns, head, statement)
            except self._errors().OperationalError:
                if not lease.conn.broken:
                    raise
                # The lease's connection is gone, and the server released the lock with
                # it. Take the lease again and retry: the checked insert makes the retry
                # safe (a batch that did commit is recognised; a newer writer's log
                # refuses it).
                self._retake(lease)
                self._write(lease.conn, header.id, columns, head, statement)
        if due is not None:
            self._catch_up_due(due)
        return None

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
        statement: str,
    ) -> None:
        seqs = columns["seqs"]
        try:
            if head is None:  # the usual case: one statement, committed on its own
                if conn.execute(statement, columns).fetchone() is not None:
                    return
                raise Refused
            with conn.transaction():  # the first batch brings the session's row
                conn.execute(UPSERT_SESSION, head)
                if conn.execute(statement, columns).fetchone() is None:
                    raise Refused  # rolls the session's row back too
                return
        except Refused:
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

    def rewrite(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes) -> None:
        """Replace the rows with ``events``, the session's row with ``header``, at once;
        the projections' rows of the old log go (the store folds the new one's)."""
        self._replace(header, 0, events, jsonl, checked_header(header))

    def commit_repair(self, header: SessionHeader, torn: object | None,
                      closers: Sequence[Event], jsonl: bytes) -> None:
        """Delete the rows from seq ``torn`` on (iff it is not ``None``), then insert the
        ``closers``; one transaction, which notifies followers."""
        self._replace(header, torn, closers, jsonl, None)

    def _replace(self, header: SessionHeader, torn: object | None,
                 closers: Sequence[Event], jsonl: bytes, head: Any) -> None:
        if torn is not None and type(torn) is not int:
            msg = f"a PostgreSQL torn marker is a seq (int), got {torn!r}"
            raise TypeError(msg)
        columns = batch_columns(header.id, closers, jsonl)[0] if closers else None
        if torn is None and columns is None:
            return
        with self._writer(header.id) as conn, conn.transaction():
            if self._indexed:  # taken first, as every catch-up takes it
                conn.execute(SEARCH_LOCK, (SEARCH_LOCK_KEY,))
            if head is not None:  # a rewrite
                conn.execute(UPSERT_SESSION, head)
                drop(PROJECTION_SQL, conn, header.id)
            if torn is not None:
                conn.execute(DELETE_TAIL, (header.id, torn))
            if columns is not None:
                conn.execute(INSERT_ROWS, columns)
            if self._indexed:
                # The index is cut back with the rows (sql_index.sync: a state past
                # the first closer), and the closers indexed after what is left.
                seqs = columns["seqs"] if columns is not None else []
                lines = lines_of(jsonl, len(seqs))
                if lines is None:
                    lines = builtins.list(sql_index.lines_from(
                        INDEX_SQL, conn, header.id, seqs[0], seqs[-1] + 1)) if seqs else []
                first = seqs[0] if seqs else torn
                end = seqs[-1] + 1 if seqs else torn
                sql_index.index(INDEX_SQL, conn, header.id, first,  # type: ignore[arg-type]
                                functools.partial(index_lines, lines), end,  # type: ignore[arg-type]
                                cut=torn is not None)
            conn.execute(NOTIFY, (channel_of(header.id), "repair"))

    @contextlib.contextmanager
    def _writer(self, session_id: str) -> Iterator[psycopg.Connection[Any]]:
        """The connection that writes the session besides its batches: its lease's when
        this backend holds it, else the shared one (under its lock)."""
        lease = self._leases.get(session_id)
        with self._lock if lease is None else contextlib.nullcontext():
            yield self._conn if lease is None else lease.conn

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

    # --- search -------------------------------------------------------------------------

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """Every hit of ``query``, in no order, from the ``tsvector`` index
        (:mod:`.sql.index`).

        Sessions the index lags behind (batches left for the search to index,
        :mod:`.postgres.trail`; rows stored by a writer without it, or a batch that
        found the index behind) are indexed first, in one transaction; when this
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
                taken = self._trail.taken(query.sessions)
                if sql_index.catch_up(INDEX_SQL, conn, query, read=contextlib.nullcontext,
                                      write=functools.partial(self._catching_up, conn),
                                      refused=self._refused):
                    self._trail.settle(taken)
            with conn.transaction():  # one snapshot for every query
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                behind = sql_index.behind(INDEX_SQL, conn, query, self._indexed, True)
                found = (sql_index.candidates(INDEX_SQL, conn, query, types)
                         if self._indexed else [])
                return sql_index.hits(INDEX_SQL, conn, found, behind, query)

    def _refused(self, exc: Exception) -> bool:
        """Whether the server refused a write: a read-only transaction (a standby) or
        a role without the right."""
        errors = self._errors().errors
        return isinstance(exc, errors.ReadOnlySqlTransaction | errors.InsufficientPrivilege)

    # --- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        """Index what this backend left for the search (:meth:`_catch_up_left`), release
        every lease still held and close the connections (asyncio ones too, without
        waiting for their event loops: :meth:`aclose` closes them politely)."""
        self._catch_up_left()
        for lease in builtins.list(self._leases.values()):
            lease.release()
        for idle in builtins.list(self._aidle.values()):
            for conn in idle:
                conn.pgconn.finish()
        self._aidle.clear()
        with self._lock:
            self._conn.close()
