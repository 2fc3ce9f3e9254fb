"""The SQLite backend's projection rows: a batch's changes written in its transaction,
and the reads of the rows, marks and summaries.

The tables are :mod:`.sqlite.schema`'s (:data:`~.sqlite.schema.PROJECTION_SCHEMA`), the
reads :mod:`.sql.projection_rows`' (shared with PostgreSQL). A batch's changes run in
the transaction that appends its events (:meth:`~.sqlite.backend.SqliteBackend._append`
calls :func:`apply_changes` there), a statement or two per projection: in-process, a
statement costs microseconds, so none is folded into another. A mixin of
:class:`~.sqlite.backend.SqliteBackend`, which owns the connection, its lock and its
transactions.
"""

from __future__ import annotations

import builtins
import functools
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final

from msgspec.json import encode

from ...._schema.header import SessionHeader
from ....events import Event
from ...rows import RowChanges, RowQuery
from ..sql import projection_rows as shared
from ..sql.projection_rows import MARKS_TABLE, ROWS_TABLE, ProjectionSql
from ..sql.rows import utf8_ok

__all__ = ["PROJECTION_SQL", "SqliteProjections", "apply_changes"]


def _json_list(values: list[str]) -> str:
    return encode(values).decode()


#: The shared reads' SQLite side: a list is bound as JSON text, read by ``json_each``.
PROJECTION_SQL: Final = ProjectionSql(
    mark="?", in_list=" IN (SELECT value FROM json_each(?))", bind_list=_json_list,
    storable=utf8_ok, backend="SQLite")

_DELETE_ROWS: Final = f"DELETE FROM {ROWS_TABLE} WHERE session_id = ? AND projection = ?"
_DELETE_KEYS: Final = (f"{_DELETE_ROWS} AND key IN (SELECT value FROM json_each(?))")
# The mark, and the summary with it (set, or dropped by a rebuild), or the mark alone
# (the summary as it was).
_SET_MARK_AND_SUMMARY: Final = (
    f"INSERT INTO {MARKS_TABLE} (session_id, projection, mark, summary) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (session_id, projection) DO UPDATE SET"
    " mark = excluded.mark, summary = excluded.summary")
_SET_MARK: Final = (
    f"INSERT INTO {MARKS_TABLE} (session_id, projection, mark) VALUES (?, ?, ?)"
    " ON CONFLICT (session_id, projection) DO UPDATE SET mark = excluded.mark")
#: Rows per multi-row upsert: 2 parameters each (and the session and projection once).
_ROWS_PER_PUT: Final = 500


@functools.cache
def _put_sql(count: int) -> str:
    # ?1 and ?2 (the session, the projection) are bound once; each row's key and row
    # take the next numbers. An upsert changes a row in place.
    return (f"INSERT INTO {ROWS_TABLE} (session_id, projection, key, row) VALUES "
            + ",".join(["(?1, ?2, ?, ?)"] * count)
            + " ON CONFLICT (session_id, projection, key) DO UPDATE SET row = excluded.row")


def apply_changes(conn: sqlite3.Connection, session_id: str,
                  changes: Sequence[RowChanges]) -> None:
    """Apply ``changes`` to the session's rows, in the caller's transaction (checked
    before it: :func:`~.sql.projection_rows.check_changes`): a rebuild or a clear drops
    the rows first, then each key's row is set or removed, then the summary and the
    mark are set."""
    for change in changes:
        name = change.name
        emptied = change.rebuild or change.clear
        if emptied:
            conn.execute(_DELETE_ROWS, (session_id, name))
        puts: list[object] = []
        gone: list[str] = []
        for key, row in change.rows.items():
            if row is not None:
                puts += (key, row)
            elif not emptied:  # after a clear, there is nothing to remove
                gone.append(key)
        if gone:
            conn.execute(_DELETE_KEYS, (session_id, name, _json_list(gone)))
        step = 2 * _ROWS_PER_PUT
        for start in range(0, len(puts), step):
            chunk = puts[start:start + step]
            conn.execute(_put_sql(len(chunk) // 2), [session_id, name, *chunk])
        if change.summary_set or change.rebuild:
            conn.execute(_SET_MARK_AND_SUMMARY, (session_id, name, change.mark,
                                                 change.summary if change.summary_set
                                                 else None))
        else:
            conn.execute(_SET_MARK, (session_id, name, change.mark))


class SqliteProjections:
    """The :class:`~..capabilities.Projecting` capability
    (:class:`~.sqlite.backend.SqliteBackend` sets what is declared here)."""

    _lock: threading.Lock
    _conn: sqlite3.Connection

    if TYPE_CHECKING:
        def _transaction(self, begin: str = "BEGIN IMMEDIATE"
                         ) -> AbstractContextManager[sqlite3.Connection]: ...

        def _append(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                    materialized: bool, changes: Sequence[RowChanges]) -> None: ...

    def append_projected(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool,
                         changes: Sequence[RowChanges]) -> None:
        """:meth:`~.sqlite.backend.SqliteBackend.append_batch`, with the rows' ``changes``
        in its transaction: both are written, or neither."""
        self._append(header, events, jsonl, materialized, changes)

    def write_rows(self, header: SessionHeader, changes: Sequence[RowChanges]) -> None:
        """Apply ``changes`` to the session's rows alone, in one transaction.

        :raises UnstorableError: a projection's name or key no text column holds
            (nothing is written)."""
        shared.check_changes(PROJECTION_SQL, header.id, changes)
        if not changes:
            return
        with self._lock, self._transaction() as conn:
            apply_changes(conn, header.id, changes)

    def projection_marks(self, session_id: str) -> dict[str, bytes]:
        """The stored mark of each projection the session has rows of."""
        with self._lock:
            return shared.marks(PROJECTION_SQL, self._conn, session_id)

    def projection_rows(self, session_id: str, name: str, query: RowQuery
                        ) -> builtins.list[tuple[str, bytes]]:
        """The rows ``query`` asks for, in its order: one statement on the rows' primary
        key."""
        with self._lock:
            return shared.rows(PROJECTION_SQL, self._conn, session_id, name, query)

    def projection_summaries(self, name: str, session_ids: Sequence[str] | None = None
                             ) -> builtins.list[tuple[str, bytes, bytes]]:
        """``(session id, mark, summary)`` of the sessions with a summary of ``name``."""
        with self._lock:
            return shared.summaries(PROJECTION_SQL, self._conn, name, session_ids)

    def drop_projections(self, session_id: str | None) -> None:
        """Remove every row and mark of the session (``None``: of every session), in one
        transaction."""
        with self._lock, self._transaction() as conn:
            shared.drop(PROJECTION_SQL, conn, session_id)
