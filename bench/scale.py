"""Benchmark of scale (issue 17): the same per-event cost as a session grows ten and
thirty times longer, and reads and listings that do not grow with the log or the store.

Two series, on JSONL, SQLite and (with ``--url`` or ``$DSH_SESSION_TEST_POSTGRESQL``)
PostgreSQL, the SQLite and PostgreSQL stores being copies of the JSONL one:

- **One long session**: the standard turn of bench/run.py repeated to 100,000 and
  1,000,000 events (3,000,000 with ``--big``). Per size: the bare append rate (while
  building it in memory), the cold load (a fresh store object opens it), the cold
  derive, the derive and the durable flush after one more turn (median of 5 turns),
  the memory the opened session holds (RSS of a fresh process, after minus before),
  the bytes on disk, the last 100 events (``store.tail``), a page of 100 from the
  middle (``store.read``), and a search for a word of the last turn.
- **Many sessions**: stores of 1,000 and 10,000 sessions (100,000 with ``--big``) of
  three turns each. Per size: ``dsh-session ls --limit 20`` (in-process), opening one
  session in a fresh store object, creating and flushing a new one, and a search.

Each figure is printed beside its ratio to the smallest size's, so growth reads
directly (10x the events should cost at most 10x: 10.5x is the target). The figures of
points 4, 5 and 7 of the issue (compact storage, the load and append limits, SQLite
against itself) come from bench/zstd.py, bench/run.py and bench/persistence.py, run in
the same process; ``--json`` prints one object whose ``targets`` maps every target to
``{"value": ..., "limit": ..., "op": "<=" or ">="}``::

    python bench/scale.py                 # 100k and 1M events; 1k and 10k sessions
    python bench/scale.py --big           # also 3M events and 100k sessions
    python bench/scale.py --json          # one JSON object
    python bench/scale.py --only sessions # one series (events, sessions or limits)

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import msgspec

from copies import every_backend
from dsh_session_core import Session, SessionHeader, open_store
from dsh_session_core._logformat.logfile import dump_log
from dsh_session_core._persistence.backends.jsonl.paths import log_path
from ls import _best_ms, _in_process
from run import fill, turn_appends, workload

SID = "long"
EVENT_SIZES = (100_032, 1_000_320)
BIG_EVENT_SIZES = (3_000_960,)
STORE_SIZES = (1_000, 10_000)
BIG_STORE_SIZES = (100_000,)
#: The word of every turn's answer, and one only the last turn's user message holds.
RARE = "zanzibar"

Results = dict[str, float]


def _clock() -> int:
    return 1_783_000_000_000


@contextlib.contextmanager
def _stores(jsonl: str, tmp: str, pg: str | None, database: str
            ) -> Iterator[dict[str, str]]:
    t0 = time.perf_counter()
    with every_backend(jsonl, tmp, pg, database) as urls:
        print(f"  copied to {', '.join(urls)} in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        yield urls


def _disk_bytes(name: str, url: str, pg: str | None) -> float:
    if name == "jsonl":
        return float(sum(os.path.getsize(os.path.join(d, f))
                         for d, _, fs in os.walk(url) for f in fs
                         if f.endswith((".jsonl", ".zst"))))
    if name == "sqlite":
        path = url.removeprefix("sqlite:///")
        return float(sum(os.path.getsize(p) for p in (path, path + "-wal")
                         if os.path.exists(p)))
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return float(row[0]) if row else 0.0


_RSS = """
import gc, sys
from dsh_session_core import open_store
def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS')) / 1024
store = open_store(sys.argv[1])
store.stored()
gc.collect(); before = rss()
s = store.open(sys.argv[2]); s.derive_messages(); gc.collect()
print(rss() - before)
"""


def _held_mb(url: str) -> float:
    """MB a fresh process holds once it has opened and derived the session."""
    out = subprocess.run([sys.executable, "-c", _RSS, url, SID], capture_output=True,
                         check=True)
    return float(out.stdout)


def _long_session(events: int) -> tuple[Session, float]:
    """The session of ``events`` standard events (its last turn holds :data:`RARE`), and
    the bare append rate met while building it."""
    appends = workload(-(-events // 48))[:events]
    last = appends[-48:]
    for i, (etype, data, kw) in enumerate(last):
        if etype == "user/message":
            data = {**data, "content": [{"type": "text", "text": f"{RARE} question"}]}
            last[i] = (etype, data, kw)
    session = Session(SID, clock=_clock)
    gc.collect()
    t0 = time.perf_counter()
    fill(session, appends)
    rate = len(appends) / (time.perf_counter() - t0)
    return session, rate


def _one_long(name: str, url: str, pg: str | None, repeat: int) -> Results:
    """Every figure of one backend's store holding the long session."""
    r: Results = {}
    loads, derives = [], []
    for _ in range(repeat):
        gc.collect()
        store = open_store(url)
        t0 = time.perf_counter()
        session = store.open(SID)
        t1 = time.perf_counter()
        session.derive_messages()
        t2 = time.perf_counter()
        loads.append((t1 - t0) * 1000)
        derives.append((t2 - t1) * 1000)
        store.close()
        del session, store
    r["cold_load_ms"] = min(loads)
    r["derive_cold_ms"] = min(derives)
    with open_store(url) as store:
        session = store.open(SID)
        session.derive_messages()
        flushes, derives = [], []
        for k in range(5):
            for etype, data, kw in turn_appends(10_000_000 + k, session.seq):
                session.append(etype, data, **kw)
            t0 = time.perf_counter()
            session.derive_messages()
            t1 = time.perf_counter()
            store.flush(session)
            t2 = time.perf_counter()
            derives.append((t1 - t0) * 1000)
            flushes.append((t2 - t1) * 1000)
        r["derive_after_turn_ms"] = statistics.median(derives)
        r["flush_after_turn_ms"] = statistics.median(flushes)
    with open_store(url) as store:
        middle = store.tail(SID, 1)[0].seq // 2
        r["tail100_ms"] = _best_ms(functools.partial(store.tail, SID, 100), 20)
        r["read100_middle_ms"] = _best_ms(
            functools.partial(store.read, SID, after=middle, limit=100), 20)
        r["search_rare_ms"] = _best_ms(functools.partial(store.search, RARE), 3)
    r["held_mb"] = _held_mb(url)
    r["disk_mb"] = _disk_bytes(name, url, pg) / 1e6
    return r


def long_sessions(sizes: tuple[int, ...], pg: str | None) -> dict[int, Results]:
    out: dict[int, Results] = {}
    for events in sizes:
        print(f"one session of {events:,} events", file=sys.stderr)
        session, rate = _long_session(events)
        r: Results = {"append_bare_eps": rate}
        with tempfile.TemporaryDirectory(prefix="dsh-scale-") as tmp:
            root = os.path.join(tmp, "jsonl")
            path = log_path(root, None, SID)
            os.makedirs(os.path.dirname(path))
            with open(path, "wb") as f:
                f.write(dump_log(session.header, list(session.events)))
            del session
            gc.collect()
            with _stores(root, tmp, pg, "dsh_bench_scale") as urls:
                for name, url in urls.items():
                    t0 = time.perf_counter()
                    figures = _one_long(name, url, pg, 3 if events < 500_000 else 2)
                    r.update({f"{name}_{k}": v for k, v in figures.items()})
                    print(f"  {name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        out[events] = r
    return out


#: Three turns of six events, as a store writes them; ``{t}`` is each event's time,
#: ``{w}`` a word of the session's own.
_TURN = (
    '{{"type":"turn/start","seq":{s0},"time":{t},"data":{{"turn":{n},"trigger":'
    '{{"kind":"message","source":{{"kind":"user"}}}}}}}}\n'
    '{{"type":"user/message","seq":{s1},"time":{t},"data":{{"content":[{{"type":"text",'
    '"text":"how is the weather {w}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}\n'
    '{{"type":"step/start","seq":{s2},"time":{t},"data":{{"turn":{n},"step":1}}}}\n'
    '{{"type":"assistant/message","seq":{s3},"time":{t},"data":{{"turn":{n},"step":1,'
    '"content":[{{"type":"text","text":"sunny in paris"}}]}},"surfaceOp":"append"}}\n'
    '{{"type":"step/end","seq":{s4},"time":{t},"data":{{"turn":{n},"step":1}}}}\n'
    '{{"type":"turn/end","seq":{s5},"time":{t},"data":{{"turn":{n},"reason":{{"kind":'
    '"completed"}}}}}}\n'
)


def _write_store(root: str, sessions: int) -> None:
    start = 1_767_225_600_000
    made: set[str] = set()
    for i in range(sessions):
        cwd = f"/home/user/project-{i % 50}"
        created = start + i * 60_000
        header = SessionHeader(version=0, id=f"s{i:06d}", created_at=created, cwd=cwd)
        path = log_path(root, cwd, header.id)
        folder = os.path.dirname(path)
        if folder not in made:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            made.add(folder)
        body = "".join(
            _TURN.format(n=n + 1, t=created + n * 1000, w=f"w{i}",
                         **{f"s{k}": n * 6 + k for k in range(6)})
            for n in range(3))
        with open(path, "wb") as f:
            f.write(dump_log(header, []) + body.encode())


def _one_store(url: str, sessions: int) -> Results:
    r: Results = {}
    r["ls_first_page_ms"] = _best_ms(_in_process("ls", "--store", url, "--limit", "20"), 5)
    middle = f"s{sessions // 2:06d}"

    def open_one() -> None:
        with open_store(url) as store:
            store.open(middle).derive_messages()

    r["open_one_ms"] = _best_ms(open_one, 5)
    counter = iter(range(1_000_000))

    def create_one() -> None:
        with open_store(url) as store:
            session = store.create(f"new-{next(counter)}", cwd="/home/user/new")
            fill(session, turn_appends(1, 0))
            store.flush(session)

    r["create_flush_ms"] = _best_ms(create_one, 5)
    with open_store(url) as store:
        store.search("paris", limit=1)  # catches an index up; not timed
        r["search_rare_ms"] = _best_ms(functools.partial(store.search, f"w{sessions // 2}"), 3)
        r["search_common_page_ms"] = _best_ms(
            functools.partial(store.search, "paris", limit=20), 3)
    return r


def many_sessions(sizes: tuple[int, ...], pg: str | None) -> dict[int, Results]:
    out: dict[int, Results] = {}
    for sessions in sizes:
        print(f"a store of {sessions:,} sessions", file=sys.stderr)
        r: Results = {}
        with tempfile.TemporaryDirectory(prefix="dsh-scale-") as tmp:
            root = os.path.join(tmp, "jsonl")
            _write_store(root, sessions)
            with _stores(root, tmp, pg, "dsh_bench_scale_store") as urls:
                for name, url in urls.items():
                    figures = _one_store(url, sessions)
                    r.update({f"{name}_{k}": v for k, v in figures.items()})
        out[sessions] = r
    return out


def limits() -> Results:
    """The figures of points 4, 5 and 7, from the benchmarks that own them."""
    import persistence
    import run
    import zstd

    r: Results = {}
    print("the in-memory limits (bench/run.py)", file=sys.stderr)
    r.update({f"run_{k}": v for k, v in run.run().items()})
    print("durable writes against their limits (bench/persistence.py)", file=sys.stderr)
    r.update({f"persistence_{k}": v for k, v in persistence.run(rounds=3).items()})
    print("compact storage (bench/zstd.py)", file=sys.stderr)
    r.update({f"zstd_{k}": v for k, v in zstd.run().items()})
    return r


Target = tuple[float, float, str]  # value, limit, op


def targets(events: dict[int, Results], stores: dict[int, Results], lim: Results,
            backends: list[str]) -> dict[str, Target]:
    t: dict[str, Target] = {}
    if len(events) >= 2:
        small, large = sorted(events)[:2]
        a, b = events[small], events[large]
        x = f"{large // small}x"
        for n in backends:  # point 2: linear growth, flat per-turn costs
            for fig in ("cold_load_ms", "held_mb", "derive_cold_ms"):
                t[f"{n}_{fig}_growth_{x}"] = (b[f"{n}_{fig}"] / a[f"{n}_{fig}"], 10.5, "<=")
            t[f"{n}_derive_after_turn_ms"] = (b[f"{n}_derive_after_turn_ms"], 0.05, "<=")
            t[f"{n}_flush_after_turn_ms"] = (b[f"{n}_flush_after_turn_ms"], 2.0, "<=")
        for n in backends:  # point 3: reads that do not grow with the log
            t[f"{n}_tail100_ms"] = (b[f"{n}_tail100_ms"], 5.0, "<=")
            t[f"{n}_read100_middle_ms"] = (b[f"{n}_read100_middle_ms"], 5.0, "<=")
    if lim:
        t["zstd_size_ratio"] = (lim["zstd_size_ratio"], 0.25, "<=")  # point 4
        t["zstd_load_ratio"] = (lim["zstd_load_ratio"], 1.3, "<=")
        t["load_vs_raw_decode"] = (lim["run_load_ms"] / lim["run_load_limit_ms"], 2.0, "<=")
        for n in ("jsonl", "sqlite"):  # point 5
            t[f"{n}_cold_vs_memory_load"] = (
                lim[f"persistence_{n}_load_ms"] / lim["persistence_memory_load_ms"], 1.2, "<=")
        t["append_bare_eps"] = (lim["run_append_bare_eps"], 800_000, ">=")
        t["append_store_vs_bare"] = (
            lim["run_append_store_eps"] / lim["run_append_bare_eps"], 0.9, ">=")
        t["sqlite_vs_plain_sqlite"] = (  # point 7
            lim["persistence_sqlite_vs_plain_sqlite_ratio"], 0.9, ">=")
        t["jsonl_durable_vs_write_fsync"] = (lim["persistence_jsonl_durable_ratio"], 0.8, ">=")
    return t


def _table(title: str, series: dict[int, Results]) -> None:
    if not series:
        return
    sizes = sorted(series)
    base = series[sizes[0]]
    names = list(base)
    width = max(map(len, names))
    print(f"{title:{width}} " + "".join(f"{s:>16,} {'ratio':>7}" for s in sizes))
    for name in names:
        cells = []
        for s in sizes:
            v = series[s].get(name, float("nan"))
            ratio = v / base[name] if base[name] else float("nan")
            cells.append(f"{v:16,.3f} {ratio:7.2f}")
        print(f"{name:{width}} " + "".join(cells))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--big", action="store_true",
                        help="also 3M events (about 2 more minutes) and 100k sessions "
                             "(about 15 more with PostgreSQL, most of it copying into it)")
    parser.add_argument("--only", choices=("events", "sessions", "limits"), action="append",
                        help="run only this series (may repeat)")
    parser.add_argument("--url", default=os.environ.get("DSH_SESSION_TEST_POSTGRESQL"),
                        help="a PostgreSQL server to measure too (a throwaway database "
                             "is made on it)")
    args = parser.parse_args()
    only = set(args.only or ("events", "sessions", "limits"))
    backends = ["jsonl", "sqlite", *(["postgresql"] if args.url else [])]
    t0 = time.perf_counter()
    events = long_sessions(EVENT_SIZES + (BIG_EVENT_SIZES if args.big else ()), args.url
                           ) if "events" in only else {}
    stores = many_sessions(STORE_SIZES + (BIG_STORE_SIZES if args.big else ()), args.url
                           ) if "sessions" in only else {}
    lim = limits() if "limits" in only else {}
    found = targets(events, stores, lim, backends)
    elapsed = time.perf_counter() - t0
    if args.json:
        doc: dict[str, Any] = {
            "seconds": elapsed,
            "events": {str(k): v for k, v in events.items()},
            "sessions": {str(k): v for k, v in stores.items()},
            "limits": lim,
            "targets": {k: {"value": v, "limit": lim_, "op": op}
                        for k, (v, lim_, op) in found.items()},
        }
        sys.stdout.buffer.write(msgspec.json.encode(doc) + b"\n")
        return
    _table("events in one session", events)
    _table("sessions in the store", stores)
    width = max(map(len, found), default=0)
    for name, (value, limit, op) in found.items():
        ok = value >= limit if op == ">=" else value <= limit
        print(f"{name:{width}} {value:14,.3f}  target {op} {limit:<10,} "
              f"{'ok' if ok else 'MISS'}")
    print(f"\n{elapsed:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
