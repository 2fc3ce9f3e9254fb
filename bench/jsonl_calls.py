"""The JSONL backend's share of ``DshSession``'s default mode, measured synchronously
(issue 25, point 4): the store's calls alone first, then the adapter's on one loop.

- ``store calls``: a session taken back and released the way the default mode does it
  (``store.open(id, resume=...)``: the writer lock and ``lines_since``; a turn of a user
  message and an answer in one step; ``store.release``: the write, its fsync, the lock
  released), synchronously, through the core's API alone: calls a second and the median
  microseconds a call (``--items / --batch`` calls);
- ``add_items``: ``--items`` items added 4 a call through ``DshSession.add_items`` in
  the default mode, on one event loop, items a second;
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
from dsh_session_core._persistence.capabilities import lines_of_types_of
from dsh_session_openai_agents import DshSession
from openai_agents import conversation

VIEW_TYPES = ("agents/item", "agents/pop", "agents/clear")


def store_calls(folder: Path, calls: int) -> list[float]:
    """Each call's seconds: the session taken back, a turn written, released."""
    times = []
    with open_store(str(folder)) as store:
        session = store.create("turns")
        with session.turn() as turn:
            turn.user("the first question")
        store.release(session)
        for i in range(calls):
            t0 = time.perf_counter()
            session = store.open("turns", resume=session)
            with session.turn() as turn:
                turn.user(f"question {i}")
                with turn.step() as step:
                    step.assistant(f"answer {i}")
            store.release(session)
            times.append(time.perf_counter() - t0)
    return times


def add_items(folder: Path, items: list[Any], batch: int) -> float:
    """Items a second through ``add_items``, ``batch`` a call, in the default mode."""
    session = DshSession("dsh", store=str(folder))

    async def run() -> float:
        t0 = time.perf_counter()
        for i in range(0, len(items), batch):
            await session.add_items(items[i:i + batch])
        return len(items) / (time.perf_counter() - t0)

    try:
        return asyncio.run(run())
    finally:
        session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile of the store calls (cumulative, top 40)")
    args = parser.parse_args()
    items = conversation(args.items)
    expected = msgspec.json.encode(items)
    folder = Path(tempfile.mkdtemp(prefix="bench-jsonl-calls-"))
    try:
        logs = folder / "logs"
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
        times = store_calls(folder / "turns", args.items // args.batch)
        if args.profile:
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
        print(f"store calls: {len(times) / sum(times):,.0f} calls/s, median "
              f"{statistics.median(times) * 1e6:,.0f} us a call")
        rate = add_items(logs, items, args.batch)
        print(f"add_items of {args.batch} (default mode): {rate:,.0f} items/s")
        store = open_store(str(logs))
        try:
            reads = []
            for _ in range(21):
                t0 = time.perf_counter()
                lines = lines_of_types_of(store.backend, "dsh", VIEW_TYPES)
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
                msg = "the reload did not give back the items added"
                raise RuntimeError(msg)
        print(f"reload (open_store + get_items): {statistics.median(reloads) * 1000:.2f} ms")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
