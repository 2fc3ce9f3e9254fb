"""SQLite stores opened at once on one new database (a writer making a store while a
follower in another process opens it: ``tail -F`` of a store not made yet) do not fail
with "database is locked": turning the journal to WAL needs the database to itself,
and SQLite refuses one of two such asks at once rather than deadlock, without its busy
handler; the open retries as the handler would (CI caught ``tail -F`` racing the
store's creation)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core._persistence.backends.sqlite.schema import set_journal_mode


def test_stores_opened_at_once_on_one_new_database_all_open(tmp_path: Path) -> None:
    # Three opens at once of a database not yet in WAL mode: each takes a shared lock
    # and asks for the whole database to change the mode, and SQLite answers one of
    # them "locked" at once, without its busy handler, to break the deadlock. Without
    # the wait, some rounds failed (about one in fifteen on 2 cores).
    failures: list[BaseException] = []
    for round_ in range(60):
        path = tmp_path / f"store-{round_}.db"
        made = sqlite3.connect(path)
        made.execute("CREATE TABLE t (x)")  # a database in rollback-journal mode
        made.close()
        start = threading.Barrier(3)

        def open_store(path: Path = path, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                SqliteBackend(str(path)).close()
            except Exception as exc:  # what the test reports
                failures.append(exc)

        threads = [threading.Thread(target=open_store) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []


def test_a_database_held_past_the_patience_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("CREATE TABLE t (x)")
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        with pytest.raises(sqlite3.OperationalError):
            set_journal_mode(writer, "WAL", patience=0.05)
    finally:
        writer.close()
        reader.close()
