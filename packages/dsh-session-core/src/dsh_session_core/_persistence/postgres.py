"""The PostgreSQL persistence backend: one store shared by agents on many hosts.

The tables and columns are the reference's (``sessions``, ``events`` with primary key
``(session_id, seq)``, JSON kept as the text it was written as, so a log's bytes survive
a round trip), plus a one-row ``dsh_session_schema`` table that holds the schema
version, checked on open. Each batch, and each repair, is one transaction; the scan and
repair rules are the SQLite backend's (:func:`scan_rows`).

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

Followers: every batch and repair notifies the session's channel
(``NOTIFY dsh_session_<hash>``, delivered at commit); :meth:`PostgresBackend.follow`
LISTENs to it and reads the events table only when told something changed.

Loading builds each row's log line in SQL and decodes a chunk of lines in one msgspec
call, like the SQLite backend.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import itertools
import os
import socket
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._header import SessionHeader
from .._registry import EventRegistry
from ..errors import (
    PersistenceError,
    SchemaVersionError,
    StoreNotFoundError,
    UnstorableError,
)
from ..events import Event
from .base import SessionLockedError, StoredLog, WriterLock
from .rows import (
    PARAMS_PER_ROW,
    _event_params,
    _header_of,
    _header_row,
    _row_line,
    load_chunks,
    scanned,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "PostgresBackend", "channel_of"]

#: The version in ``dsh_session_schema``; a database of another version is refused.
SCHEMA_VERSION: Final = 1

_SCHEMA: Final = (
    """CREATE TABLE dsh_session_schema (
        version integer NOT NULL,
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row)
    )""",
    """CREATE TABLE sessions (
        id text PRIMARY KEY,
        version integer NOT NULL,
        created_at bigint NOT NULL,
        cwd text,
        parent_session text,
        seed_length bigint
    )""",
    # The primary key's index yields one session's rows in seq order (the load reads a
    # range of it) and makes a duplicate seq fail the whole batch.
    """CREATE TABLE events (
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        type text NOT NULL,
        time bigint NOT NULL,
        data text NOT NULL,
        source_event_seqs text,
        surface_op text,
        PRIMARY KEY (session_id, seq)
    )""",
    # Listing, newest first, and by project folder.
    "CREATE INDEX sessions_by_created_at ON sessions (created_at, id)",
    "CREATE INDEX sessions_by_cwd ON sessions (cwd, created_at)",
)

#: Serializes schema creation between processes opening a fresh database at once.
_SCHEMA_LOCK_KEY: Final = 0x6473_685F_7363_6831  # "dsh_sch1"

_UPSERT_SESSION: Final = """
    INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (id) DO UPDATE SET
        version = excluded.version, created_at = excluded.created_at, cwd = excluded.cwd,
        parent_session = excluded.parent_session, seed_length = excluded.seed_length"""

# The batch's rows, unnested from one array per column. Parameters go in binary (``%b``):
# as text, psycopg would escape every quote of every JSON text, which cost about half of
# a flush's client time.
_ROWS: Final = """
    INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op)
    SELECT %(sid)b, r.seq, r.type, r.time, r.data, nullif(r.src, ''), nullif(r.op, '')
    FROM unnest(%(seqs)b::bigint[], %(types)b::text[], %(times)b::bigint[],
                %(datas)b::text[], %(srcs)b::text[], %(ops)b::text[])
         AS r(seq, type, time, data, src, op)"""

# A batch in one statement (one round trip, its own transaction when autocommit): the
# rows go in only if the stored log ends right before them, checked in the same
# statement, and then the session's channel is notified. No row back means refused, and
# nothing was written; a writer that raced past the check fails on the primary key (its
# insert waits for ours, then finds the duplicate).
_APPEND: Final = f"""
    WITH ins AS ({_ROWS}
        WHERE (SELECT coalesce(max(seq), -1) FROM events WHERE session_id = %(sid)b)
              = %(before)b
        RETURNING 1)
    SELECT pg_notify(%(channel)b, %(last)b) FROM (SELECT count(*) AS n FROM ins) AS c
    WHERE c.n > 0"""
_INSERT_ROWS: Final = _ROWS
_DELETE_TAIL: Final = "DELETE FROM events WHERE session_id = %s AND seq >= %s"
_NOTIFY: Final = "SELECT pg_notify(%s, %s)"
_SELECT_LAST: Final = "SELECT coalesce(max(seq), -1) FROM events WHERE session_id = %s"
_SELECT_AFTER: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = %s AND seq > %s ORDER BY seq"
)
_SELECT_HEADERS: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length FROM sessions"
    " ORDER BY created_at, id"
)
_SELECT_HEADER: Final = (
    "SELECT id, version, created_at, cwd, parent_session, seed_length,"
    " (SELECT min(seq) FROM events WHERE session_id = %(sid)s),"
    " (SELECT max(seq) FROM events WHERE session_id = %(sid)s)"
    " FROM sessions WHERE id = %(sid)s"
)
_SELECT_ROWS: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = %s ORDER BY seq"
)
_SELECT_STORED_ROWS: Final = (
    "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
    " WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq"
)

# Each row's log line, built by the server in the key order of the log format
# (``type, seq, time, data[, sourceEventSeqs][, surfaceOp]``). to_json escapes a string
# exactly like JSON.stringify and our encoder ("\"", "\\", \b \f \n \r \t, other control
# characters as \u00xx, everything else verbatim).
_LINE: Final = (
    "'{\"type\":' || to_json(type)::text || ',\"seq\":' || seq || ',\"time\":' || time"
    " || ',\"data\":' || data"
    " || coalesce(',\"sourceEventSeqs\":' || source_event_seqs, '')"
    " || coalesce(',\"surfaceOp\":' || surface_op, '') || '}'"
)
_SELECT_CHUNK: Final = (
    f"SELECT count(*), convert_to(string_agg({_LINE}, E'\\n' ORDER BY seq), 'UTF8')"
    " FROM events WHERE session_id = %s AND seq >= %s AND seq < %s"
)

#: Rows per chunk of the fast load.
_CHUNK: Final = 16384


def channel_of(session_id: str) -> str:
    """The NOTIFY channel of a session: a hash, since ids are not identifiers."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"dsh_session_{digest[:40]}"


def _lock_key(session_id: str) -> int:
    """The session's advisory lock key: 64 bits of a hash of its id."""
    digest = hashlib.sha256(b"dsh-session lease\0" + session_id.encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


def _redacted(url: str) -> str:
    """The URL (or libpq keyword string) without its password, for messages."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    if "://" in url:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.partition(':')[0]}@{host}"
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(url)
    except Exception:  # an unparsable string is reported by connect, not here
        return url
    params.pop("password", None)
    return make_conninfo("", **params)


def _text_ok(value: str) -> bool:
    """Whether a PostgreSQL text column can hold ``value``: no NUL, no lone surrogate."""
    if "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _storable_text(session_id: str, what: str, value: object, seq: int | None) -> None:
    """Refuse a value no PostgreSQL text column can hold (:func:`_text_ok`)."""
    if not isinstance(value, str) or _text_ok(value):
        return
    problem = "a NUL character" if "\x00" in value else "a lone surrogate"
    msg = (
        f"{what} of session {session_id!r} holds {problem}, which a PostgreSQL text "
        f"column cannot store"
    )
    raise UnstorableError(msg, session_id=session_id, seq=seq)


_Columns = dict[str, Any]


class _Refused(Exception):
    """The checked insert wrote nothing: the stored log does not end before the batch."""


def _columns(session_id: str, events: Sequence[Event]) -> tuple[_Columns, int]:
    """The batch as column arrays for ``unnest`` (checked before any transaction), and
    the seq the stored log must end at for it to follow. An absent optional column is
    ``''`` (stored as NULL: JSON text is never empty)."""
    params = _event_params(session_id, events, "PostgreSQL")
    n = PARAMS_PER_ROW
    seqs, types, times = params[0::n], params[1::n], params[2::n]
    for event_type in set(types):  # a batch has few distinct types
        _storable_text(session_id, f"the type {event_type!r}", event_type,
                       seqs[types.index(event_type)])  # type: ignore[arg-type]
    for prev, seq in itertools.pairwise(seqs):
        if seq != prev + 1:  # type: ignore[operator]
            msg = f'batch of session "{session_id}" is not contiguous at seq {seq}'
            raise PersistenceError(msg, session_id=session_id)
    columns = {"sid": session_id, "seqs": seqs, "types": types, "times": times,
               "datas": params[3::n], "srcs": params[4::n], "ops": params[5::n],
               "channel": channel_of(session_id), "last": str(seqs[-1])}
    return columns, seqs[0] - 1  # type: ignore[operator]


def _checked_header(header: SessionHeader) -> tuple[Any, ...]:
    row = _header_row(header, "PostgreSQL")
    for name, value in (("the id", row[0]), ("the cwd", row[3]), ("the parent", row[4])):
        _storable_text(header.id, name, value, None)
    return row


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


def _same_rows(stored: Sequence[tuple[Any, ...]], columns: _Columns) -> bool:
    """Whether the stored rows are exactly the batch's."""
    mine = zip(columns["seqs"], columns["types"], columns["times"], columns["datas"],
               columns["srcs"], columns["ops"], strict=True)
    return [tuple(r) for r in stored] == [(*row[:4], row[4] or None, row[5] or None)
                                          for row in mine]


def _conflict(session_id: str, last: int, first: int) -> PersistenceError:
    msg = (
        f'session "{session_id}" was written by another writer: the stored log ends at seq '
        f"{last}, but this batch starts at seq {first}; reopen the session to continue "
        f"from what is stored"
    )
    return PersistenceError(msg, session_id=session_id)


def _chunk_fetcher(
    conn: psycopg.Connection[Any], session_id: str
) -> Callable[[int], tuple[int, bytes | None]]:
    """Fetches the chunk of a session's lines that starts at a seq, on ``conn``."""
    cur = conn.cursor(binary=True)  # bytea comes back as bytes, undecoded

    def fetch(start: int) -> tuple[int, bytes | None]:
        n, blob = cur.execute(_SELECT_CHUNK, (session_id, start, start + _CHUNK)
                              ).fetchone()  # type: ignore[misc]
        return int(n), None if blob is None else bytes(blob)

    return fetch


def _news(
    rows: Sequence[tuple[Any, ...]], top: int, last: int
) -> tuple[int, builtins.list[bytes]] | None:
    """What a follower reports: the new rows' lines, or a cut back to ``top``."""
    if rows:
        return int(rows[-1][0]), [_row_line(row) for row in rows]
    if top < last:
        return top, []
    return None


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
            self._open_schema(create)
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

    def _open_schema(self, create: bool) -> None:
        conn = self._conn
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
            (have_schema, have_sessions) = conn.execute(
                "SELECT to_regclass('dsh_session_schema') IS NOT NULL,"
                " to_regclass('sessions') IS NOT NULL"
            ).fetchone() or (False, False)
            if not have_schema:
                if not create:
                    raise StoreNotFoundError(self.location_url, "the database has no tables")
                if have_sessions:
                    msg = (
                        f"the database at {self.location_url} has a sessions table that "
                        f"dsh-session did not create; use another database (or schema, "
                        f"with options=-csearch_path=NAME in the URL)"
                    )
                    raise PersistenceError(msg, session_id="")
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO dsh_session_schema (version) VALUES (%s)", (SCHEMA_VERSION,)
                )
                return
            row = conn.execute("SELECT version FROM dsh_session_schema").fetchone()
        version = -1 if row is None else int(row[0])
        if version != SCHEMA_VERSION:
            raise SchemaVersionError(self.location_url, version, expected=SCHEMA_VERSION)

    @property
    def location_url(self) -> str:
        """The connection URL without its password."""
        return _redacted(self.url)

    # --- reading ------------------------------------------------------------------------

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session, or ``None``. Ids are global in one database: any cwd matches.

        :raises LogFormatError: committed corruption (:func:`scan_rows`).
        """
        if not _text_ok(session_id):
            return None  # no row can hold this id
        with self._lock:
            conn = self._conn
            # One snapshot for every query of the load.
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                row = conn.execute(_SELECT_HEADER, {"sid": session_id}).fetchone()
                if row is None:
                    return None
                header = _header_of(row)
                first, last = row[6], row[7]
                if first is None:
                    return StoredLog(header, [], None, b"")
                if first == 0:
                    fast = self._load_fast(conn, session_id, int(last) + 1, registry)
                    if fast is not None:
                        return StoredLog(header, fast[0], None, fast[1])
                rows = conn.execute(_SELECT_ROWS, (session_id,)).fetchall()
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
            rows = self._conn.execute(_SELECT_HEADERS).fetchall()
        return [_header_of(row) for row in rows]

    def location(self, header: SessionHeader) -> str:
        """The database's URL (without password); ids are global in it."""
        return self.location_url

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
        columns, before = _columns(header.id, events)
        columns["before"] = before
        head = None if materialized else _checked_header(header)
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

    @staticmethod
    def _errors() -> Any:
        import psycopg

        return psycopg

    def _write(
        self,
        conn: psycopg.Connection[Any],
        session_id: str,
        columns: _Columns,
        head: tuple[Any, ...] | None,
    ) -> None:
        seqs = columns["seqs"]
        try:
            if head is None:  # the usual case: one statement, committed on its own
                if conn.execute(_APPEND, columns).fetchone() is not None:
                    return
                raise _Refused
            with conn.transaction():  # the first batch brings the session's row
                conn.execute(_UPSERT_SESSION, head)
                if conn.execute(_APPEND, columns).fetchone() is None:
                    raise _Refused  # rolls the session's row back too
                return
        except _Refused:
            pass
        except self._errors().errors.UniqueViolation:
            pass  # another writer committed these seqs while we checked
        # Refused, nothing written: this very batch is already stored (a retry after a
        # lost COMMIT reply), or another writer got there first.
        stored = conn.execute(
            _SELECT_STORED_ROWS, (session_id, seqs[0], seqs[-1] + 1)
        ).fetchall()
        if _same_rows(stored, columns):
            return
        (last,) = conn.execute(_SELECT_LAST, (session_id,)).fetchone()  # type: ignore[misc]
        raise _conflict(session_id, last, seqs[0])

    def commit_repair(
        self, header: SessionHeader, torn: object | None, closers: Sequence[Event], jsonl: bytes
    ) -> None:
        """Delete the rows from seq ``torn`` on (iff it is not ``None``), then insert the
        ``closers``; one transaction, which notifies followers."""
        if torn is not None and type(torn) is not int:
            msg = f"a PostgreSQL torn marker is a seq (int), got {torn!r}"
            raise TypeError(msg)
        columns = _columns(header.id, closers)[0] if closers else None
        if torn is None and columns is None:
            return
        lease = self._leases.get(header.id)
        with self._lock if lease is None else contextlib.nullcontext():
            conn = self._conn if lease is None else lease.conn
            with conn.transaction():
                if torn is not None:
                    conn.execute(_DELETE_TAIL, (header.id, torn))
                if columns is not None:
                    conn.execute(_INSERT_ROWS, columns)
                conn.execute(_NOTIFY, (channel_of(header.id), "repair"))

    # --- the lease ----------------------------------------------------------------------

    def _take(self, session_id: str) -> psycopg.Connection[Any]:
        """A new connection holding the session's advisory lock.

        :raises SessionLockedError: another connection holds it.
        """
        key = _lock_key(session_id)
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
        _storable_text(session_id, "the id", session_id, None)
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
                conn.execute("SELECT pg_advisory_unlock(%s)", (_lock_key(lease.session_id),))
        conn.close()  # and a dead connection's locks go with it

    # --- following ----------------------------------------------------------------------

    def tail(self, session_id: str, count: int) -> builtins.list[bytes] | None:
        """The last ``count`` events' log lines, oldest first; ``None`` when the session
        is not stored."""
        if not _text_ok(session_id):
            return None
        with self._lock:
            conn = self._conn
            found = conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,))
            if found.fetchone() is None:
                return None
            rows = conn.execute(
                "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
                " WHERE session_id = %s ORDER BY seq DESC LIMIT %s",
                (session_id, max(count, 0)),
            ).fetchall()
        return [_row_line(row) for row in reversed(rows)]

    def last_seq(self, session_id: str) -> int:
        """The seq of the session's last stored event (``-1`` when it has none)."""
        with self._lock:
            row = self._conn.execute(_SELECT_LAST, (session_id,)).fetchone()
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
        conn = self._connect("dsh-session follower")
        try:
            conn.execute(f"LISTEN {channel_of(session_id)}")  # a hex-derived identifier
            last = after
            while True:
                # Listening before reading: a commit after this read is notified, and
                # psycopg (>= 3.2.4) keeps a notification that arrives during the read
                # for the next notifies().
                rows = conn.execute(_SELECT_AFTER, (session_id, last)).fetchall()
                (top,) = conn.execute(_SELECT_LAST, (session_id,)).fetchone()  # type: ignore[misc]
                news = _news(rows, top, last)
                if news is not None:
                    last = news[0]
                    yield news
                got = False
                for _ in conn.notifies(timeout=timeout, stop_after=1):
                    got = True
                if not got:
                    return
        finally:
            conn.close()

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
        columns, before = _columns(header.id, events)
        columns["before"] = before
        head = None if materialized else _checked_header(header)
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
        columns: _Columns,
        head: tuple[Any, ...] | None,
    ) -> None:
        seqs = columns["seqs"]
        try:
            if head is None:
                if await (await conn.execute(_APPEND, columns)).fetchone() is not None:
                    return
                raise _Refused
            async with conn.transaction():
                await conn.execute(_UPSERT_SESSION, head)
                if await (await conn.execute(_APPEND, columns)).fetchone() is None:
                    raise _Refused
                return
        except _Refused:
            pass
        except self._errors().errors.UniqueViolation:
            pass
        cur = await conn.execute(_SELECT_STORED_ROWS, (session_id, seqs[0], seqs[-1] + 1))
        if _same_rows(await cur.fetchall(), columns):
            return
        cur = await conn.execute(_SELECT_LAST, (session_id,))
        (last,) = await cur.fetchone()  # type: ignore[misc]
        raise _conflict(session_id, last, seqs[0])

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

    async def afollow(
        self, session_id: str, after: int, *, timeout: float | None = None
    ) -> AsyncIterator[tuple[int, builtins.list[bytes]]]:
        """:meth:`follow` for asyncio hosts (a server streaming a session to a browser,
        say): the same reports, waiting on NOTIFY without blocking the loop."""
        conn = await self._aconnect("dsh-session follower")
        try:
            await conn.execute(f"LISTEN {channel_of(session_id)}")
            last = after
            while True:
                rows = await (await conn.execute(_SELECT_AFTER, (session_id, last))).fetchall()
                (top,) = await (await conn.execute(_SELECT_LAST, (session_id,))).fetchone()  # type: ignore[misc]
                news = _news(rows, top, last)
                if news is not None:
                    last = news[0]
                    yield news
                got = False
                async for _ in conn.notifies(timeout=timeout, stop_after=1):
                    got = True
                if not got:
                    return
        finally:
            await conn.close()

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
