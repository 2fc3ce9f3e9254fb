"""Crash and concurrency tests on real files: writers killed with SIGKILL at random
points, several processes at once. Every event a completed flush reported durable must
be there after a reload, a reload must always succeed, and an open turn comes back
closed as interrupted.

Each test runs on a plain store and on an encrypted one (``keys``): the sealing sits
above the backend, so the same kills must find the same guarantees below it.

The killed-writer tests also run on stores keeping the contract projection
(``projecting``, with fewer kills): after each kill, its read by a fresh store (the
crash as it lies) and, once a writer reopened the session, by the writer and by a fresh
store again, equals the fold of the log as loaded: never a stale row.

Writers are forked children (no interpreter start-up per crash), killed by the parent the
moment they report a chosen flush, so the kill lands somewhere in the next turn: between
appends, inside a flush, or in the middle of a write.
"""

from __future__ import annotations

import functools
import os
import random
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from projection_support import assert_rows_are_the_fold, plugins

from dsh_session_core import Keyring, encode_events
from dsh_session_core._persistence.base import SessionLockedError
from dsh_session_core._persistence.opening import backend_for, sealed_backend
from dsh_session_core._persistence.store.durable import DurableStore

#: Kills per backend of the resumed-writer test, and of the first-write test (a quarter
#: of them on an encrypted store: the same code below the sealing, checked again).
KILLS = {"jsonl": 200, "jsonl+zstd": 200, "sqlite": 60, "redis": 60}
FIRST_WRITE_KILLS = {"jsonl": 60, "jsonl+zstd": 60, "sqlite": 30, "redis": 30}
SID = "crash"


#: How many times fewer kills a projecting run makes (its rows checked at each).
PROJECTING_FEWER = 8


def _kills(table: dict[str, int], store_url: str, keys: Keyring | None,
           projecting: bool = False) -> int:
    kills = table[_kind(store_url)] // (4 if keys is not None else 1)
    return max(kills // PROJECTING_FEWER, 3) if projecting else kills


def _kind(store_url: str) -> str:
    scheme = store_url.partition(":")[0]
    return scheme if scheme in ("sqlite", "jsonl+zstd", "redis") else "jsonl"


# Each test taking ``store_url`` (the testing kit's) runs on each of these kinds (a
# Redis Cluster's store as many times as a Redis server's: its URL is a redis:// too).
pytestmark = pytest.mark.store_kinds("jsonl", "jsonl+zstd", "sqlite", "redis", "redis-cluster")

@pytest.fixture(params=[False, True], ids=["plain", "encrypted"])
def keys(request: pytest.FixtureRequest) -> Keyring | None:
    """Each test runs on a plain store and on an encrypted one (its records sealed)."""
    return Keyring({"crash": bytes(range(32))}) if request.param else None


@pytest.fixture(params=[False, True], ids=["no-projection", "projecting"])
def projecting(request: pytest.FixtureRequest) -> bool:
    """Whether the store keeps the contract projection."""
    return bool(request.param)


def _store(store_url: str, keys: Keyring | None, projecting: bool = False) -> DurableStore:
    backend = backend_for(store_url)
    if keys is not None:
        backend = sealed_backend(backend, keys)
    return DurableStore(backend, plugins(projecting))


def _turn(store: DurableStore, session_id: str, rng: random.Random) -> int:
    """Append one turn (a random number of chunks, sometimes a tool call) and flush."""
    s = store.get(session_id)
    assert s is not None
    turn = sum(1 for e in s.events if e.type == "turn/start") + 1
    s.append("turn/start", {"turn": turn, "trigger": {"kind": "message",
                                                      "source": {"kind": "user"}}})
    s.append("user/message", {"content": [{"type": "text", "text": f"q{turn}"}],
                              "source": {"kind": "user"}}, surface_op="append")
    s.append("step/start", {"turn": turn, "step": 1})
    for i in range(rng.randrange(1, 60)):
        s.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": {
            "type": "text-delta", "index": 0, "text": f"t{i} " * rng.randrange(1, 40)}})
    call = rng.random() < 0.5
    content = [{"type": "text", "text": f"a{turn}"}]
    if call:
        content.append({"type": "tool-call", "id": f"c{turn}", "name": "bash", "arguments": "{}"})
    s.append("assistant/message", {"turn": turn, "step": 1, "content": content},
             surface_op="append")
    if call:
        s.append("tool/result", {"turn": turn, "step": 1, "callId": f"c{turn}",
                                 "content": [{"type": "text", "text": "ok"}], "isError": False},
                 surface_op="append")
    s.append("step/end", {"turn": turn, "step": 1})
    s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    store.flush(s)
    return s.seq


def _writer(store_url: str, keys: Keyring | None, seed: int, report: int,
            projecting: bool = False) -> None:
    """Child: resume (or create) the session and write turns forever, reporting each
    durable length on the pipe."""
    rng = random.Random(seed)
    store = _store(store_url, keys, projecting)
    try:
        store.open(SID)
    except Exception:  # first run: nothing stored yet
        store.create(SID, cwd="/crash")
    while True:
        n = _turn(store, SID, rng)
        os.write(report, f"{n}\n".encode())


@pytest.fixture
def fork() -> Iterator[Callable[[Callable[[int], None]], tuple[int, int]]]:
    """Start ``target(write_fd)`` in a forked child; returns ``(pid, read_fd)``."""
    children: list[int] = []

    def start(target: Callable[[int], None]) -> tuple[int, int]:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            code = 0
            try:
                os.close(r)
                target(w)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(w)
        children.append(pid)
        return pid, r

    yield start
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _read_lines(fd: int, count: int) -> list[int]:
    """Block until ``count`` reports arrived; return them."""
    buf = b""
    while buf.count(b"\n") < count:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
    return [int(x) for x in buf.split(b"\n")[:count] if x]


def test_writers_killed_at_random_points_lose_nothing_durable(
    store_url: str, keys: Keyring | None, projecting: bool,
    fork: Callable[[Callable[[int], None]], tuple[int, int]],
) -> None:
    rng = random.Random(20261130)
    previous = b""
    fresh = functools.partial(_store, store_url, keys, projecting)
    for round_ in range(_kills(KILLS, store_url, keys, projecting)):
        wanted = rng.randrange(1, 4)
        pid, r = fork(functools.partial(_writer, store_url, keys, round_,
                                        projecting=projecting))
        reports = _read_lines(r, wanted)
        os.kill(pid, signal.SIGKILL)  # lands somewhere in the next turn
        os.waitpid(pid, 0)
        os.close(r)
        assert len(reports) == wanted, "the writer died before reporting"
        durable = reports[-1]
        if projecting:  # the crash as it lies, read by another process
            reader = fresh()
            assert_rows_are_the_fold(reader, SID, where=f"round {round_}, killed")
            reader.close()
        st = _store(store_url, keys, projecting)
        s = st.open(SID)  # must always succeed, repairing what the kill left
        if projecting:
            assert_rows_are_the_fold(st, SID, fresh=fresh, where=f"round {round_}, reopened")
        events = list(s.events)
        lines = encode_events(events)
        assert len(events) >= durable
        assert lines.startswith(previous), f"round {round_}: durable events changed"
        assert events[-1].type == "turn/end"
        reasons = {e.data.reason.kind for e in events if e.type == "turn/end"}
        assert reasons <= {"completed", "interrupted"}
        previous = lines
        st.close()


def _first_writer(store_url: str, keys: Keyring | None, session_id: str, seed: int,
                  report: int, projecting: bool = False) -> None:
    """Child: create a session, say so (a report of 0), then write turns forever,
    reporting each durable length: a kill after the first report lands in (or around)
    the session's first write."""
    rng = random.Random(seed)
    store = _store(store_url, keys, projecting)
    store.create(session_id, cwd="/crash")
    os.write(report, b"0\n")
    while True:
        n = _turn(store, session_id, rng)
        os.write(report, f"{n}\n".encode())


def test_writers_killed_in_their_first_write_leave_a_log_that_loads_or_none(
    store_url: str, keys: Keyring | None, projecting: bool,
    fork: Callable[[Callable[[int], None]], tuple[int, int]],
) -> None:
    rng = random.Random(20261201)
    fresh = functools.partial(_store, store_url, keys, projecting)
    for round_ in range(_kills(FIRST_WRITE_KILLS, store_url, keys, projecting)):
        session_id = f"first-{round_}"
        wanted = rng.randrange(1, 3)  # 1: killed during the first flush; 2: after it
        pid, r = fork(functools.partial(_first_writer, store_url, keys, session_id, round_,
                                        projecting=projecting))
        reports = _read_lines(r, wanted)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(r)
        assert len(reports) == wanted, "the writer died before reporting"
        durable = reports[-1]  # 0: no flush was reported durable
        st = _store(store_url, keys, projecting)
        stored = {h.id for h in st.stored()}  # listing never fails on what a kill left
        if durable:
            assert session_id in stored, f"round {round_}: a durable first write was lost"
        if session_id in stored:
            if projecting:  # the crash as it lies, then reopened
                assert_rows_are_the_fold(st, session_id, where=f"round {round_}, killed")
            events = list(st.open(session_id).events)  # always loads, repaired
            assert len(events) >= durable
            assert events[-1].type == "turn/end"
            if projecting:
                assert_rows_are_the_fold(st, session_id, fresh=fresh,
                                         where=f"round {round_}, reopened")
        st.close()
    if _kind(store_url) in ("jsonl", "jsonl+zstd"):  # killed first writes' temp files swept
        root = Path(store_url.removeprefix("jsonl+zstd:///"))
        assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_a_second_process_cannot_write_a_session_being_written(
    store_url: str, keys: Keyring | None,
    fork: Callable[[Callable[[int], None]], tuple[int, int]],
) -> None:
    pid, r = fork(lambda w: _writer(store_url, keys, 1, w))
    assert _read_lines(r, 1)  # the child owns the session now
    st = _store(store_url, keys)
    with pytest.raises(SessionLockedError, match='session "crash" is being written by another'):
        st.open(SID)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(r)
    # The dead writer's lock died with it.
    s = st.open(SID)
    assert s.events[-1].type == "turn/end"
    st.close()


def test_many_processes_writing_distinct_sessions_lose_nothing(
    store_url: str, keys: Keyring | None,
    fork: Callable[[Callable[[int], None]], tuple[int, int]],
) -> None:
    writers, turns = 6, 15

    def write(index: int, w: int) -> None:
        rng = random.Random(index)
        st = _store(store_url, keys)
        st.create(f"w{index}", cwd="/many")
        total = 0
        for _ in range(turns):
            total = _turn(st, f"w{index}", rng)
        st.close()
        os.write(w, f"{total}\n".encode())

    started = [fork(functools.partial(write, i)) for i in range(writers)]
    totals = {}
    for i, (pid, r) in enumerate(started):
        (total,) = _read_lines(r, 1)
        _, status = os.waitpid(pid, 0)
        os.close(r)
        assert status == 0
        totals[f"w{i}"] = total
    st = _store(store_url, keys)
    for sid, total in totals.items():
        events = st.persistence.load(sid).events
        assert [e.seq for e in events] == list(range(total))
        assert sum(1 for e in events if e.type == "turn/end") == turns
    st.close()
