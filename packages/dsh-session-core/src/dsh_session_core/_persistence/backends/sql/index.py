"""The one search-index engine of the SQL backends (SQLite and PostgreSQL).

Keeping a session's index in step with its rows, catching up the sessions it lags
behind, and answering a search from it.

What an index row is, and how a batch's lines become rows, is :mod:`.search_index`'s;
how each database stores the rows and matches a query is its :class:`IndexSql` (its
statements, their parameter mark, its insert and its match text), built once in
:mod:`.sqlite.schema` and :mod:`.postgres.schema`. The backends keep what is theirs:
their transactions and locks, the hot path's writes (PostgreSQL indexes a batch in the
statement that inserts it), and SQLite's ``data_version`` shortcut.

Every function runs on the connection it is given, in the caller's transaction unless
it says otherwise. Both drivers' connections have ``execute(sql, params)``, whose
cursor has ``fetchone`` and ``fetchall``; that is all this module asks of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

from .rows import row_line
from .search_index import Behind, IndexRow, answer, bindable, index_rows, stored_turn

if TYPE_CHECKING:
    from ...._search import SearchQuery, SearchResults

__all__ = [
    "ALL_SEQS",
    "PAGE",
    "TURN_PAGE",
    "Connection",
    "IndexSql",
    "IndexState",
    "Progress",
    "RowsFrom",
    "behind",
    "candidates",
    "catch_up",
    "catch_up_sessions",
    "delete_from",
    "forget",
    "hits",
    "index",
    "lines_from",
    "progress",
    "progress_of",
    "sync",
    "turn_before",
]

#: Below every seq: "from" it means the whole session.
ALL_SEQS: Final = -(2**63)
#: Rows per page when indexing, or checking, rows no index entry covers.
PAGE: Final = 4096
#: Turn changes per page when looking for the turn open before a seq: the first page
#: nearly always answers (a turn change that does not parse is rare), and no driver
#: holds more than a page (psycopg fetches a whole result; SQLite steps it).
TURN_PAGE: Final = 64

#: A session's index state: the seq after the last indexed row, the turn open there
#: (as stored: :func:`~.search_index.stored_turn`).
IndexState: TypeAlias = tuple[int, int | None]
#: A batch's index rows given the turn open before it
#: (:func:`~.search_index.index_batch`'s answer).
RowsFrom: TypeAlias = Callable[[int | None], tuple[list[IndexRow], int | None, bool]]
#: ``(session id, next seq indexed, turn, last seq)``: how far a session is indexed.
Progress: TypeAlias = tuple[str, int | None, int | None, int]


class Connection(Protocol):
    """What the engine asks of a connection (``sqlite3`` and ``psycopg`` both have it)."""

    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


@dataclass(frozen=True, slots=True)
class IndexSql:
    """One database's side of the index. Each statement takes its parameters in the
    order given, marked by :attr:`mark`; the rows they read are
    ``(seq, type, time, data, source_event_seqs, surface_op)`` (:func:`~.rows.row_line`).

    :ivar mark: the parameter mark (``?`` or ``%s``), for the conditions added here.
    :ivar select_state: ``(session id)`` -> ``(next_seq, turn)`` of its index state.
    :ivar upsert_state: ``(session id, next_seq, turn)``.
    :ivar delete_from: statements removing a session's index rows from a seq on,
        ``(session id, seq)`` each, run in order.
    :ivar delete_state: ``(session id)``.
    :ivar select_rows_from: ``(session id, start, end, limit)``: rows ``start <= seq <
        end`` in seq order, of the types an index reads
        (:data:`~.search_index.READ_TYPES`: no other changes what it gives).
    :ivar select_turn_changes: ``(session id, seq, limit)``: the turn changes before
        ``seq``, newest first.
    :ivar select_progress: every stored session's :data:`Progress` (``FROM sessions AS
        s``, no ``WHERE``); :ivar select_tops: the same without the index (no state).
    :ivar in_list: ``IN``-like test of a column against one parameter, a list bound by
        :attr:`bind_list` (appended to ``s.id``, ``d.session_id``).
    :ivar select_candidates: ``(match text, types)``: ``(session id, stored turn, *the
        row)`` of the index's matches, joined to ``events AS e``, ``d`` the index rows.
    :ivar bind_list: a list of strings as :attr:`in_list` takes it.
    :ivar storable: whether a column can hold a string (else no row holds it).
    :ivar insert: stores index rows of a session.
    :ivar match: a query's match text; :ivar trusted: whether the index can answer the
        query with a superset of its hits (else every row is checked).
    """

    mark: str
    select_state: str
    upsert_state: str
    delete_from: tuple[str, ...]
    delete_state: str
    select_rows_from: str
    select_turn_changes: str
    select_progress: str
    select_tops: str
    in_list: str
    select_candidates: str
    bind_list: Callable[[list[str]], object]
    storable: Callable[[str], bool]
    insert: Callable[[Any, str, Sequence[IndexRow]], None]
    match: Callable[[SearchQuery], str]
    trusted: Callable[[SearchQuery], bool]


# --- keeping an index in step ------------------------------------------------------------


def lines_from(sql: IndexSql, conn: Connection, session_id: str, start: int, end: int
               ) -> Iterator[bytes]:
    """The log lines of the rows ``start <= seq < end`` an index or a search reads
    (:attr:`IndexSql.select_rows_from`), a page at a time."""
    while start < end:
        rows = conn.execute(sql.select_rows_from, (session_id, start, end, PAGE)).fetchall()
        for row in rows:
            yield row_line(row)
        if len(rows) < PAGE:
            return
        start = int(rows[-1][0]) + 1


def turn_before(sql: IndexSql, conn: Connection, session_id: str, seq: int) -> int | None:
    """The turn open right before ``seq``: that of the last turn change before it, read
    :data:`TURN_PAGE` changes at a time."""
    from ...._search import turn_change

    while True:
        rows = conn.execute(sql.select_turn_changes, (session_id, seq, TURN_PAGE)).fetchall()
        for row in rows:
            change = turn_change(row_line(row))
            if change is not None:
                return change[1]
        if len(rows) < TURN_PAGE:
            return None
        seq = int(rows[-1][0])


def delete_from(sql: IndexSql, conn: Connection, session_id: str, start: int) -> None:
    """Remove a session's index rows from seq ``start`` on (its state is left)."""
    for statement in sql.delete_from:
        conn.execute(statement, (session_id, start))


def forget(sql: IndexSql, conn: Connection, session_id: str) -> None:
    """Remove a session's index rows and its state (the session is deleted)."""
    delete_from(sql, conn, session_id, ALL_SEQS)
    conn.execute(sql.delete_state, (session_id,))


def sync(sql: IndexSql, conn: Connection, session_id: str, end: int, cut: bool = False
         ) -> int | None:
    """Bring a session's index to cover exactly its rows before seq ``end`` (the caller
    then stores the state), and return the turn open there (``TURN_UNKNOWN`` when no
    column holds it).

    The usual case, a state at ``end``, reads one row. No state (rows a writer without
    the index stored): the session is indexed from its first row. A state behind: from
    there. A state past ``end``: the rows were cut back at ``end`` by our repair
    (``cut``), so what follows is indexed again; else by a writer that keeps no index
    (the reference's repair), which may have cut them anywhere before and written
    others: the whole session is indexed again.
    """
    state = conn.execute(sql.select_state, (session_id,)).fetchone()
    if state is not None and state[0] == end:
        return state[1]  # type: ignore[no-any-return]
    turn: int | None
    if state is None or (state[0] > end and not cut):
        start, turn = ALL_SEQS, None
        delete_from(sql, conn, session_id, ALL_SEQS)  # and rows left by a writer's delete
    elif state[0] > end:
        start, turn = end, stored_turn(turn_before(sql, conn, session_id, end))
        delete_from(sql, conn, session_id, end)
    else:
        start, turn = int(state[0]), state[1]
    # A page at a time, so a long session never sits in memory whole; each page is
    # fetched before its rows are written, so no read cursor is open across an insert.
    while start < end:
        page = conn.execute(sql.select_rows_from, (session_id, start, end, PAGE)).fetchall()
        rows, turn, _ = index_rows([row_line(row) for row in page], [r[0] for r in page],
                                   turn)
        sql.insert(conn, session_id, rows)
        if len(page) < PAGE:
            break
        start = int(page[-1][0]) + 1
    return stored_turn(turn)


def index(sql: IndexSql, conn: Connection, session_id: str, first: int, rows_from: RowsFrom,
          end: int, cut: bool = False, known: IndexState | None = None) -> IndexState:
    """Index the events ``first .. end-1`` (``rows_from`` reads them), after catching up
    the rows before them (:func:`sync`), and store the session's state.

    :param known: the state this backend stored with the session's last batch, while it
        has held the session's writer lock since: no other writer has changed it, so it
        is not read again.
    :returns: the state stored.
    """
    if known is not None and known[0] == first:
        turn: int | None = known[1]
    else:
        turn = sync(sql, conn, session_id, first, cut)
    rows, turn, _ = rows_from(turn)
    sql.insert(conn, session_id, rows)
    state = (end, stored_turn(turn))
    conn.execute(sql.upsert_state, (session_id, *state))
    return state


# --- searching ---------------------------------------------------------------------------


def progress(sql: IndexSql, conn: Connection, query: SearchQuery, indexed: bool
             ) -> list[Progress]:
    """The :data:`Progress` of each stored session the query reads that has an event
    (the state ``None`` when it has none, or there is no index)."""
    return progress_of(sql, conn, query.sessions, indexed)


def progress_of(sql: IndexSql, conn: Connection, sessions: Collection[str], indexed: bool
                ) -> list[Progress]:
    """:func:`progress` of the stored ``sessions`` (none given: of every one)."""
    statement = sql.select_progress if indexed else sql.select_tops
    params: tuple[object, ...] = ()
    if sessions:
        statement += f" WHERE s.id {sql.in_list}"
        params = (sql.bind_list(_storable(sql, sessions)),)
    return [(sid, None if n is None else int(n), turn, int(top))
            for sid, n, turn, top in conn.execute(statement, params).fetchall()
            if top is not None]


def _storable(sql: IndexSql, ids: Collection[str]) -> list[str]:
    return sorted(i for i in ids if sql.storable(i))  # another id has no row


def catch_up_sessions(sql: IndexSql, conn: Connection, sessions: Collection[str] | None
                      ) -> None:
    """Index the rows of the stored ``sessions`` (``None``: of every one) the index
    lags behind, and store their states, in the caller's write transaction."""
    if sessions is not None and not sessions:
        return
    for sid, next_seq, _, top in progress_of(sql, conn, sessions or (), True):
        if next_seq != top + 1:
            turn = sync(sql, conn, sid, top + 1)
            conn.execute(sql.upsert_state, (sid, top + 1, turn))


def catch_up(sql: IndexSql, conn: Connection, query: SearchQuery, *,
             read: Callable[[], AbstractContextManager[object]],
             write: Callable[[], AbstractContextManager[object]],
             refused: Callable[[Exception], bool]) -> bool:
    """Index the rows of the sessions (that the query reads) the index lags behind, in
    one ``write`` transaction (the backend's, with whatever lock serializes catch-ups);
    nothing when the index is in step (read in a ``read`` transaction), or the
    database refuses the write (``refused``: read-only, not allowed, or busy).

    :returns: whether the index is in step with those sessions' rows as of the
        transaction (``False``: the write was refused, the search checks the rows).
    """
    with read():
        if all(row[1] == row[3] + 1 for row in progress(sql, conn, query, True)):
            return True
    try:
        with write():
            catch_up_sessions(sql, conn, query.sessions or None)
    except Exception as exc:
        if not refused(exc):
            raise
        return False
    return True


def behind(sql: IndexSql, conn: Connection, query: SearchQuery, indexed: bool,
           trusted: bool) -> Behind:
    """The sessions whose rows from some seq on no index entry covers: ``{id: (that
    seq, the turn open there, the seq after the last)}``. Every session when there is
    no index, or it cannot answer this query (``trusted`` false)."""
    late: Behind = {}
    for sid, next_seq, turn, top in progress(sql, conn, query, indexed):
        # A state past the last row: rows cut by a writer without the index, which may
        # have written others in their place: no entry of it is trusted.
        if not (indexed and trusted) or next_seq is None or next_seq > top + 1:
            late[sid] = (ALL_SEQS, None, top + 1)
        elif next_seq <= top:
            late[sid] = (next_seq, turn, top + 1)
    return late


def candidates(sql: IndexSql, conn: Connection, query: SearchQuery, types: list[str]
               ) -> list[Any]:
    """The index's candidates of ``query``, narrowed in SQL by type, session and time
    (a bound SQL cannot compare as :func:`~.._search.hit_of` does is left to it)."""
    statement = sql.select_candidates
    params: list[object] = [sql.match(query), sql.bind_list(types)]
    if query.sessions:
        statement += f" AND d.session_id {sql.in_list}"
        params.append(sql.bind_list(_storable(sql, query.sessions)))
    for bound, op in ((query.since, ">="), (query.until, "<")):
        if bindable(bound):
            statement += f" AND e.time {op} {sql.mark}"
            params.append(bound)
    return conn.execute(statement, params).fetchall()  # type: ignore[no-any-return]


def hits(sql: IndexSql, conn: Connection, found: Sequence[Sequence[Any]], late: Behind,
         query: SearchQuery) -> SearchResults:
    """The hits: the candidates ``found`` checked, then the rows no index covers
    (``late``) scanned; a session with a damaged row read among its ``unreadable``
    (:func:`~.search_index.answer`)."""
    return answer(found, late, query, line_of=row_line,
                  turn_before=functools.partial(turn_before, sql, conn),
                  lines_from=functools.partial(lines_from, sql, conn))
