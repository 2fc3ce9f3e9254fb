"""Benchmark of a retention plan (``store.prune(RetentionPolicy(...), dry_run=True)``)
against its peers measured in the same run on the same store: listing the store
(``backend.summaries()``, what ``ls --sort activity`` reads) and the first form of prune
(``store.prune(timedelta, dry_run=True)``). The plan also measures each session (a
dry-run delete: the lock tested, the size read) and reads the retention ledger, so its
cost over the listing is what those add. Printed in milliseconds (the median of the
rounds) with the ratios::

    python bench/retention.py                      # 2,000 sessions, JSONL and SQLite
    python bench/retention.py --sessions 500 --rounds 3 --json

A benchmark, not a test: it asserts nothing and is never run by the test suite.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dsh_session_core import RetentionPolicy, create_plugin_manager, open_store
from dsh_session_core.testing import user_turn

T0 = 1_700_000_000_000
DAY = 86_400_000


def _fill(url: str, sessions: int) -> None:
    clock = {"now": T0}
    with open_store(url, plugin_manager=create_plugin_manager(autoload=False),
                    clock=lambda: clock["now"]) as store:
        for i in range(sessions):
            clock["now"] = T0 + (i % 90) * DAY
            s = store.create(f"s{i:06d}", cwd=f"/p/{i % 20}")
            for turn in (1, 2):
                user_turn(s, turn, f"question {turn} of session {i}")
            store.release(s)
        store.retain("s000001")


def _median_ms(run: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _measure(url: str, rounds: int) -> dict[str, float]:
    now = datetime.datetime(2024, 6, 1, tzinfo=datetime.UTC)
    policy = RetentionPolicy(older_than=datetime.timedelta(days=30), keep_latest=5,
                             per=("cwd",), max_total_bytes=1 << 20)
    with open_store(url, plugin_manager=create_plugin_manager(autoload=False)) as store:
        listing = _median_ms(store.backend.summaries, rounds)
        first = _median_ms(lambda: store.prune(datetime.timedelta(days=30), dry_run=True,
                                               now=now), rounds)
        plan = _median_ms(lambda: store.prune(policy, dry_run=True, now=now), rounds)
    return {"listing_ms": listing, "first_form_ms": first, "policy_plan_ms": plan,
            "plan_over_listing": plan / listing, "plan_over_first_form": plan / first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, url in (("jsonl", str(Path(tmp) / "jsonl")),
                          ("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}")):
            _fill(url, args.sessions)
            results[kind] = _measure(url, args.rounds)
    if args.json:
        print(json.dumps({"sessions": args.sessions, "rounds": args.rounds, **results}))
        return
    print(f"{args.sessions:,} sessions, median of {args.rounds} rounds")
    print(f"{'store':8} {'listing':>10} {'first form':>11} {'policy plan':>12} "
          f"{'plan/listing':>13} {'plan/first':>11}")
    for kind, r in results.items():
        print(f"{kind:8} {r['listing_ms']:>8.1f}ms {r['first_form_ms']:>9.1f}ms "
              f"{r['policy_plan_ms']:>10.1f}ms {r['plan_over_listing']:>12.2f}x "
              f"{r['plan_over_first_form']:>10.2f}x")


if __name__ == "__main__":
    main()
