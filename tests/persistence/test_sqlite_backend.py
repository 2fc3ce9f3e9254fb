"""The SQLite backend on its own (spec plugins-persistence §10, scenarios 66-71 and the
SQLite half of 47): schema, pragmas, row encoding, the row scan, transactions, the
writer lock, and lossless round trips of the reference's own logs.

Expected values come from the spec's text: the §9.2 log lines and the scenario strings.
"""

from __future__ import annotations

import itertools
import os
import re
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsh_session_core._persistence.backends.sqlite.backend as sqlite_backend
from dsh_session_core import (
    DurableStore,
    Event,
    OpaqueEvent,
    Session,
    SessionHeader,
    core_registry,
    encode_event,
    encode_events,
    interrupted_turn_closers,
)
from dsh_session_core._logformat.logfile import parse_log
from dsh_session_core._persistence.backends.sqlite.backend import (
    RowScan,
    SchemaVersionError,
    SqliteBackend,
    UnstorableError,
    scan_rows,
)
from dsh_session_core._persistence.base import Backend, SessionLockedError
from dsh_session_core._schema.codec import ENCODER
from dsh_session_core._schema.decode import decode_body, decode_wire
from dsh_session_core.errors import LogFormatError, PersistenceError, StoreFolderError

REGISTRY = core_registry()
UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "upstream"

# --- the spec's fixtures, verbatim --------------------------------------------------------

# §9.2: the standard one-turn log, as the reference writes it.
ONE_TURN_LINES = [
    b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message",'
    b'"source":{"kind":"user"}}}}',
    b'{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"hi"}]'
    b',"source":{"kind":"user"}},"surfaceOp":"append"}',
    b'{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}',
    b'{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"content":'
    b'[{"type":"text","text":"hello"}]},"surfaceOp":"append"}',
    b'{"type":"step/end","seq":4,"time":5,"data":{"turn":1,"step":1}}',
    b'{"type":"turn/end","seq":5,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}',
]
ONE_TURN_JSONL = b"".join(line + b"\n" for line in ONE_TURN_LINES)
# Scenario 47's open second turn: TS(6,2) with time 7, then step/start seq 7 time 8.
OPEN_TURN_LINES = [
    b'{"type":"turn/start","seq":6,"time":7,"data":{"turn":2,"trigger":{"kind":"message",'
    b'"source":{"kind":"user"}}}}',
    b'{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}',
]


def meta(session_id: str, cwd: str | None = None, **extra: Any) -> SessionHeader:
    """The spec's ``meta(id, cwd?)``: ``{version: 0, id, createdAt: 1000[, cwd]}``."""
    fields: dict[str, Any] = {"version": 0, "id": session_id, "created_at": 1000}
    if cwd is not None:
        fields["cwd"] = cwd
    fields.update(extra)
    return SessionHeader(**fields)


def TS(seq: int, turn: int, time: int | None = None) -> dict[str, Any]:
    return {"type": "turn/start", "seq": seq, "time": seq + 1 if time is None else time,
            "data": {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}}


def TE(seq: int, turn: int, kind: str = "completed", time: int | None = None) -> dict[str, Any]:
    return {"type": "turn/end", "seq": seq, "time": seq + 1 if time is None else time,
            "data": {"turn": turn, "reason": {"kind": kind}}}


def from_lines(lines: list[bytes]) -> list[Event]:
    return decode_body(REGISTRY, b"\n".join(lines))


def from_wires(wires: list[dict[str, Any]]) -> list[Event]:
    return [decode_wire(REGISTRY, w) for w in wires]


def put(backend: Backend, header: SessionHeader, events: list[Event], materialized: bool) -> None:
    backend.append_batch(header, events, encode_events(events), materialized)


def seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events]


def jsonl_of(backend: Backend, session_id: str) -> bytes:
    stored = backend.load_stored(session_id, REGISTRY)
    assert stored is not None
    assert stored.jsonl is not None
    return stored.jsonl


def rows_of(path: Path, session_id: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events"
            " WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
    conn.close()
    return rows


def execute(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    (tmp_path / "store").mkdir()  # a database is made in a folder that exists
    return tmp_path / "store" / "sessions.db"


@pytest.fixture
def opened() -> Iterator[list[SqliteBackend]]:
    """Backends to close at the end of the test, whatever happens."""
    backends: list[SqliteBackend] = []
    yield backends
    for backend in backends:
        backend.close()


def open_backend(opened: list[SqliteBackend], path: Path | str, **kw: Any) -> SqliteBackend:
    backend = SqliteBackend(path, **kw)
    opened.append(backend)
    return backend


def test_the_spec_fixtures_are_transcribed_exactly() -> None:
    # §9.2: 671 bytes with a 72-byte header line; scenario 47: 847 bytes with turn 2 open
    # (under the header of meta('torn', '/w')).
    assert len(ENCODER.encode(meta("s1", "/work"))) + 1 == 72
    assert 72 + len(ONE_TURN_JSONL) == 671
    torn = len(ENCODER.encode(meta("torn", "/w"))) + 1
    assert torn + len(ONE_TURN_JSONL) + sum(len(x) + 1 for x in OPEN_TURN_LINES) == 847
    assert from_wires([TS(0, 1)]) == from_lines(ONE_TURN_LINES[:1])


def test_the_backend_satisfies_the_protocol(opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, ":memory:")
    assert isinstance(backend, Backend)
    assert backend.name == "session-persistence-sqlite"


# --- 66: schema version ---------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3, 5])
def test_s66_a_database_of_another_schema_version_is_refused(db: Path, version: int) -> None:
    execute(db, f"PRAGMA user_version = {version}")
    message = (
        f'session database at "{db}" has schema version {version}, incompatible with this '
        f"build (4)"
    )
    with pytest.raises(SchemaVersionError, match=f"^{re.escape(message)}$") as caught:
        SqliteBackend(db)
    assert (caught.value.path, caught.value.version) == (str(db), version)
    assert execute(db, "PRAGMA user_version") == [(version,)]  # left as found


def test_s66_a_fresh_database_is_stamped_4_and_reopens(
    db: Path, opened: list[SqliteBackend]
) -> None:
    open_backend(opened, db).close()
    assert execute(db, "PRAGMA user_version") == [(4,)]
    put(open_backend(opened, db), meta("s1"), from_lines(ONE_TURN_LINES), False)
    assert [h.id for h in open_backend(opened, db).list()] == ["s1"]


def test_the_tables_are_exactly_the_reference_schema(db: Path, opened: list[SqliteBackend]) -> None:
    open_backend(opened, db)

    def columns(table: str) -> list[tuple[Any, ...]]:
        # (name, type, notnull, pk) of each column
        return [(r[1], r[2], r[3], r[5]) for r in execute(db, f"PRAGMA table_info({table})")]

    assert columns("sessions") == [
        ("id", "TEXT", 1, 1), ("version", "INTEGER", 1, 0), ("created_at", "INTEGER", 1, 0),
        ("cwd", "TEXT", 0, 0), ("parent_session", "TEXT", 0, 0),
        ("seed_length", "INTEGER", 0, 0),
    ]
    assert columns("events") == [
        ("session_id", "TEXT", 1, 1), ("seq", "INTEGER", 1, 2), ("type", "TEXT", 1, 0),
        ("time", "INTEGER", 1, 0), ("data", "TEXT", 1, 0), ("source_event_seqs", "TEXT", 0, 0),
        ("surface_op", "TEXT", 0, 0),
    ]
    assert execute(db, "PRAGMA foreign_key_list(events)")[0][2:7] == (
        "sessions", "session_id", "id", "NO ACTION", "CASCADE")
    reference = "('sessions', 'events')"
    for (sql,) in execute(db, "SELECT sql FROM sqlite_master WHERE type = 'table' AND "
                              f"name IN {reference}"):
        assert sql.rstrip().endswith("STRICT")
    # (A STRICT table's primary key is NOT NULL.) The primary key's index is the only
    # one: it already serves loading in seq order.
    assert execute(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND "
                       f"tbl_name IN {reference}") == [
        ("sqlite_autoindex_sessions_1",), ("sqlite_autoindex_events_1",)]
    # Every other table is dsh-session's own (its version, the kept lines, the
    # projections' rows) or the search index's (docs/search.md), which the reference does
    # not know and never needs.
    others = {name for (name,) in execute(
        db, f"SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN {reference}")}
    assert {name for name in others if not name.startswith("dsh_search")} == {
        "dsh_session_schema", "dsh_event_lines", "dsh_projection_rows",
        "dsh_projection_marks"}


# --- 67: journal mode -----------------------------------------------------------------------


def test_s67_a_file_database_defaults_to_wal(db: Path, opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, db)
    assert backend.journal_mode == "wal"
    put(backend, meta("j"), from_lines(ONE_TURN_LINES), False)
    assert execute(db, "PRAGMA journal_mode") == [("wal",)]  # persistent in the file


def test_each_commit_syncs_the_wal_and_checkpoints_stay_automatic(
    db: Path, opened: list[SqliteBackend]
) -> None:
    # A batch is on disk when append_batch returns: synchronous FULL (2), which in WAL
    # mode fsyncs the WAL at every commit (NORMAL would not). The WAL is copied into
    # the database every 1000 pages, so it is reused instead of growing (decisions.md).
    backend = open_backend(opened, db)
    put(backend, meta("j"), from_lines(ONE_TURN_LINES), False)
    assert backend._conn.execute("PRAGMA synchronous").fetchone() == (2,)
    assert backend._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)


def test_s67_journal_mode_delete_leaves_no_wal_file(db: Path, opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, db, journal_mode="delete")
    assert backend.journal_mode == "delete"
    put(backend, meta("j"), from_lines(ONE_TURN_LINES), False)
    assert not Path(f"{db}-wal").exists()
    assert backend.load_stored("j", REGISTRY) is not None


def test_s67_a_memory_database_reports_memory(opened: list[SqliteBackend]) -> None:
    assert open_backend(opened, ":memory:").journal_mode == "memory"


def test_an_unknown_journal_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="journal_mode must be one of"):
        SqliteBackend(":memory:", journal_mode="off")  # type: ignore[arg-type]


def test_a_relative_path_is_made_absolute_in_a_folder_that_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: list[SqliteBackend]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a" / "b").mkdir(parents=True)
    backend = open_backend(opened, os.path.join("a", "b", "x.db"))
    assert backend.path == str(tmp_path / "a" / "b" / "x.db")
    assert (tmp_path / "a" / "b" / "x.db").is_file()
    store = DurableStore(backend)
    store.release(store.create("s"))  # its lock folder: beside it, private
    assert stat.S_IMODE((tmp_path / "a" / "b" / "x.db.locks").stat().st_mode) == 0o700
    # Issue 24, point 1: the folders above a database are never made.
    with pytest.raises(StoreFolderError):
        open_backend(opened, os.path.join("a", "c", "x.db"))
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b"]


def test_a_new_database_and_its_wal_files_are_private_whatever_the_umask(
    tmp_path: Path, opened: list[SqliteBackend]
) -> None:
    old = os.umask(0)  # the loosest umask: the file's mode is the backend's alone
    try:
        backend = open_backend(opened, str(tmp_path / "x.db"))
        store = DurableStore(backend)
        store.release(store.create("a"))
        files = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
        assert files == ["x.db", "x.db-shm", "x.db-wal"]
        for name in files:
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    finally:
        os.umask(old)
    # A database that is there keeps its mode (the user chose it).
    (tmp_path / "shared.db").touch(mode=0o640)
    os.chmod(tmp_path / "shared.db", 0o640)
    open_backend(opened, str(tmp_path / "shared.db"))
    assert stat.S_IMODE((tmp_path / "shared.db").stat().st_mode) == 0o640


# --- 68: row encoding -----------------------------------------------------------------------


def test_s68_rows_hold_compact_json_and_quoted_surface_ops(
    db: Path, opened: list[SqliteBackend]
) -> None:
    live = Session("enc", header=meta("enc"), clock=iter(range(1, 100)).__next__)
    live.append("turn/start", TS(0, 1)["data"])
    live.append("user/message", {"content": [{"type": "text", "text": "hi"}],
                                 "source": {"kind": "user"}}, surface_op="append")
    live.append("step/start", {"turn": 1, "step": 1})
    live.append("assistant/message",
                {"turn": 1, "step": 1, "content": [{"type": "text", "text": "hello"}]},
                surface_op="append", source_event_seqs=[0])
    live.append("user/message", {"content": [{"type": "text", "text": "again"}],
                                 "source": {"kind": "user"}},
                surface_op={"op": "replace", "start": 1, "end": 3})
    backend = open_backend(opened, db)
    backend.append_batch(live.header, list(live.events), live.jsonl(), False)

    rows = rows_of(db, "enc")
    assert rows[0] == (0, "turn/start", 1,
                       '{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}',
                       None, None)
    assert rows[1] == (1, "user/message", 2,
                       '{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}',
                       None, '"append"')
    assert rows[3][4:] == ("[0]", '"append"')
    assert rows[4][5] == '{"op":"replace","start":1,"end":3}'

    stored = backend.load_stored("enc", REGISTRY)
    assert stored is not None
    assert stored.jsonl == live.jsonl()
    assert stored.events == list(live.events)
    user, assistant = (encode_event(e) for e in stored.events[1:4:2])
    assert b"sourceEventSeqs" not in user
    assert assistant.endswith(b',"sourceEventSeqs":[0],"surfaceOp":"append"}')


def test_load_rebuilds_the_reference_key_order_from_the_columns(
    db: Path, opened: list[SqliteBackend]
) -> None:
    backend = open_backend(opened, db)
    put(backend, meta("s1", "/work"), from_lines(ONE_TURN_LINES), False)
    stored = open_backend(opened, db).load_stored("s1", REGISTRY)
    assert stored is not None
    assert stored.jsonl == ONE_TURN_JSONL
    assert (stored.header, stored.torn) == (meta("s1", "/work"), None)


# --- 69: scanRows ---------------------------------------------------------------------------

ONE_TURN_ROWS = [
    (0, "turn/start", 1, '{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}',
     None, None),
    (1, "user/message", 2, '{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}',
     None, '"append"'),
    (2, "step/start", 3, '{"turn":1,"step":1}', None, None),
    (3, "assistant/message", 4,
     '{"turn":1,"step":1,"content":[{"type":"text","text":"hello"}]}', None, '"append"'),
    (4, "step/end", 5, '{"turn":1,"step":1}', None, None),
    (5, "turn/end", 6, '{"turn":1,"reason":{"kind":"completed"}}', None, None),
]
TS_ROW = ONE_TURN_ROWS[0]
TE_DATA = '{"turn":1,"reason":{"kind":"completed"}}'


def scanned_seqs(scan: RowScan) -> list[int]:
    return seqs(from_lines(scan.lines))


def test_s69_no_rows() -> None:
    assert scan_rows([]) == RowScan([], None)


def test_s69_a_balanced_log_is_kept_whole_in_the_reference_key_order() -> None:
    assert scan_rows(ONE_TURN_ROWS) == RowScan(ONE_TURN_LINES, None)


def test_s69_a_gap_after_the_last_turn_end_is_a_torn_tail() -> None:
    scan = scan_rows([TS_ROW, (2, "step/start", 3, '{"turn":1,"step":1}', None, None)])
    assert (scanned_seqs(scan), scan.torn) == ([0], 1)


def test_s69_an_unparsable_tail_row_is_torn() -> None:
    scan = scan_rows([*ONE_TURN_ROWS, (6, "turn/start", 7, "{not json", None, None)])
    assert (scan.lines, scan.torn) == (ONE_TURN_LINES, 6)


def test_s69_an_unparsable_committed_row_is_corruption() -> None:
    rows = [(0, "turn/start", 1, "{not json", None, None), (1, "turn/end", 2, TE_DATA, None, None)]
    with pytest.raises(LogFormatError,
                       match=r"^corrupt session log: unparsable committed event at seq 0$"):
        scan_rows(rows)


def test_s69_a_committed_gap_is_corruption() -> None:
    rows = [TS_ROW, (2, "step/start", 3, '{"turn":1,"step":1}', None, None),
            (3, "turn/end", 4, TE_DATA, None, None)]
    message = "corrupt session log: seq gap in committed region (expected 1, got 2)"
    with pytest.raises(LogFormatError, match=f"^{re.escape(message)}$"):
        scan_rows(rows)


@pytest.mark.parametrize(
    ("data", "sources", "op"),
    [("NaN", None, None), ("Infinity", None, None), ("", None, None), ("1 2", None, None),
     ('{"turn":2}', "[0", None), ('{"turn":2}', None, "append")],
    ids=["nan", "infinity", "empty", "two-values", "bad-sources", "unquoted-op"],
)
def test_a_row_is_a_hole_when_any_json_column_is_not_json_to_javascript(
    data: str, sources: str | None, op: str | None
) -> None:
    # JSON.parse refuses NaN/Infinity (Python's json accepts them) and the bare word
    # `append`: that is why surface_op holds JSON text.
    assert scan_rows([TS_ROW, (1, "x/y", 2, data, sources, op)]).torn == 1


def test_javascript_json_parse_accepts_what_msgspec_refuses() -> None:
    # An exponent beyond float range is Infinity in JS; a lone surrogate escape is a
    # string there: neither row is a hole.
    rows = [TS_ROW, (1, "x/y", 2, "1e999", None, None), (2, "x/y", 3, '"\\ud800"', None, None)]
    assert scan_rows(rows).torn is None


def test_the_last_turn_end_counts_only_when_its_row_parses() -> None:
    # A hole before an unparsable turn/end row is a torn tail, not corruption.
    rows = [TS_ROW, (1, "x/y", 2, "{", None, None), (2, "turn/end", 3, "{", None, None)]
    assert scan_rows(rows).torn == 1


# --- 70, 71 and 47: repair and transactions -------------------------------------------------


def test_s70_a_corrupt_tail_row_is_dropped_then_deleted(
    db: Path, opened: list[SqliteBackend]
) -> None:
    put(open_backend(opened, db), meta("c"), from_lines(ONE_TURN_LINES), False)
    execute(db, "INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
            ("c", 6, "turn/start", 7, "{not valid json"))
    backend = open_backend(opened, db)
    stored = backend.load_stored("c", REGISTRY)
    assert stored is not None
    assert (stored.jsonl, stored.torn) == (ONE_TURN_JSONL, 6)
    assert encode_events(stored.events) == ONE_TURN_JSONL
    backend.commit_repair(stored.header, stored.torn, [], b"")
    assert [r[0] for r in rows_of(db, "c")] == [0, 1, 2, 3, 4, 5]
    put(backend, meta("c"), from_wires([TS(6, 2), TE(7, 2)]), True)
    again = open_backend(opened, db).load_stored("c", REGISTRY)
    assert again is not None
    assert (seqs(again.events), again.torn) == (list(range(8)), None)


def test_s71_a_stale_second_instance_fails_and_leaves_nothing(
    db: Path, opened: list[SqliteBackend]
) -> None:
    a = open_backend(opened, db)
    put(a, meta("t"), from_lines(ONE_TURN_LINES), False)
    b = open_backend(opened, db)  # both are at cursor 6
    put(a, meta("t"), from_wires([TS(6, 2), TE(7, 2)]), True)
    with pytest.raises(PersistenceError, match="another writer: seq 6 is already stored"
                       ) as refused:
        put(b, meta("t"), from_wires([TS(6, 2, time=60), TE(7, 2, time=70)]), True)
    assert isinstance(refused.value.__cause__, sqlite3.IntegrityError)
    stored = a.load_stored("t", REGISTRY)
    assert stored is not None
    assert seqs(stored.events) == list(range(8))
    assert [r[2] for r in rows_of(db, "t")[6:]] == [7, 8]  # A's rows, not B's


def test_one_batch_is_one_transaction(db: Path, opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, db)
    put(backend, meta("t", "/w"), from_lines(ONE_TURN_LINES), False)
    # Seq 6 is new and would be inserted first; seq 5 then clashes: nothing stays, and
    # the header upsert of the same (re-materializing) transaction is undone too.
    with pytest.raises(PersistenceError, match="created by another writer"):
        put(backend, meta("t", "/elsewhere"), from_wires([TS(6, 2), TE(5, 2)]), False)
    assert [r[0] for r in rows_of(db, "t")] == [0, 1, 2, 3, 4, 5]
    assert backend.list() == [meta("t", "/w")]
    put(backend, meta("t", "/w"), from_wires([TS(6, 2), TE(7, 2)]), True)  # still usable


def test_an_upsert_overwrites_every_header_column(db: Path, opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, db)
    put(backend, meta("u", "/w", parent_session="p", seed_length=3), from_wires([TS(0, 1)]),
        False)
    put(backend, meta("u"), from_wires([TE(1, 1)]), False)
    assert backend.list() == [meta("u")]
    assert seqs(from_lines(scan_rows(rows_of(db, "u")).lines)) == [0, 1]


def test_appending_to_an_unmaterialized_session_without_its_row_fails(
    opened: list[SqliteBackend],
) -> None:
    backend = open_backend(opened, ":memory:")
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        put(backend, meta("ghost"), from_lines(ONE_TURN_LINES), True)
    assert backend.list() == []


def test_a_failed_commit_is_rolled_back(opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, ":memory:")
    # Deferred, the foreign key is checked by COMMIT itself, which then fails.
    backend._conn.execute("PRAGMA defer_foreign_keys = ON")
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        put(backend, meta("ghost"), from_lines(ONE_TURN_LINES), True)
    assert not backend._conn.in_transaction
    put(backend, meta("ghost"), from_lines(ONE_TURN_LINES), False)  # usable, and clean
    assert jsonl_of(backend, "ghost") == ONE_TURN_JSONL


def test_s47_a_torn_row_after_an_open_turn_is_cut_and_the_turn_closed(
    db: Path, opened: list[SqliteBackend]
) -> None:
    put(open_backend(opened, db), meta("torn", "/w"),
        from_lines(ONE_TURN_LINES + OPEN_TURN_LINES), False)
    execute(db, "INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
            ("torn", 8, "assistant/chunk", 99, "{not valid json"))
    backend = open_backend(opened, db)
    stored = backend.load_stored("torn", REGISTRY)
    assert stored is not None
    assert (seqs(stored.events), stored.torn) == (list(range(8)), 8)
    closers = interrupted_turn_closers(stored.events)
    backend.commit_repair(stored.header, stored.torn, closers, encode_events(closers))

    repaired = open_backend(opened, db).load_stored("torn", REGISTRY)
    assert repaired is not None
    assert (seqs(repaired.events), repaired.torn) == (list(range(10)), None)
    assert jsonl_of(backend, "torn").endswith(
        b'{"type":"step/end","seq":8,"time":8,"data":{"turn":2,"step":1}}\n'
        b'{"type":"turn/end","seq":9,"time":8,"data":{"turn":2,"reason":{"kind":"interrupted"}}}'
        b"\n"
    )
    assert [r[0] for r in rows_of(db, "torn")] == list(range(10))  # the bad row is gone
    put(backend, stored.header, from_wires([TS(10, 3), TE(11, 3)]), True)
    final = backend.load_stored("torn", REGISTRY)
    assert final is not None
    assert seqs(final.events) == list(range(12))


def test_a_torn_marker_of_0_deletes_every_row(opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, ":memory:")
    put(backend, meta("z"), from_wires([TS(0, 1), {"type": "step/start", "seq": 1, "time": 2,
                                                   "data": {"turn": 1, "step": 1}}]), False)
    backend.commit_repair(meta("z"), 0, [], b"")
    stored = backend.load_stored("z", REGISTRY)
    assert stored is not None  # the session stays materialized, with no event
    assert (stored.events, stored.jsonl, stored.torn) == ([], b"", None)


def test_a_torn_marker_must_be_a_seq(opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, ":memory:")
    with pytest.raises(TypeError, match="torn marker is a seq"):
        backend.commit_repair(meta("z"), "7", [], b"")


# --- load, list ---------------------------------------------------------------------------


def test_nothing_stored_is_none_and_an_empty_batch_materializes_nothing(
    opened: list[SqliteBackend],
) -> None:
    backend = open_backend(opened, ":memory:")
    assert backend.load_stored("nope", REGISTRY) is None
    backend.append_batch(meta("eb", "/w"), [], b"", False)
    assert backend.list() == []
    assert backend.load_stored("eb", REGISTRY) is None


def test_load_live_ignores_the_cwd_as_ids_are_global(opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, ":memory:")
    put(backend, meta("g", "/w"), from_lines(ONE_TURN_LINES), False)
    for cwd in ("/w", "/elsewhere", None):
        stored = backend.load_live("g", cwd, REGISTRY)
        assert stored is not None
        assert stored.jsonl == ONE_TURN_JSONL


def test_list_gives_every_materialized_header_with_absent_keys_omitted(
    opened: list[SqliteBackend],
) -> None:
    backend = open_backend(opened, ":memory:")
    headers = [
        meta("p1", "/projA"),
        meta("p2", parent_session="the-parent", seed_length=3),
        SessionHeader(version=99, id="v99", created_at=1, cwd="/w"),
    ]
    for header in headers:
        put(backend, header, from_wires([TS(0, 1)]), False)
    listed = sorted(backend.list(), key=lambda h: h.id)
    assert listed == headers
    assert ENCODER.encode(listed[1]) == (
        b'{"type":"session","version":0,"id":"p2","createdAt":1000,'
        b'"parentSession":"the-parent","seedLength":3}'
    )


# --- what the schema cannot hold is refused before any write --------------------------------


@pytest.mark.parametrize("time", [1.5, float("inf"), 2**63, True])
def test_a_time_that_is_no_int64_is_refused_before_the_transaction(
    opened: list[SqliteBackend], time: object
) -> None:
    backend = open_backend(opened, ":memory:")
    bad = msgspec.structs.replace(from_wires([TS(0, 1)])[0], time=time)
    message = r'^event "turn/start" \(seq 0\) of session "bad" has time'
    with pytest.raises(UnstorableError, match=message):
        put(backend, meta("bad"), [bad], False)
    assert backend.list() == []


def test_an_integral_float_time_is_stored_as_the_integer(db: Path) -> None:
    # JSON has one number type: the reference writes 5 for 5.0. The column holds the
    # integer; the line comes back as it was appended, as a JSONL log keeps it.
    backend = SqliteBackend(db)
    try:
        event = msgspec.structs.replace(from_wires([TS(0, 1)])[0], time=5.0)
        put(backend, meta("f"), [event], False)
        assert jsonl_of(backend, "f").startswith(b'{"type":"turn/start","seq":0,"time":5.0,')
    finally:
        backend.close()
    assert rows_of(db, "f")[0][2] == 5


def test_a_header_without_a_version_is_refused(opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, ":memory:")
    header = SessionHeader(id="nov", created_at=1)
    with pytest.raises(UnstorableError, match='the header of session "nov" has no format version'):
        put(backend, header, from_wires([TS(0, 1)]), False)
    assert backend.list() == []


def test_an_opaque_entry_with_keys_no_column_holds_keeps_them_in_its_line(
    opened: list[SqliteBackend],
) -> None:
    backend = open_backend(opened, ":memory:")
    odd = decode_wire(REGISTRY, {"extra": 1, **TS(0, 1)})
    put(backend, meta("odd"), [odd], False)
    assert jsonl_of(backend, "odd") == encode_events([odd])
    assert jsonl_of(backend, "odd").startswith(b'{"extra":1,"type":"turn/start",')
    # Without its line (a caller that gives none), nothing would keep the key: refused.
    with pytest.raises(UnstorableError, match=r"has log keys no column holds: \['extra'\]"):
        backend.append_batch(meta("bare"), [odd], b"", False)
    assert [h.id for h in backend.list()] == ["odd"]


class SqliteBackendCM:
    """A ``:memory:`` backend as a context manager."""

    def __enter__(self) -> SqliteBackend:
        self.backend = SqliteBackend(":memory:")
        return self.backend

    def __exit__(self, *exc: object) -> None:
        self.backend.close()


# --- lossless: the reference's own logs round-trip byte for byte ----------------------------


def _reference_logs() -> list[Path]:
    found = sorted((UPSTREAM / "fixtures").rglob("session.jsonl"))
    return [p for p in found if b'"version":' in p.read_bytes().split(b"\n", 1)[0]]


@pytest.mark.parametrize(
    "path", _reference_logs(), ids=lambda p: str(p.parent.relative_to(UPSTREAM / "fixtures"))
)
def test_every_reference_log_round_trips_byte_for_byte(path: Path) -> None:
    log = parse_log(path.read_bytes(), REGISTRY, path=str(path))
    with SqliteBackendCM() as backend:
        put(backend, log.header, log.events, False)
        stored = backend.load_stored(log.header.id, REGISTRY)
        if not log.events:  # a header-only log: no event, so nothing is materialized
            assert (stored, backend.list()) == (None, [])
            return
        assert stored is not None
        assert stored.jsonl == log.jsonl
        assert (stored.header, stored.events, stored.torn) == (log.header, log.events, None)
        assert backend.list() == [log.header]


def test_the_reference_logs_were_found() -> None:
    if not (UPSTREAM / "README.md").is_file():
        pytest.skip(f"reference fixtures not found at {UPSTREAM}")
    assert len(_reference_logs()) >= 30


def test_json_quote_escapes_like_the_encoder_for_every_code_point() -> None:
    # The load builds `"type":` with SQLite's json_quote; our encoder matches JS.
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    conn = sqlite3.connect(":memory:")
    try:
        ((quoted,),) = conn.execute("SELECT json_quote(?)", (everything,)).fetchall()
    finally:
        conn.close()
    assert quoted.encode() == ENCODER.encode(everything)


@pytest.mark.parametrize(
    "event_type",
    ["x/back\\nslash", 'x/"quoted"', "x/\\u0041", "x/\\\\", "x/tab\there", "x/\u2028é😀"],
    ids=["backslash-n", "quotes", "backslash-u", "two-backslashes", "tab", "unicode"],
)
def test_a_type_string_round_trips_whatever_it_holds(
    event_type: str, opened: list[SqliteBackend]
) -> None:
    # Unescaped, `x/back\nslash` would read back as a newline, and `x/\u0041` as `x/A`.
    backend = open_backend(opened, ":memory:")
    live = Session("q", header=meta("q"), clock=lambda: 7, foreign_types=["x/*"])
    live.append("turn/start", TS(0, 1)["data"])
    live.append(event_type, {"v": 1})
    backend.append_batch(live.header, list(live.events), live.jsonl(), False)
    assert jsonl_of(backend, "q") == live.jsonl()
    stored = backend.load_stored("q", REGISTRY)
    assert stored is not None
    assert stored.events[1].type == event_type


def test_a_row_that_splices_in_another_event_is_a_hole(
    db: Path, opened: list[SqliteBackend]
) -> None:
    # Spliced into its line, this data would add an event of its own; by itself it is
    # not JSON, so the row is a hole (here: a torn tail), as the reference decides.
    backend = open_backend(opened, db)
    put(backend, meta("inj"), from_wires([TS(0, 1), TE(1, 1)]), False)
    execute(db, "INSERT INTO events VALUES ('inj', 2, 'step/start', 3, ?, NULL, NULL)",
            ('{"turn":1,"step":1}},{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,'
             '"reason":{"kind":"completed"}}',))
    stored = backend.load_stored("inj", REGISTRY)
    assert stored is not None
    assert (seqs(stored.events), stored.torn) == ([0, 1], 2)


# --- the chunked, threaded fast load, and its fall-backs ---------------------------------------


def long_session(turns: int) -> Session:
    live = Session("long", header=meta("long"), clock=iter(range(1, 10**6)).__next__,
                   foreign_types=["x/plugin"])
    for turn in range(1, turns + 1):
        live.append("turn/start", TS(0, turn)["data"])
        live.append("user/message", {"content": [{"type": "text", "text": f"q{turn}"}],
                                     "source": {"kind": "user"}}, surface_op="append")
        live.append("x/plugin", {"turn": turn, "odd": ['"\\', None, 1.5]})  # opaque
        live.append("turn/end", TE(0, turn)["data"])
    return live


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    # Five-row chunks: a 40-event session takes the threaded path over 8 chunks.
    monkeypatch.setattr(sqlite_backend, "_CHUNK", 5)


@pytest.mark.usefixtures("small_chunks")
def test_the_threaded_load_matches_the_log(db: Path, opened: list[SqliteBackend]) -> None:
    live = long_session(10)
    backend = open_backend(opened, db)
    backend.append_batch(live.header, list(live.events), live.jsonl(), False)
    stored = open_backend(opened, db).load_stored("long", REGISTRY)
    assert stored is not None
    assert (stored.jsonl, stored.events, stored.torn) == (live.jsonl(), list(live.events), None)


@pytest.mark.usefixtures("small_chunks")
def test_the_threaded_load_falls_back_to_the_scan(db: Path, opened: list[SqliteBackend]) -> None:
    live = long_session(10)
    backend = open_backend(opened, db)
    backend.append_batch(live.header, list(live.events), live.jsonl(), False)
    # A corrupt row inside the committed region: the scan names it.
    execute(db, "UPDATE events SET data = '{' WHERE seq = 22")
    with pytest.raises(LogFormatError, match=r"unparsable committed event at seq 22$") as caught:
        backend.load_stored("long", REGISTRY)
    assert caught.value.path == str(db)
    # After the last turn/end: a torn tail, the lines before it exactly as logged.
    execute(db, "UPDATE events SET data = '{}' WHERE seq = 22")
    execute(db, "INSERT INTO events (session_id, seq, type, time, data) VALUES "
                "('long', 40, 'turn/start', 1, '{'), ('long', 41, 'step/start', 1, '{}')")
    stored = backend.load_stored("long", REGISTRY)
    assert stored is not None
    assert stored.torn == 40
    lines, logged = jsonl_of(backend, "long").split(b"\n"), live.jsonl().split(b"\n")
    assert len(lines) == len(logged) == 41
    assert lines[22] == b'{"type":"x/plugin","seq":22,"time":23,"data":{}}'
    assert lines[:22] + lines[23:] == logged[:22] + logged[23:]


@pytest.mark.usefixtures("small_chunks")
def test_a_failure_in_the_load_thread_reaches_the_caller(
    monkeypatch: pytest.MonkeyPatch, opened: list[SqliteBackend]
) -> None:
    backend = open_backend(opened, ":memory:")
    live = long_session(10)
    backend.append_batch(live.header, list(live.events), live.jsonl(), False)
    real = SqliteBackend._chunk
    failing = threading.current_thread()

    def chunk(self: SqliteBackend, session_id: str, kept: list[tuple[int, str]], start: int
              ) -> tuple[int, bytes | None]:
        assert threading.current_thread() is not failing  # the worker runs the queries
        if start >= 15:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, session_id, kept, start)

    monkeypatch.setattr(SqliteBackend, "_chunk", chunk)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        backend.load_stored("long", REGISTRY)
    monkeypatch.setattr(SqliteBackend, "_chunk", real)
    stored = backend.load_stored("long", REGISTRY)  # the connection is free and clean
    assert stored is not None
    assert stored.jsonl == live.jsonl()


def test_a_chunk_beyond_the_sqlite_string_limit_falls_back_to_the_scan(
    opened: list[SqliteBackend],
) -> None:
    backend = open_backend(opened, ":memory:")
    live = long_session(10)
    backend.append_batch(live.header, list(live.events), live.jsonl(), False)
    backend._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 2000)  # rows fit, the chunk not
    stored = backend.load_stored("long", REGISTRY)
    assert stored is not None
    assert (stored.jsonl, stored.events, stored.torn) == (live.jsonl(), list(live.events), None)


def test_a_row_whose_newline_is_whitespace_stays_one_line(
    db: Path, opened: list[SqliteBackend]
) -> None:
    # Valid JSON with a raw newline between tokens (a hand edit): kept, on one line.
    backend = open_backend(opened, db)
    put(backend, meta("nl"), from_wires([TS(0, 1)]), False)
    execute(db, "INSERT INTO events VALUES ('nl', 1, 'turn/end', 2, ?, NULL, NULL)",
            ('{"turn":1,\n"reason":{"kind":"completed"}}',))
    stored = backend.load_stored("nl", REGISTRY)
    assert stored is not None
    assert jsonl_of(backend, "nl").count(b"\n") == 2
    assert stored.events[1] == from_wires([TE(1, 1, time=2)])[0]


# --- random batches round-trip ------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_step = st.one_of(
    st.tuples(st.just("turn/start"), st.just(None)),
    st.tuples(st.just("user/message"), _text),
    st.tuples(st.just("odd/surface"), _json),
    st.tuples(_text.map(lambda t: "x/" + t), _json),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(_step, min_size=1, max_size=20),
    times=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=20, max_size=20),
    cuts=st.lists(st.integers(1, 20), max_size=5),
)
def test_random_batches_round_trip(
    steps: list[tuple[str, Any]], times: list[int], cuts: list[int]
) -> None:
    clock = iter(times)
    # Lenient: foreign types and block kinds are appended, to round-trip opaquely.
    live = Session("rand", header=meta("rand"), clock=clock.__next__, strict=False)
    for kind, value in steps:
        if kind == "turn/start":
            live.append(kind, TS(0, 1)["data"])
        elif kind == "user/message":
            live.append(kind, {"content": [{"type": "text", "text": value}],
                               "source": {"kind": "user"}}, surface_op="append",
                        source_event_seqs=[0] if value else None)
        elif kind == "odd/surface":  # a surface event no schema fits: opaque, with its op
            live.append("user/message", {"content": [{"type": "odd", "v": value}],
                                         "source": {"kind": "user"}}, surface_op="append")
        else:
            live.append(kind, value)
    events = list(live.events)
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    with SqliteBackendCM() as backend:
        for i, (a, b) in enumerate(itertools.pairwise(bounds)):
            backend.append_batch(live.header, events[a:b], live.jsonl(a, b), i > 0)
        stored = backend.load_stored("rand", REGISTRY)
    assert stored is not None
    assert stored.jsonl == live.jsonl()
    assert stored.events == events


# --- the writer lock ------------------------------------------------------------------------


def test_a_second_instance_cannot_take_a_held_lock(db: Path, opened: list[SqliteBackend]) -> None:
    a, b = open_backend(opened, db), open_backend(opened, db)
    lock = a.acquire(meta("w"))
    message = r'^session "w" is being written by another writer \(lock .*\.lock\)'
    with pytest.raises(SessionLockedError, match=message) as caught:
        b.acquire(meta("w"))
    lock_path = Path(caught.value.holder.removeprefix("lock "))
    assert lock_path.parent == Path(f"{db}.locks")
    assert stat.S_IMODE(lock_path.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(lock_path.parent.stat().st_mode) & 0o077 == 0
    with pytest.raises(SessionLockedError):
        a.acquire(meta("w"))  # one writer, even in the same instance
    b.acquire(meta("other")).release()  # locks are per session
    lock.release()
    lock.release()  # idempotent
    b.acquire(meta("w")).release()


def test_close_releases_the_locks_still_held(db: Path, opened: list[SqliteBackend]) -> None:
    a = SqliteBackend(db)
    a.acquire(meta("w"))
    a.close()
    open_backend(opened, db).acquire(meta("w")).release()


def test_a_memory_database_locks_within_its_instance(opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, ":memory:")
    lock = backend.acquire(meta("m"))
    with pytest.raises(SessionLockedError, match="another writer in this process"):
        backend.acquire(meta("m"))
    lock.release()
    backend.acquire(meta("m")).release()


def test_a_lock_held_by_a_process_is_freed_when_it_dies(
    db: Path, opened: list[SqliteBackend]
) -> None:
    backend = open_backend(opened, db)
    child = (
        "import sys\n"
        "from dsh_session_core import SessionHeader\n"
        "from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend\n"
        f"backend = SqliteBackend({str(db)!r})\n"
        "backend.acquire(SessionHeader(version=0, id='held', created_at=1000))\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"  # hold it until killed
    )
    with subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"locked\n"
        with pytest.raises(SessionLockedError, match=r"\(lock "):
            backend.acquire(meta("held"))
        proc.kill()
        proc.wait()
    backend.acquire(meta("held")).release()


# --- threads --------------------------------------------------------------------------------


def test_threads_may_share_one_backend(db: Path, opened: list[SqliteBackend]) -> None:
    backend = open_backend(opened, db)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            header = meta(f"t{n}")
            put(backend, header, from_wires([TS(0, 1)]), False)
            for seq in range(1, 20):
                put(backend, header, from_wires([TE(seq, 1)]), True)
                assert backend.load_stored(header.id, REGISTRY) is not None
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for n in range(4):
        stored = backend.load_stored(f"t{n}", REGISTRY)
        assert stored is not None
        assert seqs(stored.events) == list(range(20))


def test_a_lone_surrogate_in_the_id_is_refused_at_create(tmp_path: Path) -> None:
    from dsh_session_core import DurableStore, create_plugin_manager

    backend = SqliteBackend(tmp_path / "s.db")
    with DurableStore(backend, create_plugin_manager(autoload=False)) as store:
        with pytest.raises(UnstorableError, match="holds a lone surrogate, which the SQLite "
                                                  "backend cannot store") as info:
            store.create("x\udcffy", cwd="/w")
        assert info.value.session_id == "x\udcffy"
        assert store.stored() == []
        assert backend.load_stored("x\udcffy", REGISTRY) is None


def test_a_lone_surrogate_in_the_cwd_fails_the_batch_before_writing(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "s.db")
    header = SessionHeader(version=0, id="c", created_at=1, cwd="/w\udcff")
    event = decode_wire(REGISTRY, {"type": "turn/start", "seq": 0, "time": 1, "data": {
        "turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}})
    with pytest.raises(UnstorableError, match="the cwd of session 'c' holds a lone surrogate"):
        backend.append_batch(header, [event], b"", materialized=False)
    assert backend.list() == []
    backend.close()


def test_a_lone_surrogate_in_data_is_stored_escaped_and_reads_back_the_same_line(
    tmp_path: Path,
) -> None:
    """Issue 11, defect 4: the data column is the log line's JSON text, so a lone
    surrogate (written escaped, as the reference writes it) is storable; it used to fail
    every flush of the session with a UnicodeEncodeError."""
    from dsh_session_core import DurableStore, create_plugin_manager

    path = tmp_path / "s.db"
    with DurableStore(SqliteBackend(path), create_plugin_manager(autoload=False),
                      foreign_types=["other/kind"]) as store:
        session = store.create("s", cwd="/w")
        session.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                              "source": {"kind": "user"}}})
        session.append("user/message", {"content": [{"type": "text", "text": "a\ud800"}],
                                        "source": {"kind": "user"}}, surface_op="append")
        session.append("other/kind", {"k\ud800": ["\udfff", 1]})  # no plugin declares it
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        store.flush(session)
        expected = encode_events(list(session.events))
    assert b"\\ud800" in expected  # escaped, as the JSONL log has it
    backend = SqliteBackend(path)
    stored = backend.load_stored("s", REGISTRY)
    assert stored is not None
    assert encode_events(stored.events) == expected
    backend.close()


def test_an_event_type_with_a_lone_surrogate_is_unstorable_not_a_codec_error(
    tmp_path: Path,
) -> None:
    backend = SqliteBackend(tmp_path / "s.db")
    header = SessionHeader(version=0, id="c", created_at=1, cwd="/w")
    event = decode_wire(REGISTRY, {"type": "x/\ud800", "seq": 0, "time": 1, "data": {}})
    assert type(event) is OpaqueEvent  # no schema's type: kept as it is
    with pytest.raises(UnstorableError, match="type holding a lone surrogate"):
        backend.append_batch(header, [event], b"", materialized=False)
    assert backend.list() == []
    backend.close()
