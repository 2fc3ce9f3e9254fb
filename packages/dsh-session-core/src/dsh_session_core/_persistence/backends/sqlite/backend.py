"""The SQLite persistence backend (spec §10): every session in one database file.

This module is the backend class: its writer, loads and writer lock; the tables and
statements are :mod:`.sqlite.schema`'s, opening a database (its versions and
migrations) :mod:`.sqlite.open`'s, the reads that never write (lines, tails, listing,
following) :mod:`.sqlite.reads`', the projections' rows :mod:`.sqlite.projections`', the
writer locks :mod:`.sqlite.lock`'s, and the search index's engine :mod:`.sql.index`'s
(shared with PostgreSQL), which runs the statements of :mod:`.sqlite.index`. The
reference's tables are exactly its own (schema version 4), so a database written by one
implementation is read by the other; dsh-session's own tables sit beside them.

A ``sessions`` row exists iff the session has an event: the first batch writes it in
the same transaction as its events. Each batch, and each repair, is one transaction,
so a crash never leaves half a batch (SQLite has no torn tail of its own; only a row
edited by hand can be corrupt, and the scan treats it as the reference does).

Loading rebuilds each row's log line in SQL, in key order ``type, seq, time, data[,
sourceEventSeqs][, surfaceOp]``, puts in the lines kept as appended where the rows
would not give them back (``dsh_event_lines``: a crash-repair closer's, a line another
writer spelt otherwise), and decodes the lines in one msgspec call per chunk of rows;
the row-by-row scan of the reference (:func:`scan_rows`) runs only when a chunk does not
decode or its seqs are not the expected ones. Every log comes back byte for byte.

The writer lock (beyond the reference) is an ``flock`` on a file beside the database,
which the kernel releases when the holding process dies.

The full-text index's tables are beside the reference's, which never reads them. A
small batch leaves its events unindexed, and the next search indexes them first
(:mod:`.sql.trail`, :mod:`.sqlite.search`); a larger one, a repair and a delete change
the index in their own transaction. Rows another writer stored (the reference, or a
build without the index) are indexed when a batch or a search next meets the session;
a database that cannot be written is searched as completely, those rows checked one by
one.
"""

from __future__ import annotations

import bisect
import builtins
import contextlib
import functools
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Final, Literal

from ...._base.url_for import url_for
from ...._schema.codec import ENCODER
from ...._schema.header import SessionHeader
from ...._schema.registry import EventRegistry
from ....errors import (
    PersistenceError,
    SchemaVersionError,
    StoreNotFoundError,
    UnstorableError,
)
from ....events import Event
from ...base import Deleted, SessionLockedError, StoredLog, WriterLock, check_common_id, not_found
from ...file_locks import lock_is_free, lock_or_close, same_file
from ...rows import RowChanges
from ..sql import index as sql_index
from ..sql.projection_rows import check_changes, drop
from ..sql.rows import (
    PARAMS_PER_ROW,
    Row,
    RowScan,
    batch_rows,
    header_of,
    header_row,
    load_chunks,
    scan_rows,
    scanned,
    unencodable,
    utf8_ok,
)
from ..sql.search_index import index_batch, index_lines
from ..sql.trail import Trail
from .index import INDEX_SQL
from .lock import LOCK_ATTEMPTS, FileLock, MemoryLock, clash, lock_path
from .open import open_database
from .projections import PROJECTION_SQL, SqliteProjections, apply_changes
from .reads import SqliteReads
from .schema import (
    DELETE_EVENTS,
    DELETE_SESSION,
    DELETE_TAIL,
    JOURNAL_MODES,
    SCHEMA_VERSION,
    SELECT_CHUNK,
    SELECT_FOUND,
    SELECT_HEADER,
    SELECT_KEPT,
    SELECT_MEASURE,
    SELECT_ROWS,
    UPSERT_SESSION,
    JournalMode,
    batch_lines,
    insert_kept,
    insert_rows,
    set_journal_mode,
)
from .search import SqliteSearch

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

#: Rows per chunk of the fast load: small enough that decoding starts early, large
#: enough that per-query costs vanish.
_CHUNK: Final = 8192
#: The refusals of an insert whose key is stored (SQLite's extended result codes): a
#: clash of seqs, as opposed to another constraint (a session row missing).
_CLASHES: Final = frozenset({"SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"})


# --- the backend ----------------------------------------------------------------------


class SqliteBackend(SqliteReads, SqliteProjections, SqliteSearch):
    """Sessions in one SQLite database (the reference's ``dsh-session-persistence-sqlite``).

    :param path: the database file (made absolute; its parent is created with mode
        0700), or ``":memory:"`` for a private database that lives as long as this
        object.
    :param journal_mode: ``"wal"`` (the default), ``"delete"``, ``"truncate"`` or
        ``"persist"``.
    :param create: create the file when it does not exist (else
        :class:`StoreNotFoundError`, as for ``":memory:"``: a reader must not leave a
        database behind, and a fresh in-memory one holds nothing to read).
    :raises SchemaVersionError: the database has another schema version than the
        reference's 4, or dsh-session's own tables are of a newer version (an older
        one is migrated here, :mod:`.sqlite.open`).
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
        if journal_mode not in JOURNAL_MODES:
            msg = f"journal_mode must be one of {sorted(JOURNAL_MODES)}, got {journal_mode!r}"
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
                from ...urls import check_folder

                check_folder(self.path)  # never the folders above it
                # A new database file is private, as a JSONL log is (0600, whatever the
                # umask); SQLite gives its -wal and -shm files the database's mode.
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                     | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
        self._lock = threading.Lock()
        self._file_locks: set[FileLock] = set()
        self._memory_locks: set[str] = set()
        # The index state each session's last batch stored, kept while this backend
        # holds the session's writer lock (dropped when it takes the lock, deletes or
        # repairs): no other writer can have changed it, so a flush does not read it.
        self._states: dict[str, sql_index.IndexState] = {}
        # The sessions a batch was stored for since this backend took their writer lock:
        # stored still at its release (no one else can delete a session while its lock
        # is held), so the release asks the database nothing (_has_row).
        self._written: set[str] = set()
        # The sessions whose writer lock (a file's) this backend holds.
        self._held: set[str] = set()
        # The data_version at which a search last found the index in step with every
        # row (None: not yet): until another connection commits, or this backend
        # leaves a batch unindexed (_trail), it still is.
        self._in_step_at: int | None = None
        # The batches this backend left for the search to index (sql/trail.py).
        self._trail = Trail()
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
        set_journal_mode(conn, journal_mode.upper())
        self._indexed = open_database(conn, self.path, self._transaction)

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

    # --- hooks ------------------------------------------------------------------------

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        """The session, or ``None``. Ids are global in one database: any cwd matches.

        :raises LogFormatError: committed corruption (:func:`scan_rows`).
        """
        if not utf8_ok(session_id):
            return None  # no row can hold this id
        with self._lock, self._transaction("BEGIN"):  # one snapshot for every query
            row = self._conn.execute(SELECT_HEADER, (session_id,)).fetchone()
            if row is None:
                return None
            header = header_of(row)
            # The header's query also gives the rows' first and last seq. Rows from seq 0
            # are loaded the fast way, last + 1 lines built by SQLite a chunk at a time;
            # load_chunks checks the counts and seqs it decodes, and anything unexpected
            # (a gap, a row edited by hand) falls back to the row-by-row scan below.
            first, last = row[6:8]
            fast: tuple[list[Event], bytes] | None = None
            if first is None:  # materialized, and every row cut since (a torn marker 0)
                fast = [], b""
            elif first == 0:  # else the scan decides what the rows before seq 0 mean
                kept = self._conn.execute(SELECT_KEPT, (session_id,)).fetchall()
                fast = self._load_fast(session_id, last + 1, registry, kept)
            if fast is not None:
                events, jsonl = fast
                return StoredLog(header, events, None, jsonl)
            rows = self._conn.execute(SELECT_ROWS, (session_id,)).fetchall()
        return scanned(header, rows, registry, self.path)

    def load_live(
        self, session_id: str, cwd: str | None, registry: EventRegistry
    ) -> StoredLog | None:
        """Same as :meth:`load_stored`: the SQLite backend has no cwd scopes."""
        return self.load_stored(session_id, registry)

    def _load_fast(
        self, session_id: str, count: int, registry: EventRegistry,
        kept: list[tuple[int, str]],
    ) -> tuple[list[Event], bytes] | None:
        """Every row as a log line built by SQLite, or the line kept for it (``kept``:
        ``(seq, line)`` in seq order) (:func:`load_chunks`); ``None`` when the careful
        scan must decide what is kept."""
        # One fetcher: a second connection building every other chunk (as PostgreSQL
        # does) made the standard load slower here, 123 -> 165 ms, the two threads'
        # SQLite allocations contending.
        try:
            return load_chunks([functools.partial(self._chunk, session_id, kept)], count,
                               _CHUNK, registry)
        except sqlite3.DataError:
            # A chunk longer than SQLite's string limit (1 GB by default): the
            # row-by-row scan has no such limit.
            return None

    def _chunk(self, session_id: str, kept: list[tuple[int, str]], start: int
               ) -> tuple[int, bytes | None]:
        n, blob = self._conn.execute(
            SELECT_CHUNK, (session_id, start, start + _CHUNK)
        ).fetchone()
        if kept and blob is not None:
            mine = kept[bisect.bisect_left(kept, (start,)):
                        bisect.bisect_left(kept, (start + n,))]
            if mine:
                # The chunk's rows are seqs start.. in order when it is whole (the
                # loader checks that, and the seqs it decodes): line i is seq start+i.
                lines = blob.split(b"\n")
                if len(lines) == n:
                    for seq, line in mine:
                        lines[seq - start] = line.encode()
                    blob = b"\n".join(lines)
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
        self._append(header, events, jsonl, materialized, ())

    def _append(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                materialized: bool, changes: Sequence[RowChanges]) -> None:
        """The one write of a batch: its events, and projection rows' ``changes``
        (:meth:`append_projected`), in one transaction."""
        if not events:  # a session row only ever comes with an event
            return self.write_rows(header, changes) if changes else None
        params, kept = batch_rows(header.id, events, jsonl)
        head = None if materialized else header_row(header)
        check_changes(PROJECTION_SQL, header.id, changes)
        try:
            self._append_rows(header, events, jsonl, params, kept, head, changes)
        except sqlite3.IntegrityError as exc:
            if exc.sqlite_errorname not in _CLASHES:
                raise  # not a clash of seqs (a session row missing: a caller's bug)
            raise clash(header.id, events[0].seq, materialized) from exc

    def _append_rows(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                     params: list[object], kept: list[tuple[int, str]], head: Any,
                     changes: Sequence[RowChanges]) -> None:
        sid = header.id
        with self._lock:
            # Taken out first: a batch that fails leaves no state believed.
            known = self._states.pop(sid, None)
            # A small batch leaves its events for the search to index (sql/trail.py);
            # the one that reaches the trail's bound indexes itself and catches up
            # every session this backend left behind, in its transaction.
            due = self._trail.due(sid, len(events)) if self._indexed else None
            with self._transaction() as conn:
                if head is not None:
                    conn.execute(UPSERT_SESSION, head)
                insert_rows(conn, sid, params)
                insert_kept(conn, sid, params, kept)
                if due is not None:  # the seqs as the rows hold them (checked ints)
                    rows_from = functools.partial(
                        index_batch, events, jsonl, functools.partial(batch_lines, params, jsonl))
                    state = sql_index.index(
                        INDEX_SQL, conn, sid, params[0], rows_from,  # type: ignore[arg-type]
                        params[-PARAMS_PER_ROW] + 1,  # type: ignore[operator]
                        known=known)
                    sql_index.catch_up_sessions(INDEX_SQL, conn, [s for s in due if s != sid])
                if changes:
                    apply_changes(conn, sid, changes)
            if due is not None:
                self._states[sid] = state
                self._trail.settle(due)
            self._written.add(sid)

    def rewrite(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes) -> None:
        """Replace the session's rows with ``events``, and its ``sessions`` row with
        ``header`` (as a JSONL rewrite writes the header given): a repair that cuts from
        seq 0, one transaction (:meth:`commit_repair`), which drops the projections' rows
        of the old log (the store folds the new one's)."""
        self._replace(header, 0, events, jsonl, header_row(header))

    def commit_repair(self, header: SessionHeader, torn: object | None,
                      closers: Sequence[Event], jsonl: bytes) -> None:
        """Delete the rows from seq ``torn`` on (iff it is not ``None``: 0 is a marker),
        then insert the ``closers``; one transaction."""
        self._replace(header, torn, closers, jsonl, None)

    def _replace(self, header: SessionHeader, torn: object | None,
                 closers: Sequence[Event], jsonl: bytes, head: Any) -> None:
        if torn is not None and type(torn) is not int:
            msg = f"a SQLite torn marker is a seq (int), got {torn!r}"
            raise TypeError(msg)
        params, kept = batch_rows(header.id, closers, jsonl)
        if torn is None and not params:
            return
        lines = batch_lines(params, jsonl) if self._indexed else None
        with self._lock, self._transaction() as conn:
            self._states.pop(header.id, None)
            if head is not None:  # a rewrite
                conn.execute(UPSERT_SESSION, head)
                drop(PROJECTION_SQL, conn, header.id)
            if torn is not None:
                conn.execute(DELETE_TAIL, (header.id, torn))
            insert_rows(conn, header.id, params)
            insert_kept(conn, header.id, params, kept)
            if lines is not None:
                # The index is cut back with the rows (sql_index.sync: a state past the first
                # closer), and the closers indexed after what is left.
                first = params[0] if params else torn
                end = params[-PARAMS_PER_ROW] + 1 if params else torn  # type: ignore[operator]
                sql_index.index(INDEX_SQL, conn, header.id, first,  # type: ignore[arg-type]
                                functools.partial(index_lines, lines),
                                end, cut=torn is not None)  # type: ignore[arg-type]

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
        return lock_path(self._lock_dir, session_id)

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
            return MemoryLock(self._memory_locks, session_id)
        fd = -1
        for _ in range(LOCK_ATTEMPTS):
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
            lock_or_close(fd, session_id, path)
            if same_file(fd, path):
                break
            os.close(fd)  # removed by a delete between our open and our flock
            fd = -1
        if fd < 0:
            raise SessionLockedError(session_id, f"lock {path} (removed under us, again "
                                                 f"and again: a delete loop?)")
        lock = FileLock(fd, self._file_locks, path,
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
                return self._conn.execute(SELECT_FOUND, (session_id,)).fetchone() is not None
        except sqlite3.Error:
            return True

    def _url(self) -> str | None:
        """The database's URL (for an error that names the store; none in memory)."""
        return None if self.path == ":memory:" else url_for("sqlite", self.path)

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove the session's ``sessions`` row and every ``events`` row of it in one
        transaction, under its writer lock (:meth:`acquire`), then its lock file (while
        holding it). Rows are matched by the exact id (``=``), never a pattern. The
        database file keeps its size: SQLite reuses the freed pages.

        :raises SessionLockedError: a writer holds the session.
        :raises SessionNotStoredError: no session of this id.
        """
        if not utf8_ok(session_id):
            raise not_found(session_id, self._url())  # no row can hold this id
        with self._lock:
            found = self._conn.execute(SELECT_FOUND, (session_id,)).fetchone()
        if found is None:
            raise not_found(session_id, self._url())
        lock_file = self._lock_file(session_id)
        if dry_run:
            free = (session_id not in self._memory_locks if lock_file is None
                    else lock_is_free(lock_file))
            if not free:
                raise SessionLockedError(
                    session_id, "another writer in this process" if lock_file is None
                    else f"lock {lock_file}")
            with self._lock, self._transaction("BEGIN") as conn:
                measured = conn.execute(SELECT_MEASURE, (session_id,)).fetchone()
            if measured is None:
                raise not_found(session_id, self._url())
            return self._report(measured, lock_file, "would-delete")
        lock = self._acquire(session_id)
        try:
            return self.delete_held(session_id, lock)
        finally:
            lock.release()

    def delete_held(self, session_id: str, lock: WriterLock) -> Deleted:
        """:meth:`delete`, under the session's writer lock the caller took
        (:meth:`acquire`) and releases."""
        lock_file = self._lock_file(session_id)
        with self._lock, self._transaction() as conn:
            measured = conn.execute(SELECT_MEASURE, (session_id,)).fetchone()
            if measured is None:  # deleted meanwhile, by another store
                raise not_found(session_id, self._url())
            conn.execute(DELETE_EVENTS, (session_id,))
            conn.execute(DELETE_SESSION, (session_id,))
            if self._indexed:
                sql_index.forget(INDEX_SQL, conn, session_id)
        if lock_file is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock_file)
        return self._report(measured, lock_file, "deleted")

    def scrub(self) -> str:
        """Make what deletes left unreadable (:func:`~.scrub.scrub_database`): the
        search index merged, the file vacuumed with ``secure_delete`` on, the WAL
        truncated (:class:`~..capabilities.Scrubbable`).

        :raises PersistenceError: the WAL could not be truncated (another connection
            reads): it may still hold what was deleted; the rest was done.
        """
        from .scrub import scrub_database

        if self.path == ":memory:":
            return "an in-memory database: nothing on disk"
        with self._lock:
            left = scrub_database(self._conn, ("dsh_search",) if self._indexed else ())
        done = f"{self.path}: vacuumed, freed pages zeroed"
        if left:  # part of it not done: forget says so in its left
            msg = f"{done}; but {left}"
            raise PersistenceError(msg, session_id="")
        return done + ", its write-ahead log truncated"

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
        """Index what this backend left for the search (:meth:`_catch_up_left`), release
        every writer lock still held and close the database."""
        with self._lock:
            self._catch_up_left()
        for lock in builtins.list(self._file_locks):
            lock.release()
        self._memory_locks.clear()
        with self._lock:
            self._conn.close()
