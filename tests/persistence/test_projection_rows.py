"""Projection rows in the backends that keep them with the log (memory, SQLite,
PostgreSQL): what a write's changes leave, what a read returns, and that rows never
leak to another session or projection, never outlive their session, and never change
in a write that is refused.

The backend-level tests drive the :class:`~dsh_session_core._persistence.capabilities.
Projecting` methods with :class:`RowChanges` and compare every read with
:class:`RowTable`, the reference semantics (the memory backend's storage); the
store-level ones declare a projection by a plugin and write sessions as a host does.
The migrations are checked on databases as the build before this one left them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_support import OLD_TABLES

from dsh_session_core import (
    DurableStore,
    Event,
    PluginManager,
    core_registry,
    create_plugin_manager,
    hookimpl,
    open_store,
)
from dsh_session_core._persistence.backends.postgres import schema as postgres_schema
from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend
from dsh_session_core._persistence.backends.redis.keys import SessionKeys
from dsh_session_core._persistence.backends.sqlite import schema as sqlite_schema
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core._persistence.capabilities import Capabilities, Projecting
from dsh_session_core._persistence.rows import RowChanges, RowQuery, RowTable
from dsh_session_core._schema.codec import encode_events
from dsh_session_core._schema.decode import decode_wire
from dsh_session_core.errors import PersistenceError, UnstorableError
from dsh_session_core.projections import Clear, Delete, Projection, Put, Summary
from dsh_session_core.testing import (
    BackendFactory,
    session_header,
    turn_end,
    turn_end_data,
    turn_start,
    turn_start_data,
    user,
    wire_event,
)

pytestmark = pytest.mark.store_kinds("memory", "sqlite", "postgresql", "redis")

REGISTRY = core_registry()


# --- the backend level -------------------------------------------------------------------

def _projecting(backend: Any) -> Projecting:
    found = Capabilities.of(backend).projecting
    assert found is not None, f"{type(backend).__name__} keeps no projection rows"
    return found


def _events(first: int, count: int, time: int = 1000) -> list[Event]:
    """Events ``first .. first + count - 1`` (turns opened and closed), at ``time + seq``."""
    wires = [wire_event("turn/start", seq, turn_start_data(seq // 2 + 1), time=time + seq)
             if seq % 2 == 0 else
             wire_event("turn/end", seq, turn_end_data(seq // 2 + 1), time=time + seq)
             for seq in range(first, first + count)]
    return [decode_wire(REGISTRY, w) for w in wires]


class Model:
    """What the rows of each (session, projection) must be: :class:`RowTable`s, and the
    log each session holds (to append to it)."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], tuple[RowTable, bytes]] = {}
        self.logs: dict[str, int] = {}

    def apply(self, sid: str, changes: Iterable[RowChanges]) -> None:
        for change in changes:
            key = (sid, change.name)
            table = self.tables[key][0] if key in self.tables else RowTable()
            table.apply(change)
            self.tables[key] = (table, change.mark)

    def drop(self, sid: str) -> None:
        for key in [k for k in self.tables if k[0] == sid]:
            del self.tables[key]


# Keys that sort differently by code point, by UTF-16 unit (U+FFFF against a non-BMP
# character) and by any locale (case, accents, punctuation, spaces).
_KEYS = st.text(alphabet="aAbB_- 0é\uffff\U0001f600\U0010fffd", max_size=4)
_BYTES = st.binary(min_size=1, max_size=6)
#: Sessions and projections whose names are prefixes of one another.
_SESSIONS = ("x", "x1")
_NAMES = ("t/a", "t/ab")


@st.composite
def _changes(draw: st.DrawFn) -> RowChanges:
    summary_set = draw(st.booleans())
    return RowChanges(
        draw(st.sampled_from(_NAMES)), draw(_BYTES),
        rebuild=draw(st.integers(0, 9)) == 0, clear=draw(st.integers(0, 6)) == 0,
        rows=draw(st.dictionaries(_KEYS, st.one_of(st.none(), _BYTES), max_size=6)),
        summary_set=summary_set, summary=draw(st.one_of(st.none(), _BYTES)) if summary_set
        else None)


_WRITES = st.lists(st.tuples(st.sampled_from(_SESSIONS),
                             st.sampled_from(("append", "rows", "drop")),
                             st.lists(_changes(), max_size=3)), min_size=1, max_size=8)
_QUERIES = st.builds(
    RowQuery, keys=st.one_of(st.none(), st.lists(_KEYS, max_size=4).map(tuple)),
    start=st.one_of(st.none(), _KEYS), stop=st.one_of(st.none(), _KEYS),
    newest_first=st.booleans(), limit=st.one_of(st.none(), st.integers(0, 5)))

_run = itertools.count()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(writes=_WRITES, queries=st.lists(_QUERIES, min_size=1, max_size=6))
def test_rows_are_what_the_changes_make_them(
    storage: BackendFactory, writes: list[tuple[str, str, list[RowChanges]]],
    queries: list[RowQuery],
) -> None:
    backend = storage()
    try:
        _check_writes(backend, next(_run), writes, queries)
    finally:
        backend.close()  # each example's (PostgreSQL: a connection each)


def _check_writes(backend: Any, run: int, writes: list[tuple[str, str, list[RowChanges]]],
                  queries: list[RowQuery]) -> None:
    rows = _projecting(backend)
    model = Model()

    def sid(name: str) -> str:
        return f"{run}-{name}"

    for session, how, changes in writes:
        if how == "append":
            at = model.logs.get(session, 0)
            events = _events(at, 2)
            rows.append_projected(session_header(sid(session)), events,
                                  encode_events(events), at > 0, changes)
            model.logs[session] = at + 2
        elif how == "rows":
            if session not in model.logs:
                continue  # rows are built for a stored session (a writer's first open)
            rows.write_rows(session_header(sid(session)), changes)
        else:
            rows.drop_projections(sid(session))
            model.drop(session)
            continue
        model.apply(session, changes)
    for session in _SESSIONS:
        assert rows.projection_marks(sid(session)) == {
            name: mark for (s, name), (_, mark) in model.tables.items() if s == session}
        for name in _NAMES:
            table = model.tables.get((session, name), (RowTable(), b""))[0]
            for query in queries:
                assert rows.projection_rows(sid(session), name, query) == table.select(query)
    ids = [sid(s) for s in _SESSIONS]
    for name in _NAMES:
        expected = {(sid(s), mark, table.summary)
                    for (s, n), (table, mark) in model.tables.items()
                    if n == name and table.summary is not None}
        assert set(rows.projection_summaries(name, ids)) == expected
        assert set(rows.projection_summaries(name, ids[:1])) == {
            e for e in expected if e[0] == ids[0]}
        # Every session's summaries: this run's among them, no other run's of its ids.
        everyone = {e for e in rows.projection_summaries(name) if e[0].startswith(f"{run}-")}
        assert everyone == expected


def _put(name: str, mark: bytes, **rows: bytes | None) -> RowChanges:
    return RowChanges(name, mark, rows=dict(rows))


@pytest.mark.store_kinds("sqlite", "postgresql")  # the memory backend checks no seq
def test_a_refused_append_leaves_the_rows_as_they_were(storage: BackendFactory) -> None:
    backend = storage()
    rows = _projecting(backend)
    header = session_header("s")
    events = _events(0, 2)
    rows.append_projected(header, events, encode_events(events), False,
                          [_put("t/a", b"m1", a=b"1", b=b"2")])
    # The same seqs again (a writer with a stale cursor): refused, rows untouched.
    again = _events(0, 2, time=5000)
    with pytest.raises(PersistenceError, match="another writer"):
        rows.append_projected(header, again, encode_events(again), True,
                              [RowChanges("t/a", b"m2", rebuild=True, rows={"c": b"3"}),
                               _put("t/ab", b"m3", z=b"9")])
    assert rows.projection_marks("s") == {"t/a": b"m1"}
    assert rows.projection_rows("s", "t/a", RowQuery()) == [("a", b"1"), ("b", b"2")]
    assert rows.projection_rows("s", "t/ab", RowQuery()) == []
    stored = backend.load_stored("s", REGISTRY)
    assert stored is not None
    assert [e.time for e in stored.events] == [1000, 1001]


@pytest.mark.store_kinds("sqlite", "postgresql")
def test_rows_that_cannot_be_written_roll_the_batch_back(
    storage: BackendFactory, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    backend = storage()
    rows = _projecting(backend)
    header = session_header("s")
    first = _events(0, 2)
    rows.append_projected(header, first, encode_events(first), False,
                          [_put("t/a", b"m1", a=b"1")])
    # Another connection makes every write of a mark fail, in the database itself: the
    # batch's events were inserted before its rows, and must go with them.
    conn: Any
    if store_kind == "sqlite":
        conn = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
        conn.execute("CREATE TRIGGER no_marks BEFORE UPDATE ON dsh_projection_marks"
                     " BEGIN SELECT RAISE(ABORT, 'no marks today'); END")
        undo = "DROP TRIGGER no_marks"
        failure: type[Exception] = sqlite3.IntegrityError
    else:
        conn = psycopg.connect(request.getfixturevalue("postgresql_url"), autocommit=True)
        conn.execute("CREATE FUNCTION no_marks() RETURNS trigger LANGUAGE plpgsql AS"
                     " $$ BEGIN RAISE EXCEPTION 'no marks today'; END $$")
        conn.execute("CREATE TRIGGER no_marks BEFORE UPDATE ON dsh_projection_marks"
                     " FOR EACH ROW EXECUTE PROCEDURE no_marks()")
        undo = "DROP TRIGGER no_marks ON dsh_projection_marks"
        failure = psycopg.errors.RaiseException
    try:
        batch = _events(2, 2)
        change = RowChanges("t/a", b"m2", rows={"a": None, "b": b"2"}, summary_set=True,
                            summary=b"s")
        with pytest.raises(failure, match="no marks today"):
            rows.append_projected(header, batch, encode_events(batch), True, [change])
        stored = backend.load_stored("s", REGISTRY)
        assert stored is not None
        assert len(stored.events) == 2  # the events went too
        assert rows.projection_marks("s") == {"t/a": b"m1"}
        assert rows.projection_rows("s", "t/a", RowQuery()) == [("a", b"1")]
        assert rows.projection_summaries("t/a") == []
        with pytest.raises(failure, match="no marks today"):
            rows.write_rows(header, [change, _put("t/ab", b"m3", c=b"3")])
        assert rows.projection_marks("s") == {"t/a": b"m1"}
        assert rows.projection_rows("s", "t/ab", RowQuery()) == []
        conn.execute(undo)
        # Nothing was left half-written: the same batch goes in now.
        rows.append_projected(header, batch, encode_events(batch), True, [change])
    finally:
        conn.close()
    assert rows.projection_rows("s", "t/a", RowQuery()) == [("b", b"2")]
    assert rows.projection_summaries("t/a") == [("s", b"m2", b"s")]


@pytest.mark.store_kinds("sqlite", "postgresql")
def test_a_key_no_column_holds_is_refused_before_anything_is_written(
    storage: BackendFactory, store_kind: str,
) -> None:
    backend = storage()
    rows = _projecting(backend)
    bad = "a\ud800" if store_kind == "sqlite" else "a\x00b"
    what = "a lone surrogate" if store_kind == "sqlite" else "a NUL character"
    events = _events(0, 2)
    with pytest.raises(UnstorableError, match=f'projection "t/a" of session \'s\' has a key '
                                              f"holding {what}"):
        rows.append_projected(session_header("s"), events, encode_events(events), False,
                              [_put("t/a", b"m", ok=b"1", **{bad: b"2"})])
    assert backend.load_stored("s", REGISTRY) is None
    assert rows.projection_marks("s") == {}
    with pytest.raises(UnstorableError):
        rows.write_rows(session_header("s"), [_put("t/a", b"m", **{bad: b"2"})])
    assert rows.projection_marks("s") == {}
    # Reads with such keys or bounds ask for what no row holds, and answer as a table.
    rows.write_rows(session_header("s"), [_put("t/a", b"m", a=b"1", b=b"2", c=b"3")])
    table = RowTable()
    table.apply(_put("t/a", b"m", a=b"1", b=b"2", c=b"3"))
    for query in (RowQuery(keys=(bad, "b")), RowQuery(start=bad), RowQuery(stop=bad),
                  RowQuery(start="a\ud800", stop="b\ud800"), RowQuery(start="b\x00")):
        assert rows.projection_rows("s", "t/a", query) == table.select(query)
    assert rows.projection_rows(bad, "t/a", RowQuery()) == []
    assert rows.projection_marks(bad) == {}
    assert rows.projection_summaries("t/a", [bad]) == []


def test_a_rewrite_drops_the_old_logs_rows(storage: BackendFactory) -> None:
    backend = storage()
    rows = _projecting(backend)
    for sid in ("s", "t"):
        events = _events(0, 2)
        rows.append_projected(session_header(sid), events, encode_events(events), False,
                              [RowChanges("t/a", b"m", rows={"a": b"1"}, summary_set=True,
                                          summary=b"s")])
    events = _events(0, 2, time=7000)
    rewritable = Capabilities.of(backend).rewritable
    assert rewritable is not None
    rewritable.rewrite(session_header("s"), events, encode_events(events))
    assert rows.projection_marks("s") == {}
    assert rows.projection_rows("s", "t/a", RowQuery()) == []
    assert rows.projection_summaries("t/a") == [("t", b"m", b"s")]


def test_dropping_projections_drops_one_session_or_all(storage: BackendFactory) -> None:
    backend = storage()
    rows = _projecting(backend)
    for sid in ("s", "t"):  # stored sessions (rows are built for those)
        events = _events(0, 2)
        rows.append_projected(session_header(sid), events, encode_events(events), False,
                              [_put("t/a", b"m", a=b"1"), _put("t/ab", b"m", a=b"1")])
    rows.drop_projections("s")
    assert rows.projection_marks("s") == {}
    assert rows.projection_marks("t") == {"t/a": b"m", "t/ab": b"m"}
    rows.drop_projections(None)
    assert rows.projection_marks("t") == {}
    assert rows.projection_rows("t", "t/a", RowQuery()) == []


# --- the store level: a plugin's projection ----------------------------------------------

class Note(msgspec.Struct):
    text: str


class Count(msgspec.Struct):
    n: int


def _commands(event: Event) -> Iterator[tuple[str, str, str]]:
    for line in event.data.content[0].text.split(";"):
        verb, _, rest = line.partition(" ")
        key, _, value = rest.partition("=")
        yield verb, key, value


def fold_notes(event: Event) -> Iterator[Any]:
    """``put k=v``, ``del k``, ``clear``, ``sum n``, ``nosum``, ``;``-separated."""
    for verb, key, value in _commands(event):
        if verb == "put":
            yield Put(key, Note(value))
        elif verb == "del":
            yield Delete(key)
        elif verb == "clear":
            yield Clear()
        elif verb == "sum":
            yield Summary(Count(int(key)))
        elif verb == "nosum":
            yield Summary(None)


def fold_seqs(event: Event) -> Iterator[Any]:
    yield Put(f"{event.seq:06d}", Note("seen"))


NOTES = Projection("test/notes", 1, frozenset({"user/message"}), Note, fold_notes,
                   summary=Count)
#: A second projection of the same events, whose name extends the first's.
SEQS = Projection("test/notes2", 1, frozenset({"user/message"}), Note, fold_seqs)


class _Plugin:
    @hookimpl
    def register_projections(self) -> list[Projection]:
        return [NOTES, SEQS]


def _pm() -> PluginManager:
    pm = create_plugin_manager(autoload=False)
    pm.register(_Plugin(), "test-projections")
    return pm


def _model(texts: Iterable[str]) -> tuple[dict[str, Note], Count | None]:
    rows: dict[str, Note] = {}
    summary = None
    for text in texts:
        for verb, key, value in _commands(_as_event(text)):
            if verb == "put":
                rows[key] = Note(value)
            elif verb == "del":
                rows.pop(key, None)
            elif verb == "clear":
                rows.clear()
            elif verb == "sum":
                summary = Count(int(key))
            elif verb == "nosum":
                summary = None
    return rows, summary


def _as_event(text: str) -> Event:
    return decode_wire(REGISTRY, wire_event(
        "user/message", 0, {"content": [{"type": "text", "text": text}],
                            "source": {"kind": "user"}}, surface_op="append"))


def _turn(store: DurableStore, session: Any, turn: int, *texts: str) -> None:
    turn_start(session, turn)
    for text in texts:
        user(session, text)
    turn_end(session, turn)
    store.flush(session)


#: Batches of commands, a turn (a flush) each: a clear, removals, a summary set and
#: removed, keys in code point order unlike any locale's.
BATCHES = (
    ("put b=1;put a=2", "put B=3;sum 1"),
    ("put é=4;put \U0001f600=5;put \uffff=6", "del b"),
    ("clear;put z=7", "put a=8;del z;put a 1=9"),
    ("nosum",),
    ("sum 5;put b1=10;put b10=11;put b2=12",),
)


def _stored(store: DurableStore, sid: str, name: str) -> list[tuple[str, Any]]:
    """The rows the backend itself holds (no fold), decoded."""
    rows = _projecting(store.backend)
    projection = NOTES if name == NOTES.name else SEQS
    return [(k, projection.decode_row(v))
            for k, v in rows.projection_rows(sid, name, RowQuery())]


def test_the_rows_are_the_fold_of_the_log_after_each_flush(store_url: str,
                                                          store_kind: str) -> None:
    texts: list[str] = []
    with open_store(store_url, plugin_manager=_pm()) as store:
        session = store.create()
        sid = session.id
        for turn, batch in enumerate(BATCHES, 1):
            _turn(store, session, turn, *batch)
            texts += batch
            rows, summary = _model(texts)
            view = store.projection(sid, NOTES.name)
            assert view.folded == 0  # read from the stored rows
            assert view.rows() == sorted(rows.items()) == _stored(store, sid, NOTES.name)
            assert view.summary() == summary
            seqs = store.projection(sid, SEQS.name)
            assert seqs.folded == 0
            assert len(seqs.rows()) == len(texts) == len(_stored(store, sid, SEQS.name))
        store.release(session)
    if store_kind == "memory":
        return
    # Another process's store reads the rows as they are stored: nothing is folded.
    with open_store(store_url, plugin_manager=_pm()) as store:
        view = store.projection(sid, NOTES.name)
        assert view.folded == 0
        assert view.covers == 5 * 2 + len(texts)
        assert view.rows() == sorted(_model(texts)[0].items())
        assert view.summary() == Count(5)


def test_a_view_reads_keys_ranges_and_the_newest_rows(store_url: str) -> None:
    keys = ["a", "a1", "a10", "a2", "b", "B", "é", "\uffff", "\U0001f600", "a\U0010fffd"]
    with open_store(store_url, plugin_manager=_pm()) as store:
        session = store.create()
        _turn(store, session, 1, ";".join(f"put {k}={i}" for i, k in enumerate(keys)))
        _turn(store, session, 2, "put other=x")
        other = store.create()
        _turn(store, other, 1, "put a0=leak;put a=leak")
        view = store.projection(session.id, NOTES.name)
        assert view.folded == 0
        everything = sorted((k, Note(str(i))) for i, k in enumerate(keys))
        everything = sorted([*everything, ("other", Note("x"))])
        assert view.rows() == everything
        assert view.get("a2") == Note("3")
        assert view.get("a0") is None
        assert view.get("nope") is None
        assert view.get_many(["a", "b", "a0", "B"]) == {"a": Note("0"), "b": Note("4"),
                                                        "B": Note("5")}
        assert view.rows(prefix="a") == [r for r in everything if r[0].startswith("a")]
        assert [k for k, _ in view.rows(prefix="a", newest_first=True, limit=2)] == [
            "a\U0010fffd", "a2"]
        assert [k for k, _ in view.rows(start="a1", stop="b")] == ["a1", "a10", "a2",
                                                                   "a\U0010fffd"]
        assert [k for k, _ in view.rows(newest_first=True, limit=3)] == [
            "\U0001f600", "\uffff", "é"]
        assert view.rows(limit=0) == []
        assert [k for k, _ in view.rows(start="\uffff")] == ["\uffff", "\U0001f600"]


def test_summaries_are_listed_from_the_rows_of_the_sessions_that_have_one(
    store_url: str,
) -> None:
    with open_store(store_url, plugin_manager=_pm()) as store:
        summed, removed, cleared, none = (store.create() for _ in range(4))
        _turn(store, summed, 1, "put a=1;sum 1")
        _turn(store, removed, 1, "sum 2", "nosum")
        _turn(store, cleared, 1, "sum 3;put a=1")
        _turn(store, cleared, 2, "clear")  # the rows go, not the summary
        turn_start(none, 1)
        turn_end(none, 1)
        store.flush(none)
        expected = {summed.id: Count(1), cleared.id: Count(3)}
        assert store.projection_summaries(NOTES.name) == expected
        assert store.projection_summaries(NOTES.name, [summed.id, removed.id, none.id]) == {
            summed.id: Count(1)}
        # From the rows the backend keeps, not a fold of each log.
        stored = _projecting(store.backend).projection_summaries(NOTES.name)
        assert {sid: NOTES.decode_summary(s) for sid, _, s in stored} == expected
        assert store.projection(cleared.id, NOTES.name).rows() == []
        assert _projecting(store.backend).projection_summaries(SEQS.name) == []


def _table_rows(store_url: str, store_kind: str, sid: str) -> list[Any]:
    """The rows and marks of ``sid`` in the database's tables, read by SQL (Redis: in
    the session's hashes)."""
    if store_kind == "redis":
        import redis

        from dsh_session_core._persistence.backends.redis.url import parse_redis_url

        base = SessionKeys.of(parse_redis_url(store_url).prefix, sid).base
        client: Any = redis.Redis.from_url(store_url.partition("?")[0])
        try:
            found: list[Any] = [("mark", m.decode()) for m in client.hkeys(base + "pmarks")]
            for key in client.scan_iter(match=base.replace("{", "[{]").replace(
                    "}", "[}]") + "prows:*"):
                found += [("row", k.decode()) for k in client.hkeys(key)]
            return found
        finally:
            client.close()
    sql = ("SELECT 'row', key FROM dsh_projection_rows WHERE session_id = {m}"
           " UNION ALL SELECT 'mark', projection FROM dsh_projection_marks"
           " WHERE session_id = {m}")
    if store_kind == "sqlite":
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql.format(m="?"), (sid, sid)).fetchall()
    with psycopg.connect(store_url, autocommit=True) as pg:
        return pg.execute(sql.format(m="%s"), (sid, sid)).fetchall()


def test_deleting_a_session_deletes_its_rows(store_url: str, store_kind: str) -> None:
    with open_store(store_url, plugin_manager=_pm()) as store:
        gone, kept = store.create("gone"), store.create("kept")
        for session in (gone, kept):
            _turn(store, session, 1, "put a=1;sum 1")
            store.release(session)
        if store_kind != "memory":
            assert len(_table_rows(store_url, store_kind, "gone")) == 4
        store.delete("gone")
        rows = _projecting(store.backend)
        assert rows.projection_marks("gone") == {}
        assert rows.projection_rows("gone", NOTES.name, RowQuery()) == []
        assert set(store.projection_summaries(NOTES.name)) == {"kept"}
        if store_kind != "memory":
            assert _table_rows(store_url, store_kind, "gone") == []
            assert len(_table_rows(store_url, store_kind, "kept")) == 4
        # Made again under the id, the session has none of the old log's rows.
        again = store.create("gone")
        _turn(store, again, 1, "put b=2")
        assert store.projection("gone", NOTES.name).rows() == [("b", Note("2"))]
        assert store.projection("gone", NOTES.name).summary() is None


@pytest.mark.store_kinds("sqlite")
def test_another_writer_deleting_a_session_deletes_its_rows(store_url: str) -> None:
    # The reference knows nothing of the rows: the trigger deletes them with the session.
    with open_store(store_url, plugin_manager=_pm()) as store:
        session = store.create("s")
        _turn(store, session, 1, "put a=1;sum 1")
        store.release(session)
    with sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None) as conn:
        conn.execute("DELETE FROM events WHERE session_id = 's'")
        conn.execute("DELETE FROM sessions WHERE id = 's'")
    assert _table_rows(store_url, "sqlite", "s") == []


@pytest.mark.store_kinds("postgresql")
def test_a_hand_delete_in_another_schema_path_deletes_the_rows(postgresql_url: str) -> None:
    # The trigger deletes from the deleted row's schema, whatever the search_path of
    # the connection that deletes it.
    with psycopg.connect(postgresql_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA agents")
    url = postgresql_url + "?options=-csearch_path%3Dagents"
    with open_store(url, plugin_manager=_pm()) as store:
        session = store.create("s")
        _turn(store, session, 1, "put a=1;sum 1")
        store.release(session)
    with psycopg.connect(postgresql_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM agents.dsh_projection_rows").fetchone() == (2,)
        conn.execute("DELETE FROM agents.sessions WHERE id = 's'")
        assert conn.execute("SELECT count(*) FROM agents.dsh_projection_rows"
                            " UNION ALL SELECT count(*) FROM agents.dsh_projection_marks"
                            ).fetchall() == [(0,), (0,)]


@pytest.mark.store_kinds("postgresql")
def test_postgresql_keys_sort_by_code_point_in_a_database_of_a_language_collation(
    postgresql_databases: Any,
) -> None:
    # The test server's databases collate as "C" already: one that sorts as English
    # does (case and accents aside, punctuation ignored) shows the key column's own.
    from psycopg import sql

    url = postgresql_databases.create("icu")
    name = url.rsplit("/", 1)[1]
    admin = postgresql_databases._admin()
    admin.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))
    try:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 LOCALE_PROVIDER icu"
                              " ICU_LOCALE 'en-US' LOCALE 'C'").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        pytest.skip(f"no database with an ICU collation on this server: {exc}")
    try:
        backend = PostgresBackend(url)
        try:
            keys = ["a", "B", "b", "a b", "a_", "a-", "ab", "é", "e", "Z", "\uffff",
                    "\U0001f600", "10", "9"]
            change = RowChanges("t/a", b"m", rows={k: k.encode() for k in keys})
            backend.write_rows(session_header("s"), [change])
            table = RowTable()
            table.apply(change)
            for query in (RowQuery(), RowQuery(newest_first=True, limit=4),
                          RowQuery(start="a", stop="b"), RowQuery(start="Z", stop="e"),
                          RowQuery(keys=("e", "é", "B", "b"), newest_first=True)):
                assert backend.projection_rows("s", "t/a", query) == table.select(query)
        finally:
            backend.close()
    finally:
        postgresql_databases.drop(url)


# --- the query plans: a read costs what it returns ---------------------------------------

@pytest.mark.store_kinds("sqlite")
def test_sqlite_reads_rows_by_the_primary_key_and_summaries_by_their_index(
    tmp_path: Path,
) -> None:
    backend = SqliteBackend(tmp_path / "s.db")
    backend.close()
    from dsh_session_core._persistence.backends.sql import projection_rows as shared
    from dsh_session_core._persistence.backends.sqlite.projections import PROJECTION_SQL

    conn = sqlite3.connect(tmp_path / "s.db")
    recorded: list[tuple[str, Any]] = []

    class Recorder:
        """The statements the reads run, run on ``conn``."""

        def execute(self, sql: str, params: Any = ()) -> Any:
            recorded.append((sql, params))
            return conn.execute(sql, params)

    for query in (RowQuery(), RowQuery(keys=("a",), newest_first=True, limit=2),
                  RowQuery(start="a", stop="b", newest_first=True, limit=3)):
        shared.rows(PROJECTION_SQL, Recorder(), "s", "t/a", query)
    shared.summaries(PROJECTION_SQL, Recorder(), "t/a", None)
    shared.summaries(PROJECTION_SQL, Recorder(), "t/a", ["s"])
    shared.marks(PROJECTION_SQL, Recorder(), "s")
    plans = [row[3] for sql, params in recorded
             for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    conn.close()
    assert len(recorded) == 6
    assert all("PRIMARY KEY" in p or "INDEX dsh_projection_summaries" in p
               or "json_each" in p or "LIST SUBQUERY" in p for p in plans), plans
    assert not any(p.startswith("SCAN dsh_") or "TEMP B-TREE" in p for p in plans), plans


# --- migrations: a database the build before this one wrote -------------------------------

def _old_sqlite(path: Path, sid: str, texts: list[str]) -> None:
    """A database as the build before this one leaves it (own version 1: the kept lines;
    the search index), holding one session of ``texts``, a turn each."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA user_version = 4")
        for statement in (*sqlite_schema.SCHEMA, *sqlite_schema.LINES_SCHEMA,
                          *sqlite_schema.INDEX_SCHEMA):
            conn.execute(statement)
        conn.execute(sqlite_schema.STAMP_OWN, (1,))
        conn.execute("INSERT INTO sessions VALUES (?, 0, 1000, '/w', NULL, NULL)", (sid,))
        for seq, wire in enumerate(_wires(texts)):
            conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, NULL, ?)",
                         (sid, seq, wire["type"], 1000 + seq, msgspec.json.encode(
                             wire["data"]).decode(), '"append"' if "surfaceOp" in wire
                          else None))
    finally:
        conn.close()


def _wires(texts: list[str]) -> list[dict[str, Any]]:
    wires: list[dict[str, Any]] = []
    for turn, text in enumerate(texts, 1):
        wires += [
            {"type": "turn/start", "data": {"turn": turn, "trigger": {
                "kind": "message", "source": {"kind": "user"}}}},
            {"type": "user/message", "data": {"content": [{"type": "text", "text": text}],
                                              "source": {"kind": "user"}},
             "surfaceOp": "append"},
            {"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}},
        ]
    return wires


def _check_migrated(url: str, sid: str, texts: list[str]) -> None:
    """The old session's projection, folded until the next write, then read from rows."""
    with open_store(url, plugin_manager=_pm()) as store:
        view = store.projection(sid, NOTES.name)
        assert view.folded > 0  # no rows yet: the log is folded
        assert view.rows() == sorted(_model(texts)[0].items())
        session = store.open(sid)
        _turn(store, session, len(texts) + 1, "put new=1")
        store.release(session)
        view = store.projection(sid, NOTES.name)
        assert view.folded == 0
        assert view.rows() == sorted(_model([*texts, "put new=1"])[0].items())
        assert view.summary() == Count(2)


@pytest.mark.store_kinds("sqlite")
def test_a_sqlite_database_of_the_build_before_gains_the_tables(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    texts = ["put a=1;sum 2", "put b=2;del a"]
    _old_sqlite(db, "old", texts)
    _check_migrated(f"sqlite:///{db}", "old", texts)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT version FROM dsh_session_schema").fetchall() == [(2,)]
        assert conn.execute("PRAGMA user_version").fetchone() == (4,)
    finally:
        conn.close()


_READ = """
import sys
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core._persistence.rows import RowQuery
backend = SqliteBackend(sys.argv[1], create=False)
print(backend.projection_marks("old"), backend.projection_rows("old", "test/notes", RowQuery()),
      backend.projection_summaries("test/notes"))
backend.close()
"""


@pytest.mark.store_kinds("sqlite")
def test_a_sqlite_database_of_the_build_before_that_cannot_be_written_is_read() -> None:
    folder = tempfile.mkdtemp(prefix="dsh-ro-")
    try:
        os.chmod(folder, 0o777)  # SQLite's WAL files are made beside it
        db = Path(folder) / "ro.db"
        _old_sqlite(db, "old", ["put a=1"])
        os.chmod(db, 0o444)
        done = subprocess.run([sys.executable, "-c", _READ, str(db)], capture_output=True,
                              check=False, cwd=folder,
                              user="nobody" if os.geteuid() == 0 else None)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout == b"{} [] []\n"
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("SELECT version FROM dsh_session_schema").fetchall() == [(1,)]
        finally:
            conn.close()
    finally:
        shutil.rmtree(folder)


@pytest.mark.store_kinds("postgresql")
def test_a_postgresql_database_of_the_build_before_gains_the_tables(
    postgresql_url: str,
) -> None:
    texts = ["put a=1;sum 2", "put b=2;del a"]
    with psycopg.connect(postgresql_url, autocommit=True) as conn:
        # Version 3, as the build before this one leaves it.
        for statement in (*OLD_TABLES, *postgres_schema.INDEX_SCHEMA,
                          "ALTER TABLE events ADD COLUMN line text",
                          *postgres_schema.CREATE_LINE_TRIGGER,
                          "INSERT INTO dsh_session_schema (version) VALUES (3)",
                          "INSERT INTO sessions VALUES ('old', 0, 1000, '/w', NULL, NULL)"):
            conn.execute(statement)
        for seq, wire in enumerate(_wires(texts)):
            conn.execute("INSERT INTO events VALUES (%s, %s, %s, %s, %s, NULL, %s, NULL)",
                         ("old", seq, wire["type"], 1000 + seq,
                          msgspec.json.encode(wire["data"]).decode(),
                          '"append"' if "surfaceOp" in wire else None))
    _check_migrated(postgresql_url, "old", texts)
    with psycopg.connect(postgresql_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM dsh_session_schema").fetchall() == [(4,)]
    PostgresBackend(postgresql_url).close()  # again: nothing more to do

