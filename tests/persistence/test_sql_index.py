"""The one search-index engine of the SQL backends (``_persistence/backends/sql/index.py``), run
on each database's statements: what the two backends once did each their own way is
now done one way on both, and checked on both here.

- The turn open before a seq is read a page of turn changes at a time: a run of turn
  changes longer than a page that do not parse (rows edited by hand) is paged through
  to the last one that does.
- How far sessions are indexed is read for the sessions a query names only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend
from dsh_session_core._persistence.backends.postgres.index import INDEX_SQL as PG_INDEX
from dsh_session_core._persistence.backends.sql import index as sql_index
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core._persistence.backends.sqlite.index import INDEX_SQL as SQLITE_INDEX
from dsh_session_core._search import SearchQuery

Opened = tuple[sql_index.IndexSql, Any, str]


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    """``(the database's IndexSql, a connection to a fresh store, its parameter mark)``."""
    backend: SqliteBackend | PostgresBackend
    if request.param == "sqlite":
        backend = SqliteBackend(tmp_path / "s.db")
        sql = SQLITE_INDEX
    else:
        backend = PostgresBackend(request.getfixturevalue("postgresql_url"))
        sql = PG_INDEX
    try:
        yield sql, backend._conn, sql.mark
    finally:
        backend.close()


def _store(conn: Any, mark: str, sid: str, rows: list[tuple[int, str, str]]) -> None:
    """A session's header and ``(seq, type, data)`` rows, written as a hand would (no
    index entry, no check): the data text is stored as it is, valid JSON or not."""
    with_marks = ", ".join([mark] * 6)
    conn.execute(f"INSERT INTO sessions (id, version, created_at, cwd, parent_session,"
                 f" seed_length) VALUES ({with_marks})", (sid, 1, 0, None, None, None))
    for seq, kind, data in rows:
        conn.execute(f"INSERT INTO events (session_id, seq, type, time, data)"
                     f" VALUES ({', '.join([mark] * 5)})", (sid, seq, kind, seq, data))


def test_the_turn_before_a_seq_pages_through_turn_changes_that_do_not_parse(
        database: Opened) -> None:
    sql, conn, mark = database
    broken = [(seq, "turn/start", '{"turn": ') for seq in range(1, 151)]  # not JSON
    assert len(broken) > 2 * sql_index.TURN_PAGE  # three pages of them
    _store(conn, mark, "s", [(0, "turn/start", '{"turn":7}'), *broken,
                             (151, "message", '{"role":"user"}')])
    assert sql_index.turn_before(sql, conn, "s", 152) == 7
    assert sql_index.turn_before(sql, conn, "s", 1) == 7
    assert sql_index.turn_before(sql, conn, "s", 0) is None  # nothing before seq 0


def test_the_turn_before_a_seq_is_that_of_the_last_turn_change_before_it(
        database: Opened) -> None:
    sql, conn, mark = database
    _store(conn, mark, "s", [(0, "turn/start", '{"turn":1}'), (1, "turn/end", "{}"),
                             (2, "turn/start", '{"turn":2}'), (3, "message", "{}")])
    assert sql_index.turn_before(sql, conn, "s", 4) == 2
    assert sql_index.turn_before(sql, conn, "s", 2) is None  # turn 1 ended
    assert sql_index.turn_before(sql, conn, "s", 1) == 1


def test_the_progress_read_is_that_of_the_sessions_a_query_names(database: Opened) -> None:
    sql, conn, mark = database
    for sid in ("a", "b", "c"):
        _store(conn, mark, sid, [(0, "message", "{}"), (1, "message", "{}")])
    every = sql_index.progress(sql, conn, SearchQuery.parse("x"), True)
    assert sorted(every) == [("a", None, None, 1), ("b", None, None, 1),
                             ("c", None, None, 1)]
    named = SearchQuery.parse("x", sessions=["a", "c", "\udcff"])  # the last: no row
    assert sorted(sql_index.progress(sql, conn, named, True)) == [
        ("a", None, None, 1), ("c", None, None, 1)]
    assert sorted(sql_index.progress(sql, conn, named, False)) == [
        ("a", None, None, 1), ("c", None, None, 1)]
