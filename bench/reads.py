"""Benchmark of reads that return part of a session (issue 17, point 3): ``store.tail(id,
100)`` and ``store.read(id, after=seq, limit=100)`` on a session of 1,000,000 events (the
standard workload of bench/run.py, ten times over), in a JSONL store, a SQLite store and,
with ``--url`` or ``$DSH_SESSION_TEST_POSTGRESQL``, a PostgreSQL store. Each figure is
the best of 20 calls on a warm store; the store's full load of the same session is timed
once beside them, so the ratio shows the reads do not grow with the log.

Target: the last 100 events (and a page of 100 from the middle) in at most 5 ms::

    python bench/reads.py            # a table with the targets
    python bench/reads.py --json     # one JSON object
    python bench/reads.py --events 200000   # another size

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from pathlib import Path

from copies import every_backend
from dsh_session_core import Session, open_store
from dsh_session_core._logformat.logfile import dump_log
from dsh_session_core._persistence.backends.jsonl.paths import log_path
from ls import _best_ms
from run import Target, cli, fill, workload

EVENTS = 1_000_000
SID = "long"


def _option(name: str, default: str | None) -> str | None:
    if name in sys.argv:
        i = sys.argv.index(name)
        value = sys.argv[i + 1]
        del sys.argv[i:i + 2]
        return value
    return default


def _session(events: int) -> Session:
    appends = workload()
    s = Session(SID)
    while len(s.events) < events:
        fill(s, appends)
    return s


def run(events: int, pg: str | None) -> dict[str, float]:
    results: dict[str, float] = {}
    s = _session(events)
    results["events"] = len(s.events)
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "jsonl")
        path = Path(log_path(root, None, SID))
        path.parent.mkdir(parents=True)
        path.write_bytes(dump_log(s.header, list(s.events)))
        with every_backend(root, tmp, pg, "dsh_bench_reads") as urls:
            for name, url in urls.items():
                with open_store(url) as store:
                    middle = len(s.events) // 2
                    results[f"{name}_tail100_ms"] = _best_ms(
                        functools.partial(store.tail, SID, 100), 20)
                    results[f"{name}_read100_middle_ms"] = _best_ms(
                        functools.partial(store.read, SID, after=middle, limit=100), 20)
                    t0 = time.perf_counter()
                    store.backend.load_stored(SID, store.registry)
                    results[f"{name}_full_load_ms"] = (time.perf_counter() - t0) * 1000
    return results


def _targets(names: list[str]) -> dict[str, Target]:
    targets: dict[str, Target] = {}
    for name in names:
        for read in ("tail100", "read100_middle"):
            key = f"{name}_{read}_ms"
            targets[key] = ("<=", lambda r, k=key: r[k], 5)  # type: ignore[misc]
    return targets


def main() -> None:
    events = int(_option("--events", str(EVENTS)) or EVENTS)
    pg = _option("--url", os.environ.get("DSH_SESSION_TEST_POSTGRESQL"))
    names = ["jsonl", "sqlite", *(["postgresql"] if pg else [])]
    cli(__doc__ or "", lambda: run(events, pg), _targets(names))


if __name__ == "__main__":
    main()
