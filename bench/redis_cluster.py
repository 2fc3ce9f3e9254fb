"""The Redis backend on a Redis Cluster (``python bench/redis_backend.py --cluster``):
appends and a cold load on a three-primary cluster against one server, and what a
listing costs, by the index the backend reads and by the scan of every primary it
does not do.

- **Appends, cold load**: bench/redis_backend.py's (the standard workload, a flush a
  turn), on a cluster of three primaries (no replicas) and on one server, every node
  with ``appendonly yes`` and ``appendfsync always``.
- **Listing**: ``--sessions`` sessions (a turn each), spread over the primaries by their
  hash tags. ``index``: the backend's ``list()`` (one ``ZRANGE`` of ``P:sessions``, a
  key of its own slot, then each header, in a pipeline a node) and ``summaries()``
  (what ``ls`` shows: a script a session, a pipeline a node). ``scan``: the
  alternative, a ``SCAN`` of every primary for the sessions' heads, then the same
  headers, sorted by ``createdAt``; measured on a keyspace of the sessions alone, then
  with ``--foreign`` keys of another application beside them (a scan reads every key;
  the index, none of them). ``ids``: finding the sessions alone (the ``ZRANGE``, or
  the scan), without their headers.

Best of ``--repeat`` runs; milliseconds. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis as redis_py
import redis.cluster

from dsh_session_core._logformat.logfile import parse_header
from dsh_session_core._persistence.backends.redis.backend import RedisBackend
from dsh_session_core.testing import one_turn_log, session_header
from dsh_session_core.testing.redis import RedisCluster, RedisServer


def _best_ms(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return round(best * 1000, 1)


def _fill(url: str, sessions: int) -> None:
    """``sessions`` sessions of one turn each, created in an order of their own."""
    from dsh_session_core import core_registry
    from dsh_session_core._schema.decode import decode_wire

    events = [decode_wire(core_registry(), w) for w in one_turn_log()]
    backend = RedisBackend(url)
    try:
        for n in range(sessions):
            header = session_header(f"s{n:06}", "/bench", created_at=1_000_000 - n)
            backend.append_batch(header, events, b"", materialized=False)
    finally:
        backend.close()


def _scan_heads(client: Any, prefix: str) -> list[bytes]:
    """Every session's head key, found by scanning every primary for ``P{*}:head``."""
    return [key for node in client.get_primaries()
            for key in client.get_redis_connection(node).scan_iter(
                match=f"{prefix}{{*}}:head", count=1000, _type="HASH")]


def _scan_listing(client: Any, prefix: str) -> list[Any]:
    """Every session's header found by scanning every primary, oldest first."""
    heads = _scan_heads(client, prefix)
    pipe = client.pipeline(transaction=False)
    for key in heads:
        pipe.hget(key, "h")
    found = [parse_header(h) for h in pipe.execute() if h is not None]
    return sorted(found, key=lambda h: h.created_at)


def _foreign(client: Any, count: int) -> None:
    """``count`` keys of another application (strings, spread over the slots)."""
    for at in range(0, count, 1000):
        pipe = client.pipeline(transaction=False)
        for n in range(at, min(at + 1000, count)):
            pipe.set(f"other:{n}", b"x")
        pipe.execute()


def cluster_figures(turns: int, sessions: int, foreign: int, repeat: int,
                    append_and_load: Callable[[str, int], tuple[float, float, int]]
                    ) -> dict[str, Any]:
    """The figures of the module's docstring."""
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder, \
            RedisCluster(Path(folder) / "cluster") as cluster, \
            RedisServer(Path(folder) / "server", durable=True) as server:
        raw = redis_py.Redis(port=cluster.servers[0].port)
        config = raw.config_get("append*")
        raw.close()
        figures["redis_fsync"] = (f"appendonly {config['appendonly']}, appendfsync "
                                  f"{config['appendfsync']} (every node)")
        urls = {"cluster": cluster.url, "server": server.url}
        for name, url in urls.items():
            runs = [append_and_load(f"{url}?prefix=bench:", turns) for _ in range(repeat)]
            figures[f"{name}_append_events_per_s"] = round(max(r[0] for r in runs))
            figures[f"{name}_cold_load_ms"] = round(min(r[1] for r in runs), 1)
        for name, url in urls.items():
            store = f"{url}?prefix=ls:"
            _fill(store, sessions)
            backend = RedisBackend(store)
            try:
                assert len(backend.list()) == sessions
                figures[f"{name}_list_{sessions}_ms"] = _best_ms(backend.list, repeat)
                figures[f"{name}_summaries_{sessions}_ms"] = _best_ms(backend.summaries,
                                                                     repeat)
            finally:
                backend.close()
        client: Any = redis.cluster.RedisCluster.from_url(cluster.url)  # typed loosely
        try:
            assert len(_scan_listing(client, "ls:")) == sessions
            keys = sum(int(client.get_redis_connection(n).dbsize())
                       for n in client.get_primaries())
            figures["cluster_keys"] = keys
            figures[f"cluster_index_ids_{sessions}_ms"] = _best_ms(
                lambda: client.zrange("ls:sessions", 0, -1), repeat)
            figures[f"cluster_scan_ids_{sessions}_ms"] = _best_ms(
                lambda: _scan_heads(client, "ls:"), repeat)
            figures[f"cluster_scan_list_{sessions}_ms"] = _best_ms(
                lambda: _scan_listing(client, "ls:"), repeat)
            _foreign(client, foreign)
            figures["cluster_keys_with_foreign"] = keys + foreign
            backend = RedisBackend(f"{cluster.url}?prefix=ls:")
            figures[f"cluster_list_{sessions}_with_foreign_ms"] = _best_ms(backend.list,
                                                                          repeat)
            figures[f"cluster_scan_ids_{sessions}_with_foreign_ms"] = _best_ms(
                lambda: _scan_heads(client, "ls:"), repeat)
            figures[f"cluster_scan_list_{sessions}_with_foreign_ms"] = _best_ms(
                lambda: _scan_listing(client, "ls:"), repeat)
            backend.close()
        finally:
            client.close()
    return figures
