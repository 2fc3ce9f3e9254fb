"""The JSONL backend's share of ``DshSession``'s default mode, measured synchronously
(issue 25, point 4): no event loop, no worker thread, so what is left is the store.

- ``calls``: ``--items`` items added 4 a call the way the default mode adds them (take
  the writer lock, ``store.open(id, resume=...)``, append, flush, release), calls a
  second and the median microseconds a call;
- ``lines_of_types``: the backend's read of the item view's lines from the log those
  calls wrote (what a cold ``get_items()`` reads), median milliseconds;
- ``reload``: a new store opened from the folder and ``get_items()`` of the whole list,
  median milliseconds (checked against the items added).

::

    python bench/jsonl_calls.py                 # 2,000 items
    python bench/jsonl_calls.py --items 20000 --profile

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from dsh_session_core import open_store
from dsh_session_openai_agents import DshSession
from dsh_session_openai_agents._session import _record
from openai_agents import conversation

VIEW_TYPES = ("agents/item", "agents/pop", "agents/clear")


def add_calls(folder: Path, items: list[Any], batch: int) -> list[float]:
    """Each call's seconds, adding ``items`` ``batch`` a call in the default mode."""
    session = DshSession("dsh", store=str(folder))
    times = []
    try:
        for i in range(0, len(items), batch):
            chunk = items[i:i + batch]
            t0 = time.perf_counter()
            session._run_once(lambda index, chunk=chunk: _record(index, chunk, None,
                                                                 session._runs), True)
            times.append(time.perf_counter() - t0)
    finally:
        session.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile of the calls (cumulative, top 40)")
    args = parser.parse_args()
    items = conversation(args.items)
    expected = msgspec.json.encode(items)
    folder = Path(tempfile.mkdtemp(prefix="bench-jsonl-calls-"))
    try:
        logs = folder / "logs"
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
        times = add_calls(logs, items, args.batch)
        if args.profile:
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(150)
        per_call = statistics.median(times) * 1e6
        print(f"calls of {args.batch}: {len(times) / sum(times):,.0f} calls/s, "
              f"{args.batch * len(times) / sum(times):,.0f} items/s, median "
              f"{per_call:,.0f} us a call")
        store = open_store(str(logs))
        try:
            backend = store.backend
            reads = []
            for _ in range(21):
                t0 = time.perf_counter()
                lines = backend.lines_of_types("dsh", VIEW_TYPES)
                reads.append(time.perf_counter() - t0)
            assert lines is not None
            size = sum(p.stat().st_size for p in logs.rglob("*.jsonl"))
            print(f"lines_of_types: {statistics.median(reads) * 1000:.2f} ms "
                  f"({len(lines):,} lines of a {size / 1e6:.2f} MB log)")
        finally:
            store.close()
        reloads = []
        for _ in range(11):
            t0 = time.perf_counter()
            session = DshSession("dsh", store=str(logs))
            got = asyncio.run(session.get_items())
            reloads.append(time.perf_counter() - t0)
            session.close()
            if msgspec.json.encode(got) != expected:
                raise RuntimeError("the reload did not give back the items added")
        print(f"reload (open_store + get_items): {statistics.median(reloads) * 1000:.2f} ms")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
