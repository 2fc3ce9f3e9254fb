"""The PostgreSQL backend's reads that never write.

Where it is, listing with counts, a session's lines by seq range or by type, its tail,
and following it (the NOTIFY follower is :mod:`.follow`'s). A mixin of
:class:`~.postgres.backend.PostgresBackend`, which owns the shared connection and its
lock.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import AsyncIterator, Collection, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ...._schema.header import SessionHeader
from ....events import Event
from ...base import LogNews, LogTail, SessionSummary, continued
from ..sql.rows import header_of, row_line, summaries_in_order
from . import follow as postgres_follow
from .schema import (
    SELECT_FOUND,
    SELECT_HEADERS,
    SELECT_LAST,
    SELECT_RANGE,
    SELECT_SUMMARIES,
    SELECT_SUMMARIES_OF,
    SELECT_TYPES,
    database_of,
    text_ok,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresReads"]


class PostgresReads:
    """The reads (:class:`~.postgres.backend.PostgresBackend` sets what is declared here)."""

    url: str
    _lock: threading.Lock
    _conn: psycopg.Connection[Any]

    if TYPE_CHECKING:
        @property
        def location_url(self) -> str: ...

        def _connect(self, application: str = ...) -> psycopg.Connection[Any]: ...

        async def _aconnect(self, application: str = ...) -> psycopg.AsyncConnection[Any]: ...

    def list(self) -> builtins.list[SessionHeader]:
        """Every ``sessions`` row as a header, oldest first; no event is read."""
        with self._lock:
            rows = self._conn.execute(SELECT_HEADERS).fetchall()
        return [header_of(row) for row in rows]

    def location(self, header: SessionHeader) -> str:
        """The database's URL (without password); ids are global in it."""
        return self.location_url

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
