"""The search index trailing the commit (issue 39, ``_persistence/backends/sql/trail.py``):
a small batch leaves its index entries for the next search, which catches the index up
first and answers exactly as a store indexed at every batch does.

- Over random writes, deletes, repairs, rewrites, damaged rows, writers that die and
  searches from the writer or another connection, a trailing store and a store indexed
  at every batch (a trail bound of 0) give the same answers (hits with their turns,
  snippets and scores; the sessions named unreadable), both equal to the scan of the
  stored lines, and end with the same index.
- A search right after a flush sees its events; the batch that reaches the bound, and a
  writer's close, catch up what the writer left; a read-only copy, or a database whose
  write lock another connection holds, is searched completely; a pruned session leaves
  no hit behind.
- A process killed (SIGKILL) in the middle of a search's catch-up leaves the index as it
  was: the next search catches up, and the index is the one written at every batch.

Real SQLite files and a real PostgreSQL server; no mocks.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from persist_support import meta
from test_search_index import (
    ITEMS,
    QUERIES,
    Log,
    _read_only_search,
    _sqlite_insert,
    assistant,
    end,
    events_of,
    scanned,
    searched,
    start,
    user,
)

from dsh_session_core import open_store
from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend
from dsh_session_core._persistence.backends.sql.trail import TRAIL_LIMIT, Trail
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core._schema.codec import encode_events
from dsh_session_core._search import SearchQuery

HERE = Path(__file__).resolve().parent

# --- two databases, one trailing, one indexed at every batch ------------------------------------


class Pair:
    """A database whose writer trails (and a reader on another connection), and one
    whose writer indexes every batch; the same operations go to both."""

    def __init__(self, open_trailing: Callable[[], Any], open_at_write: Callable[[], Any],
                 raw: Callable[[str, str, tuple[Any, ...]], list[tuple[Any, ...]]]) -> None:
        self.open_trailing = open_trailing
        self.raw = raw  # (which database, SQL with ? marks, params) -> rows
        self.writer = open_trailing()
        self.reader = open_trailing()
        self.at_write = open_at_write()
        self.at_write._trail = Trail(0)

    def backends(self) -> tuple[Any, Any]:
        return self.writer, self.at_write

    def die(self) -> None:
        """The trailing writer dies: what it left stays unindexed (no close catches it
        up), and another writer takes over."""
        bound = self.writer._trail.limit
        self.writer._trail = Trail()  # forgotten, as with the process
        self.writer.close()
        self.writer = self.open_trailing()
        self.writer._trail = Trail(bound)

    def close(self) -> None:
        for backend in (self.writer, self.reader, self.at_write):
            backend.close()


def _sqlite_raw(paths: dict[str, Path]) -> Callable[[str, str, tuple[Any, ...]],
                                                     list[tuple[Any, ...]]]:
    def raw(which: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(paths[which], isolation_level=None)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()
    return raw


def _pg_raw(urls: dict[str, str]) -> Callable[[str, str, tuple[Any, ...]],
                                              list[tuple[Any, ...]]]:
    def raw(which: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with psycopg.connect(urls[which], autocommit=True) as conn:
            cur = conn.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []
    return raw


@pytest.fixture(params=["sqlite", "postgresql"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Pair]]:
    """Opens a :class:`Pair` over the test's two databases (each example of a property
    test opens its own, on the same databases)."""
    made: list[Pair] = []
    if request.param == "sqlite":
        paths = {"trailing": tmp_path / "trailing.db", "at_write": tmp_path / "at-write.db"}

        def make() -> Pair:
            made.append(Pair(lambda: SqliteBackend(paths["trailing"]),
                             lambda: SqliteBackend(paths["at_write"]), _sqlite_raw(paths)))
            return made[-1]
    else:
        databases = request.getfixturevalue("postgresql_databases")
        urls = {"trailing": databases.create("trailing"), "at_write": databases.create("at")}

        def make() -> Pair:
            made.append(Pair(lambda: PostgresBackend(urls["trailing"]),
                             lambda: PostgresBackend(urls["at_write"]), _pg_raw(urls)))
            return made[-1]
    yield make
    for opened in made:
        opened.close()
    if request.param == "postgresql":
        for url in urls.values():
            databases.drop(url)


def _index_of(pair: Pair, which: str) -> list[tuple[Any, ...]]:
    """The index a database holds: ``(session, seq, turn, words)`` of each entry, then
    each session's state."""
    if isinstance(pair.at_write, SqliteBackend):
        docs = ("SELECT d.session_id, d.seq, d.turn, f.words FROM dsh_search_docs AS d"
                " JOIN dsh_search AS f ON f.rowid = d.id ORDER BY 1, 2")
        state = "SELECT session_id, next_seq, turn FROM dsh_search_state ORDER BY 1"
    else:
        docs = "SELECT session_id, seq, turn, words::text FROM search_docs ORDER BY 1, 2"
        state = "SELECT session_id, next_seq, turn FROM search_state ORDER BY 1"
    return [*pair.raw(which, docs, ()), ("state",), *pair.raw(which, state, ())]


def _answer(backend: Any, query: SearchQuery) -> tuple[list[Any], list[tuple[str, str]]]:
    """A backend's whole answer: its hits (sorted: a backend's order is none) and the
    sessions it names unreadable, with why."""
    results = backend.search(query)
    unreadable = getattr(results, "unreadable", ())  # [] when the filters exclude all
    return (sorted(results, key=lambda h: (h.session_id, h.seq)),
            sorted((u.session_id, str(u.error)) for u in unreadable))


# --- the property ---------------------------------------------------------------------------------

_EXAMPLES = itertools.count()
SESSIONS = 3
TEXTS = [*QUERIES, ("alpha", {"roles": ["assistant"]}), ("beta gamma", {}),
         ("alp* beta", {"since": 1002})]
_FLUSH = st.tuples(st.just("flush"), st.integers(0, SESSIONS - 1),
                  st.lists(ITEMS, min_size=1, max_size=7))
_SEARCH = st.tuples(st.just("search"), st.integers(0, len(TEXTS)), st.booleans())
# Flushes and searches the most: a search after batches left unindexed is the point.
OPS = st.one_of(
    _FLUSH, _FLUSH, _FLUSH, _SEARCH, _SEARCH,
    st.tuples(st.just("delete"), st.integers(0, SESSIONS - 1)),
    st.tuples(st.just("repair"), st.integers(0, SESSIONS - 1), st.integers(0, 40),
              st.lists(ITEMS, max_size=3)),
    st.tuples(st.just("rewrite"), st.integers(0, SESSIONS - 1),
              st.lists(ITEMS, min_size=1, max_size=7)),
    st.tuples(st.just("damage"), st.integers(0, SESSIONS - 1), st.integers(0, 40)),
    st.tuples(st.just("die")),
)


def _query(index: int, sid: str) -> SearchQuery:
    if index == len(TEXTS):  # one of this example's sessions
        return SearchQuery.parse("alpha", sessions=[sid])
    text, filters = TEXTS[index]
    return SearchQuery.parse(text, **filters)


def _check(pair: Pair, query: SearchQuery, from_reader: bool, sids: list[str] | None
           ) -> None:
    """The trailing store's answer is the other's, and (``sids`` given: none of them
    damaged) the scan's of this example's sessions."""
    trailing = _answer(pair.reader if from_reader else pair.writer, query)
    assert trailing == _answer(pair.at_write, query), query
    if sids is not None:  # a damaged session cannot be loaded for the scan
        asked = frozenset(sids) & (query.sessions or frozenset(sids))
        if asked:  # (none: the query names no session of this example)
            mine = dataclasses.replace(query, sessions=asked)
            assert [h for h in trailing[0] if h.session_id in asked] == scanned(
                pair.at_write, mine), query


def _run(pair: Pair, ops: list[tuple[Any, ...]]) -> None:
    n = next(_EXAMPLES)
    sids = [f"e{n}-{k}" for k in range(SESSIONS)]
    logs: dict[str, list[Log]] = {sid: [] for sid in sids}
    damaged = False
    everything = SearchQuery.parse("alpha")

    def log(sid: str) -> list[Log]:
        if not logs[sid]:
            logs[sid] = [Log(b, sid) for b in pair.backends()]
        for one, backend in zip(logs[sid], pair.backends(), strict=True):
            one.backend = backend  # the writer that took over, after a death
        return logs[sid]

    for op in ops:
        kind = op[0]
        if kind == "flush":
            for one in log(sids[op[1]]):
                one.flush(*op[2])
        elif kind == "search":
            _check(pair, _query(op[1], sids[0]), op[2], None if damaged else sids)
        elif kind == "delete":
            sid = sids[op[1]]
            if logs[sid]:
                for backend in pair.backends():
                    backend.delete(sid)
                logs[sid] = []
        elif kind in ("repair", "rewrite"):
            sid = sids[op[1]]
            if not logs[sid]:
                continue
            for one in log(sid):
                writer: Any = one.backend
                if kind == "rewrite":
                    events = events_of(op[2], 0)
                    writer.rewrite(meta(sid, "/w"), events, encode_events(events))
                    one.next = len(events)
                else:
                    torn = op[2] if op[2] < one.next else None
                    closers = events_of(op[3], one.next if torn is None else torn)
                    writer.commit_repair(meta(sid, "/w"), torn, closers,
                                         encode_events(closers))
                    one.next = (one.next if torn is None else torn) + len(closers)
        elif kind == "damage":
            # A row cut in place, once both indexes hold it (damage to a row the index
            # has not read yet is another matter: docs/search.md).
            sid = sids[op[1]]
            if not logs[sid] or not logs[sid][0].next:
                continue
            pair.writer.search(everything)
            seq = op[2] % logs[sid][0].next
            for which in ("trailing", "at_write"):
                pair.raw(which, "UPDATE events SET data = substr(data, 1, length(data) - 3)"
                                " WHERE session_id = ? AND seq = ?", (sid, seq))
            damaged = True
        else:
            pair.die()
    for index in range(len(TEXTS) + 1):
        _check(pair, _query(index, sids[0]), False, None if damaged else sids)
    assert _index_of(pair, "trailing") == _index_of(pair, "at_write")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=25),
       bound=st.sampled_from([2, 15, 64, TRAIL_LIMIT]))
def test_a_trailing_index_answers_as_one_written_at_every_batch(
        pair: Callable[[], Pair], ops: list[tuple[Any, ...]], bound: int) -> None:
    opened = pair()
    opened.writer._trail = Trail(bound)
    try:
        _run(opened, ops)
    finally:
        opened.close()


# --- one backend ------------------------------------------------------------------------------


Opener = Callable[[], Any]


@pytest.fixture(params=["sqlite", "memory", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens backends over one fresh database (``memory``: one in-memory database,
    opened once); closes them after the test."""
    made: list[Any] = []

    def make() -> Any:
        if request.param == "sqlite":
            made.append(SqliteBackend(tmp_path / "s.db"))
        elif request.param == "memory":
            if not made:
                made.append(SqliteBackend(":memory:"))
            return made[0]
        else:
            made.append(PostgresBackend(request.getfixturevalue("postgresql_url")))
        return made[-1]
    yield make
    for backend in made:
        backend.close()


def _state(backend: Any, sid: str) -> tuple[Any, ...] | None:
    """A session's index state ``(next_seq, turn)``, read on the backend's connection."""
    table = "dsh_search_state" if isinstance(backend, SqliteBackend) else "search_state"
    mark = "?" if isinstance(backend, SqliteBackend) else "%s"
    with backend._lock:
        found: tuple[Any, ...] | None = backend._conn.execute(
            f"SELECT next_seq, turn FROM {table} WHERE session_id = {mark}", (sid,)
        ).fetchone()
    return found


def test_a_search_right_after_a_flush_sees_its_events(opener: Opener) -> None:
    backend = opener()
    log = Log(backend, "s")
    query = SearchQuery.parse("alpha")
    log.flush(start(1), user("alpha one"))
    assert _state(backend, "s") is None  # the flush left its entries to the search
    assert [(h.seq, h.turn) for h in searched(backend, query)] == [(1, 1)]
    assert _state(backend, "s") == (2, 1)  # caught up first
    for n in range(2, 6):
        log.flush(assistant(f"alpha {n}"))
        assert [h.seq for h in searched(backend, query)] == list(range(1, n + 1))
        assert searched(backend, query) == scanned(backend, query)
    assert _state(backend, "s") == (6, 1)
    if isinstance(backend, SqliteBackend):
        # The catch-up's own settings (a short wait, no sync) end with it: the batches
        # still wait 5 s for the lock and sync each commit.
        with backend._lock:
            assert backend._conn.execute("PRAGMA synchronous").fetchone() == (2,)
            assert backend._conn.execute("PRAGMA busy_timeout").fetchone() == (5000,)


def test_the_batch_at_the_bound_catches_up_what_the_writer_left(opener: Opener) -> None:
    backend = opener()
    backend._trail = Trail(10)
    a, b = Log(backend, "a"), Log(backend, "b")
    a.flush(start(1), user("alpha"), assistant("beta"))  # 3 events left
    b.flush(user("alpha"), user("gamma"), user("delta"), user("x"))  # 7
    a.flush(assistant("alpha"), end(1))  # 9: still under the bound
    assert (_state(backend, "a"), _state(backend, "b")) == (None, None)
    b.flush(user("alpha again"))  # 10: this batch indexes, and catches both up
    assert (_state(backend, "a"), _state(backend, "b")) == ((5, None), (5, None))
    assert not backend._trail.lagging
    # A batch as large as the bound is indexed as it is written.
    b.flush(*[user(f"alpha {i}") for i in range(10)])
    assert _state(backend, "b") == (15, None)
    check = SearchQuery.parse("alpha")
    assert searched(backend, check) == scanned(backend, check)


def test_a_writers_close_catches_up_what_it_left(tmp_path: Path,
                                                 postgresql_url: str) -> None:
    for backend_of in (lambda: SqliteBackend(tmp_path / "s.db"),
                       lambda: PostgresBackend(postgresql_url)):
        writer = backend_of()
        Log(writer, "w").flush(start(1), user("alpha"), end(1))
        assert _state(writer, "w") is None
        writer.close()
        reader = backend_of()
        try:
            assert _state(reader, "w") == (3, None)
        finally:
            reader.close()


def test_a_read_only_copy_of_a_trailing_database_answers_completely(tmp_path: Path) -> None:
    # A copy taken while the writer runs (its batches left unindexed), opened read-only
    # in a process of its own: the rows past the index are checked one by one.
    db = tmp_path / "s.db"
    writer = SqliteBackend(db)
    try:
        log = Log(writer, "s1")
        log.flush(user("alpha before any turn"), start(1), user("Alpha beta gamma"))
        log.flush(assistant("beta alpha", turn=3), end(1))
        Log(writer, "s2").flush(start(7), user("alpha seven"))
        assert (_state(writer, "s1"), _state(writer, "s2")) == (None, None)
        with writer._lock:  # the WAL's commits into the file, which alone is copied
            writer._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        hits = _read_only_search(db)
    finally:
        writer.close()
    assert [h for h in hits if h[0] in ("s1", "s2")] == [
        ["s1", 0, None], ["s1", 2, 1], ["s1", 3, 3], ["s2", 1, 7]]


def test_a_search_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    # The catch-up waits a moment for the lock, then checks the rows one by one; the
    # rows the reference wrote (never indexed) as well as our own batches.
    db = tmp_path / "s.db"
    backend = SqliteBackend(db)
    other = sqlite3.connect(db, isolation_level=None)
    try:
        Log(backend, "ours").flush(start(1), user("alpha ours"))
        _sqlite_insert(db, "ref", [user("alpha theirs")], 0)
        other.execute("BEGIN IMMEDIATE")  # held until the search is done
        query = SearchQuery.parse("alpha")
        began = time.monotonic()
        found = searched(backend, query)
        assert time.monotonic() - began < 4  # not the connection's 5 s busy wait
        assert [(h.session_id, h.seq) for h in found] == [("ours", 1), ("ref", 0)]
        assert _state(backend, "ours") is None  # nothing written meanwhile
        other.execute("ROLLBACK")
        assert searched(backend, query) == found
        assert _state(backend, "ours") == (2, 1)
    finally:
        other.close()
        backend.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_pruned_session_leaves_no_hit(kind: str, tmp_path: Path,
                                        request: pytest.FixtureRequest) -> None:
    import datetime

    url = (f"sqlite:///{tmp_path}/s.db" if kind == "sqlite"
           else request.getfixturevalue("postgresql_url"))
    clock = {"now": 1_700_000_000_000}
    with open_store(url, clock=lambda: clock["now"]) as store:
        for sid, days_ago in (("old", 90), ("new", 1)):
            clock["now"] = 1_700_000_000_000 - days_ago * 86_400_000
            s = store.create(sid)
            with s.turn() as turn:
                turn.user(f"the needle of {sid}")
            store.release(s)  # flushed, its index entries left for the search
        assert _state(store.backend, "old") is None
        clock["now"] = 1_700_000_000_000
        removed = store.prune(datetime.timedelta(days=30), now=datetime.datetime.fromtimestamp(
            1_700_000_000, tz=datetime.UTC))
        assert [d.session_id for d in removed] == ["old"]
        assert [h.session_id for h in store.search("needle")] == ["new"]


# --- a catch-up killed midway ---------------------------------------------------------------------

# Writes small batches (left unindexed), then searches; the catch-up's first insert of
# index rows says so on stdout and waits for the parent, which kills the process there.
_CHILD = """
import dataclasses, sys
sys.path[:0] = [sys.argv[3]]
import test_search_index as t
from dsh_session_core._persistence.backends.postgres import backend as pg
from dsh_session_core._persistence.backends.sqlite import search as lite

kind, where = sys.argv[1], sys.argv[2]
module = lite if kind == "sqlite" else pg
backend = t.SqliteBackend(where) if kind == "sqlite" else t.PostgresBackend(where)
for sid in ("k1", "k2"):
    log = t.Log(backend, sid)
    for n in range(20):
        log.flush(t.start(n), t.user(f"alpha {sid} {n}"), t.assistant("beta"), t.end(n))
real = module.INDEX_SQL.insert

def insert(conn, session_id, rows):
    real(conn, session_id, rows)
    print("inserted", flush=True)
    sys.stdin.readline()  # never answered: killed here

module.INDEX_SQL = dataclasses.replace(module.INDEX_SQL, insert=insert)
backend.search(t.SearchQuery.parse("alpha"))
print("not killed", flush=True)
"""


def _kill_mid_catch_up(kind: str, where: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", _CHILD, kind, where, str(HERE)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ})
    try:
        assert child.stdout is not None
        assert child.stderr is not None
        ready, _, _ = select.select([child.stdout], [], [], 120)
        line = child.stdout.readline() if ready else b""
        if line != b"inserted\n":
            child.kill()
            pytest.fail(f"the child did not reach the catch-up: {line!r}, "
                        f"{child.stderr.read().decode(errors='replace')}")
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_catch_up_killed_midway_leaves_the_index_as_it_was(
        kind: str, request: pytest.FixtureRequest) -> None:
    opened: Pair | None = None
    if kind == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="dsh-trail-kill-"))
        paths = {"trailing": folder / "s.db", "at_write": folder / "at-write.db"}
        where = str(paths["trailing"])
    else:
        databases = request.getfixturevalue("postgresql_databases")
        urls = {"trailing": databases.create("killed"), "at_write": databases.create("at")}
        where = urls["trailing"]
    try:
        _kill_mid_catch_up(kind, where)
        if kind == "sqlite":
            opened = Pair(lambda: SqliteBackend(paths["trailing"]),
                          lambda: SqliteBackend(paths["at_write"]), _sqlite_raw(paths))
        else:
            opened = Pair(lambda: PostgresBackend(urls["trailing"]),
                          lambda: PostgresBackend(urls["at_write"]), _pg_raw(urls))
        # The index as the child's batches left it: nothing of the catch-up.
        assert _index_of(opened, "trailing") == [("state",)]
        # The same batches, indexed one by one.
        for sid in ("k1", "k2"):
            log = Log(opened.at_write, sid)
            for n in range(20):
                log.flush(start(n), user(f"alpha {sid} {n}"), assistant("beta"), end(n))
        query = SearchQuery.parse("alpha")
        assert _answer(opened.writer, query) == _answer(opened.at_write, query)
        assert len(searched(opened.writer, query)) == 40
        assert _index_of(opened, "trailing") == _index_of(opened, "at_write")
    finally:
        if opened is not None:
            opened.close()
        if kind == "postgresql":
            for url in urls.values():
                databases.drop(url)
        else:
            shutil.rmtree(folder)
