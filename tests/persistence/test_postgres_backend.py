"""What the PostgreSQL backend adds to the contract suite (which it passes too): the
schema and its version check, the lease that keeps one writer per session across hosts,
the optimistic seq checks, followers woken by NOTIFY, and values PostgreSQL cannot
store. Every test runs against a real server, in a database of its own."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import psycopg
import pytest
from persist_support import ONE_TURN, TE, TS, meta

from dsh_session_core import core_registry, to_wire
from dsh_session_core._persistence.backends.postgres.backend import (
    SCHEMA_VERSION,
    PostgresBackend,
    channel_of,
)
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core._persistence.store.coordinator import PersistencePlugin
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core.errors import (
    PersistenceError,
    SchemaVersionError,
    SessionLockedError,
    StoreNotFoundError,
    UnstorableError,
)
from dsh_session_core.events import Event


def _sql(url: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _events(wires: list[dict[str, Any]]) -> list[Event]:
    from dsh_session_core._schema.decode import decode_wire

    reg = core_registry()
    return [decode_wire(reg, w) for w in wires]


def _load(url: str, sid: str) -> Any:
    """What a fresh coordinator's ``load`` returns (repairing), its connections closed."""
    p = PersistencePlugin(PostgresBackend(url), core_registry())
    try:
        return p.load(sid)
    finally:
        p.close()


def _stored(url: str, sid: str) -> list[dict[str, Any]]:
    backend = PostgresBackend(url)
    try:
        stored = backend.load_stored(sid, core_registry())
        assert stored is not None
        return [to_wire(e) for e in stored.events]
    finally:
        backend.close()


@pytest.fixture
def request_cleanup() -> Any:
    """Callables run after the test, last first (for what outlives its database)."""
    todo: list[Any] = []
    yield todo
    for undo in reversed(todo):
        undo()


# --- schema ------------------------------------------------------------------------------


def test_the_schema_is_the_references_tables_with_a_version(postgresql_url: str) -> None:
    PostgresBackend(postgresql_url).close()
    columns = _sql(
        postgresql_url,
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    )
    assert [c for c in columns if c[0] == "sessions"] == [
        ("sessions", "id", "text", "NO"),
        ("sessions", "version", "integer", "NO"),
        ("sessions", "created_at", "bigint", "NO"),
        ("sessions", "cwd", "text", "YES"),
        ("sessions", "parent_session", "text", "YES"),
        ("sessions", "seed_length", "bigint", "YES"),
    ]
    assert [c for c in columns if c[0] == "events"] == [
        ("events", "session_id", "text", "NO"),
        ("events", "seq", "bigint", "NO"),
        ("events", "type", "text", "NO"),
        ("events", "time", "bigint", "NO"),
        ("events", "data", "text", "NO"),
        ("events", "source_event_seqs", "text", "YES"),
        ("events", "surface_op", "text", "YES"),
        ("events", "line", "text", "YES"),  # ours: a line the columns would not give back
    ]
    (key,) = _sql(
        postgresql_url,
        "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i"
        " WHERE i.indrelid = 'events'::regclass AND i.indisprimary",
    )
    assert key[0].endswith("USING btree (session_id, seq)")
    indexes = {r[0] for r in _sql(postgresql_url,
                                  "SELECT indexname FROM pg_indexes WHERE tablename = 'sessions'")}
    assert {"sessions_by_created_at", "sessions_by_cwd"} <= indexes
    assert _sql(postgresql_url, "SELECT version FROM dsh_session_schema") == [(SCHEMA_VERSION,)]


def test_a_reader_finds_no_store_and_leaves_no_tables(postgresql_url: str) -> None:
    with pytest.raises(StoreNotFoundError, match=r"^no dsh-session store at postgresql://")\
            as info:
        PostgresBackend(postgresql_url, create=False)
    assert info.value.location.startswith("postgresql://")
    assert _sql(postgresql_url, "SELECT to_regclass('dsh_session_schema')") == [(None,)]
    PostgresBackend(postgresql_url).close()  # a writer creates it
    PostgresBackend(postgresql_url, create=False).close()


def test_ls_on_an_empty_database_says_so_and_writes_nothing(postgresql_url: str) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "dsh_session_core", "ls", "--store",
                           postgresql_url], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("dsh-session: no dsh-session store at postgresql://")
    assert _sql(postgresql_url, "SELECT to_regclass('sessions')") == [(None,)]


def test_opening_twice_keeps_the_schema(postgresql_url: str) -> None:
    p = PersistencePlugin(PostgresBackend(postgresql_url), core_registry())
    p.create(meta("kept", "/w"))
    p.append("kept", ONE_TURN)
    p.close()
    PostgresBackend(postgresql_url).close()
    assert _stored(postgresql_url, "kept") == ONE_TURN


def test_concurrent_first_opens_create_the_schema_once(postgresql_url: str) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            PostgresBackend(postgresql_url).close()
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _sql(postgresql_url, "SELECT count(*) FROM dsh_session_schema") == [(1,)]


def test_another_schema_version_is_refused(postgresql_url: str) -> None:
    PostgresBackend(postgresql_url).close()
    _sql(postgresql_url, "UPDATE dsh_session_schema SET version = 7")
    with pytest.raises(SchemaVersionError, match=r"schema version 7, incompatible with this "
                                                 rf"build \({SCHEMA_VERSION}\)") as info:
        PostgresBackend(postgresql_url)
    assert info.value.version == 7
    assert info.value.expected == SCHEMA_VERSION


def test_foreign_tables_are_not_taken_over(postgresql_url: str) -> None:
    _sql(postgresql_url, "CREATE TABLE sessions (name text)")
    with pytest.raises(PersistenceError, match="did not create"):
        PostgresBackend(postgresql_url)
    assert _sql(postgresql_url, "SELECT to_regclass('events')") == [(None,)]


def test_the_url_picks_this_backend_and_location_hides_the_password(
    postgresql_url: str, request_cleanup: list[Any]
) -> None:
    import uuid

    role = f"writer_{uuid.uuid4().hex[:8]}"  # roles are the whole server's
    _sql(postgresql_url, f"CREATE ROLE {role} LOGIN PASSWORD 's3cret' SUPERUSER")
    request_cleanup.append(lambda: _sql(postgresql_url, f"DROP OWNED BY {role}; DROP ROLE {role}"))
    url = postgresql_url.replace("://dsh@", f"://{role}:s3cret@")
    with DurableStore(backend_for(url)) as store:
        assert isinstance(store.backend, PostgresBackend)
        s = store.create("where", cwd="/w")
        s.append("turn/start", TS(0, 1)["data"])
        store.flush(s)
        location = store.location("where")
    assert "s3cret" not in location
    assert location.startswith(f"postgresql://{role}@127.0.0.1")
    short = backend_for(url.replace("postgresql://", "postgres://"))
    try:
        assert isinstance(short, PostgresBackend)
        assert [h.id for h in short.list()] == ["where"]
    finally:
        short.close()


# --- the lease ----------------------------------------------------------------------------


def test_a_second_writer_is_refused_and_named(postgresql_url: str) -> None:
    first = PostgresBackend(postgresql_url)
    second = PostgresBackend(postgresql_url)
    try:
        lease = first.acquire(meta("one"))
        with pytest.raises(SessionLockedError, match=r"dsh-session writer .*server pid \d+"):
            second.acquire(meta("one"))
        other = second.acquire(meta("two"))  # another session is free
        other.release()
        lease.release()
        second.acquire(meta("one")).release()  # released: free for the next writer
    finally:
        first.close()
        second.close()


def test_a_dead_writers_lease_is_released(postgresql_url: str) -> None:
    first = PostgresBackend(postgresql_url)
    first.acquire(meta("orphan"))
    # The server ends the holder's connection, as when its host or process dies.
    _sql(postgresql_url,
         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
         " WHERE application_name LIKE 'dsh-session writer%%' AND datname = current_database()")
    second = PostgresBackend(postgresql_url)
    try:
        second.acquire(meta("orphan")).release()
    finally:
        second.close()
        first.close()


def test_a_writer_whose_connection_dropped_takes_its_lease_again(postgresql_url: str) -> None:
    p = PersistencePlugin(PostgresBackend(postgresql_url), core_registry())
    p.create(meta("blip", "/w"))
    p.append("blip", ONE_TURN[:3])
    _sql(postgresql_url,
         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
         " WHERE application_name LIKE 'dsh-session writer%%' AND datname = current_database()")
    p.append("blip", ONE_TURN[3:])  # reconnects, takes the lease again, writes
    p.close()
    assert _stored(postgresql_url, "blip") == ONE_TURN


def test_a_writer_that_lost_its_lease_to_another_cannot_write(postgresql_url: str) -> None:
    p = PersistencePlugin(PostgresBackend(postgresql_url), core_registry())
    p.create(meta("taken", "/w"))
    p.append("taken", ONE_TURN[:3])
    _sql(postgresql_url,
         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
         " WHERE application_name LIKE 'dsh-session writer%%' AND datname = current_database()")
    thief = PostgresBackend(postgresql_url)
    lease = thief.acquire(meta("taken"))
    try:
        for _ in range(2):  # refused again, not a driver error about a closed connection
            with pytest.raises(SessionLockedError):
                p.append("taken", ONE_TURN[3:])
        assert _stored(postgresql_url, "taken") == ONE_TURN[:3]
        lease.release()  # the thief is gone: the writer takes its lease back and goes on
        p.append("taken", ONE_TURN[3:])
    finally:
        lease.release()
        thief.close()
        p.close()
    assert _stored(postgresql_url, "taken") == ONE_TURN


# --- optimistic seq checks ------------------------------------------------------------------


def test_a_batch_that_does_not_follow_the_stored_log_writes_nothing(
    postgresql_url: str,
) -> None:
    backend = PostgresBackend(postgresql_url)
    try:
        h = meta("gap", "/w")
        backend.append_batch(h, _events(ONE_TURN[:2]), b"", materialized=False)
        # No lease: a misbehaving writer. A gap and a duplicate are both refused.
        with pytest.raises(PersistenceError, match=r"ends at seq 1, but this batch starts at "
                                                   r"seq 3"):
            backend.append_batch(h, _events(ONE_TURN[3:]), b"", materialized=True)
        rewritten = [{**ONE_TURN[1], "time": 99}, ONE_TURN[2]]
        with pytest.raises(PersistenceError, match="written by another writer"):
            backend.append_batch(h, _events(rewritten), b"", materialized=True)
    finally:
        backend.close()
    assert _stored(postgresql_url, "gap") == ONE_TURN[:2]


def test_a_retry_of_a_committed_batch_succeeds_without_duplicates(postgresql_url: str) -> None:
    backend = PostgresBackend(postgresql_url)
    try:
        h = meta("retry", "/w")
        batch = _events(ONE_TURN)
        backend.append_batch(h, batch, b"", materialized=False)
        backend.append_batch(h, batch, b"", materialized=False)  # the COMMIT reply was lost
    finally:
        backend.close()
    assert _stored(postgresql_url, "retry") == ONE_TURN
    assert _sql(postgresql_url, "SELECT count(*) FROM events") == [(6,)]


def test_a_refused_first_batch_leaves_no_session_row(postgresql_url: str) -> None:
    backend = PostgresBackend(postgresql_url)
    try:
        with pytest.raises(PersistenceError):
            backend.append_batch(meta("late", "/w"), _events(ONE_TURN[2:]), b"",
                                 materialized=False)
    finally:
        backend.close()
    assert _sql(postgresql_url, "SELECT count(*) FROM sessions") == [(0,)]


def test_racing_writers_never_leave_a_gap_or_a_duplicate(postgresql_url: str) -> None:
    """Writers with no lease at all, each appending turns as fast as it can from where it
    believes the log ends: whatever wins, the log stays 0..n-1."""
    h = meta("race", "/w")
    seed = PostgresBackend(postgresql_url)
    seed.append_batch(h, _events([TS(0, 1), TE(1, 1)]), b"", materialized=False)
    seed.close()

    def writer() -> None:
        backend = PostgresBackend(postgresql_url)
        try:
            for _ in range(40):
                (top,) = _sql(postgresql_url,
                              "SELECT max(seq) FROM events WHERE session_id = 'race'")[0]
                turn = top // 2 + 1
                with contextlib.suppress(PersistenceError):  # lost: refused, nothing written
                    backend.append_batch(
                        h, _events([TS(top + 1, turn), TE(top + 2, turn)]), b"", True)
        finally:
            backend.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqs = [r[0] for r in _sql(postgresql_url,
                               "SELECT seq FROM events WHERE session_id = 'race' ORDER BY seq")]
    assert seqs == list(range(len(seqs)))
    assert len(seqs) >= 2 + 2 * 40  # at least one writer's every attempt, or its equal


# --- reading ------------------------------------------------------------------------------


def test_a_load_takes_many_chunks_and_keeps_the_bytes(postgresql_url: str) -> None:
    from dsh_session_core._persistence.backends.postgres.backend import _CHUNK

    turns = _CHUNK // 2 + 3
    wires = [w for t in range(turns) for w in (TS(2 * t, t + 1), TE(2 * t + 1, t + 1))]
    with DurableStore(PostgresBackend(postgresql_url)) as store:
        s = store.create("long", cwd="/w", seed=_events(wires))
        store.flush(s)
        expected = s.to_jsonl()
    with DurableStore(PostgresBackend(postgresql_url)) as store:
        again = store.open("long")
        assert again.to_jsonl() == expected
        assert len(again.events) == 2 * turns


def test_a_large_load_shares_its_snapshot_with_a_second_connection(
    postgresql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond two chunks, a second connection builds every other chunk, in the load's
    snapshot: rows deleted meanwhile are still seen, and the fast load completes (a
    chunk short of rows would send it the careful way)."""
    from dsh_session_core._persistence.backends.postgres import backend as _persist_postgres
    from dsh_session_core._schema.codec import encode_events

    monkeypatch.setattr(_persist_postgres, "_CHUNK", 16)  # 250 turns: 32 chunks
    wires = [w for t in range(250) for w in (TS(2 * t, t + 1), TE(2 * t + 1, t + 1))]
    events = _events(wires)
    backend = PostgresBackend(postgresql_url)
    try:
        backend.append_batch(meta("big"), events, b"", materialized=False)
        seen: list[int] = []
        fetch = _persist_postgres._chunk_fetcher
        connect = backend._connect

        def connect_then_cut(application: str = "dsh-session") -> Any:
            conn = connect(application)
            # The second connection exists, its snapshot not taken yet: the tail is cut
            # by someone else now.
            _sql(postgresql_url, "DELETE FROM events WHERE seq >= 400")
            return conn

        def fetcher(conn: Any, sid: str) -> Any:
            inner = fetch(conn, sid)

            def spy(start: int) -> Any:
                seen.append(id(conn))
                return inner(start)

            return spy

        monkeypatch.setattr(backend, "_connect", connect_then_cut)
        def careful(*args: Any) -> Any:
            pytest.fail("the fast load fell back to the row-by-row scan")

        monkeypatch.setattr(_persist_postgres, "_chunk_fetcher", fetcher)
        monkeypatch.setattr(_persist_postgres, "scanned", careful)
        stored = backend.load_stored("big", core_registry())
    finally:
        backend.close()
    assert stored is not None
    assert stored.jsonl == encode_events(events)  # as of the load's snapshot
    assert len(set(seen)) == 2  # two connections built the chunks
    assert _sql(postgresql_url, "SELECT count(*) FROM events") == [(400,)]


def test_an_odd_type_string_keeps_its_bytes(postgresql_url: str) -> None:
    odd = "\"quoted\"\\\t\x01\x7f é 𝄞 \u2028"
    wires = [TS(0, 1), {"type": odd, "seq": 1, "time": 5, "data": {"x": "\x00"}}, TE(2, 1)]
    from dsh_session_core._schema.codec import encode_events

    events = _events(wires)
    backend = PostgresBackend(postgresql_url)
    try:
        backend.append_batch(meta("odd"), events, b"", materialized=False)
        stored = backend.load_stored("odd", core_registry())
    finally:
        backend.close()
    assert stored is not None
    assert stored.jsonl == encode_events(events)


def test_a_corrupt_committed_row_is_an_error_naming_the_seq(postgresql_url: str) -> None:
    p = PersistencePlugin(PostgresBackend(postgresql_url), core_registry())
    p.create(meta("bad", "/w"))
    p.append("bad", ONE_TURN)
    p.close()
    _sql(postgresql_url, "UPDATE events SET data = '{oops' WHERE seq = 2")
    from dsh_session_core.errors import LogFormatError

    with pytest.raises(LogFormatError, match="unparsable committed event at seq 2"):
        _load(postgresql_url, "bad")


def test_a_torn_tail_is_cut_and_the_turn_closed(postgresql_url: str) -> None:
    p = PersistencePlugin(PostgresBackend(postgresql_url), core_registry())
    p.create(meta("torn", "/w"))
    p.append("torn", ONE_TURN[:5])
    p.close()
    _sql(postgresql_url, "UPDATE events SET data = '{oops' WHERE seq = 4")
    loaded = _load(postgresql_url, "torn")
    assert [e.type for e in loaded.events] == [
        "turn/start", "user/message", "step/start", "assistant/message", "step/end",
        "turn/end",
    ]
    assert to_wire(loaded.events[-1])["data"]["reason"] == {"kind": "interrupted"}


# --- values PostgreSQL cannot store ---------------------------------------------------------


def test_a_nul_in_a_header_is_refused_before_writing(postgresql_url: str) -> None:
    backend = PostgresBackend(postgresql_url)
    try:
        with pytest.raises(UnstorableError, match="NUL character"):
            backend.append_batch(meta("nul", "/w\x00x"), _events(ONE_TURN), b"", False)
    finally:
        backend.close()
    assert _sql(postgresql_url, "SELECT count(*) FROM sessions") == [(0,)]


def test_a_fractional_time_is_refused_naming_this_backend(postgresql_url: str) -> None:
    backend = PostgresBackend(postgresql_url)
    try:
        with pytest.raises(UnstorableError, match=r"has time 1\.5, not integer epoch "
                                                  r"milliseconds.*the PostgreSQL backend"):
            backend.append_batch(meta("frac"), _events([TS(0, 1, time=1.5)]), b"", False)  # type: ignore[arg-type]
    finally:
        backend.close()
    assert _sql(postgresql_url, "SELECT count(*) FROM sessions") == [(0,)]


@pytest.mark.parametrize("sid", ["a\x00b", "x\udcffy"])
def test_an_id_no_row_can_hold_is_refused_at_create(postgresql_url: str, sid: str) -> None:
    with DurableStore(PostgresBackend(postgresql_url)) as store:
        with pytest.raises(UnstorableError, match="which a PostgreSQL text column cannot "
                                                  "store") as info:
            store.create(sid, cwd="/w")
        assert info.value.session_id == sid
        assert store.stored() == []


# --- followers ------------------------------------------------------------------------------


def test_a_follower_is_woken_by_each_commit(postgresql_url: str) -> None:
    p = PersistencePlugin(PostgresBackend(postgresql_url), core_registry())
    p.create(meta("live", "/w"))
    p.append("live", ONE_TURN[:2])
    follower = PostgresBackend(postgresql_url)
    seen: list[tuple[int, int]] = []
    ready = threading.Event()

    def follow() -> None:
        for last, lines in follower.follow("live", 1, timeout=60):
            seen.append((last, len(lines)))
            ready.set()
            if last == 5:
                return

    t = threading.Thread(target=follow)
    t.start()
    p.append("live", ONE_TURN[2:4])
    p.append("live", ONE_TURN[4:])
    t.join(timeout=120)
    p.close()
    follower.close()
    assert not t.is_alive()
    assert seen[-1][0] == 5
    assert sum(n for _, n in seen) == 4  # seqs 2-5, each once


def test_a_commit_that_lands_while_the_follower_reads_is_not_missed(
    postgresql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NOTIFY that reaches the follower while it runs a query (not while it waits)
    must still wake it, else it would sleep until the next commit."""
    from dsh_session_core._persistence.backends.postgres import schema as postgres_schema

    p = PersistencePlugin(PostgresBackend(postgresql_url), core_registry())
    p.create(meta("race", "/w"))
    p.append("race", ONE_TURN[:2])
    follower = PostgresBackend(postgresql_url)
    connect = follower._connect
    committed = False

    class CommitBeforeTop:
        """The follower's connection, which lets a commit land just before the query
        for the top seq: its NOTIFY arrives while that query runs."""

        def __init__(self, conn: Any) -> None:
            self._conn = conn

        def __getattr__(self, name: str) -> Any:
            return getattr(self._conn, name)

        def execute(self, query: Any, *args: Any) -> Any:
            nonlocal committed
            if query is postgres_schema.SELECT_LAST and not committed:
                committed = True
                p.append("race", ONE_TURN[2:])
            return self._conn.execute(query, *args)

    monkeypatch.setattr(follower, "_connect", lambda app="": CommitBeforeTop(connect(app)))
    try:
        seen = []
        for last, lines in follower.follow("race", 1, timeout=60):
            seen.append((last, len(lines)))
            if last == 5:
                break
    finally:
        follower.close()
        p.close()
    assert committed
    assert seen == [(5, 4)]


def test_channels_are_valid_identifiers() -> None:
    for sid in ["s1", "../../etc/passwd", "é" * 300, "a b;DROP TABLE events"]:
        channel = channel_of(sid)
        assert channel.isidentifier()
        assert len(channel) <= 63
