"""The search indexes of the database backends (SQLite's FTS5, PostgreSQL's tsvector):
each answer equals the reference scan (``lines_hits``) over the same session's stored
lines, and the index stays in step with the log across flushes, repairs, deletes, rows
written without it (the reference, an older build), a read-only database and an older
PostgreSQL schema. Real SQLite files and a real PostgreSQL server; no mocks."""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from persist_support import meta
from pg_support import OLD_TABLES

from dsh_session_core import core_registry
from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend
from dsh_session_core._persistence.backends.postgres.schema import SCHEMA_VERSION as PG_VERSION
from dsh_session_core._persistence.backends.sql.search_index import (
    TURN_UNKNOWN,
    fts_match,
    index_batch,
    index_lines,
    tsquery_text,
)
from dsh_session_core._persistence.backends.sql.trail import Trail
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core._persistence.base import Backend, stored_lines
from dsh_session_core._persistence.search import lines_hits
from dsh_session_core._schema.codec import encode_events
from dsh_session_core._schema.decode import decode_wire
from dsh_session_core._search import SearchHit, SearchQuery
from dsh_session_core.events import Event

REGISTRY = core_registry()
USER = {"kind": "user"}


# --- building logs ------------------------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"type": "user/message",
            "data": {"content": [{"type": "text", "text": text}], "source": USER}}


def assistant(text: str, turn: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if turn is not None:
        data["turn"] = turn
    return {"type": "assistant/message", "data": data}


def call(name: str, arguments: str) -> dict[str, Any]:
    return {"type": "tool/call", "data": {"callId": "c1", "name": name,
                                          "arguments": arguments}}


def result(text: str) -> dict[str, Any]:
    return {"type": "tool/result", "data": {"callId": "c1", "content": [
        {"type": "text", "text": text}]}}


def start(turn: int) -> dict[str, Any]:
    return {"type": "turn/start", "data": {"turn": turn, "trigger": {
        "kind": "message", "source": USER}}}


def end(turn: int) -> dict[str, Any]:
    return {"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}}


def step(turn: int) -> dict[str, Any]:
    return {"type": "step/start", "data": {"turn": turn, "step": 1}}


def events_of(wires: list[dict[str, Any]], first: int) -> list[Event]:
    """The events of ``wires`` from seq ``first`` on, their time 1000 + seq."""
    return [decode_wire(REGISTRY, {**w, "seq": first + i, "time": 1000 + first + i})
            for i, w in enumerate(wires)]


class Log:
    """Writes batches of one session through a backend, as the coordinator does."""

    def __init__(self, backend: Backend, sid: str) -> None:
        self.backend, self.sid, self.next = backend, sid, 0

    def flush(self, *wires: dict[str, Any]) -> None:
        events = events_of(list(wires), self.next)
        self.backend.append_batch(meta(self.sid, "/w"), events, encode_events(events),
                                  self.next > 0)
        self.next += len(events)


def scanned(backend: Backend, query: SearchQuery) -> list[SearchHit]:
    """The reference answer: ``lines_hits`` over each stored session's lines."""
    hits: list[SearchHit] = []
    for header in backend.list():
        if query.sessions and header.id not in query.sessions:
            continue
        stored = backend.load_stored(header.id, REGISTRY)
        assert stored is not None
        hits += lines_hits(header.id, stored_lines(stored), query)
    return sorted(hits, key=lambda h: (h.session_id, h.seq))


def searched(backend: Any, query: SearchQuery) -> list[SearchHit]:
    return sorted(backend.search(query), key=lambda h: (h.session_id, h.seq))


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("alpha", {}),
    ("alp*", {}),
    ("ALPHA beta", {}),
    ('"alpha beta"', {}),
    ("read_file", {}),
    ("gamma", {"roles": ["tool"]}),
    ("gamma", {"types": ["tool/call", "user/message"]}),
    ("alpha", {"sessions": ["s2"]}),
    ("alpha", {"since": 1003, "until": 1010}),
    ("alpha", {"since": float("nan")}),
    ("alpha", {"until": 2**80}),
    ("ünïcödé", {}),
    ("straße", {}),
    ("x" * 80, {}),
    ("x" * 70 + "*", {}),
    ("nothing", {}),
    ("gamma", {"types": ["tool/result"], "roles": ["user"]}),
]


def check_all(backend: Any) -> None:
    for text, filters in QUERIES:
        query = SearchQuery.parse(text, **filters)
        assert searched(backend, query) == scanned(backend, query), (text, filters)


def fill(backend: Backend) -> None:
    """Two sessions over several flushes: events inside and outside turns, with a turn
    of their own, calls, results, long words, words that fold."""
    s1, s2 = Log(backend, "s1"), Log(backend, "s2")
    s1.flush(user("alpha before any turn"), start(1), user("Alpha beta gamma"))
    s2.flush(start(7), step(7), call("read_file", '{"path": "alpha.txt"}'))
    s1.flush(assistant("beta alpha", turn=3), result("gamma delta"), end(1))
    s2.flush(result("gamma " + "x" * 80), user("ünïcödé STRASSE alphabet"), end(7))
    s1.flush(user("alpha after the turn"), start(2), assistant("alpha beta"))


# --- the backends -------------------------------------------------------------------------

Opener = Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens backends over one fresh database; closes them after the test."""
    made: list[Any] = []
    if request.param == "sqlite":
        def make() -> Any:
            made.append(SqliteBackend(tmp_path / "s.db"))
            return made[-1]
    else:
        url = request.getfixturevalue("postgresql_url")

        def make() -> Any:
            made.append(PostgresBackend(url))
            return made[-1]
    yield make
    for backend in made:
        backend.close()


def test_hits_equal_the_scan_across_flushes(opener: Opener) -> None:
    backend = opener()
    fill(backend)
    check_all(backend)
    check_all(opener())  # another instance reads the same index


def test_a_repair_cuts_the_index_back_and_indexes_the_closers(opener: Opener) -> None:
    backend = opener()
    log = Log(backend, "r")
    log.flush(start(1), user("alpha one"))
    log.flush(assistant("alpha two"), result("alpha three"))
    query = SearchQuery.parse("alpha")
    assert [h.seq for h in searched(backend, query)] == [1, 2, 3]
    # Cut from seq 2 on, closed by a user message outside the turn... and a turn end.
    closers = events_of([end(1), user("alpha closer")], 2)
    backend.commit_repair(meta("r", "/w"), 2, closers, encode_events(closers))
    assert [h.seq for h in searched(backend, query)] == [1, 3]
    check_all(backend)
    assert searched(backend, query) == scanned(backend, query)
    # And the log goes on from there.
    log.next = 4
    log.flush(start(2), assistant("alpha four"))
    assert [(h.seq, h.turn) for h in searched(backend, query)] == [
        (1, 1), (3, None), (5, 2)]
    # A repair without a cut: closers only.
    closers = events_of([end(2)], 6)
    backend.commit_repair(meta("r", "/w"), None, closers, encode_events(closers))
    log.next = 7
    log.flush(assistant("alpha five"))
    assert searched(backend, query) == scanned(backend, query)
    assert searched(backend, query)[-1].turn is None


def test_a_delete_takes_the_index_with_it(opener: Opener) -> None:
    backend = opener()
    fill(backend)
    backend.delete("s1")
    query = SearchQuery.parse("alpha")
    assert {h.session_id for h in searched(backend, query)} == {"s2"}
    # A new session of the same id starts an index of its own.
    log = Log(backend, "s1")
    log.flush(user("alpha again"))
    assert [(h.session_id, h.seq) for h in searched(backend, query)] == [
        ("s1", 0), ("s2", 2)]
    check_all(backend)


def test_turns_no_column_holds(opener: Opener) -> None:
    backend = opener()
    log = Log(backend, "t")
    log.flush(start(2**40), user("alpha"))
    log.flush(assistant("alpha", turn=-(2**70)), user("alpha"), end(2**40))
    log.flush(start(TURN_UNKNOWN), user("alpha"))
    query = SearchQuery.parse("alpha")
    hits = searched(backend, query)
    assert [h.turn for h in hits] == [2**40, -(2**70), 2**40, TURN_UNKNOWN]
    assert hits == scanned(backend, query)


def test_an_event_with_huge_text(opener: Opener) -> None:
    # Past the 512 KiB a PostgreSQL row keeps words for: found all the same.
    backend = opener()
    words = " ".join(f"w{i:07d}" for i in range(80_000))
    Log(backend, "big").flush(user("alpha " + words), user("beta"))
    for text in ("alpha", "w0079999", "beta", "nothing"):
        query = SearchQuery.parse(text)
        assert searched(backend, query) == scanned(backend, query)
    assert len(searched(backend, SearchQuery.parse("w0079999"))) == 1


# --- rows written without the index ---------------------------------------------------------


def _rows(sid: str, wires: list[dict[str, Any]], first: int) -> list[tuple[Any, ...]]:
    """The ``events`` rows of ``wires``, as the reference writes them."""
    from dsh_session_core._persistence.backends.sql.rows import PARAMS_PER_ROW, event_params

    params = event_params(sid, events_of(wires, first))
    n = PARAMS_PER_ROW
    return [(sid, *params[i:i + 4], params[i + 4] or None, params[i + 5] or None)
            for i in range(0, len(params), n)]


REFERENCE_LOG = [start(1), user("alpha one"), step(1), assistant("alpha beta"), end(1),
                 user("alpha outside"), start(2), result("gamma alpha")]


def _sqlite_insert(path: Path, sid: str, wires: list[dict[str, Any]], first: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR IGNORE INTO sessions VALUES (?, 0, 1000, '/w', NULL, NULL)",
                     (sid,))
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
                         _rows(sid, wires, first))
        conn.execute("COMMIT")
    finally:
        conn.close()


def _reference_db(path: Path) -> None:
    """A database as the reference makes it: its two tables, version 4, no index."""
    from dsh_session_core._persistence.backends.sqlite import schema as module

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA user_version = 4")
        for statement in module.SCHEMA:
            conn.execute(statement)
    finally:
        conn.close()
    _sqlite_insert(path, "ref", REFERENCE_LOG, 0)
    _sqlite_insert(path, "ref2", [user("alpha"), start(5), user("beta")], 0)


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


def test_sqlite_a_reference_database_is_caught_up_by_the_search(tmp_path: Path) -> None:
    db = tmp_path / "ref.db"
    _reference_db(db)
    backend = SqliteBackend(db)
    try:
        assert {"dsh_search", "dsh_search_docs", "dsh_search_state"} <= _tables(db)
        check_all(backend)
        # The reference writes on, and so do we: a small batch leaves the index where
        # it was (it trails the batches, sql/trail.py), and the search catches it up.
        _sqlite_insert(db, "ref", [user("alpha late"), assistant("alpha later")], 8)
        log = Log(backend, "ref")
        log.next = 10
        log.flush(user("alpha ours"), end(2))
        assert _sqlite_state(db, "ref") == (8, 2)
        check_all(backend)
        assert _sqlite_state(db, "ref") == (12, None)
        # A batch that indexes itself (one at the trail's bound: every one, at a bound
        # of 0) catches the rows before it up first.
        _sqlite_insert(db, "ref", [start(3), user("alpha theirs")], 12)
        backend._trail = Trail(0)
        log.next = 14
        log.flush(user("alpha ours again"), end(3))
        assert _sqlite_state(db, "ref") == (16, None)
        check_all(backend)
        query = SearchQuery.parse("alpha")
        assert [(h.seq, h.turn) for h in searched(backend, query)
                if h.session_id == "ref"] == [(1, 1), (3, 1), (5, None), (7, 2), (8, 2),
                                              (9, 2), (10, 2), (13, 3), (14, 3)]
    finally:
        backend.close()


def _sqlite_state(db: Path, sid: str) -> tuple[Any, ...] | None:
    """The session's index state: ``(next_seq, turn)``."""
    conn = sqlite3.connect(db)
    try:
        found: tuple[Any, ...] | None = conn.execute(
            "SELECT next_seq, turn FROM dsh_search_state WHERE session_id = ?", (sid,)
        ).fetchone()
        return found
    finally:
        conn.close()


def test_sqlite_index_rows_dropped_or_cut_by_another_writer(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    backend = SqliteBackend(db)
    try:
        fill(backend)
        check_all(backend)
        conn = sqlite3.connect(db, isolation_level=None)
        # Every index row gone (an older build's database copied over, say).
        conn.execute("DELETE FROM dsh_search")
        conn.execute("DELETE FROM dsh_search_docs")
        conn.execute("DELETE FROM dsh_search_state")
        check_all(backend)
        # Only the state gone: the docs rows are written again, not twice.
        conn.execute("DELETE FROM dsh_search_state")
        check_all(backend)
        # The reference's repair: rows cut, others written in their place.
        conn.execute("DELETE FROM events WHERE session_id = 's1' AND seq >= 4")
        conn.close()
        _sqlite_insert(db, "s1", [user("zeta alpha"), end(1)], 4)
        check_all(backend)
        query = SearchQuery.parse("zeta")
        assert [(h.seq, h.turn) for h in searched(backend, query)] == [(4, 1)]
    finally:
        backend.close()


def test_sqlite_a_search_in_step_reads_no_session_progress(tmp_path: Path) -> None:
    """Once a search found the index in step, the next one checks it with SQLite's
    ``data_version`` alone, until another connection commits: then every session's
    progress is read again, and the rows it wrote without the index are found."""
    from dsh_session_core._persistence.backends.sqlite import index as module

    db = tmp_path / "s.db"
    backend = SqliteBackend(db)
    try:
        fill(backend)
        statements: list[str] = []
        backend._conn.set_trace_callback(statements.append)
        query = SearchQuery.parse("alpha")
        first = searched(backend, query)
        assert any(module.SELECT_PROGRESS.strip() in s for s in statements)
        statements.clear()
        assert searched(backend, query) == first
        assert not any(module.SELECT_PROGRESS.strip() in s for s in statements)
        _sqlite_insert(db, "late", [user("alpha late")], 0)  # another connection
        statements.clear()
        assert [h.session_id for h in searched(backend, query)
                if h.session_id == "late"] == ["late"]
        assert any(module.SELECT_PROGRESS.strip() in s for s in statements)
        assert searched(backend, query) == scanned(backend, query)
    finally:
        backend.close()


# A reader of a read-only copy: as this user, or (the tests run as root, who writes a
# 0444 file all the same) as nobody or root without its overrides, in a process of its
# own (unprivileged_support).
_READER = """
import json, sys
sys.path[:0] = sys.argv[2:]
import test_search_index as t
backend = t.SqliteBackend(sys.argv[1], create=False)
t.check_all(backend)
hits = t.searched(backend, t.SearchQuery.parse("alpha"))
print(json.dumps([[h.session_id, h.seq, h.turn] for h in hits]))
"""


def _read_only_search(src: Path) -> list[list[Any]]:
    """``check_all`` on a read-only copy of the database ``src`` (in a folder anyone
    may write, as SQLite's WAL needs, the file itself 0444), and the hits of "alpha";
    the copy is checked to be unchanged."""
    import hashlib
    import json
    import tempfile

    from unprivileged_support import run_unprivileged

    folder = tempfile.mkdtemp(prefix="dsh-ro-")
    try:
        os.chmod(folder, 0o777)
        db = os.path.join(folder, "ro.db")
        shutil.copy(src, db)
        os.chmod(db, 0o444)
        with open(db, "rb") as f:
            before = hashlib.sha256(f.read()).hexdigest()
        here = os.path.dirname(__file__)
        paths = [here, os.path.dirname(here)]
        done = run_unprivileged(["-c", _READER, db, *paths], imports=["test_search_index"],
                                path=paths, reach=[db], cwd=folder)
        assert done.returncode == 0, done.stderr
        with open(db, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == before
        found: list[list[Any]] = json.loads(done.stdout)
        return found
    finally:
        shutil.rmtree(folder)


def test_sqlite_a_read_only_database_answers_completely(tmp_path: Path) -> None:
    # A reference database, never opened writable: no index tables at all.
    _reference_db(tmp_path / "ref.db")
    assert "dsh_search" not in _tables(tmp_path / "ref.db")
    assert [h[:2] for h in _read_only_search(tmp_path / "ref.db")] == [
        ["ref", 1], ["ref", 3], ["ref", 5], ["ref", 7], ["ref2", 0]]
    # An indexed database that a writer without the index went on writing.
    db = tmp_path / "s.db"
    writer = SqliteBackend(db)
    fill(writer)
    writer.close()
    _sqlite_insert(db, "s1", [user("alpha lagging"), end(2), user("alpha beta")], 9)
    _sqlite_insert(db, "s3", REFERENCE_LOG, 0)
    hits = _read_only_search(db)
    assert [h for h in hits if h[0] == "s1"][-3:] == [["s1", 8, 2], ["s1", 9, 2],
                                                      ["s1", 11, None]]
    assert len([h for h in hits if h[0] == "s3"]) == 4


# --- PostgreSQL: rows written without the index, and the older schema ------------------------

_V1_SCHEMA = (
    *OLD_TABLES,
    "INSERT INTO dsh_session_schema (version) VALUES (1)",
)


def _pg_insert(url: str, sid: str, wires: list[dict[str, Any]], first: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("INSERT INTO sessions VALUES (%s, 0, 1000, '/w', NULL, NULL)"
                     " ON CONFLICT DO NOTHING", (sid,))
        conn.cursor().executemany("INSERT INTO events VALUES (%s, %s, %s, %s, %s, %s, %s)",
                                  _rows(sid, wires, first))


def _pg(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []


def test_postgres_a_version_1_database_is_upgraded(postgresql_url: str) -> None:
    url = postgresql_url
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in _V1_SCHEMA:
            conn.execute(statement)
    _pg_insert(url, "ref", REFERENCE_LOG, 0)
    _pg_insert(url, "ref2", [user("alpha"), start(5), user("beta")], 0)
    backend = PostgresBackend(url)
    try:
        # Migrated through version 2 (the index) and 3 (the kept lines) to 4 (the
        # projections' tables).
        assert _pg(url, "SELECT version FROM dsh_session_schema") == [(PG_VERSION,)] == [(4,)]
        assert _pg(url, "SELECT count(*) FROM search_state") == [(0,)]
        check_all(backend)  # caught up by the first search
        assert sorted(_pg(url, "SELECT session_id, next_seq FROM search_state")) == [
            ("ref", 8), ("ref2", 3)]
        # Our batches follow; a batch after rows the index has not seen leaves the
        # index behind, and the search catches it up.
        log = Log(backend, "ref")
        log.next = 8
        log.flush(user("alpha ours"), end(2))
        _pg_insert(url, "ref", [user("alpha theirs")], 10)
        log.next = 11
        log.flush(start(3), user("alpha ours again"))
        check_all(backend)
        query = SearchQuery.parse("alpha")
        assert [(h.seq, h.turn) for h in searched(backend, query)
                if h.session_id == "ref"][-4:] == [(7, 2), (8, 2), (10, None), (12, 3)]
    finally:
        backend.close()
    # Opened again: already version 4.
    PostgresBackend(url).close()
    assert _pg(url, "SELECT version FROM dsh_session_schema") == [(4,)]


def test_postgres_index_rows_dropped_or_cut_by_another_writer(postgresql_url: str) -> None:
    url = postgresql_url
    backend = PostgresBackend(url)
    try:
        fill(backend)
        check_all(backend)
        _pg(url, "DELETE FROM search_docs")
        _pg(url, "DELETE FROM search_state")
        check_all(backend)
        _pg(url, "DELETE FROM search_state")  # the docs rows are written again
        check_all(backend)
        _pg(url, "DELETE FROM events WHERE session_id = 's1' AND seq >= 4")
        _pg_insert(url, "s1", [user("zeta alpha"), end(1)], 4)
        check_all(backend)
        assert [(h.seq, h.turn) for h in searched(backend, SearchQuery.parse("zeta"))] == [
            (4, 1)]
    finally:
        backend.close()


def test_postgres_batches_index_in_their_statement(postgresql_url: str) -> None:
    # Every batch indexes itself at a trail's bound of 0 (sql/trail.py): at the bound,
    # in the statement that inserts it; small batches leave it to the search (below).
    backend = PostgresBackend(postgresql_url)
    backend._trail = Trail(0)
    try:
        log = Log(backend, "p")
        log.flush(start(1), user("alpha"), step(1))
        log.flush(assistant("beta"), end(1), user("gamma"))
        rows = _pg(postgresql_url,
                   "SELECT seq, turn, words::text FROM search_docs ORDER BY seq")
        assert rows == [(1, 1, "'alpha'"), (3, 1, "'beta'"), (5, None, "'gamma'")]
        assert _pg(postgresql_url, "SELECT next_seq, turn FROM search_state") == [(6, None)]
    finally:
        backend.close()


# --- the shared pieces, and varied logs ---------------------------------------------------------


def test_query_strings() -> None:
    query = SearchQuery.parse('al* "it\'s" ' + "y" * 70)
    assert fts_match(query) == '"al"* "it" "s" "' + "y" * 64 + '"*'
    assert tsquery_text(query) == "'al':* & 'it' & 's' & '" + "y" * 64 + "':*"


def test_index_lines_tracks_turns_as_the_scan_does() -> None:
    lines = encode_events(events_of(
        [user("a"), start(4), assistant("b", turn=9), user("c"), end(4), user("d")], 0)
    ).split(b"\n")[:-1]
    rows, after, still = index_lines(lines, 3)
    assert [(r.seq, r.turn, r.words, r.inherited) for r in rows] == [
        (0, 3, ["a"], True), (2, 9, ["b"], False), (3, 4, ["c"], False),
        (5, None, ["d"], False)]
    assert (after, still) == (None, False)


WORDS = ["alpha", "beta", "gamma", "Alpha", "ALPHABET", "ünï", "read_file", "ß"]
_EXAMPLES = itertools.count()
ITEMS = st.one_of(
    st.builds(user, st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)),
    st.builds(assistant, st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join),
              st.none() | st.integers(-3, 3)),
    st.builds(result, st.sampled_from(WORDS)),
    st.builds(start, st.integers(0, 5)),
    st.builds(end, st.integers(0, 5)),
    st.builds(step, st.integers(0, 5)),
)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log=st.lists(ITEMS, min_size=1, max_size=20), cuts=st.lists(st.integers(1, 19)),
       text=st.sampled_from(["alpha", "alp*", "al* beta", '"alpha beta"', "ünï", "ss",
                             "file", "read_file"]))
def test_varied_logs_and_flushes(opener: Opener, log: list[dict[str, Any]],
                                 cuts: list[int], text: str) -> None:
    backend = opener()
    # A new session for every example: hypothesis may run one example twice (replaying,
    # shrinking) against the same database, and a session is written only once.
    sid = f"h{next(_EXAMPLES)}"
    writer = Log(backend, sid)
    bounds = sorted({c for c in cuts if c < len(log)} | {0, len(log)})
    for a, b in itertools.pairwise(bounds):
        writer.flush(*log[a:b])
    query = SearchQuery.parse(text, sessions=[sid])
    assert searched(backend, query) == scanned(backend, query)


def _both_readings(events: list[Event], turn: int | None) -> None:
    """A batch indexed from its events gives the rows its lines give."""
    jsonl = encode_events(events)
    lines = jsonl.split(b"\n")[:-1]
    read: list[bool] = []

    def from_lines() -> list[bytes]:
        read.append(True)
        return lines

    assert index_batch(events, jsonl, from_lines, turn) == index_lines(lines, turn)
    typed = not any(type(e).__name__ == "OpaqueEvent" for e in events)
    assert read == ([] if typed and b"\\ud" not in jsonl else [True])


@settings(max_examples=60, deadline=None)
@given(log=st.lists(ITEMS | st.builds(call, st.sampled_from(WORDS), st.sampled_from(WORDS)),
                    max_size=20),
       turn=st.none() | st.integers(-3, 3) | st.just(2**40))
def test_a_batch_indexed_from_its_events_as_from_its_lines(log: list[dict[str, Any]],
                                                           turn: int | None) -> None:
    _both_readings(events_of(log, 0), turn)


def test_every_reference_log_indexed_from_its_events_as_from_its_lines(
        upstream: Path) -> None:
    from dsh_session_core._logformat.logfile import parse_log

    logs = sorted(upstream.rglob("*.jsonl"))
    assert logs
    for path in logs:
        try:
            parsed = parse_log(path.read_bytes(), REGISTRY)
        except ValueError:
            continue  # a fixture of a broken log: no batch of it is written
        for size in (1, 7, len(parsed.events) or 1):
            turn = None
            for i in range(0, len(parsed.events), size):
                batch = parsed.events[i:i + size]
                _both_readings(batch, turn)
                turn = index_lines(encode_events(batch).split(b"\n")[:-1], turn)[1]


def test_a_lone_surrogate_sends_a_batch_to_its_lines() -> None:
    _both_readings(events_of([user("a \ud800 b"), user("alpha")], 0), None)


def test_words_fts5_does_not_take_for_letters(opener: Opener) -> None:
    # U+19B0.. are letters to Python, separators to FTS5's older Unicode tables: a query
    # of them alone cannot be answered by FTS5, which then checks every line.
    backend = opener()
    odd = "\u19b0\u19b1"
    Log(backend, "u").flush(user(f"alpha {odd}"), user(odd), user("alpha"))
    for text in (odd, f"alpha {odd}", f"{odd}*", f'"alpha {odd}"'):
        query = SearchQuery.parse(text)
        assert searched(backend, query) == scanned(backend, query), text
    assert [h.seq for h in searched(backend, SearchQuery.parse(odd))] == [0, 1]


@pytest.mark.parametrize("bound", [0, 3, None])
def test_postgres_async_batches_are_indexed(postgresql_url: str, bound: int | None) -> None:
    """Asyncio batches follow the trail as the others do (sql/trail.py): at a bound of
    0 each is indexed in its statement; at 3 the second batch reaches the bound and
    catches the first up after it (in a thread: the event loop runs); under the
    default bound both are left for the search, and ``aclose`` indexes them."""
    import asyncio

    backend = PostgresBackend(postgresql_url)
    if bound is not None:
        backend._trail = Trail(bound)
    states: list[list[tuple[Any, ...]]] = []

    async def write() -> None:
        first = events_of([start(1), user("alpha")], 0)
        await backend.aappend_batch(meta("a", "/w"), first, encode_events(first), False)
        more = events_of([assistant("alpha beta"), end(1)], 2)
        await backend.aappend_batch(meta("a", "/w"), more, encode_events(more), True)
        states.append(_pg(postgresql_url, "SELECT next_seq, turn FROM search_state"))
        await backend.aclose()

    try:
        asyncio.run(write())
        assert states == [[] if bound is None else [(4, None)]]
        assert _pg(postgresql_url, "SELECT next_seq, turn FROM search_state") == [(4, None)]
        backend = PostgresBackend(postgresql_url)
        check_all(backend)
        assert [(h.seq, h.turn) for h in searched(backend, SearchQuery.parse("alpha"))] == [
            (1, 1), (2, 1)]
    finally:
        backend.close()


def test_the_store_searches_through_the_index(tmp_path: Path) -> None:
    from dsh_session_core import open_store

    with open_store(f"sqlite:///{tmp_path}/s.db") as store:
        s = store.create("chat", cwd="/w")
        s.append("turn/start", start(1)["data"])
        s.append("user/message", user("Where is the alpha file?")["data"],
                 surface_op="append")
        s.append("turn/end", end(1)["data"])
        store.flush(s)
        hits = store.search("alpha")
    assert [(h.session_id, h.seq, h.turn, h.snippet) for h in hits] == [
        ("chat", 1, 1, "Where is the alpha file?")]
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        assert conn.execute("SELECT session_id, seq, turn FROM dsh_search_docs").fetchall() == [
            ("chat", 1, 1)]
    finally:
        conn.close()
