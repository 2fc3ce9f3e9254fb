"""The database backends give every log line back as it was appended: a line their
columns would rebuild otherwise (a crash-repair closer, written ``surfaceOp`` before
``sourceEventSeqs``; a line another writer spelt otherwise) is kept beside its row, and
every read returns it. A database written before (by the reference, or by the build
before this one) is migrated when opened, once however many processes open it at once,
and its closers get back the key order the reference writes; triggers keep a kept line
with its row whoever deletes or changes the row. Real SQLite files, a real PostgreSQL
server, real processes."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from persist_support import meta
from pg_support import OLD_TABLES

from dsh_session_core import Session, SessionHeader, core_registry
from dsh_session_core._logformat.logfile import parse_log
from dsh_session_core._model.repair import interrupted_turn_closers
from dsh_session_core._persistence.backends.postgres import schema as postgres_schema
from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend
from dsh_session_core._persistence.backends.sql.rows import (
    CLOSER_DATA_END,
    event_params,
    header_row,
    row_line,
)
from dsh_session_core._persistence.backends.sqlite import schema as sqlite_schema
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
from dsh_session_core._persistence.base import Backend, stored_lines
from dsh_session_core._schema.codec import ENCODER
from dsh_session_core.errors import SchemaVersionError
from dsh_session_core.events import Event

REG = core_registry()
OPS_FIRST = b'"surfaceOp":"append","sourceEventSeqs":'


# --- logs -------------------------------------------------------------------------------


def crashed(session_id: str = "crashed") -> tuple[SessionHeader, list[Event], bytes]:
    """A session cut short after a tool call, then closed by crash repair: its closers
    as the reference writes them (the tool result ``surfaceOp`` first), then a turn
    more. Its events and their lines, as a JSONL log holds them."""
    ticks = iter(range(1_000, 2_000))
    s = Session(session_id, header=meta(session_id, "/w"), clock=lambda: next(ticks))
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                   "source": {"kind": "user"}}})
    s.append("user/message", {"content": [{"type": "text", "text": "list é"}],
                              "source": {"kind": "user"}}, surface_op="append")
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("assistant/message", {"turn": 1, "step": 1, "content": [
        {"type": "tool-call", "id": "call-1", "name": "bash", "arguments": "{}"}]},
        surface_op="append")
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "call-1", "name": "bash",
                           "arguments": "{}"})
    events = [*s.events, *interrupted_turn_closers(s.events)]
    after = Session(session_id, events, s.header, registry=REG, clock=lambda: next(ticks))
    after.append("turn/start", {"turn": 2, "trigger": {"kind": "message",
                                                       "source": {"kind": "user"}}})
    after.append("tool/result", {"turn": 2, "step": 1, "callId": "call-2", "content": [
        {"type": "text", "text": "a plain result, sourceEventSeqs first"}], "isError": False},
        surface_op="append", source_event_seqs=[4])
    after.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    jsonl = after.jsonl()
    assert jsonl.count(OPS_FIRST) == 1  # the closer
    return after.header, list(after.events), jsonl


#: Lines another writer spelt otherwise: spaces, a ``\\u`` escape, keys in another order
#: (the envelope's, a payload's), a key no column holds, ``1.0``. JSON.parse reads them
#: all; the columns rebuild none of them byte for byte.
ODD_LINES = [
    b'{"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1, "trigger":'
    b' {"kind": "message", "source": {"kind": "user"}}}}',
    b'{"seq":1,"type":"user/message","time":6,"data":{"source":{"kind":"user"},'
    b'"content":[{"type":"text","text":"caf\\u00e9"}]},"surfaceOp":"append"}',
    b'{"type":"x/note","seq":2,"time":7.0,"data":{"b":1,"a":[1.0,2e3]},"by":"hand"}',
    b'{"type":"turn/end","seq":3,"time":8,"data":{"reason":{"kind":"completed"},"turn":1}}',
]


def odd(session_id: str = "odd", *, extra: bool = True
        ) -> tuple[SessionHeader, list[Event], bytes]:
    """A session of :data:`ODD_LINES` (without the key no column holds, which a build
    before this one could not store, unless ``extra``)."""
    header = meta(session_id, "/w")
    lines = ODD_LINES if extra else [line.replace(b',"by":"hand"', b"") for line in ODD_LINES]
    log = parse_log(ENCODER.encode(header) + b"\n" + b"\n".join(lines) + b"\n", REG)
    assert log.jsonl == b"\n".join(lines) + b"\n"
    return header, list(log.events), log.jsonl


def stored_bytes(backend: Backend, session_id: str) -> bytes:
    """The session as ``export`` prints it: its header line, then its lines."""
    stored = backend.load_stored(session_id, REG)
    assert stored is not None
    assert stored.jsonl is not None
    return ENCODER.encode(stored.header) + b"\n" + stored.jsonl


def log_bytes(header: SessionHeader, jsonl: bytes) -> bytes:
    return ENCODER.encode(header) + b"\n" + jsonl


def rebuilt(events: list[Event]) -> bytes:
    """The lines the columns of ``events``' rows rebuild (as a build before this one
    read them back)."""
    params = event_params("-", events)
    return b"".join(row_line((*params[i:i + 4], params[i + 4] or None,  # type: ignore[arg-type]
                              params[i + 5] or None)) + b"\n"
                    for i in range(0, len(params), 6))


# --- every read gives the lines back ------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Backend]]:
    """Opens fresh backends over one database of each kind."""
    opened: list[Backend] = []
    if request.param == "sqlite":
        def make() -> Backend:
            opened.append(SqliteBackend(tmp_path / "s.db"))
            return opened[-1]
    else:
        url: str = request.getfixturevalue("postgresql_url")

        def make() -> Backend:
            opened.append(PostgresBackend(url))
            return opened[-1]
    yield make
    for backend in opened:
        backend.close()


@pytest.mark.parametrize("log", [crashed, odd])
def test_every_read_gives_back_the_lines_as_appended(
    database: Callable[[], Backend], log: Callable[[], tuple[SessionHeader, list[Event], bytes]]
) -> None:
    header, events, jsonl = log()
    lines = jsonl.split(b"\n")[:-1]
    writer = database()
    writer.append_batch(header, events[:3], b"".join(line + b"\n" for line in lines[:3]),
                        False)
    writer.append_batch(header, events[3:], b"".join(line + b"\n" for line in lines[3:]),
                        True)
    backend: Any = database()  # a fresh connection: nothing is remembered
    sid = header.id
    stored = backend.load_stored(sid, REG)
    assert stored.jsonl == jsonl
    assert [e.seq for e in stored.events] == list(range(len(events)))
    assert stored_bytes(backend, sid) == log_bytes(header, jsonl)
    assert backend.read_lines(sid, -1, None) == lines
    assert backend.read_lines(sid, 1, 2) == lines[2:4]
    assert backend.tail_lines(sid, 3).lines == lines[-3:]
    assert backend.lines_since(header, stored.events[2]) == lines[3:]
    kinds = {e.type for e in events}
    for kind in kinds:
        assert backend.lines_of_types(sid, [kind]) == [
            line for line, e in zip(lines, events, strict=True) if e.type == kind]
    news = next(iter(backend.follow_lines(sid, 1, timeout=5)))
    assert news.lines == lines[2:]
    measured = backend.delete(sid, dry_run=True)
    assert measured.bytes == len(log_bytes(header, jsonl))


def test_a_load_in_chunks_puts_each_kept_line_in_its_place(
    database: Callable[[], Backend], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_session_core._persistence.backends.postgres import backend as postgres
    from dsh_session_core._persistence.backends.sqlite import backend as sqlite

    monkeypatch.setattr(sqlite, "_CHUNK", 4)
    monkeypatch.setattr(postgres, "_CHUNK", 4)

    def no_scan(*args: object) -> None:
        raise AssertionError("the fast load fell back to the row-by-row scan")

    for module in (sqlite, postgres):  # the fast load's own answer, not the scan's
        monkeypatch.setattr(module, "scanned", no_scan)
    # 30 events, every third spelt otherwise (kept), over chunks of 4 rows.
    header = meta("long", "/w")
    lines = []
    for seq in range(30):
        line = (b'{"type":"x/note","seq":%d,"time":1,"data":{"n":%d}}' % (seq, seq))
        lines.append(line.replace(b'"data":', b'"data": ') if seq % 3 == 0 else line)
    log = parse_log(ENCODER.encode(header) + b"\n" + b"\n".join(lines) + b"\n", REG)
    database().append_batch(header, list(log.events), log.jsonl, False)
    stored = database().load_stored("long", REG)
    assert stored is not None
    assert stored.jsonl == log.jsonl
    assert [e.seq for e in stored.events] == list(range(30))


def test_the_careful_load_gives_back_the_lines_too(tmp_path: Path) -> None:
    # A row before seq 0 sends the load to the reference's row-by-row scan.
    header, events, jsonl = crashed()
    backend = SqliteBackend(tmp_path / "s.db")
    try:
        backend.append_batch(header, events, jsonl, False)
        conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
        conn.execute("INSERT INTO events VALUES ('crashed', -1, 'x', 1, '{}', NULL, NULL)")
        conn.close()
        with pytest.raises(Exception, match="seq gap in committed region"):
            backend.load_stored("crashed", REG)
        conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
        conn.execute("DELETE FROM events WHERE seq IN (-1, 10)")  # the last turn/end, and
        conn.execute("INSERT INTO events VALUES ('crashed', 11, 'x', 1, 'torn', NULL, NULL)")
        conn.close()  # a gap after it: a torn tail
        stored = backend.load_stored("crashed", REG)
        assert stored is not None
        assert stored.torn == 10
        assert stored.jsonl == b"".join(line + b"\n" for line in jsonl.split(b"\n")[:10])
        assert OPS_FIRST in stored.jsonl
    finally:
        backend.close()


def test_only_the_lines_the_columns_would_not_rebuild_are_kept(tmp_path: Path) -> None:
    header, events, jsonl = crashed()
    closer = jsonl.split(b"\n")[5]
    assert OPS_FIRST in closer
    assert closer.split(b',"surfaceOp"')[0].endswith(CLOSER_DATA_END.encode())
    # A tool result with a closer's payload appended by hand, sourceEventSeqs first:
    # the columns would rebuild it as a closer, so its line is kept.
    by_hand = Session("by-hand", list(events[:5]), header, registry=REG, clock=lambda: 5)
    by_hand.append("tool/result", events[5].data, surface_op="append", source_event_seqs=[4])
    assert OPS_FIRST not in by_hand.jsonl()
    backend = SqliteBackend(tmp_path / "s.db")
    try:
        backend.append_batch(header, events, jsonl, False)
        backend.append_batch(*odd(), False)
        backend.append_batch(meta("by-hand", "/w"), list(by_hand.events), by_hand.jsonl(),
                             False)
        assert backend.load_stored("by-hand", REG).jsonl == by_hand.jsonl()  # type: ignore[union-attr]
    finally:
        backend.close()
    conn = sqlite3.connect(tmp_path / "s.db")
    kept = conn.execute("SELECT session_id, seq, line FROM dsh_event_lines").fetchall()
    conn.close()
    # The closer is rebuilt as the reference writes it: no line kept.
    assert kept == [("by-hand", 5, by_hand.jsonl().split(b"\n")[5].decode()),
                    *(("odd", i, line.decode()) for i, line in enumerate(ODD_LINES))]


# --- triggers: a kept line lives and dies with its row ----------------------------------


def test_a_kept_line_goes_with_its_row_whoever_deletes_or_changes_it(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    backend = SqliteBackend(db)
    for sid in ("odd", "other", "third"):
        backend.append_batch(*odd(sid), False)
    conn = sqlite3.connect(db, isolation_level=None)

    def kept(sid: str) -> list[int]:
        return [seq for (seq,) in conn.execute(
            "SELECT seq FROM dsh_event_lines WHERE session_id = ? ORDER BY seq", (sid,))]

    def line(sid: str, seq: int) -> bytes:
        stored = backend.load_stored(sid, REG)
        assert stored is not None
        assert stored.jsonl is not None
        return stored.jsonl.split(b"\n")[seq]

    try:
        assert kept("odd") == kept("other") == [0, 1, 2, 3]
        # Changed by hand: the row speaks for itself again (as its columns rebuild it).
        conn.execute("UPDATE events SET time = 7 WHERE session_id = 'odd' AND seq = 0")
        assert kept("odd") == [1, 2, 3]
        assert line("odd", 0) == (b'{"type":"turn/start","seq":0,"time":7,"data":{"turn":1,'
                                  b'"trigger":{"kind":"message","source":{"kind":"user"}}}}')
        # Cut by another writer (the reference), then written again without a line.
        conn.execute("DELETE FROM events WHERE session_id = 'other' AND seq >= 2")
        assert kept("other") == [0, 1]
        conn.execute("INSERT INTO events VALUES ('other', 2, 'turn/end', 9, ?, NULL, NULL)",
                     ('{"turn":1,"reason":{"kind":"interrupted"}}',))
        assert line("other", 2) == (b'{"type":"turn/end","seq":2,"time":9,"data":{"turn":1,'
                                    b'"reason":{"kind":"interrupted"}}}')
        # Sessions deleted (the rows of one by the cascade from sessions).
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM sessions WHERE id = 'third'")
        assert kept("third") == []
        backend.delete("other")
        assert kept("other") == []
        assert kept("odd") == [1, 2, 3]
    finally:
        conn.close()
        backend.close()


def test_postgresql_forgets_a_kept_line_when_its_row_is_changed_by_hand(
    postgresql_url: str,
) -> None:
    backend = PostgresBackend(postgresql_url)
    try:
        backend.append_batch(*odd(), False)
        with psycopg.connect(postgresql_url, autocommit=True) as conn:
            def lines() -> list[tuple[Any, ...]]:
                return conn.execute(
                    "SELECT seq FROM events WHERE line IS NOT NULL ORDER BY seq").fetchall()

            assert lines() == [(0,), (1,), (2,), (3,)]
            conn.execute("UPDATE events SET line = line || '' WHERE seq = 0")  # the line: kept
            assert lines() == [(0,), (1,), (2,), (3,)]
            conn.execute("UPDATE events SET time = 7 WHERE seq = 0")
            assert lines() == [(1,), (2,), (3,)]
        assert stored_bytes(backend, "odd").split(b"\n")[1] == (
            b'{"type":"turn/start","seq":0,"time":7,"data":{"turn":1,'
            b'"trigger":{"kind":"message","source":{"kind":"user"}}}}')
    finally:
        backend.close()


# --- SQLite: a database written before ----------------------------------------------------


def _old_sqlite(path: Path, *logs: tuple[SessionHeader, list[Event], bytes],
                index: bool = True) -> None:
    """A database as the build before this one writes it (the reference's tables,
    ``user_version`` 4, the search index's tables, no line kept), or as the reference
    does (``index=False``), holding ``logs``: rows exactly as both write them."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA user_version = 4")
        for statement in (*sqlite_schema.SCHEMA, *(sqlite_schema.INDEX_SCHEMA if index else ())):
            conn.execute(statement)
        for header, events, _ in logs:
            conn.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)", header_row(header))
            params = event_params(header.id, events)
            conn.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, nullif(?, ''), nullif(?, ''))",
                [(header.id, *params[i:i + 6]) for i in range(0, len(params), 6)])
    finally:
        conn.close()


def _sqlite_state(path: Path) -> tuple[Any, ...]:
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("PRAGMA user_version").fetchone()[0],
                conn.execute("SELECT version FROM dsh_session_schema").fetchall(),
                conn.execute("SELECT session_id, seq FROM dsh_event_lines").fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("index", [True, False], ids=["older-build", "reference"])
def test_an_older_sqlite_database_is_migrated_and_its_closers_come_back_as_written(
    tmp_path: Path, index: bool
) -> None:
    db = tmp_path / "old.db"
    header, events, jsonl = crashed()
    old = odd(extra=False)
    _old_sqlite(db, (header, events, jsonl), old, index=index)
    backend = SqliteBackend(db)
    try:
        # The closer comes back as the reference wrote it; the rows that were rebuilt
        # before still are (nothing knows how another writer spelt them).
        assert stored_bytes(backend, "crashed") == log_bytes(header, jsonl)
        assert stored_bytes(backend, "odd") == log_bytes(old[0], rebuilt(old[1]))
        assert rebuilt(old[1]) != old[2]
        backend.append_batch(*odd("odd-now"), False)  # written now: kept as it is
        assert stored_bytes(backend, "odd-now") == log_bytes(meta("odd-now", "/w"), odd()[2])
    finally:
        backend.close()
    # user_version stays the reference's: it reads and writes the database as before.
    now = [("odd-now", seq) for seq in range(4)]
    assert _sqlite_state(db) == (4, [(2,)], now)
    SqliteBackend(db).close()  # again: nothing more to do
    assert _sqlite_state(db) == (4, [(2,)], now)


_OPEN = """
import sys, time
from pathlib import Path
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
from dsh_session_core import core_registry
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
backend = SqliteBackend(sys.argv[1])
stored = backend.load_stored("crashed", core_registry())
sys.stdout.buffer.write(stored.jsonl)
backend.close()
"""


def test_processes_opening_an_older_sqlite_database_at_once_migrate_it_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    header, events, jsonl = crashed()
    _old_sqlite(db, (header, events, jsonl))
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN, str(db), str(go), str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(4)]
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert out == jsonl
    assert _sqlite_state(db) == (4, [(2,)], [])


_READ = """
import sys
from dsh_session_core import core_registry
from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend
backend = SqliteBackend(sys.argv[1], create=False)
stored = backend.load_stored("crashed", core_registry())
sys.stdout.buffer.write(stored.jsonl)
sys.stdout.buffer.write(b"".join(backend.tail_lines("crashed", 100).lines))
backend.close()
"""


def test_an_older_sqlite_database_that_cannot_be_written_is_read_until_it_can_be_migrated(
    tmp_path: Path,
) -> None:
    header, events, jsonl = crashed()
    folder = tempfile.mkdtemp(prefix="dsh-ro-")
    try:
        os.chmod(folder, 0o777)  # SQLite's WAL files are made beside it
        db = Path(folder) / "ro.db"
        _old_sqlite(db, (header, events, jsonl))
        os.chmod(db, 0o444)
        before = hashlib.sha256(db.read_bytes()).hexdigest()
        done = subprocess.run([sys.executable, "-c", _READ, str(db)], capture_output=True,
                              check=False, cwd=folder,
                              user="nobody" if os.geteuid() == 0 else None)
        assert done.returncode == 0, done.stderr.decode()
        # Every line, the closer as the reference wrote it, the file left as it is.
        assert done.stdout == jsonl + jsonl.replace(b"\n", b"")
        assert hashlib.sha256(db.read_bytes()).hexdigest() == before
        # Once it may be written, the first open migrates it.
        os.chmod(db, 0o644)
        backend = SqliteBackend(db, create=False)
        try:
            backend.append_batch(*odd(), False)
            assert stored_bytes(backend, "odd") == log_bytes(*odd()[::2])
        finally:
            backend.close()
        assert _sqlite_state(db)[:2] == (4, [(2,)])
    finally:
        shutil.rmtree(folder)


def test_own_tables_of_a_newer_version_are_refused_and_left_as_they_are(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    SqliteBackend(db).close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE dsh_session_schema SET version = 3")
    conn.close()
    message = (f'session database at "{db}" has schema version 3, incompatible with this '
               "build (2): the version of dsh-session's own tables (dsh_session_schema), "
               "which a newer dsh-session wrote: open the database with that one")
    with pytest.raises(SchemaVersionError) as caught:
        SqliteBackend(db)
    assert str(caught.value) == message
    assert (caught.value.version, caught.value.expected) == (3, 2)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT version FROM dsh_session_schema").fetchall() == [(3,)]
    conn.close()


# --- PostgreSQL: a database written before ------------------------------------------------

def _old_postgres(url: str, version: int,
                  *logs: tuple[SessionHeader, list[Event], bytes]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in (*OLD_TABLES, *(postgres_schema.INDEX_SCHEMA if version > 1 else ())):
            conn.execute(statement)
        conn.execute("INSERT INTO dsh_session_schema (version) VALUES (%s)", (version,))
        for header, events, _ in logs:
            conn.execute("INSERT INTO sessions VALUES (%s, %s, %s, %s, %s, %s)",
                         header_row(header, "PostgreSQL"))
            params = event_params(header.id, events, "PostgreSQL")
            conn.cursor().executemany(
                "INSERT INTO events VALUES (%s, %s, %s, %s, %s, nullif(%s, ''), nullif(%s, ''))",
                [(header.id, *params[i:i + 6]) for i in range(0, len(params), 6)])


def _pg(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_postgresql_database_is_migrated_and_its_closers_come_back_as_written(
    postgresql_url: str, version: int
) -> None:
    url = postgresql_url
    header, events, jsonl = crashed()
    old = odd(extra=False)
    _old_postgres(url, version, (header, events, jsonl), old)
    backend = PostgresBackend(url)
    try:
        assert stored_bytes(backend, "crashed") == log_bytes(header, jsonl)
        assert stored_bytes(backend, "odd") == log_bytes(old[0], rebuilt(old[1]))
        backend.append_batch(*odd("odd-now"), False)  # written now: kept as it is
        assert stored_bytes(backend, "odd-now") == log_bytes(meta("odd-now", "/w"), odd()[2])
    finally:
        backend.close()
    kept = "SELECT session_id, seq FROM events WHERE line IS NOT NULL ORDER BY 1, 2"
    now = [("odd-now", seq) for seq in range(4)]
    assert _pg(url, "SELECT version FROM dsh_session_schema") == [(4,)]
    assert _pg(url, kept) == now
    PostgresBackend(url).close()  # again: nothing more to do
    assert _pg(url, "SELECT version FROM dsh_session_schema") == [(4,)]
    assert _pg(url, kept) == now


def test_connections_opening_an_older_postgresql_database_at_once_migrate_it_once(
    postgresql_url: str,
) -> None:
    header, events, jsonl = crashed()
    _old_postgres(postgresql_url, 2, (header, events, jsonl))
    loaded: list[bytes] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            backend = PostgresBackend(postgresql_url)
            try:
                loaded.append(stored_bytes(backend, "crashed"))
            finally:
                backend.close()
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert loaded == [log_bytes(header, jsonl)] * 6
    assert _pg(postgresql_url, "SELECT version FROM dsh_session_schema") == [(4,)]


def test_an_older_postgresql_database_a_connection_may_not_change_is_refused(
    postgresql_url: str,
) -> None:
    _old_postgres(postgresql_url, 2, crashed())
    read_only = postgresql_url + (
        ("&" if "?" in postgresql_url else "?") + "options=-cdefault_transaction_read_only%3Don")
    with pytest.raises(SchemaVersionError, match=(
            r"has schema version 2, incompatible with this build \(4\): this connection may "
            r"not migrate it \(a read-only role or a standby\); open it once with a role "
            r"that may change its tables, and it is migrated in place$")):
        PostgresBackend(read_only)
    assert _pg(postgresql_url, "SELECT version FROM dsh_session_schema") == [(2,)]
    PostgresBackend(postgresql_url).close()
    PostgresBackend(read_only).close()  # migrated: a reader needs to change nothing


def test_stored_lines_of_a_database_are_the_lines_as_appended(tmp_path: Path) -> None:
    # What copy and export read (base.stored_lines): one line an event, as appended.
    header, events, jsonl = crashed()
    backend = SqliteBackend(tmp_path / "s.db")
    try:
        backend.append_batch(header, events, jsonl, False)
        stored = backend.load_stored("crashed", REG)
        assert stored is not None
        assert stored_lines(stored) == jsonl.split(b"\n")[:-1]
    finally:
        backend.close()
