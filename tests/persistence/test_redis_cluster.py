"""The Redis backend on a Redis Cluster (three primaries, no replicas, every one with
``appendfsync always``, started by the testing kit): a URL naming any node finds the
cluster, a database number is refused, sessions spread over every primary are listed
(the index, a key of its own slot), URLs naming two nodes are one store, a slot moved
to another primary is followed, and a primary killed and restarted while a session of
its slots is written loses nothing a flush reported durable; a flush while it is down
fails with a clear error and is written once when flushed again.

The contract suite, the lease and fencing tests (test_redis_backend.py) and the killed
writers' suite (test_crash.py) run on the cluster too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster
from persist_support import ONE_TURN, TE, TS, meta

from dsh_session_core import core_registry, open_store
from dsh_session_core._persistence.backends.redis.backend import RedisBackend
from dsh_session_core._persistence.backends.redis.keys import SessionKeys
from dsh_session_core._persistence.backends.redis.nodes import moved
from dsh_session_core._persistence.store.coordinator import PersistencePlugin
from dsh_session_core._schema.decode import decode_wire
from dsh_session_core.errors import PersistenceError, StoreUrlError, StoreWriteError
from dsh_session_core.events import Event
from dsh_session_core.testing import run_cli
from dsh_session_core.testing.redis import RedisCluster, RedisServer


def _command(port: int, *args: object) -> Any:
    client: Any = redis.Redis(port=port)  # typed loosely
    try:
        return client.execute_command(*args)
    finally:
        client.close()


def _wait_for(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (a bound: 30 s)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)  # polling a condition (the cluster's state), not a race


def _prefix(url: str) -> str:
    return url.partition("prefix=")[2]


def _events(wires: list[dict[str, Any]]) -> list[Event]:
    return [decode_wire(core_registry(), w) for w in wires]


def _cluster_client(cluster: RedisCluster) -> Any:
    return redis.cluster.RedisCluster.from_url(cluster.url)


def _turn(session: Any, turn: int) -> None:
    session.append("turn/start", {"turn": turn, "trigger": {"kind": "message",
                                                            "source": {"kind": "user"}}})
    session.append("user/message", {"content": [{"type": "text", "text": f"q{turn}"}],
                                    "source": {"kind": "user"}}, surface_op="append")
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def test_a_url_naming_any_node_finds_the_cluster(redis_cluster: RedisCluster,
                                                 redis_cluster_url: str,
                                                 redis_url: str) -> None:
    prefix = _prefix(redis_cluster_url)
    batch = _events(ONE_TURN)
    for server in redis_cluster.servers:
        backend = RedisBackend(f"redis://127.0.0.1:{server.port}?prefix={prefix}")
        try:
            assert backend.cluster
            for sid in ("a", "b", "c"):  # whichever node holds them
                backend.append_batch(meta(f"{sid}{server.port}"), batch, b"", False)
        finally:
            backend.close()
    with open_store(f"redis://127.0.0.1:{redis_cluster.servers[1].port}?prefix={prefix}"
                    ) as store:
        assert len(store.stored()) == 3 * len(redis_cluster.servers)
    single = RedisBackend(redis_url)
    try:
        assert not single.cluster
    finally:
        single.close()


def test_urls_naming_two_nodes_of_a_cluster_are_one_store(redis_cluster: RedisCluster,
                                                          redis_cluster_url: str) -> None:
    from dsh_session_core._persistence.copy import same_store

    prefix = _prefix(redis_cluster_url)
    first, _, last = redis_cluster.servers
    a = RedisBackend(f"redis://127.0.0.1:{first.port}?prefix={prefix}")
    b = RedisBackend(f"redis://localhost:{last.port}/0?prefix={prefix}&lease=5")
    other = RedisBackend(f"redis://127.0.0.1:{first.port}?prefix=other-{prefix}")
    try:
        assert same_store(a, b)
        assert not same_store(a, other)
    finally:
        for backend in (a, b, other):
            backend.close()


def test_a_database_number_on_a_cluster_is_refused(redis_cluster_url: str) -> None:
    server, _, query = redis_cluster_url.partition("?")
    with pytest.raises(StoreUrlError, match=r"names database 3 of a Redis Cluster, which "
                                            r"has database 0 only") as refused:
        open_store(f"{server}/3?{query}")
    assert "?prefix=" in str(refused.value)  # says what to do instead
    code, _, err = run_cli("ls", "--store", f"{server}/3?{query}")
    assert code != 0
    assert "database 0 only" in err
    assert "Traceback" not in err
    client = redis.cluster.RedisCluster.from_url(server)
    try:
        assert list(client.scan_iter(match=_prefix(redis_cluster_url) + "*")) == []
    finally:
        client.close()
    with open_store(f"{server}/0?{query}") as store:  # database 0 is the cluster's
        s = store.create("zero", cwd="/w")
        _turn(s, 1)
        store.flush(s)
        assert [h.id for h in store.stored()] == ["zero"]


def test_sessions_spread_over_every_primary_are_listed(redis_cluster: RedisCluster,
                                                       redis_cluster_url: str) -> None:
    prefix = _prefix(redis_cluster_url)
    p = PersistencePlugin(RedisBackend(redis_cluster_url), core_registry())
    ids = [f"s{i:02}" for i in range(24)]
    try:
        # Created newest first (each with its createdAt): listed oldest first.
        for n, sid in enumerate(reversed(ids)):
            p.create(meta(sid, "/w", created_at=10_000 - n))
            p.append(sid, ONE_TURN if n % 2 else ONE_TURN[:2])
        holders = {redis_cluster.server_of(SessionKeys.of(prefix, sid).head).port
                   for sid in ids}
        assert holders == {s.port for s in redis_cluster.servers}
        assert [h.id for h in p.list()] == ids
        counts = {s.header.id: (s.events, s.turns) for s in p.backend.summaries()}
        assert counts == {sid: (6, 1) if n % 2 else (2, 1)
                          for n, sid in enumerate(reversed(ids))}
        for sid in ids[:5]:
            p.delete(sid)
        assert [h.id for h in p.list()] == ids[5:]
    finally:
        p.close()
    client = _cluster_client(redis_cluster)
    try:
        # The index: one key, in a slot of its own (no hash tag), an entry a session.
        assert client.zcard(prefix + "sessions") == len(ids) - 5
        assert "{" not in prefix + "sessions"
    finally:
        client.close()


def test_an_index_entry_with_no_session_is_left_out_of_listings(
    redis_cluster: RedisCluster, redis_cluster_url: str,
) -> None:
    """What a crash between a first append's index entry and its script leaves (or
    between ``rm``'s script and its index removal): listed by no one."""
    prefix = _prefix(redis_cluster_url)
    client = _cluster_client(redis_cluster)
    try:
        client.zadd(prefix + "sessions", {"ghost": 1})
    finally:
        client.close()
    with open_store(redis_cluster_url) as store:
        s = store.create("real", cwd="/w")
        _turn(s, 1)
        store.flush(s)
        assert [h.id for h in store.stored()] == ["real"]
    code, out, _ = run_cli("ls", "--store", redis_cluster_url)
    assert code == 0
    assert b"real" in out
    assert b"ghost" not in out


def test_a_refused_first_batch_takes_its_index_entry_back(redis_cluster: RedisCluster,
                                                          redis_cluster_url: str) -> None:
    backend = RedisBackend(redis_cluster_url)
    try:
        late = _events(ONE_TURN[2:])
        with pytest.raises(PersistenceError, match="ends at seq -1"):
            backend.append_batch(meta("late", "/w"), late, b"", materialized=False)
        assert backend.list() == []
    finally:
        backend.close()
    client = _cluster_client(redis_cluster)
    try:
        assert list(client.scan_iter(match=_prefix(redis_cluster_url) + "*")) == []
    finally:
        client.close()


def _session_server(cluster: RedisCluster, url: str, sid: str) -> RedisServer:
    return cluster.server_of(SessionKeys.of(_prefix(url), sid).log)


def test_a_flush_while_the_sessions_primary_is_down_fails_clearly_and_is_written_once(
    redis_cluster: RedisCluster, redis_cluster_url: str,
) -> None:
    server = _session_server(redis_cluster, redis_cluster_url, "down")
    with open_store(redis_cluster_url) as store:
        s = store.create("down", cwd="/w")
        _turn(s, 1)
        store.flush(s)
        server.kill()  # SIGKILL: what it acknowledged is on disk (appendfsync always)
        try:
            _turn(s, 2)
            with pytest.raises(StoreWriteError) as failed:
                store.flush(s)
            assert isinstance(failed.value, PersistenceError)
            message = str(failed.value)
            assert 'flushing session "down"' in message
            assert "Redis" in message
            assert "flushing again finds it stored and writes it once" in message
        finally:
            server.start()
            redis_cluster.wait_ok()
        store.flush(s)  # the buffered turn, written once
        written = [e.seq for e in s.events]
    with open_store(redis_cluster_url) as fresh:
        stored = fresh.read_session("down")
        assert [e.seq for e in stored.events] == written == list(range(6))


def test_a_primary_restarted_mid_run_loses_nothing_reported_durable(
    redis_cluster: RedisCluster, redis_cluster_url: str,
) -> None:
    """A writer flushes turn after turn while the primary of its session's slot is
    killed (SIGKILL, wherever its writes are) and started again: each flush either
    succeeds (redis-py's retries may bridge the restart) or fails with a
    :class:`StoreWriteError`, and every event a flush reported durable is there after,
    once, in order."""
    server = _session_server(redis_cluster, redis_cluster_url, "restarted")
    durable = [0]  # how many events the last successful flush made durable
    failures: list[BaseException] = []
    flushed = threading.Condition()
    stop = threading.Event()

    def writer() -> None:
        with open_store(redis_cluster_url) as store:
            s = store.create("restarted", cwd="/w")
            turn = 0
            while not stop.is_set():
                if len(s.events) == durable[0]:  # a failed flush's turn is still buffered
                    turn += 1
                    _turn(s, turn)
                try:
                    store.flush(s)
                except StoreWriteError as exc:
                    failures.append(exc)
                    continue
                with flushed:
                    durable[0] = len(s.events)
                    flushed.notify_all()

    def flushes(count: int) -> None:
        with flushed:
            start = durable[0]
            assert flushed.wait_for(lambda: durable[0] >= start + 3 * count, timeout=60)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        flushes(5)
        server.kill()
        server.start()
        redis_cluster.wait_ok()
        flushes(5)
    finally:
        stop.set()
        thread.join()
    assert all(isinstance(f, PersistenceError) for f in failures)
    with open_store(redis_cluster_url) as fresh:
        events = fresh.read_session("restarted").events
    assert len(events) >= durable[0] > 0
    assert [e.seq for e in events] == list(range(len(events)))
    turns = [e.data.turn for e in events if e.type == "turn/start"]
    assert turns == list(range(1, len(turns) + 1))


def test_a_batch_refused_on_a_cluster_is_not_an_unreachable_node(redis_cluster_url: str
                                                                 ) -> None:
    """A refusal (another writer's events) stays a refusal: only a node that cannot take
    the write becomes an OSError."""
    backend = RedisBackend(redis_cluster_url)
    try:
        h = meta("gap", "/w")
        backend.append_batch(h, _events([TS(0, 1), TE(1, 1)]), b"", materialized=False)
        with pytest.raises(PersistenceError, match="written by another writer") as refused:
            backend.append_batch(h, _events([TE(1, 1, time=99)]), b"", materialized=True)
        assert not isinstance(refused.value, OSError)
    finally:
        backend.close()


def _serves(port: int, key: str) -> bool:
    """Whether the node on ``port`` serves ``key``'s slot (no MOVED)."""
    client: Any = redis.Redis(port=port)
    try:
        client.exists(key)
        return True
    except redis.ResponseError as exc:  # MOVED (its own class on redis-py 8)
        if not moved(exc):
            raise
        return False
    finally:
        client.close()


def test_a_slot_moved_to_another_primary_is_followed(tmp_path: Path) -> None:
    """The session's (empty) slot moves to the other primary after the backend learned
    the slots: its lease, its appends and the listings find it there (each after a
    MOVED, once)."""
    with RedisCluster(tmp_path / "cluster", primaries=2) as cluster:
        url = f"{cluster.url}?prefix=m:"
        keys = SessionKeys.of("m:", "moved")
        source = cluster.server_of(keys.log)
        target = next(s for s in cluster.servers if s is not source)
        backend = RedisBackend(url)  # it knows the slots as they are now
        try:
            slot = int(_command(source.port, "CLUSTER", "KEYSLOT", keys.log))
            ident = _command(target.port, "CLUSTER", "MYID")
            for server in (target, source):  # an empty slot: given, then given up
                _command(server.port, "CLUSTER", "SETSLOT", slot, "NODE", ident)
            _wait_for(lambda: _serves(target.port, keys.log)
                      and not _serves(source.port, keys.log))
            lease = backend.acquire(meta("moved", "/w"))
            backend.append_batch(meta("moved", "/w"), _events(ONE_TURN), b"", False)
            assert _serves(target.port, keys.lease)
            assert _command(target.port, "EXISTS", keys.lease) == 1
            assert [h.id for h in backend.list()] == ["moved"]
            assert [s.events for s in backend.summaries()] == [6]
            lease.release()
        finally:
            backend.close()
