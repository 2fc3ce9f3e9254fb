"""``copy_sessions``: copying sessions between stores of any kind, resumably, checked.

Every test runs over the kinds of store in ``STORES`` (a new backend is tested by adding
one entry): a factory that opens a backend over the storage named ``name`` of one test,
in the test's :class:`Places`.
"""

from __future__ import annotations

import itertools
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from persist_support import ONE_TURN, meta

from conftest import upstream_dir
from dsh_session_core import (
    JsonlBackend,
    MemoryBackend,
    PostgresBackend,
    Session,
    SessionHeader,
    SqliteBackend,
    StoredLog,
    core_registry,
    encode_events,
)
from dsh_session_core._persistence.backends.jsonl.paths import log_path
from dsh_session_core._persistence.backends.jsonl.zstd import JsonlZstdBackend
from dsh_session_core._persistence.backends.redis.backend import RedisBackend
from dsh_session_core._persistence.base import Backend
from dsh_session_core._persistence.copy import (
    DEFAULT_BATCH_SIZE,
    CopyProgress,
    check_copy,
    copy_sessions,
    same_store,
)
from dsh_session_core.errors import SessionLockedError, SkippedLogWarning

if TYPE_CHECKING:
    from dsh_session_core.testing.postgresql import Databases

REG = core_registry()

B = TypeVar("B", bound=Backend)


class Places:
    """Where one test's stores live: files under ``tmp``, one memory backend per name,
    one PostgreSQL database per name (made on first use, by ``make_database``), and the
    backends the openers made, closed by :meth:`close` (a psycopg connection left open
    would end the test with an unraisable warning)."""

    def __init__(self, tmp: Path, make_database: Callable[[str], str],
                 make_redis: Callable[[str], str]) -> None:
        self.tmp = tmp
        self._make_database = make_database
        self.make_redis = make_redis
        self._databases: dict[str, str] = {}
        self._redis: dict[str, str] = {}
        self._memories: dict[str, MemoryBackend] = {}
        self._opened: list[Backend] = []

    def database(self, name: str) -> str:
        """The URL of database ``name``: a new one the first time, then the same."""
        if name not in self._databases:
            self._databases[name] = self._make_database(name)
        return self._databases[name]

    def redis(self, name: str) -> str:
        """The URL of Redis store ``name``: a key prefix of its own on the run's
        server, the same each time."""
        if name not in self._redis:
            self._redis[name] = self.make_redis(name)
        return self._redis[name]

    def memory(self, name: str) -> MemoryBackend:
        """The memory store ``name``: it lives in one backend object."""
        return self._memories.setdefault(name, MemoryBackend())

    def opened(self, backend: B) -> B:
        """``backend``, closed with the others by :meth:`close`."""
        self._opened.append(backend)
        return backend

    def close(self) -> None:
        while self._opened:
            self._opened.pop().close()


Opener = Callable[[Places, str], Backend]

#: The kinds of store, each a factory opening a backend over storage ``name`` of a test:
#: a folder, a file, a memory backend or a database of its :class:`Places`.
STORES: dict[str, Opener] = {
    "jsonl": lambda at, name: at.opened(JsonlBackend(at.tmp / name)),
    "jsonl+zstd": lambda at, name: at.opened(JsonlZstdBackend(at.tmp / name)),
    "sqlite": lambda at, name: at.opened(SqliteBackend(at.tmp / f"{name}.db")),
    "memory": lambda at, name: at.memory(name),
    "postgresql": lambda at, name: at.opened(PostgresBackend(at.database(name))),
    "redis": lambda at, name: at.opened(RedisBackend(at.redis(name))),
}


@pytest.fixture
def places(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Places]:
    """The test's :class:`Places`: a PostgreSQL store asks for the test server only
    when the test opens one (so the other kinds run without it), and its databases are
    dropped after the test, once every backend is closed."""
    made: list[str] = []

    def make_database(name: str) -> str:
        databases: Databases = request.getfixturevalue("postgresql_databases")
        made.append(databases.create(f"copy {name}"))
        return made[-1]

    prefixes: list[str] = []

    def make_redis(name: str) -> str:
        server: str = request.getfixturevalue("redis_server")
        prefixes.append(f"c{uuid.uuid4().hex[:12]}:")
        return f"{server}?prefix={prefixes[-1]}"

    at = Places(tmp_path, make_database, make_redis)
    try:
        yield at
    finally:
        at.close()
        if prefixes:
            _drop_prefixes(request.getfixturevalue("redis_server"), prefixes)
        if made:
            dropping: Databases = request.getfixturevalue("postgresql_databases")
            for url in made:
                dropping.drop(url)


def _drop_prefixes(server: str, prefixes: list[str]) -> None:
    import redis

    client = redis.Redis.from_url(server)
    try:
        for prefix in prefixes:
            keys = list(client.scan_iter(match=prefix + "*", count=1000))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


PAIRS = [pytest.param(a, b, id=f"{a}-to-{b}") for a, b in itertools.product(STORES, STORES)]


def _lines(events: Sequence[Any]) -> list[bytes]:
    return encode_events(events).split(b"\n")[:-1]


def _log(session_id: str, turns: int, *, cwd: str | None = "/w", open_turn: bool = False
         ) -> tuple[SessionHeader, list[Any]]:
    """A session of ``turns`` complete turns (then one left open), through the real
    append path."""
    ticks = itertools.count(1_000)
    session = Session(session_id, header=meta(session_id, cwd), clock=lambda: next(ticks))
    for turn in range(1, turns + 2 if open_turn else turns + 1):
        session.append("turn/start", {"turn": turn, "trigger": {
            "kind": "message", "source": {"kind": "user"}}})
        session.append("user/message", {"content": [{"type": "text", "text": f"q{turn}"}],
                                        "source": {"kind": "user"}}, surface_op="append")
        session.append("step/start", {"turn": turn, "step": 1})
        session.append("assistant/message", {
            "turn": turn, "step": 1, "content": [{"type": "text", "text": f"a{turn} é"}]},
            surface_op="append")
        session.append("step/end", {"turn": turn, "step": 1})
        if turn <= turns:
            session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return session.header, list(session.events)


def _store(backend: Backend, header: SessionHeader, events: Sequence[Any]) -> None:
    """Write a session into a backend as one batch (as a store's first flush does)."""
    backend.append_batch(header, events, encode_events(events), False)


def _stored(backend: Backend, session_id: str) -> StoredLog:
    stored = backend.load_stored(session_id, REG)
    assert stored is not None
    return stored


# --- copying ----------------------------------------------------------------------------


@pytest.mark.parametrize(("src_kind", "dst_kind"), PAIRS)
def test_every_session_is_copied_with_its_header_and_events(
    places: Places, src_kind: str, dst_kind: str
) -> None:
    src = STORES[src_kind](places, "src")
    dst = STORES[dst_kind](places, "dst")
    logs = {
        "a": _log("a", 2),
        "b": _log("b", 1, cwd=None),
        "c": _log("c", 3, open_turn=True),
    }
    forked = SessionHeader(version=0, id="d", created_at=2000, cwd="/w", parent_session="a",
                           seed_length=6)
    logs["d"] = (forked, logs["a"][1][:6])
    for header, events in logs.values():
        _store(src, header, events)
    seen: list[CopyProgress] = []
    report = copy_sessions(src, dst, registry=REG, batch_size=4, progress=seen.append)
    assert report.ok
    assert report.verify
    assert not report.dry_run
    assert [s.session_id for s in report.sessions] == ["a", "b", "c", "d"]  # oldest first
    assert all(s.status == "copied" and s.verified for s in report.sessions)
    assert report.copied_events == sum(len(e) for _, e in logs.values())
    for sid, (header, events) in logs.items():
        copy = _stored(dst, sid)
        assert copy.header == header
        assert _lines(copy.events) == _lines(events)
    # Progress: each session from 0, batch by batch, to its total.
    a = [(p.done, p.total) for p in seen if p.session_id == "a"]
    assert a == [(0, 12), (4, 12), (8, 12), (12, 12)]
    assert {(p.index, p.count) for p in seen if p.session_id == "d"} == {(4, 4)}
    # A second run finds every session complete.
    again = copy_sessions(src, dst, registry=REG)
    assert [s.status for s in again.sessions] == ["up-to-date"] * 4
    assert again.copied_events == 0
    assert again.ok


def test_a_jsonl_copy_of_a_jsonl_store_is_the_same_files(tmp_path: Path) -> None:
    src, dst = JsonlBackend(tmp_path / "src"), JsonlBackend(tmp_path / "dst")
    for sid, cwd in (("x", "/w"), ("y/../z", None)):
        _store(src, *_log(sid, 2, cwd=cwd))
    report = copy_sessions(src, dst, registry=REG, batch_size=5)
    assert report.ok
    files = sorted(p.relative_to(tmp_path / "src") for p in (tmp_path / "src").rglob("*.jsonl"))
    assert len(files) == 2
    for rel in files:
        assert (tmp_path / "dst" / rel).read_bytes() == (tmp_path / "src" / rel).read_bytes()


def test_only_the_named_sessions_are_copied_and_a_missing_one_is_reported(
    tmp_path: Path,
) -> None:
    src, dst = MemoryBackend(), MemoryBackend()
    for sid in "abc":
        _store(src, *_log(sid, 1))
    report = copy_sessions(src, dst, ["c", "nope", "a", "c"], registry=REG)
    assert [(s.session_id, s.status) for s in report.sessions] == [
        ("c", "copied"), ("nope", "missing"), ("a", "copied")]
    assert not report.ok
    assert report.sessions[1].error == "no such session in the source"
    assert sorted(h.id for h in dst.list()) == ["a", "c"]


def test_the_source_is_read_without_its_writer_lock_and_left_as_it_is(tmp_path: Path) -> None:
    src = JsonlBackend(tmp_path / "src")
    header, events = _log("live", 2, open_turn=True)
    _store(src, header, events)
    held = src.acquire(header)  # a live writer holds the source session
    before = {p: p.read_bytes() for p in (tmp_path / "src").rglob("*.jsonl")}
    try:
        report = copy_sessions(src, JsonlBackend(tmp_path / "dst"), registry=REG)
    finally:
        held.release()
    assert report.ok
    assert report.sessions[0].copied == len(events)  # the open turn is copied as it is
    assert {p: p.read_bytes() for p in (tmp_path / "src").rglob("*.jsonl")} == before


def test_a_torn_source_tail_is_not_copied_nor_repaired(tmp_path: Path) -> None:
    src = JsonlBackend(tmp_path / "src")
    header, events = _log("torn", 2)
    _store(src, header, events)
    path = Path(src.location(header))
    path.write_bytes(path.read_bytes() + b'{"type":"turn/start","seq":12,"ti')
    before = path.read_bytes()
    report = copy_sessions(src, JsonlBackend(tmp_path / "dst"), registry=REG)
    (result,) = report.sessions
    assert result.ok
    assert result.source_torn
    assert result.copied == len(events) == 12
    assert path.read_bytes() == before
    copy = Path(JsonlBackend(tmp_path / "dst").location(header)).read_bytes()
    assert before.startswith(copy)
    assert len(before) - len(copy) == 33


def test_a_session_without_events_is_reported_empty(tmp_path: Path) -> None:
    src = JsonlBackend(tmp_path / "src")
    header = meta("bare", "/w")
    path = Path(src.location(header))
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"type":"session","version":0,"id":"bare","createdAt":1000,"cwd":"/w"}\n')
    dst = JsonlBackend(tmp_path / "dst")
    (result,) = copy_sessions(src, dst, registry=REG).sessions
    assert (result.status, result.ok, result.events) == ("empty", True, 0)
    assert dst.list() == []  # a session is stored from its first event on


# --- resuming ---------------------------------------------------------------------------


class _Crashing:
    """A destination whose writes fail after ``batches`` successful ones (a crash, as
    the copy sees it: the failed batch leaves nothing behind)."""

    def __init__(self, inner: Backend, batches: int) -> None:
        self._inner = inner
        self._left = batches

    def append_batch(self, header: SessionHeader, events: Sequence[Any], jsonl: bytes,
                     materialized: bool) -> None:
        if self._left == 0:
            raise OSError(28, "No space left on device")
        self._left -= 1
        self._inner.append_batch(header, events, jsonl, materialized)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.parametrize("dst_kind", list(STORES))
def test_a_copy_cut_short_resumes_where_it_stopped(places: Places, dst_kind: str) -> None:
    src = MemoryBackend()
    header, events = _log("long", 5)
    _store(src, header, events)
    _store(src, *_log("next", 1))
    dst = STORES[dst_kind](places, "dst")
    crashing: Any = _Crashing(dst, batches=2)
    first = copy_sessions(src, crashing, registry=REG, batch_size=7)
    failed, other = first.sessions
    assert (failed.status, failed.copied) == ("failed", 14)
    assert failed.error == "OSError: [Errno 28] No space left on device"
    assert isinstance(failed.cause, OSError)
    assert other.status == "failed"  # the disk is still full for the next one
    assert len(_stored(dst, "long").events) == 14  # two whole batches, nothing else
    second = copy_sessions(src, dst, registry=REG, batch_size=7)
    resumed, new = second.sessions
    assert (resumed.status, resumed.existing, resumed.copied) == ("resumed", 14, 16)
    assert resumed.verified
    assert new.status == "copied"
    assert _lines(_stored(dst, "long").events) == _lines(events)


_EXAMPLES = itertools.count()


# One test per kind of store (so that without a PostgreSQL server only that one skips).
# The fixture is the test's, not an example's (hence the suppressed health check): each
# example gets a folder of its own, but they all share the test's one database (one per
# example would add ~40 ms each), each example under a session id of its own, so that
# each starts from an empty destination all the same.
@pytest.mark.parametrize("kind", list(STORES))
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    turns=st.integers(1, 6),
    open_turn=st.booleans(),
    cut=st.floats(0, 1),
    batch=st.integers(1, 9),
)
def test_any_stored_prefix_is_completed(
    places: Places, kind: str, turns: int, open_turn: bool, cut: float, batch: int
) -> None:
    sid = f"s{next(_EXAMPLES)}"
    header, events = _log(sid, turns, open_turn=open_turn)
    k = int(cut * len(events))
    with tempfile.TemporaryDirectory() as tmp:
        at = Places(Path(tmp), places.database, places.make_redis)
        try:
            src, dst = MemoryBackend(), STORES[kind](at, "dst")
            assert dst.load_stored(sid, REG) is None
            _store(src, header, events)
            if k:
                _store(dst, header, events[:k])
            (result,) = copy_sessions(src, dst, registry=REG, batch_size=batch).sessions
            expected = "copied" if k == 0 else "up-to-date" if k == len(events) else "resumed"
            assert (result.status, result.existing, result.copied) == (
                expected, k, len(events) - k)
            assert result.verified
            assert _lines(_stored(dst, sid).events) == _lines(events)
        finally:
            at.close()


def test_a_torn_destination_tail_is_cut_before_the_rest_is_appended(tmp_path: Path) -> None:
    src, dst = JsonlBackend(tmp_path / "src"), JsonlBackend(tmp_path / "dst")
    header, events = _log("t", 3)
    _store(src, header, events)
    _store(dst, header, events[:7])
    path = Path(dst.location(header))
    path.write_bytes(path.read_bytes() + b'{"type":"step/end","se')  # a crash mid-write
    (result,) = copy_sessions(src, dst, registry=REG).sessions
    assert (result.status, result.existing, result.cut_destination_tail) == ("resumed", 7, True)
    assert path.read_bytes() == Path(src.location(header)).read_bytes()


# --- refusing ---------------------------------------------------------------------------


@pytest.mark.parametrize("dst_kind", list(STORES))
def test_a_diverged_destination_is_refused_and_left_untouched(
    places: Places, dst_kind: str
) -> None:
    src, dst = MemoryBackend(), STORES[dst_kind](places, "dst")
    header, events = _log("x", 2)
    _store(src, header, events)
    _store(src, *_log("y", 1))
    changed = Session("x", [*events[:8]], header, registry=REG)
    changed.append("user/message", {"content": [{"type": "text", "text": "other"}],
                                    "source": {"kind": "user"}}, surface_op="append")
    _store(dst, header, list(changed.events))
    before = _lines(_stored(dst, "x").events)
    report = copy_sessions(src, dst, registry=REG)
    x, y = report.sessions
    assert x.status == "diverged"
    assert not report.ok
    assert x.error == (
        "the destination's event seq 8 differs from the source's: it is not a prefix of "
        "the source")
    assert y.status == "copied"  # the others are still copied
    assert _lines(_stored(dst, "x").events) == before


def test_a_destination_with_another_header_or_more_events_diverges(tmp_path: Path) -> None:
    src, dst = MemoryBackend(), MemoryBackend()
    header, events = _log("h", 2)
    _store(src, header, events)
    _store(dst, meta("h", "/elsewhere"), events[:3])
    (result,) = copy_sessions(src, dst, registry=REG).sessions
    assert result.status == "diverged"
    assert result.error == ('the destination holds another session under this id (header: '
                            'cwd "/w" in the source, "/elsewhere" in the destination)')
    longer_src, longer_dst = MemoryBackend(), MemoryBackend()
    _store(longer_src, header, events[:6])
    _store(longer_dst, header, events)
    (result,) = copy_sessions(longer_src, longer_dst, registry=REG).sessions
    assert result.status == "diverged"
    assert result.error == "the destination holds 12 events, more than the 6 the source holds"


@pytest.mark.parametrize("dst_kind", ["jsonl", "sqlite", "postgresql"])
def test_a_session_locked_in_the_destination_is_skipped(places: Places, dst_kind: str) -> None:
    src = MemoryBackend()
    header, events = _log("busy", 1)
    _store(src, header, events)
    _store(src, *_log("free", 1))
    writer = STORES[dst_kind](places, "dst")  # another process, as far as locks go
    held = writer.acquire(header)
    try:
        report = copy_sessions(src, STORES[dst_kind](places, "dst"), registry=REG)
        busy, free = report.sessions
        assert busy.status == "locked"
        assert busy.copied == 0
        assert isinstance(busy.cause, SessionLockedError)
        assert busy.error == (
            f"another writer holds its lock in the destination ({busy.cause.holder})")
        assert busy.cause.holder.startswith("lease " if dst_kind == "postgresql" else "lock ")
        assert free.status == "copied"
    finally:
        held.release()
    (busy,) = copy_sessions(src, STORES[dst_kind](places, "dst"), ["busy"],
                            registry=REG).sessions
    assert busy.status == "copied"


@pytest.mark.parametrize("dst_kind", ["sqlite", "postgresql"])
def test_a_value_the_destination_cannot_store_fails_that_session_only(
    places: Places, dst_kind: str
) -> None:
    src, dst = MemoryBackend(), STORES[dst_kind](places, "dst")
    odd = [dict(e, time=1.5) if e["seq"] == 2 else e for e in ONE_TURN]
    _store(src, meta("odd", "/w"), Session("odd", odd, registry=REG).events)
    _store(src, *_log("fine", 1))
    fine, odd_result = copy_sessions(src, dst, registry=REG).sessions  # both at 1000: by id
    # Not "failed" (which a rerun retries): no rerun can store it (issue 11, defect 7).
    assert odd_result.status == "unstorable"
    assert not odd_result.ok
    assert odd_result.error is not None
    assert odd_result.error.startswith(
        'UnstorableError: event "step/start" (seq 2) of session "odd" has time 1.5')
    assert fine.status == "copied"
    assert [h.id for h in dst.list()] == ["fine"]


def test_the_same_store_is_refused(tmp_path: Path) -> None:
    jsonl = JsonlBackend(tmp_path / "s")
    cases: list[tuple[Backend, Backend]] = [
        (jsonl, jsonl),
        (jsonl, JsonlBackend(str(tmp_path / "s") + "/")),
        (SqliteBackend(tmp_path / "s.db"), SqliteBackend(tmp_path / "." / "s.db")),
    ]
    (tmp_path / "link").symlink_to(tmp_path / "s", target_is_directory=True)
    cases.append((jsonl, JsonlBackend(tmp_path / "link")))
    for a, b in cases:
        assert same_store(a, b)
        with pytest.raises(ValueError, match="are the same store"):
            copy_sessions(a, b, registry=REG)
    assert not same_store(MemoryBackend(), MemoryBackend())
    assert not same_store(jsonl, JsonlBackend(tmp_path / "t"))
    assert not same_store(jsonl, SqliteBackend(tmp_path / "s.db"))
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        copy_sessions(MemoryBackend(), MemoryBackend(), batch_size=0)


def test_one_postgresql_database_is_the_same_store_however_its_url_is_spelt(
    places: Places,
) -> None:
    from urllib.parse import urlsplit

    url = places.database("one")
    parts = urlsplit(url)
    assert parts.scheme == "postgresql"
    assert parts.hostname == "127.0.0.1"  # the test server, as the kit spells it
    user, host, port, dbname = parts.username, parts.hostname, parts.port, parts.path[1:]
    one = STORES["postgresql"](places, "one")
    spellings = [
        url,
        f"postgresql://{user}:not-needed@{host}:{port}/{dbname}",  # a password
        f"postgres://{user}@{host}:{port}/{dbname}",  # the other scheme
        f"postgres://{user}:x@localhost:{port}/{dbname}",  # a loopback name
        f"{url}?application_name=other&connect_timeout=5&password=y",  # other settings
        f"host={host} port={port} dbname={dbname} user={user}",  # libpq keywords
    ]
    for spelling in spellings:
        other = places.opened(PostgresBackend(spelling))
        assert same_store(one, other), spelling
        with pytest.raises(ValueError, match="are the same store"):
            copy_sessions(one, other, registry=REG)
    two = STORES["postgresql"](places, "two")
    assert not same_store(one, two)  # another database of the same server
    assert not same_store(one, STORES["memory"](places, "one"))
    assert not same_store(one, STORES["sqlite"](places, "one"))
    _store(one, *_log("p", 1))
    assert copy_sessions(one, two, registry=REG).ok


def test_a_dry_run_writes_nothing_and_takes_no_lock(tmp_path: Path) -> None:
    src, dst = MemoryBackend(), JsonlBackend(tmp_path / "dst")
    a_header, a_events = _log("a", 2)
    b_header, b_events = _log("b", 1)
    _store(src, a_header, a_events)
    _store(src, b_header, b_events)
    _store(dst, a_header, a_events[:5])
    held = dst.acquire(a_header)
    try:
        report = copy_sessions(src, dst, registry=REG, dry_run=True)
    finally:
        held.release()
    assert report.dry_run
    assert not report.verify
    assert report.ok
    assert [(s.status, s.existing, s.copied, s.verified) for s in report.sessions] == [
        ("resumed", 5, 7, False), ("copied", 0, 6, False)]
    assert len(_stored(dst, "a").events) == 5
    assert dst.load_stored("b", REG) is None


def test_the_default_batch_size_is_what_the_command_line_says() -> None:
    from dsh_session_core._cli.main import _parser

    args = _parser().parse_args(["copy", "a", "b"])
    assert args.batch_size == DEFAULT_BATCH_SIZE


# --- verifying --------------------------------------------------------------------------


class _Tampering:
    """A destination that writes each batch with its first ``"q`` text changed."""

    def __init__(self, inner: Backend) -> None:
        self._inner = inner

    def append_batch(self, header: SessionHeader, events: Sequence[Any], jsonl: bytes,
                     materialized: bool) -> None:
        self._inner.append_batch(header, events, jsonl.replace(b'"q', b'"Q', 1), materialized)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_verification_catches_a_copy_that_differs(tmp_path: Path) -> None:
    src, dst = MemoryBackend(), JsonlBackend(tmp_path / "dst")
    _store(src, *_log("v", 2))
    tampering: Any = _Tampering(dst)
    (result,) = copy_sessions(src, tampering, registry=REG).sessions
    assert (result.status, result.verified, result.copied) == ("mismatch", False, 12)
    assert result.error == (
        "the copy does not check out: event seq 1 differs: another value; 138 bytes in the "
        "source, 138 in the destination, apart from byte 85: "
        "'...ype\":\"text\",\"text\":\"q1\"}],\"source\":{\"kind\":\"user\"}...' against "
        "'...ype\":\"text\",\"text\":\"Q1\"}],\"source\":{\"kind\":\"user\"}...'")
    src2 = MemoryBackend()
    _store(src2, *_log("w", 1))
    (skipped,) = copy_sessions(src2, _Tampering(MemoryBackend()), registry=REG,
                               verify=False).sessions
    assert (skipped.status, skipped.verified) == ("copied", False)


def test_check_copy_names_what_differs() -> None:
    header, events = _log("c", 2)
    original = StoredLog(header, events, None, encode_events(events))

    def variant(**change: Any) -> StoredLog:
        fields = {"header": header, "events": events, "torn": None, "jsonl": None, **change}
        return StoredLog(**fields)

    assert check_copy(original, variant(), REG) is None
    assert check_copy(original, None, REG) == "it is not in the destination"
    assert check_copy(original, variant(header=meta("c", "/x")), REG) == (
        'the header differs (cwd "/w" in the source, "/x" in the destination)')
    assert check_copy(original, variant(torn=0), REG) == (
        "a torn tail follows it in the destination")
    assert check_copy(original, variant(events=events[:-1]), REG) == (
        "11 events in the destination, 12 in the source")
    other = Session("c", events[:-1], header, registry=REG)
    other.append("turn/end", {"turn": 2, "reason": {"kind": "aborted"}})
    problem = check_copy(original, variant(events=list(other.events)), REG)
    assert problem is not None
    assert problem.startswith("event seq 11 differs: another value; 88 bytes in the source, "
                              "95 in the destination, apart from byte 36: ")
    # The same events with their keys in another order are other bytes: a copy keeps
    # every byte, and says which line holds the same value written otherwise...
    reordered = [line.replace(b'"type":"turn/end","seq":5', b'"seq":5,"type":"turn/end"')
                 for line in _lines(events)]
    assert reordered != _lines(events)
    jsonl = b"".join(line + b"\n" for line in reordered)
    assert check_copy(original, variant(jsonl=jsonl), REG) == (
        "event seq 5 differs: the same JSON value written otherwise: key order or spelling; "
        "87 bytes in the source, 87 in the destination, apart from byte 2: "
        "'{\"type\":\"turn/end\",\"seq\":5,\"time...' against "
        "'{\"seq\":5,\"type\":\"turn/end\",\"time...'")
    # ...and events that derive other messages are caught even when the lines agree.
    seeded = Session("c", events[:1], header, registry=REG)
    other_text = seeded.append("user/message", {"content": [{"type": "text", "text": "zz"}],
                                                "source": {"kind": "user"}}, surface_op="append")
    fake = variant(events=[events[0], other_text, *events[2:]], jsonl=encode_events(events))
    assert check_copy(original, fake, REG) == "it derives other messages than the source"


# --- the reference logs -----------------------------------------------------------------


def _reference_stores(tmp: Path) -> list[tuple[JsonlBackend, list[Path]]]:
    """Every reference log, as is, in JSONL stores (as many as it takes for the ids in
    each to be unique)."""
    from dsh_session_core._logformat.logfile import parse_header

    stores: list[tuple[JsonlBackend, set[str], list[Path]]] = []
    for log in sorted(upstream_dir().rglob("*.jsonl")):
        data = log.read_bytes()
        header = parse_header(data[: data.index(b"\n")])
        home = next((s for s in stores if header.id not in s[1]), None)
        if home is None:
            home = (JsonlBackend(tmp / f"store-{len(stores)}"), set(), [])
            stores.append(home)
        home[1].add(header.id)
        home[2].append(log)
        path = Path(log_path(home[0].root, None if not isinstance(header.cwd, str)
                             else header.cwd, header.id))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return [(backend, logs) for backend, _, logs in stores]


# Whole stores of the reference's logs, listed as they are (version-less headers among
# them). Every log through every pair of kinds of store: test_byte_round_trip.py.
@pytest.mark.parametrize("kind", ["sqlite"])
def test_every_reference_log_survives_a_trip_through_another_store_byte_for_byte(
    places: Places, kind: str
) -> None:
    tmp_path = places.tmp
    statuses: dict[str, int] = {}
    compared = 0
    skipped: set[str] = set()
    for i, (store, _) in enumerate(_reference_stores(tmp_path)):
        db = STORES[kind](places, f"copy-{i}")
        back = JsonlBackend(tmp_path / f"back-{i}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            there = copy_sessions(store, db, registry=REG)
            listed = store.list()
        # The reference's version-less headers are no store's sessions: left out, and said.
        assert {w.category for w in caught} <= {SkippedLogWarning}
        skipped.update(w.message.path for w in caught)  # type: ignore[union-attr]
        home = copy_sessions(db, back, registry=REG)
        for result in (*there.sessions, *home.sessions):
            statuses[result.status] = statuses.get(result.status, 0) + 1
        for header in listed:
            source = Path(store.location(header)).read_bytes()
            copy = Path(back.location(header))
            if not copy.exists():
                continue
            stored = _stored(store, header.id)
            # The torn reference log comes back as its valid prefix, every other one whole.
            expected = source if stored.torn is None else source[: len(copy.read_bytes())]
            assert copy.read_bytes() == expected, header.id
            compared += 1
    # 354 logs: 10 version-less headers are no store's sessions, 9 have no event.
    assert statuses == {"copied": 2 * 335, "empty": 9}
    assert compared == 335
    assert len(skipped) == 10
