"""The JSONL store's projection sidecar: every session's projection rows in one SQLite
database beside the logs, written just after them.

A JSONL store keeps the rows of its projections (:mod:`~.._persistence.rows`) in one
database at its root (where, and how it is opened: :mod:`.sidecar_file`). One database
per store, not a file per session: a read by key, by key range or newest first is one
indexed query (it costs what it returns), a flush writes its rows in one small
transaction without an fsync, and a listing reads every session's summary row in one
query. Keys are stored as their UTF-8 bytes (lone surrogates too), compared as bytes:
code-point order, the order rows are read in on every backend.

The log is the only truth; the sidecar is derived data, which readers check before they
trust it (each projection's mark: :mod:`~.._persistence.projections.read`). So:

- **The log first.** A flush appends its batch durably (as without projections), then
  writes its rows in one transaction. A writer killed in between, a power loss taking
  the last transactions, a release that knows no projection: the rows are behind the
  log, and readers fold the log's tail on top of them.
- **A sidecar that cannot be written never fails a flush** (a read-only folder, a
  database locked past the busy timeout, a newer release's sidecar): the rows are left
  behind. What this backend could not write it remembers (``Sidecar._failed``): it
  never adds a later batch to those rows, which would make them look current while
  they miss a batch; it drops them instead (readers then fold the log). When the
  session's writer lock is taken again, its writer reads the marks anew, and catches
  the rows up (or rebuilds them).
- **A damaged sidecar is replaced**: a file that is no SQLite database, a malformed one,
  another database, is removed by the next writer that meets it and made anew, empty;
  readers fold meanwhile. A sidecar replaced under a running writer (removed, repaired
  by another process) is noticed at its next call (one ``stat``): the rows it wrote
  there are gone, and it adds to none of the new file's.
- **Readers never write**: a reader opens an existing sidecar and never makes one; on a
  store it cannot write, or a sidecar it cannot read, it folds the logs.
- **Deleting a session removes its rows** (before its files, under its writer lock: a
  session whose rows cannot be removed is not deleted), and a rewrite drops them first.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from ....errors import PersistenceError
from ...rows import RowChanges, RowQuery
from .sidecar_file import Foreign, Unusable, code, damaged, identity, open_file, remove_damaged

if TYPE_CHECKING:
    import sqlite3

    from ...._schema.header import SessionHeader
    from ....events import Event

__all__ = ["Sidecar", "SidecarRows"]

#: After a write found the database locked past the busy timeout, how long writes
#: leave their rows behind without waiting again (a process holding the database
#: would make every flush wait).
_BUSY_PAUSE: Final = 30.0
#: Keys or session ids per ``IN (...)`` (below SQLite's oldest limit of variables).
_CHUNK: Final = 500
#: How many sessions' written projections a backend remembers (what it no longer adds
#: to when the file is replaced under it): a bound on a long-lived writer's memory.
_WRITTEN_KEPT: Final = 10_000


def _key(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


def _text(key: bytes) -> str:
    return key.decode("utf-8", "surrogatepass")


class Sidecar:
    """The sidecar of the store at ``root`` (see the module): one connection, opened on
    demand, shared by the backend's threads under a lock, closed by :meth:`close`.

    :ivar folder: :data:`~.sidecar_file.SIDECAR_DIR` in the root.
    :ivar path: the database.
    """

    def __init__(self, root: str) -> None:
        from .sidecar_file import SIDECAR_DIR, SIDECAR_FILE

        self.folder = os.path.join(root, SIDECAR_DIR)
        self.path = os.path.join(self.folder, SIDECAR_FILE)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        #: The open database's file (device, inode), its process, and whether it was
        #: opened to write.
        self._file: tuple[int, int] | None = None
        self._pid = 0
        self._writable = False
        #: The projections, by session, whose rows this backend could not write: behind
        #: what the session's writer believes, so never added to (dropped at the next
        #: chance), until the session's writer lock is taken anew (:meth:`forget`).
        self._failed: dict[str, set[str]] = {}
        #: The projections, by session, whose rows this backend wrote to the open
        #: database (the most recent :data:`_WRITTEN_KEPT` sessions).
        self._written: dict[str, set[str]] = {}
        self._busy_until = 0.0

    # -- the connection --

    def _current(self, *, write: bool) -> sqlite3.Connection | None:
        """The open connection, (re)opened when the file at the path is not the one it
        opened (removed, replaced) or a write needs what a reader opened; ``None``: no
        sidecar to read. Called under the lock.

        :raises: as :func:`~.sidecar_file.open_file` (``write``: it cannot be written).
        """
        if self._pid != os.getpid():
            self._conn = None  # a forked child: the parent's connection is not its own
        now = identity(self.path)
        conn = self._conn
        if conn is not None and now == self._file and (self._writable or not write):
            return conn
        if conn is not None and now != self._file:
            self._lost()  # not the file this backend wrote its rows to
        self.close_connection()
        opened = open_file(self.folder, self.path, write=write)
        if opened is None:
            return None
        self._conn, self._file = opened
        self._pid, self._writable = os.getpid(), write
        return self._conn

    def _lost(self) -> None:
        """The rows this backend wrote are not in the file at the path (any more)."""
        for sid, names in self._written.items():
            self._failed.setdefault(sid, set()).update(names)
        self._written.clear()

    def _fail(self, sid: str, names: Iterable[str]) -> None:
        self._failed.setdefault(sid, set()).update(names)

    def _replace_damaged(self) -> None:
        """Close and remove the damaged database (:func:`~.sidecar_file.remove_damaged`).
        Called under the lock; the next write makes it anew."""
        file = self._file if self._conn is not None else identity(self.path)
        self.close_connection()
        self._lost()
        remove_damaged(self.folder, self.path, file)

    def close_connection(self) -> None:
        """Close the connection (of this process), if open. Called under the lock."""
        conn, self._conn, self._file, self._writable = self._conn, None, None, False
        if conn is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close the connection; the sidecar stays usable (it reopens on demand)."""
        with self._lock:
            self.close_connection()

    # -- writing --

    def write(self, session_id: str, changes: Sequence[RowChanges], *,
              strict: bool = False) -> bool:
        """Apply ``changes`` to the session's rows, in one transaction; whether they
        were. A change that adds to rows this backend could not write before drops
        them instead, and one that adds to rows the database does not hold (removed,
        replaced) is left out: rows are never made to look current while they miss a
        batch. A damaged database is replaced, and written anew.

        :param strict: raise rather than leave the rows behind.
        :raises PersistenceError: (``strict``) the sidecar cannot be written.
        """
        import sqlite3

        with self._lock:
            for attempt in (1, 2):
                try:
                    if time.monotonic() < self._busy_until:
                        msg = "locked by another process a moment ago"
                        raise Unusable(msg)
                    conn = self._current(write=True)
                    assert conn is not None
                    self._apply(conn, session_id, changes)
                    return True
                except (sqlite3.Error, OSError, Unusable, Foreign) as exc:
                    if attempt == 1 and damaged(exc):
                        self._replace_damaged()
                        continue
                    self._fail(session_id, (c.name for c in changes))
                    if code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                        self._busy_until = time.monotonic() + _BUSY_PAUSE
                    if strict:
                        raise self._error(session_id, "written", exc) from exc
                    return False
        raise AssertionError  # pragma: no cover - the loop returns or raises

    def _apply(self, conn: sqlite3.Connection, sid: str, changes: Sequence[RowChanges]
               ) -> None:
        conn.execute("BEGIN IMMEDIATE")
        failed = self._failed.get(sid, ())
        written: list[str] = []
        try:
            for c in changes:
                if not c.rebuild:
                    if c.name in failed:
                        self._drop(conn, sid, c.name)
                        continue
                    if conn.execute("SELECT 1 FROM marks WHERE session_id = ? AND "
                                    "projection = ?", (sid, c.name)).fetchone() is None:
                        continue  # no rows to add to: readers fold, a rebuild makes them
                self._change(conn, sid, c)
                written.append(c.name)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(Exception):
                    conn.execute("ROLLBACK")
            raise
        if failed:
            failed.difference_update(c.name for c in changes)
            if not failed:
                del self._failed[sid]
        if written:  # the most recently written last
            self._written[sid] = self._written.pop(sid, set()) | set(written)
            if len(self._written) > _WRITTEN_KEPT:
                del self._written[next(iter(self._written))]

    @staticmethod
    def _change(conn: sqlite3.Connection, sid: str, c: RowChanges) -> None:
        where = (sid, c.name)
        if c.rebuild or c.clear:
            conn.execute("DELETE FROM rows WHERE session_id = ? AND projection = ?", where)
        gone = [(sid, c.name, _key(k)) for k, row in c.rows.items() if row is None]
        if gone:
            conn.executemany("DELETE FROM rows WHERE session_id = ? AND projection = ? AND "
                             "key = ?", gone)
        put = [(sid, c.name, _key(k), row) for k, row in c.rows.items() if row is not None]
        if put:
            conn.executemany("INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?)", put)
        if c.rebuild:
            conn.execute("INSERT OR REPLACE INTO marks VALUES (?, ?, ?, ?)",
                         (sid, c.name, c.mark, c.summary if c.summary_set else None))
        elif c.summary_set:
            conn.execute("UPDATE marks SET mark = ?, summary = ? WHERE session_id = ? AND "
                         "projection = ?", (c.mark, c.summary, sid, c.name))
        else:
            conn.execute("UPDATE marks SET mark = ? WHERE session_id = ? AND "
                         "projection = ?", (c.mark, sid, c.name))

    @staticmethod
    def _drop(conn: sqlite3.Connection, sid: str | None, name: str | None = None) -> None:
        where = ""
        args: tuple[str, ...] = ()
        if sid is not None:
            where, args = " WHERE session_id = ?", (sid,)
            if name is not None:
                where, args = " WHERE session_id = ? AND projection = ?", (sid, name)
        conn.execute("DELETE FROM rows" + where, args)
        conn.execute("DELETE FROM marks" + where, args)

    def drop(self, session_id: str | None) -> None:
        """Remove every row and mark of the session (``None``: of every session); a
        sidecar that is not this release's to write (damaged, another database, a newer
        release's) is removed whole. Nothing to do where there is no sidecar.

        :raises PersistenceError: they cannot be removed (the sidecar is locked past
            :data:`BUSY_SECONDS`, or cannot be written).
        """
        with self._lock:
            if self._conn is None and identity(self.path) is None:
                self._forget(session_id)
                return
            import sqlite3

            try:
                conn = self._current(write=True)
                assert conn is not None
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._drop(conn, session_id)
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(Exception):
                        conn.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, OSError, Unusable, Foreign) as exc:
                if not (damaged(exc) or isinstance(exc, Unusable)):
                    raise self._error(session_id, "removed", exc) from exc
                self._replace_damaged()  # the whole file, then: derived data
                if identity(self.path) is not None:
                    raise self._error(session_id, "removed", exc) from exc
            self._forget(session_id)

    def scrub(self) -> str:
        """Make the rows earlier drops removed unreadable in the sidecar's files
        (:func:`~..sqlite.scrub.scrub_database`: vacuumed, freed pages zeroed, its WAL
        truncated); what was done, for people.

        :raises PersistenceError: it cannot be vacuumed (busy past
            :data:`BUSY_SECONDS`, read-only), or its WAL could not be truncated
            (another connection reads: the rest was done).
        """
        import sqlite3

        from ..sqlite.scrub import scrub_database

        with self._lock:
            if self._conn is None and identity(self.path) is None:
                return "no projection sidecar"
            try:
                conn = self._current(write=True)
                assert conn is not None
                left = scrub_database(conn)
            except (sqlite3.Error, OSError, Unusable, Foreign) as exc:
                raise self._error(None, "scrubbed", exc) from exc
        if left:  # part of it not done: forget says so in its left
            msg = f"{self.path}: vacuumed; but {left}"
            raise PersistenceError(msg, session_id="")
        return f"{self.path}: vacuumed, its write-ahead log truncated"

    def _forget(self, session_id: str | None) -> None:
        for kept in (self._failed, self._written):
            if session_id is None:
                kept.clear()
            else:
                kept.pop(session_id, None)

    def forget(self, session_id: str) -> None:
        """What this backend remembers of the session's rows, forgotten: its writer lock
        was just taken, so no writer of this process holds a belief about them (a
        writer reads the marks when it takes a session: rows left behind are then
        caught up, not dropped)."""
        if session_id in self._failed or session_id in self._written:
            with self._lock:
                self._forget(session_id)

    def _error(self, session_id: str | None, done: str, exc: BaseException
               ) -> PersistenceError:
        whose = "every session" if session_id is None else f"session {session_id!r}"
        return PersistenceError(
            f"the projection rows of {whose} in {self.path} cannot be {done} "
            f"({type(exc).__name__}: {exc}); nothing else was changed: retry, or remove "
            f"the folder {self.folder} (derived data: reads fold the logs until writes "
            f"rebuild it)", session_id=session_id or "")

    # -- reading --

    def _reading(self) -> sqlite3.Connection | None:
        """The connection to read with, or ``None`` (no sidecar, or not one to trust).
        Called under the lock."""
        import sqlite3

        try:
            return self._current(write=False)
        except (sqlite3.Error, OSError):
            return None

    def marks(self, session_id: str) -> dict[str, bytes]:
        """The stored mark of each projection of the session, but those this backend
        could not write (dropped first, when it can: see :meth:`write`); ``{}`` where
        the sidecar cannot be read."""
        import sqlite3

        with self._lock:
            behind = set(self._failed.get(session_id, ()))
            # Dropped first, but not waiting for a database found locked a moment ago.
            paused = time.monotonic() < self._busy_until
            for name in [] if paused else sorted(behind):
                with contextlib.suppress(Exception):
                    conn = self._current(write=True)
                    assert conn is not None
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        self._drop(conn, session_id, name)
                        conn.execute("COMMIT")
                    except BaseException:
                        with contextlib.suppress(Exception):
                            conn.execute("ROLLBACK")
                        raise
                    self._failed[session_id].discard(name)
                    if not self._failed[session_id]:
                        del self._failed[session_id]
                    behind.discard(name)
            conn = self._reading()
            if conn is None:
                return {}
            try:
                found = conn.execute("SELECT projection, mark FROM marks WHERE "
                                     "session_id = ?", (session_id,)).fetchall()
            except sqlite3.Error:
                return {}
        return {name: mark for name, mark in found if name not in behind}

    def rows(self, session_id: str, name: str, query: RowQuery
             ) -> builtins.list[tuple[str, bytes]]:
        """The rows ``query`` asks for, in its order (see :class:`RowQuery`).

        :raises PersistenceError: the sidecar cannot be read (after its marks were).
        """
        import sqlite3

        where = "session_id = ? AND projection = ?"
        args: list[Any] = [session_id, name]
        with self._lock:
            # The connection the view's marks were read with, though the file was
            # replaced since: its rows are the ones those marks describe.
            conn = self._conn if self._conn is not None and self._pid == os.getpid() \
                else self._reading()
            try:
                if conn is None:
                    msg = "it is gone"
                    raise OSError(msg)
                if query.keys is not None:
                    found = self._by_keys(conn, where, args, query.keys)
                    found.sort(reverse=query.newest_first)
                    return found if query.limit is None else found[:query.limit]
                if query.start is not None:
                    where += " AND key >= ?"
                    args.append(_key(query.start))
                if query.stop is not None:
                    where += " AND key < ?"
                    args.append(_key(query.stop))
                order = "DESC" if query.newest_first else "ASC"
                sql = f"SELECT key, row FROM rows WHERE {where} ORDER BY key {order}"
                if query.limit is not None:
                    sql += " LIMIT ?"
                    args.append(query.limit)
                return [(_text(k), row) for k, row in conn.execute(sql, args)]
            except (sqlite3.Error, OSError) as exc:
                raise self._error(session_id, "read", exc) from exc

    @staticmethod
    def _by_keys(conn: sqlite3.Connection, where: str, args: list[Any],
                 keys: Iterable[str]) -> builtins.list[tuple[str, bytes]]:
        wanted = sorted({_key(k) for k in keys})
        found: list[tuple[str, bytes]] = []
        for at in range(0, len(wanted), _CHUNK):
            chunk = wanted[at:at + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            found += [(_text(k), row) for k, row in conn.execute(
                f"SELECT key, row FROM rows WHERE {where} AND key IN ({marks})",
                [*args, *chunk])]
        return found

    def summaries(self, name: str, session_ids: Sequence[str] | None
                  ) -> builtins.list[tuple[str, bytes, bytes]]:
        """``(session, mark, summary)`` of the sessions with a summary row of ``name``
        (of ``session_ids`` only, when given); ``[]`` where the sidecar cannot be read
        (readers then fold)."""
        import sqlite3

        sql = ("SELECT session_id, mark, summary FROM marks WHERE projection = ? AND "
               "summary IS NOT NULL")
        with self._lock:
            behind = {s for s, names in self._failed.items() if name in names}
            conn = self._reading()
            if conn is None:
                return []
            try:
                if session_ids is None:
                    found = conn.execute(sql, (name,)).fetchall()
                else:
                    wanted = sorted(set(session_ids))
                    found = []
                    for at in range(0, len(wanted), _CHUNK):
                        chunk = wanted[at:at + _CHUNK]
                        found += conn.execute(
                            f"{sql} AND session_id IN ({', '.join('?' * len(chunk))})",
                            [name, *chunk]).fetchall()
            except sqlite3.Error:
                return []
        return [(sid, mark, summary) for sid, mark, summary in found if sid not in behind]


class SidecarRows:
    """The :class:`~.._persistence.capabilities.Projecting` capability of
    :class:`~.jsonl.backend.JsonlBackend` (a mixin; the compact backend inherits it): the
    log through ``append_batch``, then the rows in its :class:`Sidecar`."""

    _sidecar: Sidecar

    if TYPE_CHECKING:
        def append_batch(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool) -> None: ...

    def append_projected(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool,
                         changes: Sequence[RowChanges]) -> None:
        """``append_batch`` (durable, or raising as it does), then the rows' changes
        in one sidecar transaction, which never fails the append: rows it cannot
        write are left behind the log (see :mod:`.sidecar`)."""
        self.append_batch(header, events, jsonl, materialized)
        self._sidecar.write(header.id, changes)

    def write_rows(self, header: SessionHeader, changes: Sequence[RowChanges]) -> None:
        """:raises PersistenceError: the sidecar cannot be written."""
        self._sidecar.write(header.id, changes, strict=True)

    def projection_marks(self, session_id: str) -> dict[str, bytes]:
        return self._sidecar.marks(session_id)

    def projection_rows(self, session_id: str, name: str, query: RowQuery
                        ) -> builtins.list[tuple[str, bytes]]:
        return self._sidecar.rows(session_id, name, query)

    def projection_summaries(self, name: str, session_ids: Sequence[str] | None = None
                             ) -> builtins.list[tuple[str, bytes, bytes]]:
        return self._sidecar.summaries(name, session_ids)

    def drop_projections(self, session_id: str | None) -> None:
        """:raises PersistenceError: the sidecar cannot be written."""
        self._sidecar.drop(session_id)
