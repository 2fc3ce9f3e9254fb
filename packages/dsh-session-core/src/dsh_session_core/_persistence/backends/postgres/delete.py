"""The PostgreSQL backend's deleting: a session's rows removed in one transaction.

It runs under the session's writer lease, and tells the session's channel. A mixin of
:class:`~.postgres.backend.PostgresBackend`, which owns the connections and the lease.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

from ...base import Deleted, WriterLock, not_found
from ..sql import index as sql_index
from ..sql.rows import header_of
from .index import INDEX_SQL
from .schema import (
    DELETE_EVENTS,
    DELETE_SESSION,
    NOTIFY,
    SELECT_FOUND,
    SELECT_MEASURE,
    channel_of,
    lock_key,
    text_ok,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresDelete"]


class PostgresDelete:
    """Deleting (:class:`~.postgres.backend.PostgresBackend` sets what is declared here)."""

    _lock: threading.Lock
    _conn: psycopg.Connection[Any]
    _indexed: bool

    if TYPE_CHECKING:
        @property
        def location_url(self) -> str: ...

        def _take(self, session_id: str) -> psycopg.Connection[Any]: ...

        def _connect(self, application: str = ...) -> psycopg.Connection[Any]: ...

        @staticmethod
        def _errors() -> Any: ...

    def delete(self, session_id: str, *, dry_run: bool = False) -> Deleted:
        """Remove the session's ``sessions`` row and every ``events`` row of it in one
        transaction, holding its writer lease (:meth:`acquire`'s advisory lock, taken on
        a connection of its own and released right after), and notify its channel so
        that followers see it go. Rows are matched by the exact id. Nothing else is
        stored for a session: an advisory lock is no row, it ends with its connection.
        The database does not shrink at once: VACUUM reclaims the rows' space.

        :raises SessionLockedError: a writer, on any host, holds the session.
        :raises SessionNotStoredError: no session of this id.
        """
        if not text_ok(session_id):
            raise not_found(session_id, self.location_url)  # no row can hold this id
        with self._lock:
            found = self._conn.execute(SELECT_FOUND, (session_id,)).fetchone()
        if found is None:
            raise not_found(session_id, self.location_url)
        conn = self._take(session_id)
        try:
            return self._remove(conn, session_id, dry_run=dry_run)
        finally:
            with contextlib.suppress(self._errors().Error):
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(session_id),))
            conn.close()

    def delete_held(self, session_id: str, lock: WriterLock) -> Deleted:
        """:meth:`delete`, on the connection of the lease the caller took
        (:meth:`acquire`) and releases."""
        conn = getattr(lock, "conn", None)
        if conn is None:  # not a lease of this backend's: take one for the delete
            return self.delete(session_id)
        return self._remove(conn, session_id, dry_run=False)

    def scrub(self) -> str:
        """``VACUUM`` the tables that hold a session (its rows, its index entries, its
        projection rows), where this role owns them (the server skips the others), on
        a connection of its own (VACUUM runs in no transaction)
        (:class:`~..capabilities.Scrubbable`). A DELETE leaves dead tuples, readable
        in the table's files, until a VACUUM prunes them; what the server keeps beyond
        it (its WAL until recycled, the free space of a page until reused, replicas,
        base backups, archived WAL) is the operator's, and the result says so
        (docs/erasing.md)."""
        conn = self._connect("dsh-session forget")
        try:
            owned = conn.execute(
                "SELECT c.relname FROM pg_class AS c WHERE c.oid = ANY(ARRAY["
                "to_regclass('sessions'), to_regclass('events'), to_regclass('search_docs'),"
                " to_regclass('search_state'), to_regclass('dsh_projection_rows'),"
                " to_regclass('dsh_projection_marks')]) AND pg_has_role(c.relowner, 'USAGE')"
                " ORDER BY c.relname").fetchall()
            names = [str(name) for (name,) in owned]
            for name in names:  # (a name of the catalog's, of our own fixed tables)
                conn.execute(f'VACUUM "{name}"')
        finally:
            conn.close()
        done = (f"VACUUM of {', '.join(names)}" if names else
                "no VACUUM: this role owns none of the tables (ask their owner)")
        return (f"{self.location_url}: rows deleted; {done}. The server keeps what it "
                f"keeps: freed space in its pages until reused, its WAL until recycled, "
                f"replicas, backups and archived WAL (docs/erasing.md)")

    def _remove(self, conn: psycopg.Connection[Any], session_id: str, *,
                dry_run: bool) -> Deleted:
        with conn.transaction():
            row = conn.execute(SELECT_MEASURE, {"sid": session_id}).fetchone()
            if row is None:  # deleted meanwhile, by another store
                raise not_found(session_id, self.location_url)
            if not dry_run:
                conn.execute(DELETE_EVENTS, (session_id,))
                conn.execute(DELETE_SESSION, (session_id,))
                if self._indexed:
                    sql_index.forget(INDEX_SQL, conn, session_id)
                conn.execute(NOTIFY, (channel_of(session_id), "delete"))
        from ...._schema.codec import ENCODER

        header = header_of(row[:6])
        events, size, last = int(row[6]), int(row[7]), row[8]
        where = self.location_url
        return Deleted(
            header.id, "would-delete" if dry_run else "deleted", where,
            (f"{where}: the sessions row and {events} events row(s)",),
            len(ENCODER.encode(header)) + 1 + size, events, header,
            None if last is None else int(last))
