"""The SQLite backend's reads that never write.

Where it is, listing with counts, a session's lines by seq range or by type, its tail,
and following it by polling. A mixin of :class:`~.sqlite.backend.SqliteBackend`, which
owns the connection, its lock and its transactions.

The reads of lines (``read_lines``, ``lines_since``, ``lines_of_types``) are one
statement each, whose lines SQLite builds as the loader's and joins into one string
(:func:`~.sqlite.schema.lines_sql`).
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ...._schema.codec import ENCODER
from ...._schema.header import SessionHeader
from ....events import Event
from ...base import POLL_SECONDS, LogNews, LogTail, SessionSummary, continued
from ..sql.index import IndexState
from ..sql.rows import header_of, row_line, summaries_in_order, utf8_ok
from .schema import (
    LINES_AFTER,
    LINES_OF_TYPES,
    LINES_SINCE,
    SELECT_AFTER,
    SELECT_FOUND,
    SELECT_HEADERS,
    SELECT_LAST,
    SELECT_RANGE,
    SELECT_SUMMARIES,
    SELECT_SUMMARIES_OF,
    SELECT_TAIL,
    SELECT_TYPES,
)

__all__ = ["SqliteReads"]


class SqliteReads:
    """The backend's reads (:class:`~.sqlite.backend.SqliteBackend` sets what is declared
    here)."""

    path: str
    _lock: threading.Lock
    _conn: sqlite3.Connection
    _indexed: bool
    _held: set[str]
    _memory_locks: set[str]
    _states: dict[str, IndexState]

    if TYPE_CHECKING:
        def _transaction(self, begin: str = "BEGIN IMMEDIATE"
                         ) -> AbstractContextManager[sqlite3.Connection]: ...

    @property
    def journal_mode(self) -> str:
        """The journal mode in effect (``"memory"`` for a ``:memory:`` database)."""
        with self._lock:
            (mode,) = self._conn.execute("PRAGMA journal_mode").fetchone()
        return str(mode)

    def location(self, header: SessionHeader) -> str:
        """The database file (``:memory:`` for an in-memory one); ids are global in it."""
        return self.path

    def exists(self) -> bool:
        """Always: the database was opened (or created) with the backend."""
        return True

    def store_identity(self) -> Hashable | None:
        """The database file, resolved; ``None`` for ``:memory:``."""
        return None if self.path == ":memory:" else ("sqlite", os.path.realpath(self.path))

    def list(self) -> builtins.list[SessionHeader]:
        """Every ``sessions`` row as a header (a row exists iff the session has an
        event); no event is read. No particular order."""
        with self._lock:
            rows = self._conn.execute(SELECT_HEADERS).fetchall()
        return [header_of(row) for row in rows]

    # --- reading without writing ------------------------------------------------------

    def summaries(self) -> builtins.list[SessionSummary]:
        """Every session with its counts, in one query (an aggregate over the events'
        primary-key index); no JSON is decoded. Never torn (a batch is a transaction)."""
        with self._lock:
            rows = self._conn.execute(SELECT_SUMMARIES).fetchall()
        return [SessionSummary(header_of(row[:6]), row[6], row[7], row[8]) for row in rows]

    def summaries_of(self, headers: Sequence[SessionHeader]) -> builtins.list[SessionSummary]:
        """:meth:`summaries` of just these sessions, in their order: one query, which
        reads only their rows (a page of ``ls`` costs the same in any store)."""
        ids = ENCODER.encode([h.id for h in headers if utf8_ok(h.id)]).decode()
        with self._lock:
            rows = self._conn.execute(SELECT_SUMMARIES_OF, (ids,)).fetchall()
        return summaries_in_order(headers, rows)

    def read_lines(self, session_id: str, after: int, limit: int | None
                   ) -> builtins.list[bytes] | None:
        """The rows after seq ``after`` (at most ``limit``) by the primary key, as log
        lines: a key range, whatever the session's length, read in one statement
        (:func:`~.sqlite.schema.lines_sql`)."""
        if not utf8_ok(session_id):
            return None  # no row can hold this id
        return self._lines(LINES_AFTER, (session_id, after,
                                          -1 if limit is None else max(limit, 0)),
                           SELECT_RANGE)

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
            # reads it no more (:func:`~.sql.index.index`'s ``known``).
            state: builtins.list[Any] = []
            lines = self._lines(LINES_SINCE, (sid, last.seq - 1, -1), SELECT_RANGE, state)
            with self._lock:
                if state and state[0] is not None and lines is not None:
                    self._states[sid] = (state[0], state[1])
                else:
                    self._states.pop(sid, None)
        return None if lines is None else continued(lines, last)

    def lines_of_types(self, session_id: str, types: Collection[str]
                       ) -> builtins.list[bytes] | None:
        """:func:`~.base.lines_of_types_of`: the rows of those types (by the ``type``
        column), as log lines, in one statement (:func:`~.sqlite.schema.lines_sql`)."""
        if not utf8_ok(session_id):
            return None  # no row can hold this id
        wanted = ENCODER.encode([t for t in types if utf8_ok(t)]).decode()
        return self._lines(LINES_OF_TYPES, (session_id, wanted), SELECT_TYPES)

    def _lines(self, sql: str, params: tuple[object, ...], rows_sql: str,
               also: builtins.list[Any] | None = None) -> builtins.list[bytes] | None:
        """The lines ``sql`` (:func:`~.sqlite.schema.lines_sql`) builds, or ``None`` when
        the session is not stored. Where SQLite's lines are not one per row (a column edited by hand
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
                if conn.execute(SELECT_FOUND, (params[0],)).fetchone() is None:
                    return None
                rows = conn.execute(rows_sql, params).fetchall()
        return [row_line(row) for row in rows]

    def tail_lines(self, session_id: str, count: int) -> LogTail | None:
        """The last ``count`` rows by the primary key, as log lines; the position is the
        last stored seq (``-1`` when none is)."""
        if not utf8_ok(session_id):
            return None  # no row can hold this id
        with self._lock, self._transaction("BEGIN") as conn:  # one snapshot
            if conn.execute(SELECT_FOUND, (session_id,)).fetchone() is None:
                return None
            rows = conn.execute(SELECT_TAIL, (session_id, max(count, 0))).fetchall()
            (last,) = conn.execute(SELECT_LAST, (session_id,)).fetchone()
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
                rows = self._conn.execute(SELECT_AFTER, (session_id, last)).fetchall()
                top = None if rows else self._conn.execute(
                    SELECT_LAST, (session_id,)).fetchone()[0]
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
