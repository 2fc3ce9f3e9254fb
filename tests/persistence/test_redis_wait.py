"""A Redis store with replicas: the URL's ``wait=N`` makes a flush return only once N
replicas have its batch (``WAIT``, on the batch's connection), and fail clearly
(:class:`StoreWriteError`, the batch kept buffered) when they do not within
``wait_timeout``; flushing again writes it once. On a server with a replica, and on a
Redis Cluster whose primary has one (where ``WAIT`` goes to the session's primary, and
to the index's for a session's first flush)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster

from dsh_session_core import open_store
from dsh_session_core._persistence.backends.redis.keys import SessionKeys
from dsh_session_core.errors import StoreWriteError
from dsh_session_core.testing.redis import RedisCluster, RedisServer, wait_replicating


def _turn(session: Any, turn: int) -> None:
    session.append("turn/start", {"turn": turn, "trigger": {"kind": "message",
                                                            "source": {"kind": "user"}}})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _on_replica(replica: RedisServer, sid: str) -> int:
    """How many events of ``sid`` the replica has (read from it, not its primary)."""
    client: Any = redis.Redis(port=replica.port)
    with contextlib.suppress(redis.ResponseError):  # not a cluster's node
        client.execute_command("READONLY")  # a cluster's replica answers for its slots
    try:
        return int(client.xlen(SessionKeys.of("w:", sid).log))
    finally:
        client.close()


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A durable server and its replica."""
    # A replica's sync at once (the primary waits 5 s for more replicas by default).
    primary = RedisServer(tmp_path / "primary", durable=True,
                          args=("--repl-diskless-sync-delay", "0")).start()
    replica = RedisServer(tmp_path / "replica", durable=True, args=(
        "--replicaof", "127.0.0.1", str(primary.port))).start()
    try:
        wait_replicating([replica])
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()


def _flushes_wait_for_the_replica(url: str, replica: RedisServer,
                                  restarted: Any) -> None:
    with open_store(url) as store:
        s = store.create("waited", cwd="/w")
        _turn(s, 1)
        store.flush(s)  # returns once the replica has it: read from the replica now
        assert _on_replica(replica, "waited") == 2
        replica.kill()
        _turn(s, 2)
        with pytest.raises(StoreWriteError) as failed:
            store.flush(s)
        message = str(failed.value)
        assert "is on the Redis primary, but 0 of the 1 replicas the URL waits for " \
               "(wait=1) had it after 2 s" in message
        assert "flushing again finds the batch stored" in message
        replica.start()
        restarted()
        store.flush(s)  # found stored, and waited for again
        assert _on_replica(replica, "waited") == 4
        written = [e.seq for e in s.events]
    with open_store(url) as fresh:
        assert [e.seq for e in fresh.read_session("waited").events] == written == [0, 1, 2, 3]


def test_a_flush_returns_once_the_replicas_the_url_waits_for_have_it(
    replicated: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = replicated
    url = f"redis://127.0.0.1:{primary.port}?prefix=w:&wait=1"
    _flushes_wait_for_the_replica(url, replica, lambda: wait_replicating([replica]))
    replica.kill()  # without wait (the default), a flush waits for no replica
    with open_store(url.replace("&wait=1", "")) as store:
        s = store.open("waited")
        _turn(s, 3)
        store.flush(s)


def test_on_a_cluster_a_flush_waits_on_its_sessions_primary(tmp_path: Path) -> None:
    with RedisCluster(tmp_path / "cluster", primaries=1, replicas=1) as cluster:
        replica = cluster.replicas[0][0]
        url = f"{cluster.url}?prefix=w:&wait=1"

        def restarted() -> None:
            cluster.wait_ok()
            wait_replicating([replica])

        _flushes_wait_for_the_replica(url, replica, restarted)
        client: Any = redis.cluster.RedisCluster.from_url(cluster.url)
        try:  # the first flush's index entry, on the replica too
            assert client.zrange("w:sessions", 0, -1) == [b"waited"]
        finally:
            client.close()
