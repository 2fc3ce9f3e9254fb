"""The SQLite backend's cheap paths (issue 25, point 4): reads answered in one statement
whose lines SQLite builds, byte for byte the lines the row-by-row path built; the
default mode's per-call statements (retaking the writer lock, ``lines_since``, the
batch and its index); and opening a database whose schema is already there.

Statements are counted with SQLite's own trace callback on the real connection; the
expected lines are built here from the JSON rules (key order ``type, seq, time, data[,
sourceEventSeqs][, surfaceOp]``, the type quoted as JSON), not by the backend's code.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_core import SessionHeader
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend

_ROW_SQL = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)"


def _header(session_id: str) -> SessionHeader:
    return SessionHeader(version=0, id=session_id, created_at=1000)


def _json_text(value: Any, newline: bool) -> str:
    """The JSON text of ``value``, with a raw newline after its first character when
    asked (whitespace a hand edit may leave; a line holds it as a space)."""
    text = msgspec.json.encode(value).decode()
    return text[0] + "\n" + text[1:] if newline and len(text) > 1 else text


def _expected(row: tuple[Any, ...]) -> bytes:
    _, seq, type_, time, data, sources, op = row
    line: bytes = (b'{"type":' + msgspec.json.encode(type_) + b',"seq":' + str(seq).encode()
            + b',"time":' + str(time).encode() + b',"data":' + data.encode())
    if sources is not None:
        line += b',"sourceEventSeqs":' + sources.encode()
    if op is not None:
        line += b',"surfaceOp":' + op.encode()
    return (line + b"}").replace(b"\n", b" ")


def _store(path: Path, rows: list[tuple[Any, ...]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for sid in sorted({r[0] for r in rows}):
            conn.execute("INSERT INTO sessions VALUES (?, 0, 1000, NULL, NULL, NULL)", (sid,))
        conn.executemany(_ROW_SQL, rows)
        conn.execute("COMMIT")
    finally:
        conn.close()


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[SqliteBackend, list[str]]]:
    """A backend over a fresh file, and the statements its connection runs."""
    backend = SqliteBackend(tmp_path / "s.db")
    statements: list[str] = []
    backend._conn.set_trace_callback(statements.append)
    try:
        yield backend, statements
    finally:
        backend.close()


# --- reads in one statement, byte for byte ------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6)
_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_types = st.sampled_from(["agents/item", "agents/pop", "turn/start", 'x/"q"', "x/\\n",
                          "x/\t\u2028é😀", "x/\x01"])
_row = st.tuples(
    _types, st.integers(-(2**63), 2**63 - 1), _value,
    st.none() | st.lists(st.integers(0, 99), max_size=3),
    st.none() | st.sampled_from(["append", {"replace": 3}, "é"]),
    st.integers(0, 20),  # 0: a raw newline in the data (whitespace between tokens)
)


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_row, max_size=12), wanted=st.sets(_types, max_size=4),
       after=st.integers(-2, 12), limit=st.none() | st.integers(-1, 13))
def test_the_lines_sqlite_builds_are_the_rows_lines(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[Any, ...]],
    wanted: set[str], after: int, limit: int | None,
) -> None:
    path = tmp_path_factory.mktemp("rows") / "s.db"
    SqliteBackend(path).close()
    stored = [
        ("s", seq, type_, time, _json_text(data, newline == 0),
         None if sources is None else msgspec.json.encode(sources).decode(),
         None if op is None else msgspec.json.encode(op).decode())
        for seq, (type_, time, data, sources, op, newline) in enumerate(rows)
    ]
    # Another session's rows on both sides of the key range.
    _store(path, [*stored, ("r", 0, "agents/item", 1, "{}", None, None),
                  ("t", 0, "agents/item", 1, "{}", None, None)])
    backend = SqliteBackend(path)
    try:
        if not stored:  # no row, so no sessions row: not stored
            assert backend.lines_of_types("s", wanted) is None
            assert backend.read_lines("s", after, limit) is None
            return
        lines = [_expected(row) for row in stored]
        got = backend.lines_of_types("s", wanted)
        assert got == [line for line, row in zip(lines, stored, strict=True)
                       if row[2] in wanted]
        # Past the types it binds one by one, the same lines (json_quote quotes them).
        many = {*wanted, *(f"pad/{i}" for i in range(9))}
        assert backend.lines_of_types("s", many) == got
        assert backend.read_lines("s", after, limit) == (
            lines[max(after + 1, 0):][:None if limit is None else max(limit, 0)])
        assert backend.lines_of_types("u", wanted) is None
        assert backend.read_lines("u", -1, None) is None
    finally:
        backend.close()


def test_reads_of_a_session_are_one_statement_each(
    traced: tuple[SqliteBackend, list[str]],
) -> None:
    backend, statements = traced
    _store(Path(backend.path), [("s", 0, "agents/item", 1, "{}", None, None),
                                ("s", 1, "turn/start", 2, "{}", None, None)])
    statements.clear()
    assert backend.lines_of_types("s", ["agents/item"]) == [
        b'{"type":"agents/item","seq":0,"time":1,"data":{}}']
    assert len(statements) == 1
    statements.clear()
    assert len(backend.read_lines("s", -1, None) or []) == 2
    assert len(statements) == 1
    statements.clear()
    assert backend.read_lines("s", 1, None) == []  # stored, nothing after seq 1
    assert backend.lines_of_types("s", ["x"]) == []
    assert backend.lines_of_types("nope", ["x"]) is None
    assert len(statements) == 3


def test_lines_beyond_the_string_limit_are_built_row_by_row(
    traced: tuple[SqliteBackend, list[str]],
) -> None:
    backend, _ = traced
    data = '{"text":"' + "é" * 300 + '"}'
    _store(Path(backend.path), [("s", i, "agents/item", i, data, None, None)
                                for i in range(20)])
    backend._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 2000)  # a row fits, all do not
    expected = [_expected(("s", i, "agents/item", i, data, None, None)) for i in range(20)]
    assert backend.lines_of_types("s", ["agents/item"]) == expected
    assert backend.read_lines("s", 4, 3) == expected[5:8]


# --- the default mode's call ------------------------------------------------------------


def test_a_call_in_the_default_mode_runs_one_read_and_one_write_transaction(
    tmp_path: Path,
) -> None:
    # Take the released session back, append a turn, flush, release: what DshSession
    # does per add_items call without keep_open.
    from dsh_session_core import open_store

    with open_store(f"sqlite:///{tmp_path}/s.db") as store:
        backend = store.backend
        assert isinstance(backend, SqliteBackend)
        session = store.create("s")
        with session.turn() as turn:
            turn.user("zero")
        store.release(session)
        statements: list[str] = []

        def top(sql: str) -> None:  # FTS5's own statements start with "--"
            if not sql.startswith("--"):
                statements.append(sql)

        backend._conn.set_trace_callback(top)
        for text in ("one", "two"):
            statements.clear()
            again = store.open("s", resume=session)
            assert again is session  # no one wrote: taken back as it was
            with again.turn() as turn:
                turn.user(text)
            store.release(again)
            begin = statements.index("BEGIN IMMEDIATE")
            # Before the batch, one statement: the rows from the last event on (its
            # own); no read transaction, and no query at release.
            assert len(statements[:begin]) == 1
            assert statements[0].startswith("SELECT")
            assert statements[-1] == "COMMIT"
            assert statements.count("COMMIT") == 1
            # The batch: its rows (its index rows are left to the next search,
            # sql/trail.py; at the trail's bound, they and the new state, the state
            # it starts from having come with that read, as the lock was held).
            assert len(statements) - begin <= 6
            assert not [s for s in statements[begin:] if s.startswith("SELECT")]
        assert [e.data.content[0].text for e in store.read_session("s").events
                if e.type == "user/message"] == ["zero", "one", "two"]


def test_the_lock_file_of_a_session_never_stored_still_goes_at_release(
    tmp_path: Path,
) -> None:
    backend = SqliteBackend(tmp_path / "s.db")
    try:
        lock = backend.acquire(_header("never"))
        (held,) = list((tmp_path / "s.db.locks").iterdir())
        lock.release()
        assert not held.exists()
        # Stored under one lock, then the session deleted: a new lock's release asks
        # the database again and takes the file away.
        from dsh_session_core import Session

        live = Session("x", header=_header("x"), clock=lambda: 1)
        live.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                          "source": {"kind": "user"}}})
        lock = backend.acquire(live.header)
        backend.append_batch(live.header, list(live.events), live.jsonl(), False)
        lock.release()
        assert len(list((tmp_path / "s.db.locks").iterdir())) == 1  # stored: kept
        backend.delete("x")
        lock = backend.acquire(live.header)
        lock.release()
        assert list((tmp_path / "s.db.locks").iterdir()) == []
    finally:
        backend.close()


# --- opening -----------------------------------------------------------------------------


def _opening_statements(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[str]:
    """The statements a backend's open runs on its (real) connection."""
    statements: list[str] = []
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced_connect)  # the module the backend uses
    SqliteBackend(path).close()
    monkeypatch.setattr(sqlite3, "connect", connect)
    return [s for s in statements if not s.startswith("--")]


def test_a_database_with_its_schema_opens_without_creating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "s.db"
    first = _opening_statements(monkeypatch, path)
    # A new file: every table (the reference's two, dsh-session's own two and their two
    # triggers, the projections' two with their index and trigger, the index's three).
    assert sum(s.startswith("CREATE") for s in first) == 13
    again = _opening_statements(monkeypatch, path)
    assert not [s for s in again if s.startswith(("CREATE", "BEGIN"))]
    assert len(again) <= 4  # two pragmas, the versions and the tables, the own version
    # A database the reference wrote (its two tables, no index): the index is made.
    conn = sqlite3.connect(path)
    for table in ("dsh_search", "dsh_search_docs", "dsh_search_state"):
        conn.execute(f"DROP TABLE {table}")
    conn.commit()
    conn.close()
    made = _opening_statements(monkeypatch, path)
    assert sum(s.startswith("CREATE") for s in made) >= 3
    backend = SqliteBackend(path)
    try:
        assert backend._indexed
    finally:
        backend.close()


def test_writers_taking_turns_in_the_default_mode_index_every_turn_as_its_own(
    tmp_path: Path,
) -> None:
    # Each call starts its batch from the index state read with lines_since; another
    # writer's turns in between move it, and the next batch must start from theirs.
    from dsh_session_core import open_store
    from dsh_session_core._search import SearchQuery

    url = f"sqlite:///{tmp_path}/s.db"
    with open_store(url) as mine, open_store(url) as theirs:
        session = mine.create("s")
        with session.turn() as turn:
            turn.user("alpha")
        mine.release(session)
        other = theirs.open("s")
        with other.turn() as turn:
            turn.user("beta")
            with turn.step() as step:
                step.assistant("gamma")
        theirs.release(other)
        for word in ("delta", "epsilon"):
            session = mine.open("s", resume=session)
            with session.turn() as turn:
                turn.user(word)
            mine.release(session)
        backend = mine.backend
        assert isinstance(backend, SqliteBackend)
        words = ("alpha", "beta", "gamma", "delta", "epsilon")
        hits = {w: [h.turn for h in backend.search(SearchQuery.parse(w))]
                for w in words}
    assert hits == {"alpha": [1], "beta": [2], "gamma": [2], "delta": [3], "epsilon": [4]}
