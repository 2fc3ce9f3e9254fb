"""Every removal of a session's log is recorded in the store's retention ledger, by
whichever door it came (``prune`` in each form, ``rm``, ``store.delete``), with the
door as its rule; a removal takes the session's never-prune mark with it; and a process
killed (SIGKILL, for real) at any point of a removal leaves the session either still
there or recorded as removed, on JSONL, SQLite and PostgreSQL."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import DurableStore, RetentionPolicy
from dsh_session_core.errors import SessionLockedError
from dsh_session_core.testing import run_cli
from lifecycle_support import LEDGER, Clock, opened, sessions, write

pytestmark = pytest.mark.store_kinds("jsonl", "sqlite", "postgresql", "redis")

T0 = 1_600_000_000_000  # long ago: every session is old
DAY = 86_400_000


def _fill(store_url: str, ids: tuple[str, ...] = ("s1", "s2", "s3")) -> None:
    clock = Clock()
    with opened(store_url, clock) as store:
        for i, sid in enumerate(ids):
            write(store, clock, sid, at=T0 + i * DAY)


def _removed(store: DurableStore) -> list[tuple[str, str]]:
    return [(r.data.session_id, r.data.rule) for r in store.removals()]


def _ledger(store: DurableStore) -> list[tuple[str, str]]:
    """The ledger's records: (type, session id) each."""
    return [(e.type, e.data.session_id) for e in store.read(LEDGER)]


@pytest.fixture
def piped(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(""))


@pytest.mark.usefixtures("piped")
def test_every_door_records_its_removals_with_its_rule(store_url: str) -> None:
    _fill(store_url, ("a", "b", "c", "d", "e"))
    code, _, err = run_cli("prune", "--older-than", "30d", "--keep", "4", "--yes",
                           "--store", store_url)  # the README's form: a goes
    assert (code, err) == (0, "")
    code, _, err = run_cli("rm", "b", "--yes", "--store", store_url)
    assert (code, err) == (0, "")
    with opened(store_url) as store:
        store.delete("c")
        store.prune(RetentionPolicy(keep_latest=1))  # d goes
        assert sessions(store) == ["e"]
        assert _removed(store) == [("a", "older-than"), ("b", "rm"), ("c", "api-delete"),
                                   ("d", "keep-latest")]
        policies = [r.data.policy for r in store.removals()]
        assert policies == ["older than 30d, keep the 4 newest", "dsh-session rm",
                            "DurableStore.delete", "keep latest 1"]
        assert all(r.data.created_at is not None for r in store.removals())
    code, out, err = run_cli("prune", "--log", "--store", store_url)
    assert (code, err) == (0, "")
    assert [line.split()[2:4] for line in out.decode().splitlines()[1:-1]] == [
        ["a", "older-than"], ["b", "rm"], ["c", "api-delete"], ["d", "keep-latest"]]
    assert out.decode().splitlines()[-1].startswith("4 removal(s) from ")


@pytest.mark.usefixtures("piped")
def test_a_removed_session_takes_its_mark_with_it(store_url: str) -> None:
    _fill(store_url, ("a", "b"))
    with opened(store_url) as store:
        assert store.retain("a")
        assert store.retain("b")
    code, out, err = run_cli("rm", "a", "--yes", "--store", store_url)
    assert (code, err) == (0, "")
    assert "its mark is removed with it" in out.decode()
    with opened(store_url) as store:
        store.delete("b")
        assert store.retained() == []
        assert [(r.data.session_id, r.data.retained) for r in store.removals()] == [
            ("a", True), ("b", True)]
    # A later session of the same id is another session: unmarked, pruned as any.
    clock = Clock()
    with opened(store_url, clock) as store:
        write(store, clock, "a", at=T0)
        write(store, clock, "z", at=T0 + DAY)
        report = store.prune(RetentionPolicy(keep_latest=1))
        assert [(d.session_id, d.rule, d.status) for d in report.decisions] == [
            ("a", "keep-latest", "deleted"), ("z", "keep-latest", "kept")]


def test_a_delete_a_writer_wins_after_its_dry_run_writes_nothing(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The lock is taken before the removal is announced: a writer that gets in between
    # the dry run and the delete leaves the ledger as it was (a writer taking and
    # letting go of the lock in a loop would otherwise grow it by two records a try).
    _fill(store_url, ("s0", "s1"))
    with opened(store_url) as store, opened(store_url) as other:
        store.delete("s0")
        before = _ledger(store)
        real = store.backend.delete
        writers: list[Any] = []

        def delete(session_id: str, *, dry_run: bool = False) -> Any:
            done = real(session_id, dry_run=dry_run)
            if dry_run and not writers:  # a writer takes the session right after
                writers.append(other.open(session_id))
            return done

        monkeypatch.setattr(store.backend, "delete", delete)
        with pytest.raises(SessionLockedError):
            store.delete("s1")
        assert writers
        assert _ledger(store) == before
        assert sessions(store) == ["s1"]
        other.release(writers[0])
        store.delete("s1")
        assert _removed(store) == [("s0", "api-delete"), ("s1", "api-delete")]
        assert sessions(store) == []


# --- a removal killed at any point -------------------------------------------------------

_KILLED = textwrap.dedent("""
    import datetime, sys, threading
    from pathlib import Path
    from dsh_session_core import RetentionPolicy, create_plugin_manager, open_store

    url, door, point, reached = sys.argv[1:5]
    store = open_store(url, plugin_manager=create_plugin_manager(autoload=False))
    backend = store.backend
    real, real_held = backend.delete, backend.delete_held

    def killed(delete):
        # The point where this process is killed: before the log is deleted, or right
        # after (and before the removal is recorded).
        if point == "before":
            Path(reached).touch()
            threading.Event().wait()
        done = delete()
        if point == "after":
            Path(reached).touch()
            threading.Event().wait()
        return done

    def delete(session_id, *, dry_run=False):  # dry runs (prune's measure) pass
        if dry_run:
            return real(session_id, dry_run=True)
        return killed(lambda: real(session_id))

    backend.delete = delete
    backend.delete_held = lambda session_id, lock: killed(
        lambda: real_held(session_id, lock))
    if door == "prune-policy":
        store.prune(RetentionPolicy(keep_latest=1))
    elif door == "prune-older-than":
        store.prune(datetime.timedelta(0), keep=1)
    else:
        store.delete("s1")
    raise SystemExit("not killed")
""")

#: What each door removes, once it is let run to its end.
_GOES = {"prune-policy": ("s1", "s2"), "prune-older-than": ("s1", "s2"), "delete": ("s1",)}
_RULE = {"prune-policy": "keep-latest", "prune-older-than": "older-than",
         "delete": "api-delete"}


def _killed_at(store_url: str, door: str, point: str, tmp_path: Path) -> None:
    """Run ``door`` in another process and SIGKILL it when its first removal reaches
    ``point``."""
    reached = tmp_path / "reached"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, store_url, door, point,
                             str(reached)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not reached.exists():  # wait for the condition: the point is reached
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "the point was never reached"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def _let_go(store_url: str, *session_ids: str) -> None:
    """Wait until the killed process's holds (of the ledger, of the session it was
    removing) are gone: a PostgreSQL server ends a dead client's sessions when it
    notices; a file lock goes with the process."""
    deadline = time.monotonic() + 60
    for session_id in session_ids:
        while True:
            with opened(store_url) as store:
                if session_id != LEDGER and session_id not in sessions(store):
                    break  # removed: nothing holds it
                try:
                    store.release(store.open(session_id))
                    break
                except SessionLockedError:
                    assert time.monotonic() < deadline, f"{session_id} was never let go"
            time.sleep(0.05)


@pytest.mark.parametrize("point", ["before", "after"])
@pytest.mark.parametrize("door", list(_GOES))
def test_a_removal_killed_at_any_point_leaves_the_session_there_or_recorded(
        store_url: str, door: str, point: str, tmp_path: Path) -> None:
    _fill(store_url)
    _killed_at(store_url, door, point, tmp_path)
    rule = _RULE[door]
    with opened(store_url) as store:
        there = "s1" in sessions(store)
        assert there is (point == "before")
        # Either still there, or recorded as removed: never gone without a record.
        assert _removed(store) == ([] if there else [("s1", rule)])
        assert _ledger(store)[-1] == ("retention/removing", "s1")  # announced first
    code, out, _ = run_cli("prune", "--log", "--store", store_url)
    assert code == 0
    assert (b" s1 " in out) is (point == "after")
    _let_go(store_url, LEDGER, "s1")
    # The next writer settles it, and runs the door to its end.
    with opened(store_url) as store:
        if door == "prune-policy":
            store.prune(RetentionPolicy(keep_latest=1))
        elif door == "prune-older-than":
            store.prune(datetime.timedelta(0), keep=1)
        else:
            if there:
                store.delete("s1")
            else:
                store.retain("s3")  # any ledger writer settles it
        assert sorted(set(("s1", "s2", "s3")) - set(sessions(store))) == list(_GOES[door])
        assert _removed(store) == [(sid, rule) for sid in _GOES[door]]  # each once
        outcome = "retention/abandoned" if there else "retention/removal"
        assert _ledger(store)[1] == (outcome, "s1")
        events: list[Any] = store.read(LEDGER)
        if there:
            assert "before the delete" in events[1].data.reason
