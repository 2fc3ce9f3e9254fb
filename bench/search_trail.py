"""Benchmark of the search index trailing the commit (issue 39): a small flush without
its index entries, and what the first search after it pays to catch them up.

Two stores of each kind, the same in all but one thing: in one, every batch writes its
index entries in its own transaction (a trail bound of 0: the behaviour before issue
39, the "at write" figures); in the other, a small batch leaves them for the next search
to write (``sql/trail.py``'s bound, the default: the "trailing" figures).

- **The small flush**: each round appends one small turn (turn/start, the user's
  message, a step with the assistant's answer, turn/end: 6 events) to a session of each
  store and times its flush (``store.flush``), the two stores' order alternating from
  round to round. The median of each store's flushes, and their mean: the mean of the
  trailing store's includes the flushes that reach the bound and catch every session
  up. On SQLite files (WAL, ``synchronous=FULL``: each commit synced), in-memory SQLite
  databases (no I/O), and PostgreSQL (each commit synced by the server, as it is
  configured: its ``fsync`` and ``synchronous_commit`` are printed); then on SQLite
  files and PostgreSQL again with commits that do not wait for the disk (the
  ``unsynced`` figures): on a busy disk the sync's jitter is larger than the index's
  share of a flush, which these show.
- **The first search after N small flushes**: each round writes N flushes of 6 events
  to a new session of each store, alternating, then times one search in each (a word
  of that round's session alone): in the trailing store, the search first indexes the
  6N events the flushes left. Medians over the rounds; then the mean cost of one flush
  with its share of that catch-up (the N flushes and the search, over N).

::

    python bench/search_trail.py               # a table
    python bench/search_trail.py --json        # one JSON object
    python bench/search_trail.py --url postgresql://USER@HOST:PORT/postgres

The PostgreSQL server is ``--url``, else ``$DSH_SESSION_TEST_POSTGRESQL``, else a
throwaway one (bench/postgres.py's); every database the run makes is dropped after it.
A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dsh_session_core import DurableStore, Session, create_plugin_manager, open_store
from dsh_session_core._persistence.backends.sql.trail import TRAIL_LIMIT, Trail
from dsh_session_core.testing import assistant, step_end, step_start, turn_end, turn_start, user

#: Flush rounds timed, after the warm-up ones (600 flushes of 6 events: the trailing
#: store reaches its bound fourteen times, at 256 events).
ROUNDS = 600
WARM_UP = 40
#: The N of "the first search after N small flushes", and the rounds of each.
AFTER = (1, 10, TRAIL_LIMIT // 6)
SEARCH_ROUNDS = 15

STORES = ("at_write", "trailing")


def _turn(session: Session, turn: int, word: str = "") -> None:
    turn_start(session, turn)
    user(session, f"question {turn} {word}: what does the log say about this?")
    step_start(session, turn, 1)
    assistant(session, turn, 1, f"answer {turn}: it says what it said, every word of it.")
    step_end(session, turn, 1)
    turn_end(session, turn)


@contextlib.contextmanager
def _pair(urls: tuple[str, str]) -> Iterator[dict[str, DurableStore]]:
    """The two stores: ``at_write`` (a trail bound of 0), ``trailing`` (the default)."""
    with contextlib.ExitStack() as stack:
        stores = {name: stack.enter_context(open_store(
            url, plugin_manager=create_plugin_manager(autoload=False)))
            for name, url in zip(STORES, urls, strict=True)}
        stores["at_write"].backend._trail = Trail(0)  # type: ignore[attr-defined]
        yield stores


def _flushes(urls: tuple[str, str], unsynced: bool = False) -> dict[str, float]:
    """Median and mean flush of each store (ms), and the trailing store's longest;
    ``unsynced``: with commits that do not wait for the disk (SQLite's WAL at
    ``synchronous=NORMAL``, PostgreSQL's ``synchronous_commit=off`` on the writers'
    connections), what the index adds besides the sync, which on a busy disk varies
    more than it."""
    times: dict[str, list[float]] = {name: [] for name in STORES}
    with _pair(urls) as stores:
        sessions = {name: store.create() for name, store in stores.items()}
        if unsynced:
            for name, store in stores.items():
                backend: Any = store.backend
                if hasattr(backend, "_leases"):
                    backend._leases[sessions[name].id].conn.execute(
                        "SET synchronous_commit = off")
                else:
                    with backend._lock:
                        backend._conn.execute("PRAGMA synchronous = NORMAL")
        for turn in range(1, WARM_UP + ROUNDS + 1):
            for name in STORES if turn % 2 else STORES[::-1]:
                _turn(sessions[name], turn)
                start = time.perf_counter_ns()
                stores[name].flush(sessions[name])
                if turn > WARM_UP:
                    times[name].append((time.perf_counter_ns() - start) / 1e6)
        for name, store in stores.items():
            store.release(sessions[name])
    out: dict[str, float] = {}
    for name in STORES:
        out[f"{name}_median_ms"] = statistics.median(times[name])
        out[f"{name}_mean_ms"] = statistics.mean(times[name])
    out["trailing_longest_ms"] = max(times["trailing"])
    return out


def _searches(urls: tuple[str, str]) -> dict[str, float]:
    """For each N of :data:`AFTER`: the median first search after N small flushes in
    each store (ms), the trailing store's second search, and each store's mean cost of
    a flush with its share of the search."""
    out: dict[str, float] = {}
    with _pair(urls) as stores:
        serial = 0
        for n in AFTER:
            first: dict[str, list[float]] = {name: [] for name in STORES}
            again: list[float] = []
            total: dict[str, list[float]] = {name: [] for name in STORES}
            for rnd in range(SEARCH_ROUNDS):
                serial += 1
                word = f"w{serial:06d}"
                order = STORES if rnd % 2 else STORES[::-1]
                spent = dict.fromkeys(STORES, 0.0)
                sessions = {name: stores[name].create() for name in STORES}
                for turn in range(1, n + 1):
                    for name in order:
                        _turn(sessions[name], turn, word)
                        start = time.perf_counter_ns()
                        stores[name].flush(sessions[name])
                        spent[name] += (time.perf_counter_ns() - start) / 1e6
                for name in order:
                    start = time.perf_counter_ns()
                    hits = stores[name].search(word)
                    ms = (time.perf_counter_ns() - start) / 1e6
                    assert len(hits) == n, (name, len(hits), n)
                    first[name].append(ms)
                    total[name].append((spent[name] + ms) / n)
                start = time.perf_counter_ns()
                stores["trailing"].search(word)
                again.append((time.perf_counter_ns() - start) / 1e6)
                for name in STORES:
                    stores[name].release(sessions[name])
            for name in STORES:
                out[f"after_{n}_{name}_first_search_ms"] = statistics.median(first[name])
            out[f"after_{n}_trailing_second_search_ms"] = statistics.median(again)
            for name in STORES:
                out[f"after_{n}_{name}_flush_and_share_ms"] = statistics.median(total[name])
    return out


def _postgres(admin: str | None) -> tuple[dict[str, float], str]:
    from postgres import Databases, server

    with server(admin) as url:
        databases = Databases(url)
        try:
            with databases.fresh() as a, databases.fresh() as b:
                flushes = _flushes((a, b))
            with databases.fresh() as a, databases.fresh() as b:
                unsynced = {f"unsynced_{name}": value
                            for name, value in _flushes((a, b), unsynced=True).items()}
            with databases.fresh() as a, databases.fresh() as b:
                searches = _searches((a, b))
            row = databases.admin.execute("SELECT current_setting('fsync'),"
                                          " current_setting('synchronous_commit')").fetchone()
        finally:
            databases.close()
    assert row is not None
    policy = f"server fsync={row[0]}, synchronous_commit={row[1]}"
    return {**flushes, **unsynced, **searches}, policy


def run(admin: str | None) -> tuple[dict[str, float], dict[str, str]]:
    results: dict[str, float] = {}
    fsync: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-trail-") as folder:
        memory = ("sqlite:///:memory:", "sqlite:///:memory:")
        kinds = {
            "sqlite_file": ([(f"sqlite:///{folder}/{tag}-a.db", f"sqlite:///{folder}/{tag}-b.db")
                             for tag in ("flush", "search")],
                            "WAL, synchronous=FULL: each commit synced"),
            "sqlite_memory": ([memory, memory], "none (in-memory database)"),
        }
        for kind, ((flush_urls, search_urls), policy) in kinds.items():
            for name, value in {**_flushes(flush_urls), **_searches(search_urls)}.items():
                results[f"{kind}_{name}"] = value
                fsync[f"{kind}_{name}"] = policy
        unsynced = (f"sqlite:///{folder}/unsynced-a.db", f"sqlite:///{folder}/unsynced-b.db")
        for name, value in _flushes(unsynced, unsynced=True).items():
            results[f"sqlite_file_unsynced_{name}"] = value
            fsync[f"sqlite_file_unsynced_{name}"] = "WAL, synchronous=NORMAL: no sync at commit"
    figures, policy = _postgres(admin)
    for name, value in figures.items():
        results[f"postgresql_{name}"] = value
        fsync[f"postgresql_{name}"] = (
            "synchronous_commit=off on the writers' connections: no wait for the disk"
            if name.startswith("unsynced_") else policy)
    return results, fsync


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--url", help="the PostgreSQL admin URL (see above)")
    args = parser.parse_args()
    results, fsync = run(args.url)
    if args.json:
        sys.stdout.buffer.write(msgspec.json.encode({**results, "fsync": fsync}) + b"\n")
        return
    width = max(map(len, results))
    print(f"trail bound: {TRAIL_LIMIT} events; flush rounds: {ROUNDS}; "
          f"search rounds: {SEARCH_ROUNDS}")
    for name, value in results.items():
        print(f"{name:{width}} {value:10,.3f}  fsync: {fsync[name]}")


if __name__ == "__main__":
    main()
