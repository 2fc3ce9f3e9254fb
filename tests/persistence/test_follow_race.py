"""Issue 11, defect 6: a follower misses no commit, however fast the writer commits.

``tail -f`` reads the last events and where following starts, then follows from
there; when the two were separate reads (the rows, then ``max(seq)``), a commit
between them was never printed (about 1% of events on SQLite, 480 of 37,824 in one
PostgreSQL run). Here a writer commits one event per flush as fast as it can, for a
bounded time, and stops by itself, while followers start at different moments of its
run: each must print every seq from 0 to the writer's last exactly once, in order.
The writer stops when told, once every follower has started and it has made
:data:`MIN_STEPS` commits: on a loaded machine too, each follower starts mid-write.

The CLI (what people run) follows in a subprocess on every durable backend; the
protocol's ``tail_lines`` + ``follow_lines`` are followed in-process on every backend
(the memory backend and the protocol's defaults with a writer thread, since their
store lives in one process).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_session_core import SessionHeader
from dsh_session_core._persistence.backends.memory import MemoryBackend
from dsh_session_core._persistence.base import Backend, StoredLog, WriterLock
from dsh_session_core._persistence.opening import backend_for
from dsh_session_core._persistence.store.durable import DurableStore
from dsh_session_core._schema.registry import EventRegistry
from dsh_session_core.events import Event
from lifecycle_support import store_url

RUN = "from dsh_session_core._cli.main import main; main()"
SESSION = "race"
#: The fewest commits the writer makes (it goes on until told to stop).
MIN_STEPS = 300
#: A bound on a wait for what should come soon: only a hang reaches it.
PATIENCE = 120
#: Followers started one after the other while the writer runs.
FOLLOWERS = 3
ALL = str(10**9)  # tail -n: every event, so seq 0 on is checked

# Commits one event per flush until a line on stdin says stop (and it made at least
# the given number of commits), then says the last seq and exits.
WRITER = """
import sys, threading
from dsh_session_core import open_store
url, sid, least = sys.argv[1], sys.argv[2], int(sys.argv[3])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
with open_store(url) as st:
    s = st.create(sid)
    s.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                   "source": {"kind": "user"}}})
    st.flush(s)
    print("ready", flush=True)
    step = 0
    while step < least or not stop.is_set():
        step += 1
        s.append("step/start", {"turn": 1, "step": step})
        st.flush(s)
    print(s.seq - 1, flush=True)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "DSH_SESSION_DISABLE_PLUGINS": "example"}


class _Seqs:
    """The seqs of the ``--json`` lines a child prints, read with a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.seqs: list[int] = []

    def until(self, done: Any, within: float) -> None:
        deadline = time.monotonic() + within
        while not done(self.seqs):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return
            *lines, self.buffer = (self.buffer + chunk).split(b"\n")
            self.seqs += [json.loads(line)["seq"] for line in lines]


@contextlib.contextmanager
def _children() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


def _start_writer(url: str, procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, url, SESSION, str(MIN_STEPS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env())
    procs.append(writer)
    assert writer.stdout is not None
    assert writer.stdout.readline() == b"ready\n"
    return writer


def _stop_writer(writer: subprocess.Popen[bytes]) -> int:
    """Tell the writer to stop; its last seq."""
    assert writer.stdin is not None
    assert writer.stdout is not None
    writer.stdin.write(b"stop\n")
    writer.stdin.flush()
    return int(writer.stdout.readline())


def _check(seqs: Sequence[int], last: int, who: str) -> None:
    missing = sorted(set(range(last + 1)) - set(seqs))
    assert list(seqs) == list(range(last + 1)), (
        f"{who}: {len(seqs)} lines for seqs 0..{last}; missing {len(missing)} "
        f"(first {missing[:10]}), {len(seqs) - len(set(seqs))} repeated, "
        f"in order: {list(seqs) == sorted(seqs)}")


@pytest.mark.parametrize("kind", ["jsonl", "jsonl+zstd", "sqlite", "postgresql"])
def test_tail_follow_prints_every_commit_of_a_fast_writer_process_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = store_url(kind, request, tmp_path, "sessions")
    with _children() as procs:
        writer = _start_writer(url, procs)
        followers: list[_Seqs] = []
        for _ in range(FOLLOWERS):  # each starts (reads its tail) mid-write
            child = subprocess.Popen(
                [sys.executable, "-c", RUN, "tail", "-f", "-n", ALL, "--json", SESSION,
                 "--store", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
            procs.append(child)
            followers.append(_Seqs(child))
            followers[-1].until(bool, within=PATIENCE)  # it has read its tail
            assert followers[-1].seqs, "the follower printed nothing"
        last = _stop_writer(writer)
        assert writer.wait(timeout=PATIENCE) == 0
        assert last > 100, "the writer hardly wrote: the race was not exercised"
        for i, follower in enumerate(followers):
            follower.until(lambda seqs: bool(seqs) and seqs[-1] >= last, within=PATIENCE)
            _check(follower.seqs, last, f"follower {i}")


# --- in-process: the protocol's tail_lines + follow_lines on every backend -----------------


class _Defaults(Backend):
    """A backend with only the required hooks (over a memory backend): the protocol's
    default ``tail_lines`` and ``follow_lines`` are the ones followed."""

    name = "defaults"

    def __init__(self) -> None:
        self.inner = MemoryBackend()

    def load_stored(self, session_id: str, registry: EventRegistry) -> StoredLog | None:
        return self.inner.load_stored(session_id, registry)

    def load_live(self, session_id: str, cwd: str | None,
                  registry: EventRegistry) -> StoredLog | None:
        return self.inner.load_live(session_id, cwd, registry)

    def append_batch(self, header: SessionHeader, events: Sequence[Event], jsonl: bytes,
                     materialized: bool) -> None:
        self.inner.append_batch(header, events, jsonl, materialized)

    def commit_repair(self, header: SessionHeader, torn: object | None,
                      closers: Sequence[Event], jsonl: bytes) -> None:
        self.inner.commit_repair(header, torn, closers, jsonl)

    def list(self) -> list[SessionHeader]:
        return self.inner.list()

    def acquire(self, header: SessionHeader) -> WriterLock:
        return self.inner.acquire(header)

    def location(self, header: SessionHeader) -> str:
        return "memory:"

    def close(self) -> None:
        self.inner.close()


def _follow_in_process(reader: Backend, stop_at: threading.Event, last_box: list[int],
                       started: threading.Event | None = None) -> list[int]:
    """Every seq the protocol reports: the tail of every event, then each news item,
    until the writer's last seq was reported (or :data:`PATIENCE` passed). ``started``
    is set once the tail was read."""
    deadline = time.monotonic() + PATIENCE
    tail = None
    while tail is None and time.monotonic() < deadline:
        tail = reader.tail_lines(SESSION, 10**9)  # None until the first flush
    assert tail is not None
    seqs = [json.loads(line)["seq"] for line in tail.lines]
    if started is not None:
        started.set()
    position = tail.position

    def finished() -> bool:
        return stop_at.is_set() and bool(seqs) and seqs[-1] >= last_box[0]

    # A quiet spell (a loaded machine's writer pausing) ends one follow_lines: following
    # goes on from where it ended until the writer's last seq came.
    while not finished() and time.monotonic() < deadline:
        for news in reader.follow_lines(SESSION, position, timeout=0.5):
            assert news.note is None, news.note
            seqs += [json.loads(line)["seq"] for line in news.lines]
            position = news.position
            if finished() or time.monotonic() > deadline:
                break
    return seqs


def _write_in_thread(backend: Backend, stop_at: threading.Event, last_box: list[int],
                     go_on: threading.Event) -> None:
    """Commit one event per flush until ``go_on`` is set and :data:`MIN_STEPS` were
    made."""
    store = DurableStore(backend)
    session = store.create(SESSION)
    step = 0
    session.append("turn/start", {"turn": 1, "trigger": {"kind": "message",
                                                         "source": {"kind": "user"}}})
    store.flush(session)
    while step < MIN_STEPS or not go_on.is_set():
        step += 1
        session.append("step/start", {"turn": 1, "step": step})
        store.flush(session)
    last_box[0] = session.seq - 1
    stop_at.set()


@pytest.mark.parametrize("kind", ["jsonl", "jsonl+zstd", "sqlite", "postgresql", "memory",
                                  "defaults"])
def test_follow_lines_reports_every_commit_of_a_fast_writer_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    done, last_box = threading.Event(), [-1]
    results: list[list[int]]
    if kind in ("memory", "defaults"):  # one process: the writer is a thread
        reader: Backend = MemoryBackend() if kind == "memory" else _Defaults()
        started = threading.Event()  # the writer goes on until the follower started
        writer = threading.Thread(target=_write_in_thread,
                                  args=(reader, done, last_box, started))
        writer.start()
        try:
            results = [_follow_in_process(reader, done, last_box, started)]
        finally:
            writer.join()
    else:
        url = store_url(kind, request, tmp_path, "sessions")
        with _children() as procs:
            proc = _start_writer(url, procs)
            readers = [backend_for(url, create=False) for _ in range(FOLLOWERS)]
            try:
                results = [[] for _ in readers]

                def follow(i: int, started: threading.Event) -> None:
                    results[i] = _follow_in_process(readers[i], done, last_box, started)

                threads = []
                for i in range(len(readers)):  # each starts (reads its tail) mid-write
                    started = threading.Event()
                    threads.append(threading.Thread(target=follow, args=(i, started)))
                    threads[-1].start()
                    assert started.wait(timeout=PATIENCE)
                last_box[0] = _stop_writer(proc)
                done.set()
                assert proc.wait(timeout=PATIENCE) == 0
                for thread in threads:
                    thread.join()
            finally:
                for reader in readers:
                    reader.close()
    assert last_box[0] > 100, "the writer hardly wrote: the race was not exercised"
    for i, seqs in enumerate(results):
        _check(seqs, last_box[0], f"{kind} follower {i}")
