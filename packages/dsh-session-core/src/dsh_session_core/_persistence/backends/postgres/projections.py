"""The PostgreSQL backend's projection rows: a batch's changes written in the batch's
one statement, and the reads of the rows, marks and summaries.

The tables are :mod:`.postgres.schema`'s (:data:`~.postgres.schema.PROJECTION_SCHEMA`),
the reads :mod:`.sql.projection_rows`' (shared with SQLite). A flush is one statement,
one round trip (:data:`~.postgres.schema.APPEND`): its changes are added to it as more
data-modifying CTEs (:func:`projected`), each a few arrays unnested (:func:`row_columns`)
and each gated on the events' insert, so that the rows change iff the batch goes in,
atomically, and a remote writer pays no round trip more for them. The CTEs of one
statement see one snapshot and must not change one row twice: so a rebuild's or a
clear's delete spares the keys the batch sets (they are upserted), the keys it removes
are those of projections not emptied, and one projection's changes are merged first
(:func:`~.sql.projection_rows.merged`). A mixin of
:class:`~.postgres.backend.PostgresBackend`, which owns the connections and the leases.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ...._schema.header import SessionHeader
from ....events import Event
from ...rows import RowChanges, RowQuery
from ..sql import projection_rows as shared
from ..sql.projection_rows import MARKS_TABLE, ROWS_TABLE, ProjectionSql
from .schema import Columns, text_ok

if TYPE_CHECKING:
    import psycopg

__all__ = ["PROJECTION_SQL", "PostgresProjections", "Shape", "projected", "row_columns"]

#: The shared reads' PostgreSQL side: a list is bound as an array.
PROJECTION_SQL: Final = ProjectionSql(
    mark="%s", in_list=" = ANY(%s)", bind_list=list, storable=text_ok, backend="PostgreSQL")


class Shape(NamedTuple):
    """Which of the CTEs a batch's changes need (each one's arrays non-empty)."""

    cleared: bool
    gone: bool
    puts: bool
    summed: bool
    marked: bool


def row_columns(changes: Sequence[RowChanges]) -> tuple[Shape, Columns]:
    """The changes as arrays for ``unnest``, and which CTEs they need. A removed
    summary is ``b""`` (stored as NULL: an encoded summary is never empty)."""
    cleared: list[str] = []
    put_names: list[str] = []
    put_keys: list[str] = []
    put_rows: list[bytes] = []
    gone_names: list[str] = []
    gone_keys: list[str] = []
    sum_names: list[str] = []
    sum_marks: list[bytes] = []
    sums: list[bytes] = []
    mark_names: list[str] = []
    marks: list[bytes] = []
    for change in shared.merged(changes):
        name = change.name
        emptied = change.rebuild or change.clear
        if emptied:
            cleared.append(name)
        for key, row in change.rows.items():
            if row is not None:
                put_names.append(name)
                put_keys.append(key)
                put_rows.append(row)
            elif not emptied:  # after a clear, there is nothing to remove
                gone_names.append(name)
                gone_keys.append(key)
        if change.summary_set or change.rebuild:
            sum_names.append(name)
            sum_marks.append(change.mark)
            sums.append(change.summary if change.summary_set and change.summary else b"")
        else:
            mark_names.append(name)
            marks.append(change.mark)
    shape = Shape(bool(cleared), bool(gone_names), bool(put_names), bool(sum_names),
                  bool(mark_names))
    return shape, {
        "pj_cleared": cleared, "pj_put_names": put_names, "pj_put_keys": put_keys,
        "pj_put_rows": put_rows, "pj_gone_names": gone_names, "pj_gone_keys": gone_keys,
        "pj_sum_names": sum_names, "pj_sum_marks": sum_marks, "pj_sums": sums,
        "pj_mark_names": mark_names, "pj_marks": marks}


_PUT_KEYS: Final = "unnest(%(pj_put_names)b::text[], %(pj_put_keys)b::text[])"


def _ctes(shape: Shape, gate: str) -> list[str]:
    """The CTEs of ``shape``, each writing only where ``gate`` holds."""
    ctes = []
    if shape.cleared:
        spare = (f" AND NOT EXISTS (SELECT 1 FROM {_PUT_KEYS} AS p(name, key)"
                 " WHERE p.name = r.projection AND p.key = r.key)") if shape.puts else ""
        ctes.append(
            f"pj_cleared AS (DELETE FROM {ROWS_TABLE} AS r WHERE r.session_id = %(sid)b"
            f" AND r.projection = ANY(%(pj_cleared)b::text[]) AND {gate}{spare})")
    if shape.gone:
        ctes.append(
            f"pj_gone AS (DELETE FROM {ROWS_TABLE} AS r"
            " USING unnest(%(pj_gone_names)b::text[], %(pj_gone_keys)b::text[]) AS g(name, key)"
            f" WHERE r.session_id = %(sid)b AND r.projection = g.name AND r.key = g.key"
            f" AND {gate})")
    if shape.puts:
        ctes.append(
            f"pj_puts AS (INSERT INTO {ROWS_TABLE} (session_id, projection, key, row)"
            " SELECT %(sid)b, p.name, p.key, p.row FROM unnest(%(pj_put_names)b::text[],"
            " %(pj_put_keys)b::text[], %(pj_put_rows)b::bytea[]) AS p(name, key, row)"
            f" WHERE {gate} ON CONFLICT (session_id, projection, key)"
            " DO UPDATE SET row = excluded.row)")
    if shape.summed:
        ctes.append(
            f"pj_summed AS (INSERT INTO {MARKS_TABLE} (session_id, projection, mark, summary)"
            " SELECT %(sid)b, m.name, m.mark, nullif(m.summary, ''::bytea)"
            " FROM unnest(%(pj_sum_names)b::text[], %(pj_sum_marks)b::bytea[],"
            " %(pj_sums)b::bytea[]) AS m(name, mark, summary)"
            f" WHERE {gate} ON CONFLICT (session_id, projection)"
            " DO UPDATE SET mark = excluded.mark, summary = excluded.summary)")
    if shape.marked:
        ctes.append(
            f"pj_marked AS (INSERT INTO {MARKS_TABLE} (session_id, projection, mark)"
            " SELECT %(sid)b, m.name, m.mark"
            " FROM unnest(%(pj_mark_names)b::text[], %(pj_marks)b::bytea[]) AS m(name, mark)"
            f" WHERE {gate} ON CONFLICT (session_id, projection)"
            " DO UPDATE SET mark = excluded.mark)")
    return ctes


#: Where the final SELECT of a batch's statement begins (both APPEND and APPEND_INDEXED
#: end with it): the CTEs of the changes go before it.
_FINAL: Final = "\n    SELECT pg_notify("


@functools.cache
def projected(append: str, shape: Shape) -> str:
    """The batch's statement ``append`` (:data:`~.postgres.schema.APPEND` or
    :data:`~.postgres.index.APPEND_INDEXED`) with the changes' CTEs of ``shape``,
    each gated on the events' insert (``ins``: none when the batch is refused)."""
    head, final, tail = append.rpartition(_FINAL)
    if not final:  # pragma: no cover - a statement this module does not know
        msg = "the batch's statement has no final SELECT pg_notify"
        raise AssertionError(msg)
    ctes = _ctes(shape, "EXISTS (SELECT 1 FROM ins)")
    return head + "".join(",\n    " + cte for cte in ctes) + final + tail


@functools.cache
def _rows_only(shape: Shape) -> str:
    """The changes of ``shape`` alone, one statement (:meth:`write_rows`)."""
    return "WITH " + ",\n    ".join(_ctes(shape, "true")) + "\n    SELECT 1"


class PostgresProjections:
    """The :class:`~..capabilities.Projecting` capability
    (:class:`~.postgres.backend.PostgresBackend` sets what is declared here)."""

    _lock: threading.Lock
    _conn: psycopg.Connection[Any]

    if TYPE_CHECKING:
        def _append_to(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                       materialized: bool, changes: Sequence[RowChanges]) -> None: ...

        def _writer(self, session_id: str
                    ) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]: ...

    def append_projected(self, header: SessionHeader, events: Sequence[Event],
                         jsonl: bytes, materialized: bool,
                         changes: Sequence[RowChanges]) -> None:
        """:meth:`~.postgres.backend.PostgresBackend.append_batch`, with the rows'
        ``changes`` in its one statement: both are written, or neither."""
        self._append_to(header, events, jsonl, materialized, changes)

    def write_rows(self, header: SessionHeader, changes: Sequence[RowChanges]) -> None:
        """Apply ``changes`` to the session's rows alone: one statement, through the
        session's lease connection when this backend holds it.

        :raises UnstorableError: a projection's name or key no text column holds
            (nothing is written)."""
        shared.check_changes(PROJECTION_SQL, header.id, changes)
        if not changes:
            return
        shape, columns = row_columns(changes)
        columns["sid"] = header.id
        with self._writer(header.id) as conn:
            conn.execute(_rows_only(shape), columns)

    def projection_marks(self, session_id: str) -> dict[str, bytes]:
        """The stored mark of each projection the session has rows of."""
        with self._lock:
            return shared.marks(PROJECTION_SQL, self._conn.cursor(binary=True), session_id)

    def projection_rows(self, session_id: str, name: str, query: RowQuery
                        ) -> builtins.list[tuple[str, bytes]]:
        """The rows ``query`` asks for, in its order: one statement on the rows' primary
        key."""
        with self._lock:
            return shared.rows(PROJECTION_SQL, self._conn.cursor(binary=True), session_id,
                               name, query)

    def projection_summaries(self, name: str, session_ids: Sequence[str] | None = None
                             ) -> builtins.list[tuple[str, bytes, bytes]]:
        """``(session id, mark, summary)`` of the sessions with a summary of ``name``."""
        with self._lock:
            return shared.summaries(PROJECTION_SQL, self._conn.cursor(binary=True), name,
                                    session_ids)

    def drop_projections(self, session_id: str | None) -> None:
        """Remove every row and mark of the session (``None``: of every session), in one
        transaction."""
        with self._lock, self._conn.transaction():
            shared.drop(PROJECTION_SQL, self._conn, session_id)
