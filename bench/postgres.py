"""Benchmark of the PostgreSQL backend on the standard workload (see bench/run.py and
bench/persistence.py), over loopback TCP.

Durable appends with one flush per turn (48 events), against a plain psycopg loop that
inserts the same rows into a table of the same schema, one transaction per turn
(``INSERT INTO events VALUES (...)`` executemany), measured in the same run, round by
round, each measurement in a fresh database:

- **1 writer**: the whole workload (2,084 flushes), end to end (the appends and the
  flushes) and the flushes alone, against the plain loop run two ways: between the same
  appends on an in-memory session (building each turn's rows, then inserting them: only
  the persistence layer differs), and bare (the rows built beforehand).
- **8 writers**: 8 processes, each writing its own session (the standard workload from
  its first turn on) for a fixed time window started together; the figure is the sum of
  the processes' events/s. The limit is 8 processes running the plain loop for the same
  window, with the same appends and bare.
- **Cold load** of the standard 100k-event session from PostgreSQL (connect, load, repair
  check, build the session, derive: ``open_store(url).open(id)``), and the backend's
  ``load_stored`` alone, against the in-memory load of the same bytes (``load_ms`` of
  bench/run.py)::

    python bench/postgres.py               # a table with the targets
    python bench/postgres.py --json        # one JSON object
    python bench/postgres.py --url postgresql://USER@HOST:PORT/postgres

The server is ``--url``, else ``$DSH_SESSION_TEST_POSTGRESQL``, else a throwaway one
started with tests/pgserver.py (and stopped after). The role must be allowed to create
databases: every database the run makes is dropped after it. ``--rounds`` and
``--window`` (seconds) change the number of rounds (default 3) and the 8-writer window
(default 4). A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from psycopg import sql

from dsh_session_core import Event, Session, core_registry
from dsh_session_core._logformat.logfile import open_session, parse_log
from dsh_session_core._persistence.backends.postgres.backend import PostgresBackend
from dsh_session_core._persistence.backends.sql.rows import PARAMS_PER_ROW, event_params
from persistence import _clock, appended_turns, cold_load_ms, durable_fill
from run import Append, Target, cli, median_ms, workload

ENV = "DSH_SESSION_TEST_POSTGRESQL"
PGSERVER = Path(__file__).resolve().parents[1] / "tests" / "pgserver.py"
WRITERS = 8
SID = "bench"
INSERT = "INSERT INTO events VALUES (%s, %s, %s, %s, %s, %s, %s)"

Row = tuple[Any, ...]


def _event_rows(sid: str, events: Sequence[Event]) -> list[Row]:
    """The ``events`` rows of a batch, as the backend stores them (NULL for an absent
    optional column)."""
    p = event_params(sid, events, "PostgreSQL")
    n = PARAMS_PER_ROW
    return [(sid, *(v if v != "" else None for v in p[i : i + n]))
            for i in range(0, len(p), n)]


# --- the server and its databases -------------------------------------------------------------


@contextmanager
def server(url: str | None) -> Iterator[str]:
    """The admin URL: ``url``, else $DSH_SESSION_TEST_POSTGRESQL, else a throwaway server
    (tests/pgserver.py) for the ``with`` block."""
    url = url or os.environ.get(ENV, "").strip() or None
    if url is not None:
        yield url
        return
    # Not made here: pgserver makes it and hands it to the server's user when run as root.
    where = Path(tempfile.gettempdir()) / f"dsh-bench-pg-{uuid.uuid4().hex[:12]}"
    proc = subprocess.run([sys.executable, str(PGSERVER), "start", str(where)],
                          capture_output=True, text=True, check=False)
    try:
        if proc.returncode != 0:
            sys.exit(f"no PostgreSQL server (--url, ${ENV}, or a throwaway one):\n"
                     f"{proc.stderr.strip()}")
        yield proc.stdout.strip()
    finally:
        subprocess.run([sys.executable, str(PGSERVER), "stop", str(where)],
                       capture_output=True, check=False)


class Databases:
    """Fresh databases on the server, each dropped after its ``with`` block."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.admin = psycopg.connect(admin_url, autocommit=True)

    @contextmanager
    def fresh(self) -> Iterator[str]:
        from urllib.parse import urlsplit, urlunsplit

        name = f"dsh_bench_{uuid.uuid4().hex[:12]}"
        self.admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(
            sql.Identifier(name)))
        try:
            yield urlunsplit(urlsplit(self.admin_url)._replace(path="/" + name))
        finally:
            self.admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))

    def close(self) -> None:
        self.admin.close()


def plain_tables(url: str, sids: list[str]) -> None:
    """The backend's own schema (so the same tables, keys and indexes) and the sessions'
    rows (the events reference them), made by the backend once, outside the timing."""
    PostgresBackend(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        for sid in sids:
            conn.execute("INSERT INTO sessions (id, version, created_at, cwd)"
                         " VALUES (%s, 0, %s, '/bench')", (sid, _clock()))


# --- one writer's loops -----------------------------------------------------------------------


def turn_rows(sid: str, appends: list[Append]) -> list[list[Row]]:
    """The rows the workload stores, turn by turn: what the plain loop inserts."""
    session = Session(sid, clock=_clock)
    return [_event_rows(sid, session.events[start:])
            for start in appended_turns(session, appends)]


def plain_insert(url: str, rows: list[list[Row]], until: float | None = None,
                 ) -> tuple[int, float]:
    """The bare limit: one transaction per turn, executemany of its prepared rows.

    :returns: the events inserted, and the seconds it took (stopping at the turn that
        ends after ``until``, a ``time.monotonic()`` deadline, if given)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.cursor()
        count = 0
        t0 = time.perf_counter()
        for turn in rows:
            with conn.transaction():
                cur.executemany(INSERT, turn)
            count += len(turn)
            if until is not None and time.monotonic() >= until:
                break
        return count, time.perf_counter() - t0


def appends_then_insert(url: str, sid: str, appends: list[Append],
                        until: float | None = None) -> tuple[int, float, float]:
    """The limit in the conditions of a durable run: the same appends on an in-memory
    session, and after each turn its rows built and inserted in one transaction.

    :returns: the events inserted, the whole run's seconds, and the inserts' alone."""
    session = Session(sid, clock=_clock)
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.cursor()
        inserting = 0.0
        t0 = time.perf_counter()
        for start in appended_turns(session, appends):
            t1 = time.perf_counter()
            with conn.transaction():
                cur.executemany(INSERT, _event_rows(sid, session.events[start:]))
            inserting += time.perf_counter() - t1
            if until is not None and time.monotonic() >= until:
                break
        return session.seq, time.perf_counter() - t0, inserting


def durable_until(url: str, sid: str, appends: list[Append], until: float,
                  ) -> tuple[int, float, float]:
    """:func:`persistence.durable_fill`, in session ``sid`` and stopping at the turn that
    ends after ``until``: the events made durable, the seconds, the flushes' seconds."""
    elapsed, flushing, session = durable_fill(url, appends, sid, until)
    return session.seq, elapsed, flushing


# --- eight writer processes -------------------------------------------------------------------


def _worker(index: int, barrier: Barrier, commands: Connection) -> None:
    """One of the 8 writer processes: prepares the workload once (then says ``ready``),
    runs each ``(kind, url, seconds)`` it is sent, starting with the others at the
    barrier, and sends back ``(events, seconds)``; stops on ``None``."""
    sid = f"w{index}"
    appends = workload()
    rows = turn_rows(sid, appends)
    commands.send("ready")
    while (command := commands.recv()) is not None:
        kind, url, seconds = command
        barrier.wait(timeout=120)
        until = time.monotonic() + seconds
        if kind == "dsh":
            events, elapsed, _ = durable_until(url, sid, appends, until)
        elif kind == "plain":
            events, elapsed = plain_insert(url, rows, until)
        else:
            events, elapsed, _ = appends_then_insert(url, sid, appends, until)
        commands.send((events, elapsed))


class Writers:
    """8 writer processes (spawned: no state inherited), reused by every round."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        # Kept: the children rebuild it from its semaphores, which die with it.
        self.barrier = barrier = ctx.Barrier(WRITERS)
        self.pipes: list[Connection] = []
        self.procs = []
        for i in range(WRITERS):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(i, barrier, theirs), daemon=True)
            proc.start()
            self.pipes.append(mine)
            self.procs.append(proc)
        # Prepared before any measurement starts: their set-up would steal the CPU.
        for pipe in self.pipes:
            if not pipe.poll(300) or pipe.recv() != "ready":
                msg = "a writer process did not start"
                raise RuntimeError(msg)

    def run(self, kind: str, url: str, seconds: float) -> float:
        """All 8 write for ``seconds`` at once; the sum of their events/s."""
        for pipe in self.pipes:
            pipe.send((kind, url, seconds))
        total = 0.0
        for pipe in self.pipes:
            if not pipe.poll(seconds + 300):
                msg = f"an 8-writer {kind} run did not finish"
                raise RuntimeError(msg)
            events, elapsed = pipe.recv()
            total += events / elapsed
        return total

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):  # a writer that died: nothing to stop
                pipe.send(None)
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


# --- the run ------------------------------------------------------------------------------------


def run_on(admin_url: str, rounds: int, window: float) -> dict[str, float]:
    appends = workload()
    n = len(appends)
    rows = turn_rows(SID, appends)
    dbs = Databases(admin_url)
    writers = Writers()
    single: dict[str, list[float]] = {k: [] for k in (
        "whole", "flushes", "plain", "plain_whole", "plain_inserts")}
    eight: dict[str, list[float]] = {"dsh": [], "plain": [], "plain+appends": []}
    results: dict[str, float] = {}
    try:
        with dbs.fresh() as loaded:  # round 0's durable session, kept for the load
            for round_ in range(rounds):
                # One writer: the durable run, the bare loop, the loop between appends.
                with _kept(loaded) if round_ == 0 else dbs.fresh() as url:
                    elapsed, flushing, session = durable_fill(url, appends)
                single["whole"].append(elapsed)
                single["flushes"].append(flushing)
                with dbs.fresh() as url:
                    plain_tables(url, [SID])
                    single["plain"].append(plain_insert(url, rows)[1])
                with dbs.fresh() as url:
                    plain_tables(url, [SID])
                    _, whole, inserts = appends_then_insert(url, SID, appends)
                single["plain_whole"].append(whole)
                single["plain_inserts"].append(inserts)
                # Eight writer processes, each its own session, for the same window.
                for kind in eight:
                    with dbs.fresh() as url:
                        if kind == "dsh":
                            PostgresBackend(url).close()  # the schema, outside the window
                        else:
                            plain_tables(url, [f"w{i}" for i in range(WRITERS)])
                        eight[kind].append(writers.run(kind, url, window))
            results["pg_end_to_end_eps"] = n / statistics.median(single["whole"])
            results["pg_durable_eps"] = n / statistics.median(single["flushes"])
            results["plain_insert_eps"] = n / statistics.median(single["plain"])
            results["appends_plain_insert_eps"] = n / statistics.median(
                single["plain_whole"])
            # Ratios paired round by round: a drift of the server's commit time cancels.
            results["pg_end_to_end_ratio"] = _paired(single["plain_whole"], single["whole"])
            results["pg_durable_ratio"] = _paired(single["plain_inserts"], single["flushes"])
            results["pg_durable_vs_bare_ratio"] = _paired(single["plain"], single["flushes"])
            # The same, for rates: our events/s over the limit's.
            results["pg8_eps"] = statistics.median(eight["dsh"])
            results["plain8_insert_eps"] = statistics.median(eight["plain"])
            results["appends_plain8_insert_eps"] = statistics.median(eight["plain+appends"])
            results["pg8_ratio"] = _paired(eight["dsh"], eight["plain+appends"])
            results["pg8_vs_bare_ratio"] = _paired(eight["dsh"], eight["plain"])
            results["pg8_scaling"] = results["pg8_eps"] / results["pg_end_to_end_eps"]
            # Loads of round 0's session.
            results["pg_load_ms"] = cold_load_ms(loaded)
            backend = PostgresBackend(loaded)
            registry = core_registry()
            try:
                results["pg_load_stored_ms"] = median_ms(
                    lambda: backend.load_stored(SID, registry))
            finally:
                backend.close()
        data = session.to_jsonl()
        results["memory_load_ms"] = median_ms(
            lambda: open_session(parse_log(data, registry), registry).derive_messages())
    finally:
        writers.close()
        dbs.close()
    return results


@contextmanager
def _kept(url: str) -> Iterator[str]:
    yield url


def _paired(a: list[float], b: list[float]) -> float:
    """The median of the round-by-round ratios ``a / b``: the limit's time over ours, or
    our rate over the limit's (1.0: as fast as the limit)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


TARGETS: dict[str, Target] = {
    "pg_durable_vs_bare_ratio": (">=", lambda r: r["pg_durable_vs_bare_ratio"], 0.8),
    "pg8_vs_bare_ratio": (">=", lambda r: r["pg8_vs_bare_ratio"], 0.8),
    "pg_load_ms / memory_load_ms": ("<=", lambda r: r["pg_load_ms"] / r["memory_load_ms"], 1.5),
}


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--url")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=4.0)
    args, rest = parser.parse_known_args()
    sys.argv[1:] = rest  # --json and --help are cli()'s

    def run() -> dict[str, float]:
        with server(args.url) as admin_url:
            return run_on(admin_url, args.rounds, args.window)

    cli(__doc__ or "", run, TARGETS)


if __name__ == "__main__":
    main()

