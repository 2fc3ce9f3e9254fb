"""Projection rows in a SQL database: the tables' reads both backends share, and a
batch's changes checked, merged and turned into what the statements bind.

Two tables of dsh-session's own, beside the events, in SQLite and PostgreSQL alike::

    dsh_projection_rows(session_id, projection, key, row)      one row per key
    dsh_projection_marks(session_id, projection, mark, summary) one per (session, projection)

``key`` compares by code point (UTF-8 bytes: SQLite's ``BINARY``, PostgreSQL's
``COLLATE "C"``), the order :class:`~...rows.RowTable` keeps, so a key range is a range
of the primary key ``(session_id, projection, key)``: a read costs what it returns. The
summary sits in the mark's row (one per session and projection); a partial index of
the marks that have one, by projection, lists a projection's summaries without reading
a session that has none (:data:`SUMMARIES_INDEX`).

What differs between the databases (the parameter mark, how a list is bound, how a
batch's changes are written: SQLite runs a statement per change in the batch's
transaction, PostgreSQL adds them to the batch's one statement) is the backend's:
:class:`ProjectionSql` holds the first two, the backends' ``projections`` modules the
writes. Every function here runs on the connection it is given, in the caller's
transaction if any.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

from ....errors import UnstorableError
from ...rows import RowChanges, RowQuery
from .index import Connection

__all__ = [
    "MARKS_TABLE",
    "ROWS_TABLE",
    "SUMMARIES_INDEX",
    "ProjectionSql",
    "bound",
    "check_changes",
    "drop",
    "marks",
    "merged",
    "rows",
    "summaries",
]

ROWS_TABLE: Final = "dsh_projection_rows"
MARKS_TABLE: Final = "dsh_projection_marks"
#: The marks that have a summary, by projection: a projection's summaries are listed
#: from it alone (the sessions without one are not in it).
SUMMARIES_INDEX: Final = "dsh_projection_summaries"


@dataclasses.dataclass(frozen=True, slots=True)
class ProjectionSql:
    """One database's side of the shared reads.

    :ivar mark: the parameter mark (``?`` or ``%s``).
    :ivar in_list: a test of a column against one parameter holding a list bound by
        :attr:`bind_list` (appended to the column's name).
    :ivar bind_list: a list of strings as :attr:`in_list` takes it.
    :ivar storable: whether a text column can hold a string.
    :ivar backend: the database's name, for messages.
    """

    mark: str
    in_list: str
    bind_list: Callable[[list[str]], object]
    storable: Callable[[str], bool]
    backend: str


def merged(changes: Sequence[RowChanges]) -> list[RowChanges]:
    """``changes`` with those of one projection made one, which applied once leaves the
    rows as applying each in turn does (a statement that writes each row at most once
    needs it; the write path makes one per projection, so this is a copy-free pass-through
    then)."""
    names = [c.name for c in changes]
    if len(set(names)) == len(names):
        return list(changes)
    out: dict[str, RowChanges] = {}
    for change in changes:
        had = out.get(change.name)
        if had is None or change.rebuild:
            out[change.name] = dataclasses.replace(change, rows=dict(change.rows))
            continue
        if change.clear:
            had.clear = True
            had.rows = dict(change.rows)
        else:
            had.rows.update(change.rows)
        if change.summary_set:
            had.summary_set, had.summary = True, change.summary
        had.mark = change.mark
    return list(out.values())


def check_changes(sql: ProjectionSql, session_id: str, changes: Sequence[RowChanges]) -> None:
    """Refuse, before any transaction, a projection name or key no text column holds.

    :raises UnstorableError: naming the projection and the key."""
    storable = sql.storable
    for change in changes:
        if not storable(change.name):
            _refuse(sql, session_id, change.name, "its name", change.name)
        for key in change.rows:
            if not storable(key):
                _refuse(sql, session_id, change.name, "a key", key)


def _refuse(sql: ProjectionSql, session_id: str, name: str, what: str, text: str
            ) -> NoReturn:
    problem = "a NUL character" if "\x00" in text else "a lone surrogate"
    msg = (f'projection "{name}" of session {session_id!r} has {what} holding {problem} '
           f"({text!r}), which the {sql.backend} backend cannot store: its fold must make "
           f"keys of text a database holds")
    raise UnstorableError(msg, session_id=session_id, seq=None)


def bound(sql: ProjectionSql, text: str) -> str:
    """``text`` as a range's bound the database can bind: itself, or (where it holds a
    character no column holds: a lone surrogate, PostgreSQL's NUL) cut before that
    character, with the least storable one above it in its place. Every stored key
    compares with it as with ``text`` (no stored key holds the character), for ``>=``
    and ``<`` alike."""
    if sql.storable(text):
        return text
    for i, ch in enumerate(text):
        if not sql.storable(ch):
            # The least character above it: past the surrogates for one of them, the
            # next code point for NUL (which every column but PostgreSQL's holds).
            return text[:i] + ("\ue000" if "\ud800" <= ch <= "\udfff" else chr(ord(ch) + 1))
    return text  # pragma: no cover - some character is not storable


@functools.cache
def _rows_sql(sql: ProjectionSql, keys: bool, start: bool, stop: bool, newest: bool,
              limit: bool) -> str:
    m = sql.mark
    where = [f"session_id = {m}", f"projection = {m}"]
    if keys:
        where.append("key" + sql.in_list)
    if start:
        where.append(f"key >= {m}")
    if stop:
        where.append(f"key < {m}")
    return (f"SELECT key, row FROM {ROWS_TABLE} WHERE {' AND '.join(where)}"
            f" ORDER BY key{' DESC' if newest else ''}{f' LIMIT {m}' if limit else ''}")


def rows(sql: ProjectionSql, conn: Connection, session_id: str, name: str,
         query: RowQuery) -> list[tuple[str, bytes]]:
    """The rows ``query`` asks for, in its order: one statement on the primary key."""
    if query.limit is not None and query.limit <= 0:
        return []
    if not (sql.storable(session_id) and sql.storable(name)):
        return []  # no row holds it
    params: list[Any] = [session_id, name]
    if query.keys is not None:
        wanted = [k for k in query.keys if sql.storable(k)]
        if not wanted:
            return []
        params.append(sql.bind_list(wanted))
        start = stop = False
    else:
        start, stop = query.start is not None, query.stop is not None
        if query.start is not None:
            params.append(bound(sql, query.start))
        if query.stop is not None:
            params.append(bound(sql, query.stop))
    if query.limit is not None:
        params.append(query.limit)
    statement = _rows_sql(sql, query.keys is not None, start, stop, query.newest_first,
                          query.limit is not None)
    return [(key, bytes(row)) for key, row in conn.execute(statement, params).fetchall()]


def marks(sql: ProjectionSql, conn: Connection, session_id: str) -> dict[str, bytes]:
    """The mark of each projection the session has rows of."""
    if not sql.storable(session_id):
        return {}
    found = conn.execute(f"SELECT projection, mark FROM {MARKS_TABLE}"
                         f" WHERE session_id = {sql.mark}", (session_id,)).fetchall()
    return {name: bytes(mark) for name, mark in found}


def summaries(sql: ProjectionSql, conn: Connection, name: str,
              session_ids: Sequence[str] | None) -> list[tuple[str, bytes, bytes]]:
    """``(session id, mark, summary)`` of the sessions with a summary of ``name`` (of
    ``session_ids`` only, when given): from the summaries' index alone."""
    if not sql.storable(name):
        return []
    statement = (f"SELECT session_id, mark, summary FROM {MARKS_TABLE}"
                 f" WHERE projection = {sql.mark} AND summary IS NOT NULL")
    params: list[object] = [name]
    if session_ids is not None:
        ids = [sid for sid in session_ids if sql.storable(sid)]
        if not ids:
            return []
        statement += " AND session_id" + sql.in_list
        params.append(sql.bind_list(ids))
    return [(sid, bytes(mark), bytes(summary))
            for sid, mark, summary in conn.execute(statement, params).fetchall()]


def drop(sql: ProjectionSql, conn: Connection, session_id: str | None) -> None:
    """Remove every row and mark of the session (``None``: of every session)."""
    for table in (ROWS_TABLE, MARKS_TABLE):
        if session_id is None:
            conn.execute(f"DELETE FROM {table}")
        elif sql.storable(session_id):
            conn.execute(f"DELETE FROM {table} WHERE session_id = {sql.mark}", (session_id,))
