"""``store.delete(id)`` and ``store.prune(...)``: a session removed whole, under its
writer lock, on JSONL, SQLite and PostgreSQL for real (and memory); nothing else
touched; a session a live writer holds (in this process or another) refused or
skipped, and intact afterwards; prune selects exactly the sessions its rules name.
"""

from __future__ import annotations

import asyncio
import builtins
import datetime
import fcntl
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_session_core import (
    Backend,
    Deleted,
    DurableStore,
    Event,
    EventRegistry,
    SessionHeader,
    StoredLog,
    WriterLock,
)
from dsh_session_core._persistence import file_locks
from dsh_session_core.errors import (
    MisplacedLogError,
    PersistenceError,
    SessionLockedError,
)
from lifecycle_support import (
    Clock,
    exported,
    files_under,
    held_by_another_process,
    opened,
    sessions,
    snapshot,
    write,
)

UTC = datetime.UTC
T0 = 1_700_000_000_000
DAY = 86_400_000


def _at(ms: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=ms)


#: Ids that are prefixes of one another, or encode to similar file names (JSONL escapes
#: every character but [A-Za-z0-9._-] as ~XXXX, and shortens long names with a hash).
TRICKY_IDS = (
    "a", "ab", "a.b", "a-b", "a_b", "A", "a/b", "a~002Fb", "a~", ".", "..", "a.jsonl",
    "a.lock", "a.jsonl.0123456789ab.tmp", "é", "😀", "a" * 240, "a" * 241, "a" * 300,
    "a" * 300 + "b", "a%", "%", "a_", "a*", "a'", "a\\", "a b",
)


# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds.
pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

def _root(store_url: str) -> Path | None:
    """The folder whose files are the store's (JSONL: the root; SQLite: the folder of
    the database and its lock files); ``None`` for PostgreSQL."""
    if store_url.startswith("sqlite:///"):
        return Path(store_url.removeprefix("sqlite:///")).parent
    if "://" in store_url:
        return None
    return Path(store_url)


# --- delete ---------------------------------------------------------------------------


def test_delete_removes_one_session_and_leaves_every_other_byte_for_byte(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        for i, sid in enumerate(TRICKY_IDS):
            write(store, clock, sid, cwd=("/p", "/q", None)[i % 3], at=T0 + i, turns=1 + i % 2)
        before = snapshot(store)
        assert sorted(before) == sorted(TRICKY_IDS)
    root = _root(store_url)
    order = [TRICKY_IDS[i] for i in (0, 6, 7, 10, 9, 1, 17, 16, 19, 18, 3, 2, 21, 20, 22)]
    for sid in order:
        on_disk = files_under(root) if root is not None else {}
        with opened(store_url) as store:
            deleted = store.delete(sid)
            after = snapshot(store)
        assert isinstance(deleted, Deleted)
        assert (deleted.session_id, deleted.status, deleted.deleted) == (sid, "deleted", True)
        expected = {k: v for k, v in before.items() if k != sid}
        assert after == expected  # every other session byte-identical
        assert deleted.bytes == len(before[sid])  # the log's bytes (a lock file holds none)
        assert deleted.events == before[sid].count(b"\n") - 1
        if root is not None:
            now = files_under(root)
            gone = {str(root / g) for g in set(on_disk) - set(now)}
            assert set(now) <= set(on_disk)  # nothing made
            if "://" not in store_url:  # its log and its lock file; every other file as it was
                assert gone == set(deleted.removed)
                assert all(on_disk[name] == data for name, data in now.items())
            else:  # its lock file (its rows are gone: compared above)
                assert gone == {deleted.removed[1]}
                assert all(on_disk[name] == data for name, data in now.items()
                           if name.startswith("store.db.locks"))
        before = expected


def test_jsonl_removes_the_log_its_lock_and_its_dead_temp_files_only(tmp_path: Path) -> None:
    clock = Clock()
    root = tmp_path / "store"
    with opened(str(root), clock) as store:
        for sid in ("a", "ab", "a.b"):
            write(store, clock, sid, cwd="/p")
        log = Path(store.location("a"))
    bucket = log.parent
    dead = bucket / "a.jsonl.0123456789ab.tmp"  # a first write of "a" killed midway
    # One of "ab", which a live writer holds (so its temp may be live): not "a"'s.
    other = bucket / "ab.jsonl.0123456789ab.tmp"
    size = log.stat().st_size
    with opened(str(root)) as writer, opened(str(root)) as store:
        writer.open("ab")
        dead.write_bytes(b"x" * 7)
        other.write_bytes(b"y" * 5)
        deleted = store.delete("a")
    assert deleted.location == str(log)
    assert set(deleted.removed) == {str(log), str(bucket / "a.lock"), str(dead)}
    assert deleted.bytes == size + 7
    assert sorted(p.name for p in bucket.iterdir()) == sorted(
        ["ab.jsonl", "ab.lock", "a.b.jsonl", "a.b.lock", other.name])
    assert other.read_bytes() == b"y" * 5


def test_sqlite_removes_the_rows_and_the_lock_file(tmp_path: Path) -> None:
    clock = Clock()
    store_url = f"sqlite:///{tmp_path}/s.db"
    with opened(store_url, clock) as store:
        write(store, clock, "a")
        write(store, clock, "b")
    locks = tmp_path / "s.db.locks"
    assert len(files_under(locks)) == 2
    with opened(store_url) as store:
        deleted = store.delete("a")
        assert sessions(store) == ["b"]
    assert len(files_under(locks)) == 1  # b's (and the retention ledger's)
    assert str(tmp_path / "s.db.locks") in deleted.removed[1]
    import sqlite3

    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert conn.execute("SELECT count(*) FROM events WHERE session_id = 'a'"
                            ).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM events WHERE session_id = 'b'"
                            ).fetchone() == (3,)


def test_an_unknown_id_is_the_not_found_error(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "ab")
        for sid in ("a", "abc", "", "a\ud800", "AB"):
            with pytest.raises(PersistenceError, match="not found") as caught:
                store.delete(sid)
            assert caught.value.session_id == sid
            with pytest.raises(PersistenceError, match="not found"):
                store.delete(sid, dry_run=True)
        assert sessions(store) == ["ab"]


def test_a_dry_run_changes_nothing(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a", turns=2)
        before = snapshot(store)
    root = _root(store_url)
    on_disk = files_under(root) if root is not None else {}
    with opened(store_url) as store:
        would = store.delete("a", dry_run=True)
        assert snapshot(store) == before
    assert (would.status, would.deleted, would.events) == ("would-delete", False, 6)
    assert would.bytes == len(before["a"])
    if root is not None:
        assert files_under(root) == on_disk


def test_a_live_session_of_this_store_is_refused(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a")
        live = store.open("a")
        with pytest.raises(SessionLockedError, match="release it first"):
            store.delete("a")
        with pytest.raises(SessionLockedError):
            store.delete("a", dry_run=True)
        before = exported(store, "a")
        store.release(live)
        assert store.delete("a").deleted
        with pytest.raises(PersistenceError, match="not found"):
            store.open("a")
        assert before


def test_a_session_another_store_of_this_process_writes_is_refused(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as writer, opened(store_url) as deleter:
        write(writer, clock, "a")
        live = writer.open("a")
        before = exported(deleter, "a")
        with pytest.raises(SessionLockedError) as caught:
            deleter.delete("a")
        assert caught.value.session_id == "a"
        assert exported(deleter, "a") == before
        live.append("turn/start", {"turn": 2, "trigger": {"kind": "message",
                                                         "source": {"kind": "user"}}})
        writer.flush(live)  # the writer goes on, untouched
        writer.release(live)
        assert deleter.delete("a").events == 4


def test_a_session_another_process_holds_is_refused_and_skipped(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "held", at=T0)
        write(store, clock, "free", at=T0)
        before = snapshot(store)
    with held_by_another_process(store_url, "held"), opened(store_url) as store:
        with pytest.raises(SessionLockedError) as caught:
            store.delete("held")
        assert caught.value.session_id == "held"
        with pytest.raises(SessionLockedError):
            store.delete("held", dry_run=True)
        found = store.prune(datetime.timedelta(days=1), now=_at(T0 + 2 * DAY))
        assert [(d.session_id, d.status) for d in found] == [
            ("free", "deleted"), ("held", "locked")]  # as old: by id
        locked = found[1]
        assert "another writer" in (locked.reason or "")
        assert not locked.deleted
        assert snapshot(store) == {"held": before["held"]}  # intact
    with opened(store_url) as store:  # let go: now it goes
        assert store.delete("held").deleted
        assert sessions(store) == []


def test_a_fork_keeps_its_events_when_its_parent_is_deleted(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        parent = store.create("parent", cwd="/p")
        for turn in (1, 2):
            parent.append("turn/start", {"turn": turn, "trigger": {
                "kind": "message", "source": {"kind": "user"}}})
            parent.append("user/message", {"content": [{"type": "text", "text": f"q{turn}"}],
                                           "source": {"kind": "user"}}, surface_op="append")
            parent.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        store.flush(parent)
        child = store.fork(parent, 2, "parent-child")  # a prefix of the parent
        store.flush(child)
        messages = child.derive_messages()
        store.release(child)
        store.release(parent)
        child_bytes = exported(store, "parent-child")
    with opened(store_url) as store:
        store.delete("parent")
        assert exported(store, "parent-child") == child_bytes
        reopened = store.open("parent-child")
        assert reopened.header.parent_session == "parent"  # names a session that is gone
        assert reopened.derive_messages() == messages
        assert len(reopened.events) == 3


def test_a_deleted_session_can_be_made_again_and_locked_again(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a", turns=2)
        store.delete("a")
        write(store, clock, "a", turns=1, text="new")
        assert b"new 1" in exported(store, "a")
        live = store.open("a")
        with opened(store_url) as other, pytest.raises(SessionLockedError):
            other.open("a")
        store.release(live)


@pytest.mark.parametrize("again", [False, True], ids=["deleted", "deleted-and-made-again"])
def test_a_session_deleted_while_it_is_opened_is_refused_not_written_after(
        store_url: str, monkeypatch: pytest.MonkeyPatch, again: bool) -> None:
    # open reads the log, then takes the writer lock: another process's delete (and,
    # maybe, a new session of the same id) lands in between, here injected right before
    # the lock is taken.
    clock = Clock()
    with opened(store_url, clock) as store, opened(store_url, clock) as other:
        write(store, clock, "a", turns=2)
        real = store.backend.acquire

        def acquire_after_a_delete(header: Any) -> Any:
            other.delete("a")
            if again:
                write(other, clock, "a", turns=1, text="new")
            return real(header)

        monkeypatch.setattr(store.backend, "acquire", acquire_after_a_delete)
        with pytest.raises(PersistenceError, match="removed or rewritten while it was "
                                                   "being opened"):
            store.open("a")
        monkeypatch.undo()
        expected = [] if not again else ["a"]
        assert sessions(other) == expected
        if again:
            assert b"new 1" in exported(other, "a")
            live = store.open("a")  # open it again: the new one, and its lock
            assert len(live.events) == 3
            store.release(live)


def test_an_adopted_session_without_a_live_one_is_let_go_and_deleted(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a")
        store.append_stored("a", [{"type": "turn/start", "seq": 3, "time": T0,
                                   "data": {"turn": 2, "trigger": {
                                       "kind": "message", "source": {"kind": "user"}}}}])
        assert store.delete("a").events == 4  # its lock, held by this store, let go
        assert sessions(store) == []


def test_async_twins(store_url: str) -> None:
    clock = Clock()

    async def run() -> tuple[Deleted, list[Deleted]]:
        async with opened(store_url, clock) as store:
            write(store, clock, "a", at=T0)
            write(store, clock, "b", at=T0)
            one = await store.adelete("a")
            rest = await store.aprune(datetime.timedelta(hours=1), now=_at(T0 + DAY))
            return one, rest

    one, rest = asyncio.run(run())
    assert (one.session_id, one.status) == ("a", "deleted")
    assert [(d.session_id, d.status) for d in rest] == [("b", "deleted")]


# --- the lock file a delete removes ---------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_lock_taken_on_a_lock_file_a_delete_removed_is_taken_again(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer opens the lock file, a delete removes it, then the writer's flock
    # succeeds on the dead file: without the check, a second writer (on the new file)
    # would hold the session at the same time.
    # Both backends take their lock through file_locks.lock_or_close: its flock is the
    # one the race is played on.
    store_url = str(tmp_path / "store") if kind == "jsonl" else f"sqlite:///{tmp_path}/s.db"
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a")
    real = fcntl.flock
    raced: list[str] = []

    class Racing:
        LOCK_EX, LOCK_NB, LOCK_UN = fcntl.LOCK_EX, fcntl.LOCK_NB, fcntl.LOCK_UN

        @staticmethod
        def flock(fd: int, op: int) -> None:
            if not raced:  # the first lock: a delete removes the file under it
                path = os.readlink(f"/proc/self/fd/{fd}")
                os.unlink(path)
                raced.append(path)
            real(fd, op)

    header = SessionHeader(version=0, id="a", created_at=T0)
    with opened(store_url) as store:
        backend: Any = store.backend
        monkeypatch.setattr(file_locks, "fcntl", Racing)
        lock = backend.acquire(header)
        monkeypatch.setattr(file_locks, "fcntl", fcntl)
        assert raced
        assert os.path.exists(raced[0])  # taken again, on a new file at the path
        with opened(store_url) as other, pytest.raises(SessionLockedError):
            other.backend.acquire(header)
        lock.release()


def test_same_file_sees_a_lock_file_unlinked_or_replaced(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert file_locks.same_file(fd, str(path))
        path.unlink()
        assert not file_locks.same_file(fd, str(path))
        path.write_bytes(b"")
        assert not file_locks.same_file(fd, str(path))
    finally:
        os.close(fd)


# --- what a delete refuses to touch ---------------------------------------------------


def test_a_misplaced_jsonl_file_is_not_deleted(tmp_path: Path) -> None:
    clock = Clock()
    root = tmp_path / "store"
    with opened(str(root), clock) as store:
        write(store, clock, "b", cwd="/p")
        log = Path(store.location("b"))
    renamed = log.with_name("a.jsonl")  # "a.jsonl" holds session "b"
    os.link(log, renamed)
    with opened(str(root)) as store, pytest.raises(MisplacedLogError):
        store.delete("a")
    assert renamed.read_bytes() == log.read_bytes()


class _NoDelete:
    """A backend written before delete existed (not a subclass of Backend)."""

    name = "session-persistence-nodelete"

    def __init__(self) -> None:
        self.logs: dict[str, StoredLog] = {}

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        return self.logs.get(session_id)

    def load_live(self, session_id: str, cwd: str | None,
                  registry: EventRegistry) -> StoredLog | None:
        return self.logs.get(session_id)

    def append_batch(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                     materialized: bool) -> None:
        old = self.logs.get(header.id, StoredLog(header, [], None, b""))
        self.logs[header.id] = StoredLog(header, [*old.events, *events], None,
                                         (old.jsonl or b"") + jsonl)

    def commit_repair(self, header: SessionHeader, torn: object | None,
                      closers: Sequence[Event], jsonl: bytes) -> None:
        self.append_batch(header, closers, jsonl, True)

    def list(self) -> list[SessionHeader]:
        return [log.header for log in self.logs.values()]

    def acquire(self, header: SessionHeader) -> WriterLock:
        class Lock:
            def release(self) -> None:
                pass

        return Lock()

    def location(self, header: SessionHeader) -> str:
        return "nodelete:"

    def check_id(self, session_id: str) -> None:
        pass

    def close(self) -> None:
        pass

    def summaries(self) -> builtins.list[Any]:
        return Backend.summaries(self)  # type: ignore[arg-type]


class _Subclassed(_NoDelete, Backend):
    """One that subclasses Backend, so it inherits the default delete."""


@pytest.mark.parametrize("backend_class", [_NoDelete, _Subclassed])
def test_a_backend_that_cannot_delete_says_so_and_changes_nothing(
    backend_class: type[_NoDelete]
) -> None:
    from dsh_session_core import create_plugin_manager

    backend = backend_class()
    store = DurableStore(backend, create_plugin_manager(autoload=False),  # type: ignore[arg-type]
                         clock=Clock())
    write(store, Clock(), "a", at=T0)
    with pytest.raises(PersistenceError, match="backend cannot delete sessions") as caught:
        store.delete("a")
    assert "session-persistence-nodelete" in str(caught.value)
    with pytest.raises(PersistenceError, match="cannot delete"):
        store.prune(datetime.timedelta(0), now=_at(T0 + DAY))
    assert store.prune(datetime.timedelta(days=30), now=_at(T0 + DAY)) == []  # none due
    assert list(backend.logs) == ["a"]


# --- prune ----------------------------------------------------------------------------


def test_prune_refuses_a_negative_age_or_keep(tmp_path: Path) -> None:
    with opened(str(tmp_path / "s")) as store:
        with pytest.raises(ValueError, match="older_than must not be negative"):
            store.prune(datetime.timedelta(seconds=-1))
        with pytest.raises(ValueError, match="keep takes a count"):
            store.prune(datetime.timedelta(days=1), keep=-1)


def test_prune_with_keep_cwd_and_dry_run(store_url: str) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        for i, (sid, cwd) in enumerate([("p1", "/p"), ("p2", "/p"), ("p3", "/p"),
                                        ("q1", "/q"), ("n1", None), ("p-new", "/p")]):
            write(store, clock, sid, cwd=cwd, at=T0 + i * DAY if sid != "p-new" else T0 + 30 * DAY)
        before = snapshot(store)
        now = _at(T0 + 31 * DAY)
        older = datetime.timedelta(days=10)
        would = store.prune(older, cwd="/p", keep=1, dry_run=True, now=now)
        assert [(d.session_id, d.status) for d in would] == [
            ("p1", "would-delete"), ("p2", "would-delete")]  # p3 kept, p-new too young
        assert snapshot(store) == before
        assert [d.bytes for d in would] == [len(before["p1"]), len(before["p2"])]
        done = store.prune(older, cwd="/p", keep=1, now=now)
        assert [(d.session_id, d.status) for d in done] == [
            ("p1", "deleted"), ("p2", "deleted")]
        assert sorted(snapshot(store)) == ["n1", "p-new", "p3", "q1"]
        assert store.prune(older, now=now, keep=3) == []  # p3, q1, n1 kept
        everything = store.prune(datetime.timedelta(0), now=now)
        assert [d.session_id for d in everything] == ["p3", "q1", "n1", "p-new"]
        assert sessions(store) == []


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(0, 7))
    sessions = [(f"s{i}", draw(st.sampled_from([None, "/p", "/q"])),
                 T0 + draw(st.integers(0, 10)) * 1000) for i in range(n)]
    return {
        "sessions": sessions,
        "older_ms": draw(st.integers(0, 12)) * 1000,
        "now": T0 + draw(st.integers(0, 12)) * 1000 + draw(st.sampled_from([0, 1, 999])),
        "keep": draw(st.integers(0, 4)),
        "cwd": draw(st.sampled_from([None, "/p", "/q", "/r"])),
        "dry_run": draw(st.booleans()),
    }


def _expected(case: dict[str, Any]) -> list[str]:
    cutoff = case["now"] - case["older_ms"]
    matching = [(at, sid) for sid, cwd, at in case["sessions"]
                if (case["cwd"] is None or cwd == case["cwd"]) and at < cutoff]
    matching.sort(reverse=True)
    return [sid for _, sid in sorted(matching[case["keep"]:])]


@pytest.mark.parametrize("kind", ["memory", "jsonl", "jsonl+zstd", "sqlite"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases())
def test_prune_removes_exactly_what_its_rules_name(kind: str, case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store_url = {"memory": "memory:", "jsonl": f"{tmp}/store",
               "jsonl+zstd": f"jsonl+zstd:///{tmp}/store",
               "sqlite": f"sqlite:///{tmp}/s.db"}[kind]
        clock = Clock()
        with opened(store_url, clock) as store:
            for sid, cwd, at in case["sessions"]:
                write(store, clock, sid, cwd=cwd, at=at)
            before = snapshot(store)
            found = store.prune(datetime.timedelta(milliseconds=case["older_ms"]),
                                cwd=case["cwd"], keep=case["keep"],
                                dry_run=case["dry_run"], now=_at(case["now"]))
            expected = _expected(case)
            status = "would-delete" if case["dry_run"] else "deleted"
            assert [(d.session_id, d.status) for d in found] == [(s, status) for s in expected]
            left = before if case["dry_run"] else {
                k: v for k, v in before.items() if k not in expected}
            assert snapshot(store) == left
            # Every removal recorded, by the rule of this form.
            assert [(r.data.session_id, r.data.rule) for r in store.removals()] == (
                [] if case["dry_run"] else [(s, "older-than") for s in expected])


def test_prune_on_postgresql_removes_exactly_what_its_rules_name(postgresql_url: str) -> None:
    clock = Clock()
    stored = [("s0", "/p", 0), ("s1", "/p", 5), ("s2", "/q", 3), ("s3", None, 9),
              ("s4", "/p", 2), ("s5", "/p", 2)]
    with opened(postgresql_url, clock) as store:
        for sid, cwd, at in stored:
            write(store, clock, sid, cwd=cwd, at=T0 + at * 1000)
        cases: list[dict[str, Any]] = [
            {"older_ms": 4000, "keep": 1, "cwd": "/p", "dry_run": True},
            {"older_ms": 4000, "keep": 0, "cwd": None, "dry_run": True},
            {"older_ms": 1000, "keep": 2, "cwd": None, "dry_run": False}]
        for case in cases:
            case |= {"sessions": [(s, c, T0 + a * 1000) for s, c, a in stored],
                     "now": T0 + 10_000}
            found = store.prune(datetime.timedelta(milliseconds=case["older_ms"]),
                                cwd=case["cwd"], keep=case["keep"],
                                dry_run=case["dry_run"], now=_at(case["now"]))
            assert [d.session_id for d in found] == _expected(case)
        assert sorted(sessions(store)) == ["s1", "s2", "s3"]  # 2 kept, s3 young


def test_prune_measures_from_now_by_default_and_takes_a_naive_now(tmp_path: Path) -> None:
    import time

    clock = Clock(int(time.time() * 1000) - 2 * DAY)
    with opened(str(tmp_path / "s"), clock) as store:
        write(store, clock, "old")
        assert store.prune(datetime.timedelta(days=3)) == []
        naive = datetime.datetime.fromtimestamp(clock.now / 1000 - 3600)  # local time
        assert store.prune(datetime.timedelta(0), now=naive) == []
        assert [d.session_id for d in store.prune(datetime.timedelta(days=1))] == ["old"]
