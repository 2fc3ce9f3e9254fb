"""The SQLite backend's search: the index caught up first, then asked.

A batch may leave its events unindexed (:mod:`.sql.trail`), and a writer without the
index (the reference) never indexes them: the search catches the index up first, in a
write transaction of its own, then answers from it in one read snapshot; when it
cannot write (a read-only database, or another connection holding the write lock
longer than :data:`CATCH_UP_WAIT_MS`), the rows past the index are checked one by one
instead (:func:`~.sql.index.behind`). Either way the answer is the one a fully indexed
database gives. A mixin of :class:`~.sqlite.backend.SqliteBackend`, which owns the
connection, its lock and its transactions.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final

from ..sql import index as sql_index
from ..sql.search_index import Behind
from ..sql.trail import Trail
from .index import INDEX_SQL
from .schema import SELECT_ANY, busy, read_only

if TYPE_CHECKING:
    from ...._search import SearchHit, SearchQuery

__all__ = ["CATCH_UP_WAIT_MS", "SqliteSearch"]

#: How long a search waits for the write lock to catch the index up (SQLite's busy
#: timeout, in ms), instead of the connection's 5 s: past it, the rows the index lags
#: behind are checked one by one (a few thousand rows at most from each writer of
#: ours, :data:`~.sql.trail.TRAIL_LIMIT`), which takes milliseconds.
CATCH_UP_WAIT_MS: Final = 200


def _refused(exc: Exception) -> bool:
    return read_only(exc) or busy(exc)


class SqliteSearch:
    """The search (:class:`~.sqlite.backend.SqliteBackend` sets what is declared here)."""

    path: str
    _lock: threading.Lock
    _conn: sqlite3.Connection
    _indexed: bool
    _trail: Trail
    _in_step_at: int | None

    if TYPE_CHECKING:
        def _transaction(self, begin: str = "BEGIN IMMEDIATE"
                         ) -> AbstractContextManager[sqlite3.Connection]: ...

    def search(self, query: SearchQuery) -> builtins.list[SearchHit]:
        """Every hit of ``query``, in no order, from the FTS5 index (:mod:`.sql.index`).

        Sessions the index lags behind (batches of this backend's left for the search,
        rows stored by a writer without the index) are indexed first, in one write
        transaction; when the database cannot be written, their rows past the index
        are checked one by one instead, so the answer is complete either way. Every
        candidate is checked by :func:`~.._search.hit_of`.
        """
        types = query.event_types()
        if not types:
            return []  # the type and role filters exclude each other
        trusted = self._indexed and INDEX_SQL.trusted(query)
        with self._lock:
            if self._indexed and (self._trail.lagging
                                  or self._data_version() != self._in_step_at):
                taken = self._trail.taken(query.sessions)
                if sql_index.catch_up(INDEX_SQL, self._conn, query,
                                      read=functools.partial(self._transaction, "BEGIN"),
                                      write=self._catching_up, refused=_refused):
                    self._trail.settle(taken)
            with self._transaction("BEGIN") as conn:  # one snapshot for every query
                # Whatever is still behind (a read-only or busy database, or a writer
                # without the index that committed since): from where, and in which
                # turn. When no other connection has committed since the index was
                # last found in step with every row, and this backend left nothing
                # unindexed since, nothing is: checking it costs a lookup per session.
                conn.execute(SELECT_ANY).fetchall()  # the snapshot begins here
                version = self._data_version()
                if trusted and version == self._in_step_at and not self._trail.lagging:
                    behind: Behind = {}
                else:
                    behind = sql_index.behind(INDEX_SQL, conn, query, self._indexed, trusted)
                    if (trusted and not behind and not query.sessions
                            and not self._trail.lagging):
                        self._in_step_at = version
                found = sql_index.candidates(INDEX_SQL, conn, query, types) if trusted else []
                return sql_index.hits(INDEX_SQL, conn, found, behind, query)

    @contextlib.contextmanager
    def _catching_up(self) -> Iterator[sqlite3.Connection]:
        """The catch-up's write transaction, waiting :data:`CATCH_UP_WAIT_MS` at most
        for the write lock, and in WAL mode committed without a sync (the connection's
        own settings restored after).

        The index is derived from the rows, so its catch-up need not be durable: lost
        to a power cut, it is done again by the next search. WAL keeps the database
        consistent with ``synchronous=NORMAL`` (SQLite's documentation), and the next
        synced commit syncs the catch-up's pages with its own, as the WAL is written
        in order; in the other journal modes a commit without a sync could corrupt
        the file on a power cut, so they sync it as any other."""
        conn = self._conn
        (wait,) = conn.execute("PRAGMA busy_timeout").fetchone()
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        (synchronous,) = conn.execute("PRAGMA synchronous").fetchone()
        conn.execute(f"PRAGMA busy_timeout = {min(int(wait), CATCH_UP_WAIT_MS)}")
        if str(mode).lower() == "wal":
            conn.execute("PRAGMA synchronous = NORMAL")
        try:
            with self._transaction() as held:
                yield held
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(wait)}")
            conn.execute(f"PRAGMA synchronous = {int(synchronous)}")

    def _catch_up_left(self) -> None:
        """Catch up the sessions this backend left unindexed (at most the trail's
        bound): a writer that closes leaves no backlog, so that the one a search meets
        is bounded by the writers still running (and any that died). Best effort: a
        database that cannot be written now, or fails, leaves them to the next search
        (the caller holds the lock)."""
        if not self._trail.lagging or self.path == ":memory:":
            return  # an in-memory database ends with its connection
        taken = self._trail.taken()
        try:
            with self._catching_up() as conn:
                sql_index.catch_up_sessions(INDEX_SQL, conn, builtins.list(taken))
        except sqlite3.Error:
            return
        self._trail.settle(taken)

    def _data_version(self) -> int:
        """SQLite's ``data_version``: it changes when another connection commits (within
        a read transaction, as of its snapshot); this connection's own commits leave it."""
        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
        return int(version)
