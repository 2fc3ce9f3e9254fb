"""Benchmark of the Redis backend, in one run: the standard workload's durable appends
and its cold load on Redis against the SQLite and PostgreSQL backends, and the OpenAI
Agents workload against the SDK's own ``RedisSession`` on the same server.

- **Appends**: the standard workload (bench/run.py: 48 events a turn), one flush per
  turn, end to end, in events per second; each store fresh.
- **Cold load**: ``open_store(url).read_session(id)`` of what the appends wrote, in ms.
- **The Agents workload** (bench/openai_agents.py's conversation, four items a turn):
  ``add_items`` once a turn, and a fresh instance's ``get_items()``, for the default
  ``DshSession`` on the Redis store (the store kept open) and for
  ``agents.extensions.memory.RedisSession``, on the same server, with the same redis-py
  reply parser (printed). Targets: >= 1x the SDK's adds, >= 2x its reloads.

The Redis server is a throwaway one on a free port (the testing kit's ``RedisServer``),
with ``appendonly yes`` and ``appendfsync always`` (printed), so an acknowledged write is
on disk, as SQLite's and PostgreSQL's commits are. PostgreSQL runs when
``$DSH_SESSION_TEST_POSTGRESQL`` names a server whose role creates databases. Each
figure is the best of ``--repeat`` runs::

    python bench/redis_backend.py              # a table
    python bench/redis_backend.py --json       # one JSON object
    python bench/redis_backend.py --cluster    # on a Redis Cluster instead (redis_cluster.py)

(Not ``bench/redis.py``: this folder is on the path of the benchmarks, of mypy and of
ruff, where a module named ``redis`` would stand for the client.)

A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis as redis_py

from dsh_session_core import open_store
from dsh_session_core.testing.redis import RedisServer
from run import fill, workload


def append_and_load(url: str, turns: int) -> tuple[float, float, int]:
    """(events/s of the durable appends, cold load ms, events) on a fresh store."""
    appends = workload(turns)
    per_turn = len(appends) // turns
    sid = f"bench-{uuid.uuid4().hex[:8]}"
    with open_store(url) as store:
        s = store.create(sid)
        start = time.perf_counter()
        for t in range(turns):
            fill(s, appends[t * per_turn:(t + 1) * per_turn])
            store.flush(s)
        took = time.perf_counter() - start
    start = time.perf_counter()
    with open_store(url) as store:
        loaded = store.read_session(sid)
    load_ms = (time.perf_counter() - start) * 1000
    return len(appends) / took, load_ms, len(loaded.events)


async def agents_side(make: Any, items: list[Any]) -> tuple[float, float]:
    """(items/s added a turn at a time, reload ms) for one session class."""
    sid = f"agents-{uuid.uuid4().hex[:8]}"
    session = make(sid)
    start = time.perf_counter()
    for at in range(0, len(items), 4):
        await session.add_items(items[at:at + 4])
    added = len(items) / (time.perf_counter() - start)
    await _close(session)
    fresh = make(sid)
    start = time.perf_counter()
    got = await fresh.get_items()
    reload_ms = (time.perf_counter() - start) * 1000
    assert len(got) == len(items)
    await _close(fresh)
    return added, reload_ms


async def _close(session: Any) -> None:
    close = getattr(session, "close", None)
    if close is not None:
        result = close()
        if asyncio.iscoroutine(result):
            await result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cluster", action="store_true",
                        help="appends, loads and listings on a Redis Cluster instead")
    parser.add_argument("--sessions", type=int, default=10_000,
                        help="sessions a --cluster listing lists")
    parser.add_argument("--foreign", type=int, default=200_000,
                        help="keys of another application beside them (--cluster)")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    if args.cluster:
        from redis_cluster import cluster_figures

        figures = cluster_figures(args.turns, args.sessions, args.foreign, args.repeat,
                                  append_and_load)
    else:
        agents_figures(args, figures)
    if args.json:
        print(json.dumps(figures))
        return
    for name, value in figures.items():
        print(f"{name:40} {value}")
    if not args.cluster:
        print(f"{'targets':40} adds >= 1x the SDK's RedisSession, reloads >= 2x")


def agents_figures(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """The figures of a server: appends, loads, and the Agents workload."""
    with tempfile.TemporaryDirectory() as folder, \
            RedisServer(Path(folder) / "redis", durable=True) as server:
        raw = redis_py.Redis(port=server.port)
        config = raw.config_get("append*")
        figures["redis_fsync"] = (f"appendonly {config['appendonly']}, appendfsync "
                                  f"{config['appendfsync']}")
        # Both sides use redis-py, with the parser it picks (hiredis when installed:
        # core's redis extra brings it).
        figures["redis_py_parser"] = ("hiredis" if redis_py.utils.HIREDIS_AVAILABLE
                                      else "python")
        raw.close()
        stores = {"redis": server.url + "?prefix=bench:",
                  "sqlite": f"sqlite:///{folder}/bench.db"}
        pg = os.environ.get("DSH_SESSION_TEST_POSTGRESQL")
        if pg:
            stores["postgresql"] = pg
        for name, url in stores.items():
            runs = [append_and_load(url, args.turns) for _ in range(args.repeat)]
            figures[f"{name}_append_events_per_s"] = round(max(r[0] for r in runs))
            figures[f"{name}_cold_load_ms"] = round(min(r[1] for r in runs), 1)
        from agents.extensions.memory.redis_session import RedisSession

        from dsh_session_openai_agents import DshSession
        from openai_agents import conversation

        items = conversation(args.items)
        store_url = server.url + "?prefix=agents:"
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        with open_store(store_url) as store:
            for _ in range(args.repeat):  # the sides alternate, round by round
                ours.append(asyncio.run(agents_side(
                    lambda sid: DshSession(sid, store=store), items)))
                theirs.append(asyncio.run(agents_side(
                    lambda sid: RedisSession.from_url(sid, url=server.url), items)))
        figures["agents_dsh_add_items_per_s"] = round(max(r[0] for r in ours))
        figures["agents_sdk_add_items_per_s"] = round(max(r[0] for r in theirs))
        figures["agents_dsh_reload_ms"] = round(min(r[1] for r in ours), 1)
        figures["agents_sdk_reload_ms"] = round(min(r[1] for r in theirs), 1)
        figures["agents_add_ratio"] = round(figures["agents_dsh_add_items_per_s"]
                                            / figures["agents_sdk_add_items_per_s"], 2)
        figures["agents_reload_ratio"] = round(figures["agents_sdk_reload_ms"]
                                               / figures["agents_dsh_reload_ms"], 2)


if __name__ == "__main__":
    main()
