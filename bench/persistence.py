"""Benchmark of durable persistence on the standard workload (see bench/run.py).

Durable appends, one flush per turn (2,084 flushes of 48 events), for the JSONL and the
SQLite backend, against a plain loop of ``os.write`` + ``os.fsync`` of the same bytes in
the same batches, measured in the same run, two ways: end to end (the same appends on an
in-memory session, then the plain write + fsync per turn: only the persistence layer
differs), and the flushes alone against the bare loop; and the cold load of the 100k-event session
from disk (read, scan, repair check, build the session, derive), against the in-memory
load of the same bytes (``load_ms`` of bench/run.py)::

    python bench/persistence.py            # a table with the targets
    python bench/persistence.py --json     # one JSON object

A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dsh_session_core import Keyring, Session, core_registry, create_plugin_manager
from dsh_session_core._logformat.logfile import open_session, parse_log
from dsh_session_core._persistence.opening import backend_for, sealed_backend
from dsh_session_core._persistence.store.durable import DurableStore
from run import Append, Target, cli, median_ms, turn_appends, workload


def _clock() -> int:
    return 1_783_000_000_000


def _turns(appends: list[Append]) -> list[list[Append]]:
    return [appends[i : i + 48] for i in range(0, len(appends), 48)]


def appended_turns(session: Session, appends: list[Append]) -> Iterator[int]:
    """Append the workload to ``session`` a turn at a time, yielding after each turn the
    seq of its first event: the caller then writes (and times) that turn's events."""
    append = session.append
    for turn in _turns(appends):
        start = session.seq
        for etype, data, kw in turn:
            append(etype, data, **kw)
        yield start


def durable_fill(
    url: str, appends: list[Append], sid: str = "bench", until: float | None = None,
    keys: Keyring | None = None,
) -> tuple[float, float, Session]:
    """Seconds for the whole run (appends and flushes) and for the flushes alone (the
    durable writes), appending the workload to session ``sid`` with one flush per turn;
    stopping at the turn that ends after ``until`` (a ``time.monotonic()`` deadline);
    the store encrypted with ``keys`` when given."""
    backend = backend_for(url)
    if keys is not None:
        backend = sealed_backend(backend, keys)
    store = DurableStore(backend, create_plugin_manager(autoload=False), clock=_clock)
    session = store.create(sid, cwd="/bench")
    flush = store.flush
    flushing = 0.0
    t0 = time.perf_counter()
    for _start in appended_turns(session, appends):
        t1 = time.perf_counter()
        flush(session)
        flushing += time.perf_counter() - t1
        if until is not None and time.monotonic() >= until:
            break
    elapsed = time.perf_counter() - t0
    store.close()
    return elapsed, flushing, session


def plain_write_fsync(path: Path, batches: list[bytes]) -> float:
    """Seconds for the bare limit: one ``os.write`` + ``os.fsync`` per batch."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    t0 = time.perf_counter()
    for batch in batches:
        os.write(fd, batch)
        os.fsync(fd)
    elapsed = time.perf_counter() - t0
    os.close(fd)
    return elapsed


def appends_then_write_fsync(path: Path, appends: list[Append]) -> tuple[float, float]:
    """Seconds for the limit in the same conditions as a durable run: the same appends
    on an in-memory session, and after each turn one ``os.write`` + ``os.fsync`` of the
    turn's lines. Only the persistence layer differs from :func:`durable_fill`.

    :returns: the whole run, and the writes alone (as :func:`durable_fill` does)."""
    session = Session("bench", clock=_clock)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    writing = 0.0
    t0 = time.perf_counter()
    for start in appended_turns(session, appends):
        t1 = time.perf_counter()
        os.write(fd, session.jsonl(start))
        os.fsync(fd)
        writing += time.perf_counter() - t1
    elapsed = time.perf_counter() - t0
    os.close(fd)
    return elapsed, writing


class PlainSqlite:
    """SQLite's own limit (issue 17, point 7): a plain ``sqlite3`` connection that inserts
    the same rows into the same schema, with the same pragmas (WAL, the default
    ``synchronous=FULL``, foreign keys on), one transaction per turn; each turn's rows
    are built beforehand (:meth:`prepare`), so only SQLite's work is timed. With
    ``index``, it also writes the search index's rows (the docs, the FTS5 words, the
    state), as every flush does. The database is made by the backend itself, so the
    schema is the one it uses."""

    def __init__(self, path: Path, index: bool) -> None:
        import sqlite3

        from dsh_session_core._persistence.backends.sqlite.backend import SqliteBackend

        SqliteBackend(path).close()  # the schema (and the index's tables), as a store has it
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.index = index
        self.turn: int | None = None
        self.doc = 0
        self.head: tuple[object, ...] | None = None

    def prepare(self, session: Session, a: int, b: int) -> tuple[Any, ...]:
        """The rows of the session's events ``a .. b-1`` (a turn)."""
        from dsh_session_core._persistence.backends.sql.rows import event_params, header_row
        from dsh_session_core._persistence.backends.sql.search_index import index_lines

        sid = session.header.id
        params = event_params(sid, session.events[a:b])
        rows = [(sid, *params[i:i + 6]) for i in range(0, len(params), 6)]
        rows = [(r[0], r[1], r[2], r[3], r[4], r[5] or None, r[6] or None) for r in rows]
        found, self.turn, _ = index_lines(session.jsonl(a, b).split(b"\n")[:-1], self.turn)
        docs = [(self.doc + k + 1, sid, r.seq, r.turn) for k, r in enumerate(found)]
        words = [(self.doc + k + 1, " ".join(r.words)) for k, r in enumerate(found)]
        self.doc += len(found)
        head = header_row(session.header) if a == 0 else None
        return head, rows, docs, words, (sid, b, self.turn)

    def commit(self, prepared: tuple[Any, ...]) -> float:
        """Seconds for one turn's transaction."""
        head, rows, docs, words, state = prepared
        conn = self.conn
        t0 = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        if head is not None:
            conn.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)", head)
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        if self.index:
            conn.executemany("INSERT INTO dsh_search_docs (id, session_id, seq, turn) "
                             "VALUES (?, ?, ?, ?)", docs)
            conn.executemany("INSERT INTO dsh_search (rowid, words) VALUES (?, ?)", words)
            conn.execute("INSERT INTO dsh_search_state VALUES (?, ?, ?) ON CONFLICT "
                         "(session_id) DO UPDATE SET next_seq = excluded.next_seq, "
                         "turn = excluded.turn", state)
        conn.execute("COMMIT")
        return time.perf_counter() - t0


def plain_sqlite(path: Path, session: Session, offsets: list[int], index: bool) -> float:
    """Seconds for :class:`PlainSqlite` writing the session, turn by turn, back to back."""
    plain = PlainSqlite(path, index)
    prepared = [plain.prepare(session, a, b) for a, b in itertools.pairwise(offsets)]
    elapsed = sum(plain.commit(p) for p in prepared)
    plain.conn.close()
    return elapsed


def sqlite_lockstep(root: Path, appends: list[Append]) -> tuple[float, float]:
    """Seconds of our SQLite flushes and of :class:`PlainSqlite`'s transactions of the same
    rows (with the index), turn by turn in lockstep: after each turn's appends, our flush
    and the plain transaction, in alternating order, into two databases side by side.
    Both then meet the same disk at the same moment (an fsync after other work is
    slower than back to back, and a disk's pace drifts), so their ratio holds on a busy
    machine. The plain rows are prepared from the turn's events, untimed."""
    root.mkdir(exist_ok=True)
    url = f"sqlite:///{root / 'lockstep-ours.db'}"
    store = DurableStore(backend_for(url), create_plugin_manager(autoload=False), clock=_clock)
    session = store.create("bench", cwd="/bench")
    plain = PlainSqlite(root / "lockstep-plain.db", index=True)
    ours = limit = 0.0
    for i, turn in enumerate(_turns(appends)):
        start = session.seq
        for etype, data, kw in turn:
            session.append(etype, data, **kw)
        prepared = plain.prepare(session, start, session.seq)
        if i % 2:
            limit += plain.commit(prepared)
        t0 = time.perf_counter()
        store.flush(session)
        ours += time.perf_counter() - t0
        if not i % 2:
            limit += plain.commit(prepared)
    store.close()
    plain.conn.close()
    return ours, limit


def cold_load_ms(url: str, repeat: int = 5) -> float:
    def load() -> Session:
        store = DurableStore(backend_for(url), create_plugin_manager(autoload=False))
        session = store.open("bench")
        session.derive_messages()
        store.close()
        return session

    return median_ms(load, repeat)


def run(rounds: int = 7) -> dict[str, float]:
    appends = workload()
    n = len(appends)
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        root = Path(tmp)
        # fsync times drift with the disk's state: the three runs alternate, so each
        # backend and the limit see the same conditions.
        runs: dict[str, list[tuple[float, float]]] = {"jsonl": [], "sqlite": []}
        limit: list[float] = []
        sqlite_plain: list[float] = []
        sqlite_plain_indexed: list[float] = []
        lockstep: list[tuple[float, float]] = []
        limit_e2e: list[float] = []
        limit_writes: list[float] = []
        batches: list[bytes] = []
        urls = {}
        for i in range(rounds):
            for name in ("jsonl", "sqlite"):
                url = (str(root / f"jsonl-{i}") if name == "jsonl"
                       else f"sqlite:///{root / f'db-{i}.sqlite'}")
                elapsed, flushing, session = durable_fill(url, appends)
                runs[name].append((elapsed, flushing))
                urls[name] = url
            if not batches:  # the same bytes in the same batches
                offsets = [0]
                for turn in _turns(appends):
                    offsets.append(offsets[-1] + len(turn))
                batches = [session.jsonl(a, b) for a, b in itertools.pairwise(offsets)]
                assert b"".join(batches) == session.jsonl()
            limit.append(plain_write_fsync(root / f"plain-{i}.jsonl", batches))
            sqlite_plain.append(plain_sqlite(root / f"plain-{i}.db", session, offsets, False))
            sqlite_plain_indexed.append(
                plain_sqlite(root / f"plain-indexed-{i}.db", session, offsets, True))
            lockstep.append(sqlite_lockstep(root / f"lockstep-{i}", appends))
            whole, writes = appends_then_write_fsync(root / f"plain-e2e-{i}.jsonl", appends)
            limit_e2e.append(whole)
            limit_writes.append(writes)
        for name, measured in runs.items():
            # End to end (validated appends + durable flushes), and the durable writes
            # alone: the part to hold against a plain write + fsync loop.
            results[f"{name}_end_to_end_eps"] = n / statistics.median(t for t, _ in measured)
            results[f"{name}_durable_eps"] = n / statistics.median(f for _, f in measured)
            results[f"{name}_load_ms"] = cold_load_ms(urls[name])
            # Ratios paired round by round (each round's runs are back to back), so a
            # drift of the disk's fsync time between rounds cancels out.
            results[f"{name}_end_to_end_ratio"] = statistics.median(
                e2e / t for (t, _), e2e in zip(measured, limit_e2e, strict=True))
            # Flushes alone against the same writes made between the same appends (a
            # disk answers an fsync after idle time more slowly than back to back), and
            # against the bare back-to-back loop.
            results[f"{name}_durable_ratio"] = statistics.median(
                w / f for (_, f), w in zip(measured, limit_writes, strict=True))
            results[f"{name}_durable_vs_bare_ratio"] = statistics.median(
                bare / f for (_, f), bare in zip(measured, limit, strict=True))
        # SQLite against SQLite itself (issue 17, point 7), round by round: the same rows
        # into the reference's tables alone, and into the same schema with the search
        # index, which is what every flush of ours writes.
        flushes = [f for _, f in runs["sqlite"]]
        results["sqlite_plain_eps"] = n / statistics.median(sqlite_plain)
        results["sqlite_plain_indexed_eps"] = n / statistics.median(sqlite_plain_indexed)
        results["sqlite_lockstep_eps"] = n / statistics.median(f for f, _ in lockstep)
        results["sqlite_lockstep_plain_eps"] = n / statistics.median(p for _, p in lockstep)
        # The target's: our flushes and the plain transactions in lockstep, turn by turn;
        # and the durable runs against the plain loop back to back, round by round.
        results["sqlite_vs_plain_sqlite_ratio"] = statistics.median(p / f for f, p in lockstep)
        results["sqlite_vs_plain_sqlite_bare_ratio"] = statistics.median(
            p / f for f, p in zip(flushes, sqlite_plain_indexed, strict=True))
        results["sqlite_vs_plain_sqlite_no_index_ratio"] = statistics.median(
            p / f for f, p in zip(flushes, sqlite_plain, strict=True))
        results["write_fsync_limit_eps"] = n / statistics.median(limit)
        results["appends_write_fsync_limit_eps"] = n / statistics.median(limit_e2e)
        # The in-memory load of the same log (bench/run.py's load_ms).
        data = session.to_jsonl()
        registry = core_registry()

        def memory_load() -> Session:
            loaded = open_session(parse_log(data, registry), registry)
            loaded.derive_messages()
            return loaded

        results["memory_load_ms"] = median_ms(memory_load)
    results["extra_turn_flush_ms"] = _one_more_turn_ms(appends)
    return results


def _one_more_turn_ms(appends: list[Append]) -> float:
    """Append and flush one turn on a durable 100k-event session (JSONL)."""
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        durable_fill(tmp, appends)
        store = DurableStore(backend_for(tmp), create_plugin_manager(autoload=False))
        session = store.open("bench")
        t0 = time.perf_counter()
        for etype, data, kw in turn_appends(9999, session.seq):
            session.append(etype, data, **kw)
        store.flush(session)
        elapsed = (time.perf_counter() - t0) * 1000
        store.close()
        return elapsed


TARGETS: dict[str, Target] = {
    "jsonl_end_to_end_ratio": (">=", lambda r: r["jsonl_end_to_end_ratio"], 0.8),
    "sqlite_end_to_end_ratio": (">=", lambda r: r["sqlite_end_to_end_ratio"], 0.8),
    "jsonl_durable_ratio": (">=", lambda r: r["jsonl_durable_ratio"], 0.8),
    "sqlite_durable_ratio": (">=", lambda r: r["sqlite_durable_ratio"], 0.8),
    "sqlite_vs_plain_sqlite_ratio": (">=", lambda r: r["sqlite_vs_plain_sqlite_ratio"], 0.9),
    "jsonl_load_ms / memory_load_ms": (
        "<=", lambda r: r["jsonl_load_ms"] / r["memory_load_ms"], 1.5),
    "sqlite_load_ms / memory_load_ms": (
        "<=", lambda r: r["sqlite_load_ms"] / r["memory_load_ms"], 1.5),
}


def main() -> None:
    cli(__doc__ or "", run, TARGETS)


if __name__ == "__main__":
    main()
